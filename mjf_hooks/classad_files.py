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

A job's wrapper reads a handful of the hundreds of attributes an ad holds, on every job:
:class:`Ad` finds each one when asked (:func:`read_ad`), with the very rule
:func:`parse_ad` applies to every line.
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


class Ad:
    """An ad's attributes as :func:`parse_ad` gives them (``get`` a lowercased name), each
    found when asked rather than every line parsed up front: a wrapper reads about ten of
    an ad's hundreds, on every job. The answer is the one ``parse_ad`` gives: the last
    line whose name is the one asked (:func:`_is_attribute_name`, compared lowercased),
    its value parsed by :func:`parse_value`.

    The search runs on the text lowercased, whose offsets are the text's own only where
    the text is ASCII (``"İ".lower()`` is two characters); any other text is parsed whole,
    by ``parse_ad``."""

    __slots__ = ("_lowered", "_parsed", "_text")

    def __init__(self, text: str) -> None:
        self._parsed: dict[str, object] | None = None
        self._text = self._lowered = ""
        if not text.isascii():
            self._parsed = parse_ad(text)
            return
        # Its lines as parse_ad splits them (str.splitlines: \r, \v, \f, \x1c... too),
        # each ending at a "\n" alone.
        self._text = "\n".join(text.splitlines())
        self._lowered = self._text.lower()

    def get(self, name: str, default: object = None) -> object:
        if self._parsed is not None:
            return self._parsed.get(name, default)
        # parse_ad's keys are valid names, lowercased; a valid name holds no "\n", so each
        # place it is found lies within one line.
        if not _is_attribute_name(name) or name != name.lower():
            return default
        text, lowered = self._text, self._lowered
        end = len(lowered)
        while end > 0:
            found = lowered.rfind(name, 0, end)
            if found < 0:
                break
            start = lowered.rfind("\n", 0, found) + 1
            stop = lowered.find("\n", found)
            line = text[start:] if stop < 0 else text[start:stop]
            key, equals, raw = line.partition("=")
            key = key.strip()
            if equals and key.lower() == name and _is_attribute_name(key):
                return parse_value(raw.strip())
            end = start  # the lines before this one
        return default

    def __getitem__(self, name: str) -> object:
        value = self.get(name, _ABSENT)
        if value is _ABSENT:
            raise KeyError(name)
        return value

    def __bool__(self) -> bool:
        """Whether it has any attribute (a line parse_ad keeps)."""
        if self._parsed is not None:
            return bool(self._parsed)
        for line in self._text.split("\n"):
            key, equals, _ = line.partition("=")
            if equals and _is_attribute_name(key.strip()):
                return True
        return False


_ABSENT = object()


def read_ad(path: str) -> Ad:
    """An ad file's attributes; OSError if it cannot be read, ValueError if it is far too
    large or not a regular file (a FIFO in its place is not waited on)."""
    import os
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    with open(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        # As much as it holds and a byte more (up to the limit), not a buffer the limit's
        # size for every ad; a file that grew since is read on, up to the limit.
        data = handle.read(min(info.st_size, MAX_AD_BYTES) + 1)
        if len(data) > info.st_size and len(data) <= MAX_AD_BYTES:
            data += handle.read(MAX_AD_BYTES + 1 - len(data))
    if len(data) > MAX_AD_BYTES:
        raise ValueError(f"{path} is larger than {MAX_AD_BYTES} bytes")
    return Ad(data.decode("utf-8", "replace"))
