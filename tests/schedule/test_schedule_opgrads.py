"""A representative set of op gradients, all built with schedule="auto" in ONE program, equals pa.evaluate."""

import numpy as np

import polyad as pa


def _cases():
    X = pa.placeholder((2, 3, 6, 5), name="X")
    M = pa.placeholder((4, 7), name="M")
    N = pa.placeholder((7, 5), name="N")
    Wt = pa.placeholder((3, 2, 3, 3), name="Wt")
    G = pa.placeholder((3,), name="G")
    A = pa.placeholder((3,), name="A")
    I = pa.placeholder((5,), "int32", name="I")
    ins = [X, M, N, Wt, G, A, I]
    fwd = {
        "exp_log": (lambda: pa.ops.log(pa.ops.exp(M) + 1.0), [M]),
        "tanh_sigmoid": (lambda: pa.nn.tanh(M) * pa.nn.sigmoid(M), [M]),
        "mean_axis": (lambda: pa.ops.mean(X, axis=(2, 3)), [X]),
        "max_axis": (lambda: pa.ops.max(M, axis=1), [M]),
        "matmul": (lambda: pa.ops.matmul(M, N), [M, N]),
        "transpose": (lambda: pa.ops.transpose(X, (0, 2, 3, 1)), [X]),
        "concat_slice": (lambda: pa.ops.strided_slice(pa.ops.concatenate([M, M * 2.0], axis=1), (1, 2), (4, 13), (1, 3)), [M]),
        "pad": (lambda: pa.ops.pad(M, ((1, 2), (0, 3))), [M]),
        "take": (lambda: pa.ops.take(N, I, axis=0), [N]),
        "leaky_prelu": (lambda: pa.nn.prelu(pa.nn.leaky_relu(X, 0.1), A), [X, A]),
        "log_softmax": (lambda: pa.nn.log_softmax(M), [M]),
        "upsampling": (lambda: pa.nn.upsampling(X, 2), [X]),
        "avg_pool_pad": (lambda: pa.nn.pool2d(X, (3, 2), (2, 1), (1, 0), "avg"), [X]),
        "max_pool_pad": (lambda: pa.nn.pool2d(X, (2, 2), (2, 2), (1, 1), "max"), [X]),
        "global_max": (lambda: pa.nn.global_pool2d(X, "max"), [X]),
        "conv_transpose": (lambda: pa.nn.conv2d_transpose(X, Wt, 2, 1), [X, Wt]),
        "l2_normalize": (lambda: pa.nn.l2_normalize(M, axis=1), [M]),
        "batch_norm": (lambda: pa.nn.batch_norm(X, G, A, A * 0.5, G * G + 1.0), [X, G]),
    }
    outs, heads = [], []
    for name, (f, wrt) in fwd.items():
        Y = f()
        H = pa.placeholder(Y.shape, name=f"H_{name}")
        heads.append(H)
        outs.extend(pa.differentiate(Y, wrt, head=H))
    return ins + heads, outs


def test_op_gradients_with_auto_equal_evaluate():
    ins, outs = _cases()
    rng = np.random.default_rng(11)
    arrays = []
    for t in ins:
        if t.dtype == "int32":
            arrays.append(rng.integers(0, 7, t.shape).astype(np.int32))
        else:
            arrays.append(rng.uniform(0.5, 1.5, t.shape).astype(np.float32) * rng.choice([-1, 1], t.shape).astype(np.float32))
    ref = pa.evaluate(outs, dict(zip(ins, arrays)))
    mod = pa.build(outs, ins)  # schedule="auto", one program for all of them
    got = mod(*arrays)
    assert len(got) == len(outs)
    for o, g, r in zip(outs, got, ref):
        scale = max(1.0, float(np.abs(r).max()))
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4 * scale, err_msg=o.name)
