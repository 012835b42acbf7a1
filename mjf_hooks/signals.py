"""The signal API without the cost of the `signal` module.

``signal`` wraps the C module ``_signal`` in enums whose import costs about a
tenth of a bare interpreter start; hooks need only the functions and numbers.
"""

try:
    import _signal as signal
except ImportError:  # not CPython
    import signal

__all__ = ["signal"]
