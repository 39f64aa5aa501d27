"""``python -m benchmarks`` (from a source checkout): an alias of ``polyad bench``, kept for old habits.

The suite is ``polyad.bench`` now (it works from a pip install); this file only forwards to it.
"""

import sys

from polyad.bench.runner import main

sys.exit(main(prog="python -m benchmarks"))
