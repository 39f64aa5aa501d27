"""Shapes of the benchmark workloads for the pipeline tests (test_fallback, test_vjp)."""

# every workload at shapes that build in about a second, yet large enough that the device's own model
# asks for float8 and float16 vectors in some of them (test_the_shapes_ask_for_wide_vectors_unrestricted)
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
