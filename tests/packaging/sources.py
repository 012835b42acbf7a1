"""What the packages are built from, as the checkout says it: the version (its one
place, mjf_hooks/__init__.py), the installed commands (setup.cfg's ``scripts``), the
manual pages (man/pages) and the two changelogs' versions; the source tree as a clean
clone has it, and what of it no package may hold."""

from __future__ import annotations

import configparser
import re
import shutil
from pathlib import Path, PurePosixPath

from tests.conftest import ARTEFACTS, CHECKOUT_ROOT, TOP_LEVEL_ARTEFACTS


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




def clean_copy(destination: Path) -> Path:
    """The checkout as a clean clone has it (tests/vendor/ too): without build
    artefacts, caches and venvs."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        top = Path(directory).resolve() == CHECKOUT_ROOT.resolve()
        return {
            name
            for name in names
            if ARTEFACTS.match(name)
            or (top and (name in TOP_LEVEL_ARTEFACTS or name.startswith(".venv")))
        }

    shutil.copytree(CHECKOUT_ROOT, destination, ignore=ignore, symlinks=True)
    return destination


def not_ours(paths: list[str], licences: set[str]) -> list[str]:
    """Of the ``paths`` a package or source tarball holds, those of other projects: under
    a tests/vendor/, or a licence file that is not one of ``licences``, the package's
    own (the Apache-2.0 that debian/copyright and the RPM's License name for all)."""
    found = []
    for path in paths:
        parts = PurePosixPath(path).parts
        vendored = any(parts[at:at + 2] == ("tests", "vendor") for at in range(len(parts)))
        licence = parts and parts[-1].upper().startswith(("LICENSE", "COPYING", "COPYRIGHT"))
        if vendored or (licence and path not in licences):
            found.append(path)
    return found
