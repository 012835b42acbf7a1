"""The ClassAd files HTCondor's starter writes (``.job.ad``, ``.machine.ad``).

One ``Name = value`` per line, as ``condor_q -l`` prints them. Only literal
values are understood: integers, reals, booleans, strings (with escapes),
``undefined`` and ``error``. Anything else is an expression the starter did not
evaluate (``MachineMaxVacateTime = 10 * 60``, lists, nested ads): it becomes
an :class:`Expression`, which callers treat as unknown. Attribute names are
case-insensitive, as in ClassAds.

Why not HTCondor's own bindings (``classad2`` in the ``htcondor`` wheel): they
parse these files correctly, but importing them costs more than a quarter of a
bare interpreter start, on every job, and brings ~22 MB of libraries to every
worker node; the wrapper needs literals only. (The pure-Python ``classad``
package on PyPI fails to import on Python >= 3.10.)
"""

from __future__ import annotations

MAX_AD_BYTES = 16 * 1024 * 1024

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "\\": "\\", '"': '"',
            "'": "'", "/": "/"}


class Expression:
    """A value that is not a literal: kept as text, never evaluated."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expression) and other.text == self.text

    __hash__ = None  # type: ignore[assignment]


class Error:
    """The ClassAd ``error`` literal."""

    def __repr__(self) -> str:
        return "ERROR"


ERROR = Error()
UNDEFINED = None


def parse_ad(text: str) -> dict[str, object]:
    """{lowercased attribute name: value} of an ad file; malformed lines are skipped."""
    ad: dict[str, object] = {}
    for line in text.splitlines():
        name, equals, raw = line.partition("=")
        name = name.strip()
        if not equals or not _is_attribute_name(name):
            continue
        ad[name.lower()] = parse_value(raw.strip())
    return ad


def _is_attribute_name(name: str) -> bool:
    return (bool(name) and name.isascii() and not name[0].isdigit()
            and name.replace("_", "a").isalnum())


def parse_value(text: str) -> object:
    """A ClassAd literal -> int, float, bool, str, None (undefined), ERROR or Expression."""
    lowered = text.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    if lowered == "undefined":
        return UNDEFINED
    if lowered == "error":
        return ERROR
    if text.startswith('"'):
        string = _parse_string(text)
        return Expression(text) if string is None else string
    number = _parse_number(text)
    return Expression(text) if number is None else number


def _parse_string(text: str) -> str | None:
    """A whole-line string literal; None if the line is more than one literal."""
    if "\\" not in text:  # most are: no escape to decode, the closing quote ends the line
        end = text.find('"', 1)
        return text[1:end] if end == len(text) - 1 else None
    out = []
    index = 1
    while index < len(text):
        char = text[index]
        if char == '"':
            return "".join(out) if index == len(text) - 1 else None
        if char == "\\" and index + 1 < len(text):
            following = text[index + 1]
            octal = text[index + 1:index + 4]
            if len(octal) == 3 and all(c in "01234567" for c in octal):
                out.append(chr(int(octal, 8)))
                index += 4
                continue
            out.append(_ESCAPES.get(following, following))
            index += 2
            continue
        out.append(char)
        index += 1
    return None  # no closing quote: truncated


def _parse_number(text: str) -> int | float | None:
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii():
        return None
    if body.isdigit():
        # More digits than any 64-bit integer: a real (callers reject it); int() would raise.
        return int(text) if len(body) <= 19 else float(text)
    mantissa, _, exponent = body.lower().partition("e")
    whole, dot, fraction = mantissa.partition(".")
    digits_ok = (whole + fraction).isdigit() and (whole or fraction)
    exponent_ok = not exponent or exponent.lstrip("+-").isdigit()
    if not (digits_ok and exponent_ok and (dot or exponent)):
        return None
    return float(text)


def read_ad(path: str) -> dict[str, object]:
    """Parse an ad file; OSError if it cannot be read, ValueError if it is far too large or
    not a regular file (a FIFO in its place is not waited on)."""
    import os
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        data = handle.read(MAX_AD_BYTES + 1)
    if len(data) > MAX_AD_BYTES:
        raise ValueError(f"{path} is larger than {MAX_AD_BYTES} bytes")
    return parse_ad(data.decode("utf-8", "replace"))
