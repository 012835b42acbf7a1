"""Does this job slot satisfy a job's requirements? The matching engines of `mjf match`.

Two languages, both read with HTCondor's own ClassAd library (``classad2``, from the
optional ``htcondor`` wheel: ``pip install 'mjf-hooks[match]'``). The library is
imported inside the functions only, never when this package is imported, so nothing on
a hook's path pays for it.

- :mod:`.classad`: ClassAd ``Requirements`` expressions (gLite and HTCondor), explained
  clause by clause;
- :mod:`.dirac`: DIRAC JDLs by DIRAC's task-queue rules, and a JDL of either kind.

Both answer with a :class:`Verdict`, which this module holds with the little they share:
loading the library, and turning whatever a hostile requirement raises into one verdict.

Many requirements against one slot: build a :class:`~.classad.ClassAdSlot` or
:class:`~.dirac.DiracResource` once (the slot ad is made once) and call it per
requirement, or use ``classad_requirements_many`` / ``dirac_requirements_many``.
"""

from __future__ import annotations

from ..errors import MJFError

INSTALL_HINT = "pip install 'mjf-hooks[match]'"


class MatchUnavailable(MJFError):
    """HTCondor's ClassAd library is not installed."""


def _library():
    try:
        import classad2
    except ImportError:
        raise MatchUnavailable(
            "matching needs HTCondor's ClassAd library (the htcondor package): "
            f"{INSTALL_HINT}") from None
    return classad2


class Verdict:
    """The answer for one requirement: ``matched``; ``unreadable`` (None, or a one-line
    message saying where the requirement cannot be read); ``reasons`` (why it did not
    match, filled when asked to explain); ``warnings`` (one line each: what the reader
    should know about how it was judged)."""

    __slots__ = ("matched", "reasons", "unreadable", "warnings")

    def __init__(self, matched: bool, unreadable: str | None = None,
                 reasons: list[str] | None = None, warnings: list[str] | None = None):
        self.matched = matched
        # One line each, whatever line breaks the requirement's text had.
        self.unreadable = None if unreadable is None else " ".join(unreadable.split())
        self.reasons = [" ".join(reason.split()) for reason in reasons or []]
        self.warnings = [" ".join(warning.split()) for warning in warnings or []]

    @property
    def exit_code(self) -> int:
        """0 match, 1 no match, 2 unreadable: `mjf match`'s exit status."""
        if self.unreadable is not None:
            return 2
        return 0 if self.matched else 1

    def __bool__(self) -> bool:
        return self.matched

    def __repr__(self) -> str:
        if self.unreadable is not None:
            return f"Verdict(unreadable={self.unreadable!r})"
        return f"Verdict(matched={self.matched!r}, reasons={self.reasons!r})"


def _unreadable(message: str) -> Verdict:
    return Verdict(False, unreadable=message)


# How much of a requirement's text a message quotes: a requirement may be a megabyte.
_EXCERPT_CHARS = 120


def _excerpt(text: str) -> str:
    """``text`` on one line, cut to a length a message can quote."""
    line = " ".join(text.split())
    return line if len(line) <= _EXCERPT_CHARS else line[:_EXCERPT_CHARS - 3] + "..."


def _judged(judge, *args) -> Verdict:
    """``judge(*args)``, or the one-line unreadable verdict of whatever it raised: a
    requirement, however hostile, is one verdict and never stops the others."""
    try:
        return judge(*args)
    except RecursionError:
        return _unreadable("the requirement is nested too deeply to be judged")
    except MemoryError:
        return _unreadable("the requirement is too large to be judged")
    except Exception as error:  # noqa: BLE001 - the library's own failures included
        return _unreadable(f"the requirement cannot be judged: {type(error).__name__}: "
                           f"{_excerpt(str(error))}")
