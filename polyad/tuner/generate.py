"""The tuner's code generation in worker processes: isl's AST generation and the OpenCL printer, in parallel.

A tuning round generates a program per candidate before anything compiles, and in the tuner's own process that
was most of the wall time: 90 s tunings on the 2-core Zen 4 VM spent 44.5 s of lenet_step's 102 s and 68.3 s of
conv2d_5x5_s3's 107 s there, one candidate after another (on the H200's 16-core host, lenet_step's first round
of 16 candidates took 100 s).  :class:`GeneratorPool` sends each candidate's schedule to one of ``workers``
processes, each holding its own copy of the graph (pickled once, as the Dask path sends it), and takes back the
program as the program cache's data (:func:`polyad.pipeline.programs.program_data`), which
:func:`~polyad.pipeline.programs.program_from_data` binds to the graph's outputs and inputs here, as a warm
``pa.build`` does: the same program as generating it here, which the tests check source for source.

Workers are plain subprocesses (``python -m polyad.tuner.generate``, one JSON request and one answer a line), as
the compile workers are (:mod:`polyad.runtime.builder`): ``multiprocessing`` would re-import the user's
``__main__``.  A worker that dies (isl aborts) or takes longer than the timeout costs its candidate, answered as
an error, and the next request starts a fresh one.
"""

import base64
import json
import os
import pickle
import sys

from ..errors import PolyadError
from ..runtime.builder import LineProcess, end_with_parent, import_failure, install_error


class Programs:
    """The programs of one graph under many schedules, each the one ``pa.build`` compiles
    (:func:`polyad.pipeline.program_of`, as ``program_for`` calls it), with the kernels they share written once
    (:class:`polyad.codegen.KernelMemo`): a candidate changes a stage or three of lenet_step's thirty, and
    printing the unchanged kernels again was about half of generating 40 logged candidates one by one (18 s).

    :param outputs: the graph's outputs, cut and uniquely named (as the tuner plans them).
    :param inputs: the build's inputs.
    :param wide: the build's index width (``program_for``'s).
    :param widths: the device's vector widths (``program_for``'s: its model's; None: all).
    :param kernel_dir: a folder of written kernels shared with other processes (:class:`~polyad.codegen.KernelMemo`'s
        store: a checksummed record a kernel, :mod:`polyad.runtime.records`), or None.
    """

    def __init__(self, outputs, inputs, wide, kernel_dir=None, widths=None):
        from ..codegen import KernelMemo

        self.outputs, self.inputs, self.wide = list(outputs), list(inputs), wide
        self.widths = None if widths is None else tuple(widths)
        self.kernels = KernelMemo(store=None if kernel_dir is None else _KernelFolder(kernel_dir))

    def __call__(self, schedule):
        """The :class:`~polyad.codegen.Program` of ``schedule`` (a resolved Schedule).

        :raises PolyadError: as ``pa.build`` would (a ScheduleError naming the stage, ...).
        """
        from ..pipeline import program_of

        return program_of(self.outputs, self.inputs, schedule, self.wide, self.kernels, self.widths)


class _KernelFolder:
    """A :class:`~polyad.codegen.KernelMemo` store: one record a kernel in ``folder``, written whole and read back
    only where its checksum holds (a torn one is warned about and written again)."""

    def __init__(self, folder):
        self.folder = folder

    def read(self, name):
        from ..runtime.records import read

        return read(os.path.join(self.folder, name + ".json"), "written kernel")

    def write(self, name, payload):
        from ..runtime.records import write

        write(os.path.join(self.folder, name + ".json"), payload, "written kernel")


class GraphNotSent(PolyadError):
    """The graph does not pickle (chain's 600-stage backward is deeper than pickle's recursion limit): the caller
    generates code in its own process."""


class _Worker(LineProcess):
    """One code generation process, started on first use (and again after a crash) with the graph."""

    def __init__(self, hello):
        super().__init__("polyad.tuner.generate", hello)

    def program(self, schedule_json, timeout):
        """The program data of one schedule, or why there is none (a str: its error, a crash, a timeout)."""
        try:
            ans, start = self.ask({"schedule": schedule_json}, timeout)
        except TimeoutError:
            return f"code generation did not finish in {timeout:g} s"
        if ans is None:
            died = self.died(start)
            if import_failure(died):  # every candidate would fail alike: an environment, not a schedule
                raise install_error("polyad's code generation worker", import_failure(died))
            return f"code generation crashed its process {died}"
        return ans["program"] if ans["ok"] else ans["error"]


class GeneratorPool:
    """``workers`` code generation processes for one graph.

    :param outputs: the prepared graph's outputs as the tuner plans them (cut and uniquely named).
    :param inputs: the build's inputs.
    :param wide: the index width the build uses (``polyad.pipeline.program_for``'s).
    :param workers: processes run at once.
    :param widths: the device's vector widths (``program_for``'s; None: all).

    The workers share the kernels they write through a temporary folder (:class:`~polyad.codegen.KernelMemo`), removed
    by :meth:`close`: a candidate dealt to one worker reuses what the other wrote for an earlier one.
    """

    def __init__(self, outputs, inputs, wide, workers, widths=None):
        import tempfile

        # one pickle: the placeholders the outputs read are the inputs' objects
        try:
            graph = pickle.dumps((list(outputs), list(inputs)))
        except (RecursionError, pickle.PicklingError, TypeError, AttributeError) as e:
            raise GraphNotSent(f"the graph cannot be sent to code generation workers: {type(e).__name__}: "
                               f"{str(e)[:200]}") from None
        self.kernel_dir = tempfile.mkdtemp(prefix="polyad-kernels-")
        hello = {"graph": base64.b64encode(graph).decode(), "wide": wide, "kernel_dir": self.kernel_dir,
                 "widths": None if widths is None else list(widths)}
        self.outputs, self.inputs = list(outputs), list(inputs)
        self._workers = [_Worker(hello) for _ in range(max(1, int(workers)))]

    def programs(self, schedules, timeout):
        """Per schedule, its :class:`~polyad.codegen.Program` (bound to this process's graph), or why there is
        none: the text of the error generating it raised, a crash or a timeout."""
        import queue
        from concurrent.futures import ThreadPoolExecutor

        from ..pipeline.programs import program_from_data

        idle = queue.Queue()
        for w in self._workers:
            idle.put(w)

        def one(s):
            w = idle.get()
            try:
                return w.program(s.to_json(), timeout)
            finally:
                idle.put(w)

        with ThreadPoolExecutor(len(self._workers)) as ex:
            try:
                got = list(ex.map(one, schedules))
            except BaseException:  # Ctrl-C: end the workers, so that the threads reading them return now
                self.close()
                raise
        return [p if isinstance(p, str) else program_from_data(p, self.outputs, self.inputs) for p in got]

    def close(self):
        import shutil

        for w in self._workers:
            w.close()
        if self.kernel_dir is not None:
            shutil.rmtree(self.kernel_dir, ignore_errors=True)
            self.kernel_dir = None


def _serve():
    """The worker's loop: the graph first, then one schedule (JSON) a line, one program's data (or error) a line."""
    from ..pipeline.programs import program_data
    from ..schedule import Schedule

    end_with_parent()
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing else may write into the answer channel
    hello = json.loads(sys.stdin.readline())
    outputs, inputs = pickle.loads(base64.b64decode(hello["graph"]))
    programs = Programs(outputs, inputs, hello["wide"], hello.get("kernel_dir"), hello.get("widths"))
    out.write("{}\n")
    out.flush()
    for line in sys.stdin:
        try:
            s = Schedule.from_json(json.loads(line)["schedule"])
            ans = {"ok": True, "program": program_data(programs(s))}
        except PolyadError as e:
            ans = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        except Exception as e:  # noqa: BLE001 - a bug here costs the candidate, named as such
            ans = {"ok": False, "error": f"internal error in code generation: {type(e).__name__}: {e}"}
        out.write(json.dumps(ans) + "\n")
        out.flush()


if __name__ == "__main__":
    _serve()
