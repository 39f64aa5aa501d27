"""The build driver: one place owns the order of the passes, the caches and the device's answers.

``pa.build(outputs, inputs, schedule, device)``:

1. the device: ``device=`` or ``$POLYAD_DEVICE`` by name, else the device
   that passes the capability probe (:mod:`.probe`), the fastest of those by
   its calibration;
2. the program cache (:mod:`.programs`): a known build (graph structure,
   schedule as given, device, device model, polyad's code) skips 3-5;
3. the schedule: :func:`polyad.schedule.resolve` (``"auto"`` runs the
   auto-scheduler on the device's calibrated :class:`~polyad.schedule.DeviceModel`),
   restricted to the vector widths the device compiles;
4. :func:`polyad.schedule.prepare` (graph-level decisions), then
   :func:`polyad.codegen.generate` (OpenCL C);
5. the binary cache, whose cold compiles run in a worker process
   (:mod:`polyad.runtime.builder`): a compiler crash is a failed build;
6. the fallback chain: a program that does not build (a compiler error, a
   crash, kernels missing) is generated again with vectors half as wide, down
   to scalar, then with the naive schedule.  It warns once, naming the stages
   and the compiler's message, remembers the widths that failed for the
   device, and caches the program that built under the original key, so the
   next build neither retries nor warns.  What still fails is a ``BuildError``
   with the source and the log.

Layering: this package imports ``schedule``, ``codegen`` and ``runtime``; none
of them imports it (but :meth:`DeviceModel.of`, the scheduler's door to the
calibrated model).
"""

import dataclasses
import os
import warnings

from ..errors import BuildError, DeviceError, ScheduleError
from ..runtime import records
from ..runtime.device import FIX_HINT, all_devices, describe, device_key, find_device
from ..te.tensor import Tensor, as_tensor_list
from . import tuned

__all__ = ["build", "generate", "select_device", "device_model", "capabilities", "calibration", "list_devices"]

_SELECTED = {}
_MODELS = {}
_WARNED = set()


# ---------------------------------------------------------------------------------------------
# the device and what it can do
# ---------------------------------------------------------------------------------------------
def capabilities(device, refresh=False):
    """The probe's :class:`~polyad.pipeline.probe.Capabilities` of ``device`` (cached on disk)."""
    from .probe import capabilities as probe

    return probe(device, refresh=refresh)


def calibration(device, refresh=False):
    """(the calibration dict of ``device``, "cached" or "measured now")."""
    from .probe import calibration as cal

    return cal(device, refresh=refresh)


def _denied_path(key):
    return records.record_path("devices", "denied-" + records.digest("polyad-denied-1", key))


#: a vector width is left out of a device's model once this many different programs failed to build at it.  One
#: failing program is not the device: LLVM crashed (SIGSEGV) on a 1 MB transposed convolution in float16 on the
#: Zen 5 whose every other float16 program builds, and that one keeps the width it built at in the program cache.
#: A compiler that cannot do the width (pip's PoCL 3.0 on a Zen 4: ../shared/repro) fails the next program too.
DENY_AFTER = 2


def denied_widths(device):
    """Vector widths left out of ``device``'s model: :data:`DENY_AFTER` programs failed to build at each
    (width -> the compiler's last message)."""
    data = records.read(_denied_path(device_key(device)), "record of failed widths") or {}
    return {int(w): got["message"] for w, got in data.items()
            if isinstance(got, dict) and len(got.get("programs", ())) >= DENY_AFTER}


def _deny_width(device, width, message, program):
    """Count ``program`` (its source's digest) as failing at ``width``; True when the width is now denied."""
    path = _denied_path(device_key(device))
    with records.locked(path):
        data = records.read(path, "record of failed widths") or {}
        got = data.get(str(width))
        programs = got.get("programs", []) if isinstance(got, dict) else []
        if program not in programs:
            programs = (programs + [program])[-DENY_AFTER:]
        data[str(width)] = {"message": message, "programs": programs}
        records.write(path, data, "record of failed widths")
    _MODELS.pop(device_key(device), None)
    return len(programs) >= DENY_AFTER


def device_model(device=None):
    """The calibrated :class:`~polyad.schedule.DeviceModel` of ``device`` (None: the default device).

    Measured once per machine (probe and calibration, cached on disk), then
    once per process from the cache; widths that failed in a build are left out.
    """
    dev = select_device(device)
    key = device_key(dev)
    got = _MODELS.get(key)
    if got is not None:
        return got
    caps = capabilities(dev)
    if not caps.usable:
        raise DeviceError(f"{_name(dev)} compiles no scalar code correctly: {caps.describe()}\n{FIX_HINT}")
    widths = [w for w in caps.widths if w not in denied_widths(dev)] or [1]
    cal, how = calibration(dev)
    source = f"calibrated on {_name(dev)} ({how})"
    if "failed" in cal:
        warnings.warn(f"polyad: calibrating {_name(dev)} failed ({cal['failed']}); the auto-scheduler uses "
                      "an uncalibrated model (equal rates per lane, no bandwidth figures)", RuntimeWarning,
                      stacklevel=2)
        cal = _uncalibrated(dev, widths)
        source = f"uncalibrated: {_name(dev)}"
    model = model_of_calibration(dev, caps, cal, widths, source)
    _MODELS[key] = model
    return model


def model_of_calibration(dev, caps, cal, widths, source):
    """The :class:`~polyad.schedule.DeviceModel` of ``dev`` from its calibration, the probe's answer and the
    cache size the device reports."""
    from ..schedule.model import DeviceModel

    return DeviceModel.from_calibration(cal, widths, source=source, nontemporal=bool(caps.nontemporal),
                                        cache_bytes=int(getattr(dev, "global_mem_cache_size", 0) or 0))


def _uncalibrated(dev, widths):
    """A calibration-shaped stand-in with neutral figures: ratios only, not a machine's numbers."""
    from ..runtime.device import is_gpu

    return {"kind": "gpu" if is_gpu(dev) else "cpu", "compute_units": int(dev.max_compute_units),
            "gflops": {str(w): float(w) for w in widths}, "accumulators": {"8": 1.0},
            "accumulator_width": max(widths), "stream_gbs": 1.0, "cache_gbs": 10.0, "launch_s": 0.0,
            "local_sizes": []}


def _name(dev):
    return f"{dev.platform.name.strip()} | {dev.name.strip()}"


def select_device(spec=None):
    """The device ``spec`` names (a substring of ``"platform | device"`` or a ``pyopencl.Device``), else
    ``$POLYAD_DEVICE``, else the fastest device that passes the capability probe.

    Devices that pass only in part (some vector widths fail) come after those that pass
    whole; a device that cannot compile scalar code is never chosen.  DeviceError, with what
    each device failed and how to fix it, when none is usable.
    """
    spec = spec if spec is not None else os.environ.get("POLYAD_DEVICE") or None
    if spec is not None:
        return find_device(spec)
    pairs = all_devices()  # DeviceError when there is no platform (also after one went away)
    memo = tuple(device_key(d) for _, d in pairs)
    got = _SELECTED.get(memo)
    if got is not None:
        return got
    ranked, problems = [], []
    for p, d in pairs:
        caps = capabilities(d)
        if not caps.usable:
            problems.append(f"{_name(d)}: {caps.describe()}")
            continue
        ranked.append(((caps.passes, _peak(d)), d))
    if not ranked:
        raise DeviceError("no OpenCL device here compiles polyad's kernels correctly:\n  "
                          + "\n  ".join(problems) + "\n" + FIX_HINT)
    best = max(ranked, key=lambda r: r[0])[1]
    _SELECTED[memo] = best
    return best


def _peak(dev):
    cal, _ = calibration(dev)
    return max((float(g) for g in cal.get("gflops", {}).values()), default=0.0)


def list_devices():
    """Lines describing the OpenCL devices, the default marked with ``*``, each with its probe result."""
    pairs = all_devices()
    try:
        default, why = select_device(), None
    except DeviceError as e:  # say why none is marked ($POLYAD_DEVICE matching nothing listed them all unmarked)
        spec = os.environ.get("POLYAD_DEVICE")
        default, why = None, (f"$POLYAD_DEVICE={spec!r} names none of them" if spec else str(e).splitlines()[0])
    lines = []
    for p, d in pairs:
        caps = capabilities(d)
        mark = "* " if d == default else "  "
        state = "ok  " if caps.passes else ("part" if caps.usable else "FAIL")
        lines.append(f"{mark}{state} {describe(p, d)}")
        if not caps.passes:
            lines += [f"         {fam}: {msg}" for fam, msg in sorted(caps.failures.items())]
    if why is not None:
        lines.append(f"  no default device: {why}")
    return lines


# ---------------------------------------------------------------------------------------------
# schedules
# ---------------------------------------------------------------------------------------------
def resolve_schedule(outputs, schedule, device=None, inputs=None):
    """The Schedule a build of ``outputs`` (from ``inputs``, default: its placeholders) uses for
    ``schedule`` on ``device``, within its vector widths, tuning logs applied as ``pa.build`` applies them."""
    from ..te.graph import cut
    from ..te.tensor import placeholders

    dev = select_device(device)
    model = device_model(dev)
    outs = as_tensor_list(outputs, "build outputs")
    outs, ins = cut(outs, as_tensor_list(inputs, "build inputs") if inputs is not None else placeholders(outs))
    renamed = build_graph(outs)
    tuning = tuned.plan(schedule, renamed, ins, dev)
    return _within_device(tuning.resolve(renamed, model), model.widths, nontemporal=model.nontemporal)


def _within_device(sched, widths, why=None, nontemporal=True):
    """``sched`` with every vector width the device lacks narrowed to the widest it has (warned), and, where
    ``nontemporal`` is False (the device's probe did not pass them), without nontemporal stores (warned: a
    compiler without the builtin fails the build, and the fallback would blame the vector widths)."""
    def cap(ss):
        v = max((w for w in widths if w <= ss.vectorize), default=1)
        return ss if v == ss.vectorize else dataclasses.replace(ss, vectorize=v)

    def plain(ss):
        return ss if nontemporal else ss.stored(False)

    stages = {n: cap(plain(ss)) for n, ss in sched.stages.items()}
    changed = sorted(n for n in stages if stages[n].vectorize != sched.stages[n].vectorize)
    stored = sorted(n for n in stages if stages[n].nontemporal != sched.stages[n].nontemporal)
    default = cap(plain(sched.default))
    if stages == sched.stages and default == sched.default:
        return sched
    msgs = [why(changed or ["(the default)"])] if why is not None and (
        changed or default.vectorize != sched.default.vectorize) else []
    if why is not None and (stored or default.nontemporal != sched.default.nontemporal):
        msgs.append(f"polyad: the device has no nontemporal stores (its probe did not pass them); stages "
                    f"{stored[:6] or ['(the default)']} store plainly")
    for msg in msgs:
        if msg not in _WARNED:  # once per process, not at every build
            _WARNED.add(msg)
            warnings.warn(msg, RuntimeWarning, stacklevel=3)
    return dataclasses.replace(sched, stages=stages, default=default)


def generate(outputs, inputs, schedule="naive", device=None):
    """The :class:`~polyad.codegen.Program` of a build, without compiling it (``polyad show``, tests).

    ``schedule`` as ``pa.build`` takes it; ``"auto"`` uses the model of ``device`` (a
    ``pyopencl.Device``, a :class:`~polyad.schedule.DeviceModel`, a recorded model, or None: the
    default device).
    """
    from ..codegen import generate as codegen
    from ..schedule import prepare, resolve
    from ..schedule.model import DeviceModel
    from ..te.graph import cut

    outs, ins = cut(as_tensor_list(outputs, "build outputs"), as_tensor_list(inputs, "build inputs"))
    model = DeviceModel.of(device) if _needs_model(schedule) else None
    renamed = build_graph(outs)  # the graph pa.build generates: its unproven reads guarded
    g, loop = prepare(renamed, resolve(schedule, renamed, model) if model else schedule)
    return codegen(g, ins, loop, wide=model is not None and model.kind == "cpu" or None,
                   widths=model.widths if model is not None else None)


def program_for(renamed, ins, schedule, dev, model):
    """The :class:`~polyad.codegen.Program` ``pa.build`` compiles for ``schedule`` (a resolved Schedule) on
    ``dev``: :func:`program_of` with the build's index width.  The tuner measures exactly this program (it
    measured 32-bit-index kernels while builds ran 64-bit ones: conv2d_3x3's auto backward 3.9-4.5 ms there
    against 3.2 ms built)."""
    return program_of(renamed, ins, schedule, _wide_indices(dev, model), widths=model.widths)


def program_of(renamed, ins, schedule, wide, kernels=None, widths=None):
    """``schedule``'s graph decisions applied, then code generation with index width ``wide``
    (:func:`_wide_indices`) and the device's vector ``widths`` (its model's); ``kernels``: a
    :class:`~polyad.codegen.KernelMemo` shared with other programs of the graph (the tuner's candidates, in a
    process that has no device)."""
    from ..codegen import generate as codegen
    from ..schedule import prepare

    g, loop = prepare(renamed, schedule)
    return codegen(g, ins, loop, wide=wide, kernels=kernels, widths=widths)


def _wide_indices(dev, model):
    """64-bit index arithmetic on CPUs whose probe passed it (None: by the sizes).

    A 64-bit CPU addresses in 64 bits: an ``int`` index is sign-extended at every load, which keeps LLVM
    from folding constant offsets into addresses and strength-reducing them along a loop.  Measured on
    PoCL, Zen 4 (min of 7 alternating rounds): dense's dX 0.90 -> 0.74 ms with ``long`` indices.  GPUs
    emulate 64-bit integers in two 32-bit operations: ``int`` there, unless a buffer needs more.
    """
    return True if model.kind == "cpu" and capabilities(dev).index64 else None


def _needs_model(schedule):
    return isinstance(schedule, str) and schedule == "auto"


def build_graph(outs):
    """The graph a build generates code for: every stage uniquely named (as ``pa.show`` names it), every read
    that nothing proves inside its tensor guarded (:func:`polyad.poly.bounds.guarded_reads`; one proven outside
    is an OutOfBoundsError), and every reduction's quasi-affine ``where=`` in its domain
    (:func:`polyad.poly.simplify.lift_where`)."""
    from ..poly.bounds import guarded_reads
    from ..schedule.graph import scheduled_graph

    return scheduled_graph(guarded_reads(outs))


# ---------------------------------------------------------------------------------------------
# pa.build
# ---------------------------------------------------------------------------------------------
def build(outputs, inputs, schedule="auto", device=None):
    """``pa.build(outputs, inputs, schedule="auto", device=None) -> Module``.

    Generates one OpenCL program for every stage ``outputs`` need, compiles it
    (or loads it from the kernel cache) for ``device`` (a substring of
    ``"platform | device"``, a ``pyopencl.Device``, or None for
    ``$POLYAD_DEVICE``, else the fastest device that passes polyad's
    capability probe) and returns the callable
    :class:`~polyad.runtime.Module`.  ``mod(*arrays)`` returns one array when
    ``outputs`` is a single tensor, else a list.

    ``schedule``: ``"auto"`` (the auto-scheduler, on the device's calibrated
    model), ``"naive"``, a :class:`~polyad.schedule.Schedule` or its JSON.
    Vector widths the device cannot compile are narrowed; a program that does
    not build falls back to narrower vectors, then to the naive schedule, with
    one warning.

    ``inputs`` may hold computed tensors (saved forward activations, see
    ``pa.residuals``): the module then takes an array for each, in the
    inputs' order, and neither computes it nor any stage only it needs.

    Raises ``BuildError`` (with the source and the compiler log) when even the
    naive schedule does not build, ``DeviceError`` when no device is usable,
    ``ScheduleError`` for a schedule that does not fit the graph.

    :param outputs: a tensor or a list of tensors to compute.
    :param inputs: a tensor or a list of tensors given as arrays when the module is called, in that order: every
        placeholder the outputs need, and optionally computed tensors.
    :param schedule: ``"auto"``, ``"naive"``, a :class:`~polyad.schedule.Schedule`, its dict or JSON text, or a
        :class:`~polyad.schedule.Auto` (the auto-scheduler on a given device model).
    :param device: a substring of ``"platform | device"``, a ``pyopencl.Device``, or None for the default.
    :returns: the compiled :class:`~polyad.runtime.Module`, called as ``mod(*arrays)``.
    :raises PolyadError: when ``outputs`` or ``inputs`` is not a tensor or a list of tensors, an output is listed
        twice or is a placeholder, or a placeholder the outputs need is not among ``inputs``.
    :raises FeedError: when a tensor is listed twice among ``inputs``, or is both an input and an output.
    :raises ScheduleError: when ``schedule`` is malformed or does not fit the graph.
    :raises DeviceError: when no OpenCL device is usable or none matches ``device``, or the device lacks float64 for
        float64 tensors.
    :raises DeviceLimitError: when a buffer or the work-groups exceed what the device allows.
    :raises BuildError: when the program does not compile even with the naive schedule (it carries the source and
        the compiler log).
    """
    module, missed, dev = _build(outputs, inputs, schedule, device)
    if missed:
        tuned.warn_missed(schedule, f"the graph of {missed}", dev, stacklevel=2)
    return module


def _build(outputs, inputs, schedule="auto", device=None):
    """``pa.build``'s work, with what it would warn about returned instead: ``(module, missed, device)``,
    ``missed`` the outputs' names where ``pa.tuned(log)`` had no record of the graph (see
    :func:`tuned.missed`; None on a program cache hit, whose build already said so), else None.  ``pa.vjp``
    builds its two modules with it and warns once, when neither was in the log."""
    from ..runtime.module import Module
    from ..schedule.tuning import Tuned
    from ..te.graph import cut
    from .programs import forget_program, load_program, program_key, store_program

    dev = select_device(device)
    model = device_model(dev)
    user_inputs = as_tensor_list(inputs, "build inputs")
    # fed computed tensors become placeholders first: the cache key, the auto-scheduler and codegen
    # see only the graph that is built
    outs, ins = cut(as_tensor_list(outputs, "build outputs"), user_inputs)
    single = isinstance(outputs, Tensor)
    key_outputs = outs[0] if single else outs
    # a known build skips scheduling and code generation; the key holds the device's model, which
    # decides what "auto" means there
    target = device_key(dev) + "|" + model_token(model)
    tuning = tuned.plan(schedule, outs, ins, dev)  # what tuning logs change (pa.tuned, pa.tuning_log)
    key = program_key(key_outputs, ins, schedule, target + "|" + tuning.token)
    program = load_program(key, key_outputs, ins) if key is not None else None
    if program is not None:
        try:
            return Module(program, dev, single_output=single, inputs=user_inputs), None, dev
        except BuildError as e:  # a cached program that no longer builds: generate it again
            warnings.warn(f"polyad: a cached program no longer builds ({str(e).splitlines()[0]}); "
                          "regenerating it", RuntimeWarning, stacklevel=3)  # pa.build's caller
            forget_program(key)
    # renaming rebuilds every stage of a graph with repeated names: only what is generated needs it
    renamed = build_graph(outs)
    derived = _needs_model(schedule) or isinstance(schedule, Tuned)
    program, module = _build_with_fallback(renamed, ins, tuning, dev, model, single, user_inputs, derived)
    missed = tuned.missed(tuning, outs)
    if key is not None:
        store_program(key, program)
        after = device_model(dev)
        if after != model and not _needs_model(schedule):
            # the fallback denied widths, so the next build's key holds the narrower model: a schedule
            # given as data narrows there to what built here, so that key gets the program too
            # ("auto" is scheduled again for the narrower model instead)
            store_program(program_key(key_outputs, ins, schedule, device_key(dev) + "|" + model_token(after)
                                      + "|" + tuning.token), program)
    return module, missed, dev


def _max_width(sched):
    return max([sched.default.vectorize] + [ss.vectorize for ss in sched.stages.values()])


def _build_with_fallback(renamed, ins, tuning, dev, model, single, user_inputs, derived=False):
    """(program, module) of the first of ``tuning``'s schedule, narrower vectors of it and naive loops that builds.

    ``derived``: the schedule is polyad's (auto, the tuning log), so a ScheduleError code generation raises on
    it is polyad's to absorb (naive loops, with a warning); a schedule the user wrote is theirs to fix."""
    from ..runtime.module import Module
    from ..schedule import naive

    sched = tuning.resolve(renamed, model)
    sched = _within_device(sched, model.widths, why=lambda names: (
        f"polyad: {_name(dev)} does not compile the vector widths the schedule asks for stages "
        f"{names[:6]}; they use the widest it does ({'/'.join(map(str, model.widths))})"),
        nontemporal=model.nontemporal)
    first, tried = None, []
    attempts = [sched]
    while True:
        w = _max_width(attempts[-1])
        if w <= 1:
            break
        attempts.append(_within_device(attempts[-1], [x for x in model.widths if x < w]))
    last = attempts[-1]
    if last.stages or last.inline or last.rfactor or last.pad or last.space_to_depth or last.fold:
        attempts.append(naive())
    i = 0
    while i < len(attempts):
        s = attempts[i]
        try:
            program = program_for(renamed, ins, s, dev, model)
        except ScheduleError as e:
            if not derived or i == len(attempts) - 1:
                raise
            warnings.warn(f"polyad: code generation refused the schedule polyad chose ({str(e).splitlines()[0][:300]});"
                          " built with naive loops instead (polyad's fault: please report it)", RuntimeWarning,
                          stacklevel=3)
            i = len(attempts) - 1  # narrower vectors keep the same loops: naive ones
            continue
        i += 1
        try:
            module = Module(program, dev, single_output=single, inputs=user_inputs)
        except BuildError as e:
            if first is None:
                first = e
            tried.append((s, e))
            continue
        if tried:
            _warn_fallback(dev, tried, s)
        return program, module
    raise BuildError(
        f"{str(first)}\n\n(polyad also tried narrower vectors and the naive schedule: "
        f"{len(attempts)} programs, none built)", source=first.source, log=first.log) from None


def _warn_fallback(dev, tried, used):
    s0, e0 = tried[0]
    w = _max_width(s0)
    stages = sorted(n for n, ss in s0.stages.items() if ss.vectorize == w) if w > 1 else sorted(s0.stages)
    lines = [ln.strip() for ln in str(e0).splitlines() if ln.strip()]
    msg = next((ln for ln in lines if "error" in ln.lower() and "OpenCL build failed" not in ln), lines[0])[:300]
    if used.name != "naive":
        # a narrower width built: the wider ones are what this compiler cannot do; remember them, unless the
        # compiler was killed from outside (an external SIGKILL was once kept as the device failing float16)
        remembered = [_deny_width(dev, _max_width(s), msg, records.digest("polyad-failed-program-1", e.source or ""))
                      for s, e in tried if getattr(e, "device_fault", True)]
        what = f"float{_max_width(used)} vectors" if _max_width(used) > 1 else "scalar code"
    else:
        what, remembered = "the naive schedule", []
    note = ""
    if any(remembered):
        note = " (remembered for the device; `polyad devices --calibrate` probes it again)"
    elif remembered:
        note = f" (for this program; a second program that fails so leaves float{w} out for the device)"
    warnings.warn(
        f"polyad: the OpenCL compiler of {_name(dev)} failed on stages {stages[:6]} with "
        f"{f'float{w} vectors' if w > 1 else 'this schedule'} ({msg}); built with {what} instead" + note,
        RuntimeWarning, stacklevel=4)


def model_token(model):
    """What of a device model decides a schedule (its figures, not where they came from)."""
    d = model.to_dict()
    d.pop("source", None)
    return repr(sorted(d.items()))
