"""What the packages are built from, as the checkout says it: the version (its one
place, mjf_hooks/__init__.py), the installed commands (setup.cfg's ``scripts``), the
manual pages (man/pages) and the two changelogs' versions."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

from tests.conftest import CHECKOUT_ROOT


def package_version() -> str:
    text = (CHECKOUT_ROOT / "mjf_hooks/__init__.py").read_text()
    match = re.search(r'^__version__ = "([^"]+)"$', text, re.MULTILINE)
    assert match, "no __version__ in mjf_hooks/__init__.py"
    return match.group(1)


def commands() -> list[str]:
    setup = configparser.ConfigParser()
    setup.read(CHECKOUT_ROOT / "setup.cfg")
    return [Path(line).name for line in setup["options"]["scripts"].split()]


def man_pages() -> list[tuple[str, str, list[str]]]:
    """(page, section, the words that give its text) for each line of man/pages."""
    pages = []
    for line in (CHECKOUT_ROOT / "man/pages").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            page, section, *text = line.split(" (")[0].split()
            pages.append((page, section, text))
    return pages


def debian_changelog_versions(root: Path = CHECKOUT_ROOT) -> list[str]:
    return re.findall(r"^mjf-hooks \(([^)]+)\) ", (root / "debian/changelog").read_text(),
                      re.MULTILINE)


def changelog_md_versions(root: Path = CHECKOUT_ROOT) -> list[str]:
    return re.findall(r"^## (\S+) - \d{4}-\d\d-\d\d$", (root / "CHANGELOG.md").read_text(),
                      re.MULTILINE)
