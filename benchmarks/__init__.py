"""polyad's benchmark suite: autodiff gradients vs hand-written TE, numpy and PyTorch.

Run ``python -m benchmarks --help`` (or ``polyad bench``) from the repository root;
docs/benchmarks.md has the table of a full run.
"""
