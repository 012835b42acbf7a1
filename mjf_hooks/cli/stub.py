"""What a backend entry point does until its backend is built: say so, harm nothing."""

from __future__ import annotations

import sys


def not_implemented(name: str) -> int:
    sys.stderr.write(f"{name}: not implemented yet; doing nothing (exit 0)\n")
    return 0
