"""Text others wrote (a job's user, a pilot), made safe to print on root's terminal."""

from __future__ import annotations


def printable(text: str) -> str:
    """No control characters (a forged line, an escape sequence), at most 200 characters."""
    text = text[:200]
    if text.isascii() and text.isprintable():  # " " to "~" only: nothing to replace
        return text
    return "".join(char if " " <= char <= "~" else "?" for char in text)


def figure(value) -> str:
    """A value, or ``?`` where there is none."""
    return "?" if value is None else str(value)
