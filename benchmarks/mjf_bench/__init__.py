"""The benchmark behind the tables of docs/performance.md; ``benchmarks/run`` is its command.

``measure`` times one process, its peak memory and many at once; ``bench`` is the work
directory and configs every scenario shares; ``scenario`` the shape of a scenario;
``scenarios/`` one module per batch system and per subject, each with its environments
and inputs; ``report`` the Markdown tables; ``cli`` the options and the order of a run.
"""

from __future__ import annotations

import os
import sys

BENCHMARKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKOUT = os.path.dirname(BENCHMARKS)
FIXTURES = os.path.join(CHECKOUT, "tests", "fixtures")

# The stores are built with the checkout's library, and the packaged root with its test
# helpers, whichever python runs the benchmark (the commands measured are the venv's).
if CHECKOUT not in sys.path:
    sys.path.insert(0, CHECKOUT)
