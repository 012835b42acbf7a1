"""The Layout section of docs/design.md and the tree say the same: each path it lists
exists, and each module and package of mjf_hooks, and each directory of the checkout,
is listed."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import (
    CHECKOUT_ROOT,
    VENDORED,
    require,
    source_files,
    vendored_sources_left_out,
)

CHECKOUT = Path(__file__).parent.parent.parent


def listed_paths() -> set[str]:
    """The paths that begin the lines of the Layout block (a path holds a ``/``;
    the description begins at the first word that does not)."""
    text = (CHECKOUT / "docs" / "design.md").read_text()
    section = text[text.index("\n## Layout\n"):]
    block = section.split("```\n")[1]
    paths = set()
    for line in block.splitlines():
        if line.startswith(" "):
            continue  # a description's continuation
        for word in line.split(" "):
            if "/" not in word:
                break
            paths.add(word.rstrip("/"))
    return paths


def listed_entries() -> dict[str, str]:
    """Each path the Layout block lists, with its description (continuation lines
    included): a line of several paths gives each the same description."""
    text = (CHECKOUT / "docs" / "design.md").read_text()
    block = text[text.index("\n## Layout\n"):].split("```\n")[1]
    entries: dict[str, str] = {}
    current: list[str] = []
    for line in block.splitlines():
        if line.startswith(" "):
            for path in current:
                entries[path] += " " + line.strip()
            continue
        words = line.split(" ")
        current = [word.rstrip("/") for word in words if "/" in word]
        for path in current:
            entries[path] = line
    return entries


def test_every_listed_path_exists():
    missing = sorted(path for path in listed_paths() if not (CHECKOUT / path).exists())
    if vendored_sources_left_out():
        missing.remove(str(VENDORED.relative_to(CHECKOUT_ROOT)))
    assert missing == []


def test_every_module_and_package_is_listed():
    listed = listed_paths()
    package = CHECKOUT / "mjf_hooks"
    expected = {f"mjf_hooks/{path.name}" for path in package.glob("*.py")
                if path.name != "__init__.py"}
    expected |= {f"mjf_hooks/{path.parent.name}" for path in package.glob("*/__init__.py")}
    assert sorted(expected - listed) == []


def test_every_module_of_a_subpackage_is_named_in_its_entry():
    """``mjf_hooks/<package>/`` is one entry; each of its modules is named there, as
    ``<module>.py``, so a newcomer finds what each file is for."""
    entries = listed_entries()
    unnamed = sorted(
        f"mjf_hooks/{path.parent.name}/{path.name}"
        for path in (CHECKOUT / "mjf_hooks").glob("*/*.py")
        if path.name != "__init__.py"
        and path.name not in entries.get(f"mjf_hooks/{path.parent.name}", ""))
    assert unnamed == []


def test_every_directory_of_the_checkout_is_listed():
    # A package build's tree has directories of its own (_wheel/, pyproject-wheeldir/).
    require((CHECKOUT_ROOT / ".git").exists(), "the checkout's own directories: a clone's")
    listed = listed_paths()
    tops = {path.split("/")[0] for path in source_files() if "/" in path}
    unlisted = sorted(top for top in tops
                      if top != "mjf_hooks" and not any(path == top or path.startswith(top + "/")
                                                        for path in listed))
    assert unlisted == []
