"""JSON text as ``json.dumps`` writes it, without the ``json`` module.

``import json`` costs ~9 ms (it pulls in ``re``): more than an end-of-job hook spends
writing its record, and most of what ``mjf describe`` may cost. Both write their JSON
here (ASCII only, non-ASCII as ``\\u`` escapes, as ``json.dumps`` does by default).
Reading stays with ``json.loads`` (``mjf records``).
"""

from __future__ import annotations

_JSON_ESCAPES = {i: f"\\u{i:04x}" for i in (*range(0x20), 0x7F)}
_JSON_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\", ord("\n"): "\\n", ord("\r"): "\\r",
                      ord("\t"): "\\t", ord("\b"): "\\b", ord("\f"): "\\f"})


def _json_string(text: str) -> str:
    text = text.translate(_JSON_ESCAPES)
    if not text.isascii():
        text = "".join(char if char < "\x80" else _json_unicode(ord(char)) for char in text)
    return f'"{text}"'


def _json_unicode(code: int) -> str:
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a surrogate pair, as JSON spells a character beyond the BMP
    return f"\\u{0xD800 | code >> 10:04x}\\u{0xDC00 | code & 0x3FF:04x}"


def json_text(value, indent: int | None = None, sort_keys: bool = True,
              _depth: int = 0) -> str:
    """``value`` (dicts with string keys, lists, strings, finite numbers, booleans, None)
    as ``json.dumps(value, indent=indent, sort_keys=sort_keys)`` writes it."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{value!r} has no JSON form")
        return float.__repr__(value)
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, dict):
        keys = sorted(value) if sort_keys else value
        items = [f"{_json_string(key)}: {json_text(value[key], indent, sort_keys, _depth + 1)}"
                 for key in keys]
        return _joined(items, "{", "}", indent, _depth)
    if isinstance(value, (list, tuple)):
        items = [json_text(item, indent, sort_keys, _depth + 1) for item in value]
        return _joined(items, "[", "]", indent, _depth)
    raise TypeError(f"{type(value).__name__} has no JSON form here")


def _joined(items: list[str], opening: str, closing: str, indent: int | None,
            depth: int) -> str:
    """A container's items between its brackets: on one line, or (``indent``) one item a
    line, as json.dumps lays them out (an empty container stays ``{}`` or ``[]``)."""
    if indent is None:
        return opening + ", ".join(items) + closing
    if not items:
        return opening + closing
    inner, outer = "\n" + " " * (indent * (depth + 1)), "\n" + " " * (indent * depth)
    return opening + inner + ("," + inner).join(items) + outer + closing
