"""Zero-copy reshapes: a stage that reads an input in the same linear order (flatten, its gradient,
reshape, squeeze, expand_dims) is a bitcast: no kernel, its buffer the input's, a numpy view from
``mod(...)``.  Decided exactly by isl (poly.bitcast); anything else keeps its copy kernel."""

import numpy as np
import pyopencl as cl
import pytest

import polyad as pa
from polyad.pipeline import programs
from polyad.poly.bitcast import bitcast_source


def _x(shape=(2, 3, 4, 5)):
    return pa.placeholder(shape, name="X"), np.random.default_rng(0).standard_normal(shape).astype("float32")


# ---------------------------------------------------------------------------------------------
# structure (no OpenCL): which stages are bitcasts
# ---------------------------------------------------------------------------------------------
def test_bitcasts_are_the_reshapes_in_linear_order():
    X, _ = _x()
    F = pa.nn.flatten(X)
    H = pa.placeholder(F.shape, name="H")
    [dX] = pa.differentiate(F, [X], H)  # a PolyOp: dX[a, b, c, d] = H[a, 60b + 20c + 5d ...]
    S = pa.placeholder((3, 1, 4), name="S")
    for t, src in ((F, X), (dX, H), (pa.ops.reshape(X, (6, 20)), X), (pa.ops.squeeze(S, axis=1), S),
                   (pa.ops.expand_dims(X, 1), X), (pa.ops.reshape(F, (120,)), F)):
        assert bitcast_source(t.op) is src, t.name
    for t in (pa.ops.transpose(X), pa.ops.strided_slice(X, [0, 0, 0, 0], [2, 3, 4, 4]), pa.ops.exp(X),
              pa.ops.sum(X, axis=1), pa.ops.cast(X, "float64"), pa.ops.flip(X, axis=3)):
        assert bitcast_source(t.op) is None, t.name


# ---------------------------------------------------------------------------------------------
# built: no kernel, a view, the same buffer
# ---------------------------------------------------------------------------------------------


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_flatten_and_its_gradient_run_no_kernel_and_return_views():
    X, x = _x()
    F = pa.nn.flatten(X)
    H = pa.placeholder(F.shape, name="H")
    [dX] = pa.differentiate(F, [X], H)
    h = np.random.default_rng(1).standard_normal(F.shape).astype("float32")
    for schedule in ("auto", "naive"):
        mod = pa.build([F, dX], [X, H], schedule=schedule)
        assert not mod.program.kernels and "__kernel" not in mod.source
        f, dx = mod(x, h)
        np.testing.assert_array_equal(f, x.reshape(F.shape))
        np.testing.assert_array_equal(dx, h.reshape(X.shape))
        assert np.shares_memory(f, x) and np.shares_memory(dx, h)  # views, as numpy's reshape
    bufs = mod.to_device(x, h)
    assert bufs[2] is bufs[0] and bufs[3] is bufs[1]  # on the device: the input's buffer itself
    mod.run(*bufs)
    # another buffer given for a bitcast output is filled (a device copy), as run promises
    other = [cl.Buffer(mod.context, cl.mem_flags.READ_WRITE, size=x.nbytes) for _ in range(2)]
    mod.run(bufs[0], bufs[1], *other)
    got = mod.from_device(other)
    np.testing.assert_array_equal(got[0], f)
    np.testing.assert_array_equal(got[1], dx)
    # the program cache keeps the aliases
    programs.clear_memory()
    again = pa.build([F, dX], [X, H], schedule="naive")
    assert again.program.aliases and np.shares_memory(again(x, h)[1], h)


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_a_consumer_reads_a_bitcast_intermediate_from_the_input_buffer():
    X, x = _x()
    R = pa.nn.relu(pa.ops.reshape(pa.ops.expand_dims(X, 0), (6, 20)))  # a chain of two bitcasts
    mod = pa.build(R, [X])
    assert [k.name for k in mod.program.kernels] == ["relu"]
    np.testing.assert_array_equal(mod(x), np.maximum(x.reshape(6, 20), 0))


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_where_aliasing_is_unsafe_a_copy_kernel_stays():
    X, x = _x()
    # two outputs would need the input's one buffer: the second is copied
    A, B = pa.nn.flatten(X), pa.ops.reshape(X, (6, 20))
    mod = pa.build([A, B], [X])
    assert len(mod.program.kernels) == 1 and len(mod.program.aliases) == 1
    a, b = mod(x)
    np.testing.assert_array_equal(a, x.reshape(2, 60))
    np.testing.assert_array_equal(b, x.reshape(6, 20))
    assert np.shares_memory(a, x) != np.shares_memory(b, x)
    # a bitcast of a computed stage keeps its kernel (only inputs, which no kernel writes, are aliased)
    C = pa.nn.flatten(pa.nn.relu(X))
    mod = pa.build(C, [X], schedule="naive")
    assert len(mod.program.kernels) == 2 and not mod.program.aliases
    np.testing.assert_array_equal(mod(x), np.maximum(x, 0).reshape(2, 60))
