"""The benchmark workloads' backward, as the tuner tunes it (``polyad tune --workload NAME``).

The graph is pa.vjp's backward, the one the suite's ``bwd ms`` times: the gradients of the workload's
forward, fed the forward inputs, the head H and the residuals its forward saved
(``pa.residuals(grads, [H], save="reductions")``, with the forward outputs first).  The residuals'
values come from running the forward once (auto schedule).
"""

from dataclasses import dataclass

from .workloads import WORKLOADS

#: every workload at shapes that build in about a second (``polyad tune --shapes tiny``, the tests), yet
#: large enough that a device's model asks for float8 and float16 vectors in some of them
TINY = {
    "dense": dict(batch=16, n_in=64, n_out=64),
    "dense_big": dict(batch=8, n_in=128, n_out=64),
    "conv2d_3x3": dict(batch=2, c_in=4, size=18, c_out=8),
    "conv2d_5x5_s3": dict(batch=1, c_in=2, size=14, c_out=3),
    "conv2d_dilated": dict(batch=2, c_in=4, size=18, c_out=8),
    "avg_pool": dict(batch=1, channels=2, size=8),
    "max_pool": dict(batch=1, channels=2, size=8),
    "softmax": dict(batch=8, n_in=64, n_out=128),
    "softmax_homebrew": dict(batch=8, n_in=64, n_out=128),
    "flatten": dict(batch=1, c=4, h=4, w=5),
    "chain": dict(n=16, depth=8),
    "mlp_step": dict(batch=16, sizes=(64, 64, 32, 10)),
    "lenet_step": dict(batch=1),  # 28x28: the dense layers' sizes follow from it
}


@dataclass
class TuningGraph:
    """A workload's backward: ``outputs`` (the gradients), ``inputs`` (forward inputs, H, residuals)
    and ``data`` (an array per input)."""

    name: str
    outputs: list
    inputs: list
    data: list


def backward_graph(name, params=None, seed=0, device=None, case=None):
    """The :class:`TuningGraph` of workload ``name`` (``params`` overrides its shapes; ``case``: an
    instantiated one instead)."""
    import polyad as pa
    from polyad.errors import PolyadError
    from polyad.te.tensor import placeholders

    if case is None:
        if name not in WORKLOADS:
            raise PolyadError(f"unknown workload {name!r} (known: {', '.join(sorted(WORKLOADS))})")
        case = WORKLOADS[name].instantiate(**(params or {}))
    ph = case.placeholders()
    Y = case.forward_te(ph)
    H = pa.placeholder(Y.shape, dtype=Y.dtype, name=f"d_{Y.name}")  # named as pa.vjp names its head
    grads = list(pa.differentiate(Y, [ph[n] for n in case.wrt], H))
    saved = pa.residuals(grads, [H], save="reductions")
    order = [Y] + [r for r in saved if r is not Y]
    base = placeholders([Y])  # the inputs in the order the benchmark's pa.vjp takes them (the key holds it)
    arrays = case.data(seed)
    base_arrays = [arrays[t.name] for t in base]
    fwd = pa.build(order, base, device=device)
    values = fwd(*base_arrays)
    values = values if isinstance(values, list) else [values]
    return TuningGraph(name, grads, base + [H] + order, base_arrays + [arrays["H"]] + list(values))
