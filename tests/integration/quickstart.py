"""The quick-start pages (docs/quickstart-<batch system>.md), read as the tests run them.

Each page marks the blocks a test takes, with an HTML comment just before the fenced
block (a reader of the rendered page does not see it)::

    <!-- quickstart: install -->            the package's install line (checked, not run)
    <!-- quickstart: config /etc/mjf/... --> a config file's text, and where it goes
    <!-- quickstart: hooks -->              the batch system's lines (its config, or the
                                            commands an admin runs as root)
    <!-- quickstart: job -->                what a user types: submit, wait, show
    <!-- quickstart: output -->             what that prints; ``<job id>`` and ``<host>``
                                            stand for what varies

so the tests run the page's own text and the page cannot drift from what works.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
KINDS = ("install", "config", "hooks", "job", "output")
MARKED = re.compile(r"^<!-- quickstart: (\w+)(?: (\S+))? -->\n```[\w-]*\n(.*?)^```$",
                    re.M | re.S)
# What varies from run to run in an output block, and what it stands for.
PLACEHOLDERS = {"<job id>": r"[\w.\[\]-]+", "<host>": r"[\w.-]+"}


def path(name: str) -> Path:
    return CHECKOUT / "docs" / f"quickstart-{name}.md"


@dataclasses.dataclass
class Page:
    install: str
    config: str
    config_path: str  # where the page has the admin put ``config``: under /etc/mjf/
    hooks: str
    job: str
    output: str


def page(name: str) -> Page:
    """The marked blocks of batch system ``name``'s page: each kind exactly once."""
    found: dict[str, list[tuple[str, str]]] = {}
    for kind, target, text in MARKED.findall(path(name).read_text()):
        found.setdefault(kind, []).append((target, text))
    assert sorted(found) == sorted(KINDS), f"{path(name)}: blocks {sorted(found)}"
    assert all(len(blocks) == 1 for blocks in found.values()), path(name)
    assert found["config"][0][0].startswith("/etc/mjf/"), found["config"]
    return Page(config_path=found["config"][0][0],
                **{kind: blocks[0][1] for kind, blocks in found.items()})


def output_pattern(expected: str) -> re.Pattern:
    """A pattern of the whole of an output block, its placeholders standing for what
    varies."""
    parts = re.split("(" + "|".join(map(re.escape, PLACEHOLDERS)) + ")", expected)
    return re.compile("".join(PLACEHOLDERS.get(part, re.escape(part)) for part in parts))


def matches(expected: str, printed: str) -> bool:
    return output_pattern(expected).fullmatch(printed) is not None


def mapped(text: str, paths: dict[str, str]) -> str:
    """``text`` with each of ``paths``' keys (a path on a real node) replaced by where the
    test has it; each key must be in the text, so a mapping that no longer applies fails."""
    for real, here in paths.items():
        assert real in text, f"{real} is not in {text!r}"
        text = text.replace(real, here)
    return text
