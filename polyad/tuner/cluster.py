"""Tuning on a Dask cluster: candidates are built and measured on the workers, the log is the client's.

Tuning is embarrassingly parallel, and Dask ``distributed`` already schedules, retries and reports
tasks across machines, so polyad adds no RPC of its own: the graph is pickled once and sent to every
worker (``Client.scatter(..., broadcast=True)``), each candidate is one task that builds and measures it there
with a :class:`~polyad.tuner.measure.LocalMeasurer` (one per worker process, checking every output
against that worker's own auto schedule's), and the client collects the :class:`~polyad.tuner.measure.Trial`
objects, which carry the worker's device key, and writes the log.  A worker measures one candidate at
a time (a lock per process), so a worker with several threads does not time candidates against each
other.  The search plans for the first worker's device model: tune on a cluster of alike machines.
"""

import pickle
import threading

from .measure import Measurer, graph_context

_LOCK = threading.Lock()
_MEASURERS = {}  # on a worker: graph token -> LocalMeasurer
_KEEP = 4  # graphs a worker keeps a measurer for (the oldest is closed)


def _remote_model(device):
    from ..pipeline import device_model, select_device
    from ..runtime.device import device_key

    dev = select_device(device)
    return device_key(dev), device_model(dev).to_dict()


def _remote_measure(graph, token, schedule_json, options, pair_same=False, timeout=None):
    """On a worker: measure one schedule (JSON text) of the scattered graph; the Trial as a dict."""
    from dataclasses import asdict

    from ..schedule import Schedule
    from .measure import LocalMeasurer

    with _LOCK:
        m = _MEASURERS.get(token)
        if m is None:
            # one pickle: the placeholders the outputs read are the inputs' objects (Dask would serialise a
            # tuple's items apart, and a build matches its inputs by identity)
            outputs, inputs, data = pickle.loads(graph)
            m = LocalMeasurer(outputs, inputs, data=data, workers=1, **options)
            while len(_MEASURERS) >= _KEEP:  # each holds a compiler process and device buffers
                _MEASURERS.pop(next(iter(_MEASURERS))).close()
            _MEASURERS[token] = m
        t = m.measure([Schedule.from_json(schedule_json)], pair_same=pair_same, timeout=timeout)[0]
    return asdict(t)


class DaskMeasurer(Measurer):
    """Measures on the workers of a Dask cluster.

    :param outputs: the tensors to compute.
    :param inputs: the build's inputs.
    :param client: a ``distributed.Client`` or a scheduler address (``"tcp://host:8786"``).
    :param device: the device each worker uses, as ``pa.build`` takes it (None: its default).
    :param data: arrays for the inputs (None: the same reproducible random ones on every worker).
    :param repeat: timed runs per candidate.
    :param timeout: seconds a candidate's compile or first run may take.
    """

    def __init__(self, outputs, inputs, client, device=None, data=None, repeat=5, timeout=60.0):
        import uuid

        from distributed import Client

        from ..schedule.model import DeviceModel

        self._own = isinstance(client, str)
        self.client = Client(client) if self._own else client
        workers = list(self.client.scheduler_info()["workers"])
        if not workers:
            from ..errors import DeviceError

            raise DeviceError("tune: the Dask cluster has no workers")
        self.workers = len(workers)
        try:
            blob = pickle.dumps((outputs, inputs, data))
        except (RecursionError, pickle.PicklingError, TypeError, AttributeError) as e:
            from ..errors import PolyadError

            raise PolyadError(f"tune: the graph cannot be sent to the Dask workers ({type(e).__name__}: "
                              f"{str(e)[:200]}); tune it on this machine's workers instead") from None
        self.device_key, model = self.client.submit(_remote_model, device, pure=False,
                                                    workers=[workers[0]]).result()
        self._context = graph_context(outputs, inputs, DeviceModel.from_dict(model))
        [self._graph] = self.client.scatter([blob], broadcast=True)
        self._token = uuid.uuid4().hex
        self._options = {"device": device, "repeat": repeat, "timeout": timeout}

    overlaps = True  # the client breeds the next round while the workers build and measure this one

    def measure(self, schedules, pair_same=False, timeout=None, meanwhile=None):
        from .measure import Trial

        futures = [self.client.submit(_remote_measure, self._graph, self._token, s.to_json(), self._options,
                                      pair_same, timeout, pure=False) for s in schedules]
        if meanwhile is not None:
            try:
                meanwhile()
            except BaseException:  # Ctrl-C: the candidates are not wanted any more
                self.client.cancel(futures)
                raise
        out = []
        for f in futures:
            try:
                d = f.result()
            except Exception as e:  # noqa: BLE001 - a worker that died or raised costs one candidate
                out.append(Trial(error=f"dask task failed: {type(e).__name__}: {str(e)[:300]}",
                                 device=self.device_key))
                continue
            d["times"], d["ref_times"] = tuple(d["times"]), tuple(d.get("ref_times", ()))
            out.append(Trial(**d))
        return out

    def close(self):
        if self._own:
            self.client.close()
