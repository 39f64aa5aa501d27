"""polyad's benchmark suite: autodiff gradients vs hand-written TE, numpy and PyTorch.

Installed with polyad (``pip install "polyad[bench]"`` adds matplotlib for the plots; torch is
optional: its columns say ``n/a`` without it).  Run ``polyad bench --help`` or
``python -m polyad.bench --help`` from any directory; docs/benchmarks.md has the table of a full run.

Modules: ``runner`` (the harness and its options), ``workloads`` (the registry of WORKLOADS.md),
``handwritten`` (the gradients written by hand as TE), ``numpy_ref`` (the numpy baselines),
``report`` (markdown, JSON, PNG and HTML); ``bench_kernels``, ``bench_isolation`` and
``bench_chain_autodiff`` are developer micro-benchmarks (``python -m polyad.bench.bench_kernels``).
"""
