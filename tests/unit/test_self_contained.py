"""A clone of the repository is enough: nothing in it reaches outside it for what
the code, the docs or the tests need (the OpenPBS the tests build lies in
tests/vendor/openpbs, checked against its sha256)."""

import hashlib
from pathlib import Path

from tests.conftest import VENDORED, require, source_files

REPO = Path(__file__).resolve().parents[2]
# The directory beside the checkout where it was first developed, as a relative path or
# by its absolute name: spelled in pieces so that this file does not match itself.
OUTSIDE = ("../" + "shared", "/work" + "/shared")


def tracked_files() -> list[Path]:
    return [REPO / name for name in source_files()]


def test_nothing_in_the_repository_refers_to_the_directory_beside_it():
    offenders = []
    for path in tracked_files():
        if path.suffix in {".gz", ".png"} or not path.is_file():
            continue
        text = path.read_bytes()
        if any(name.encode() in text for name in OUTSIDE) or b"DESIGN" + b".md" in text:
            offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


def test_the_vendored_openpbs_source_is_the_one_its_checksum_names():
    require(VENDORED.exists(), "tests/vendor/ is in a clone, not in a source package")
    vendor = VENDORED / "openpbs"
    expected, name = (vendor / "SHA256SUMS").read_text().split()
    assert hashlib.sha256((vendor / name).read_bytes()).hexdigest() == expected
    assert (vendor / "LICENSE").read_text().startswith("---")


def test_comments_name_no_issue_of_the_tracker():
    """A reader of the repository has no tracker: a comment or docstring says what and
    why, never which numbered issue brought it (the changelog says what each version
    brought)."""
    import re

    word = b"iss" + b"ue"  # in pieces, so that this file does not match itself
    pattern = re.compile(rb"\b%s \d+|\(%s|\b%ss? #\d+" % (word, word, word), re.IGNORECASE)
    changelogs = {("CHANGELOG.md",), ("debian", "changelog")}
    offenders = []
    for path in tracked_files():
        relative = path.relative_to(REPO)
        if relative.parts[:2] in {("tests", "fixtures"), ("tests", "vendor")} \
                or relative.parts in changelogs or path.suffix in {".gz", ".png"} \
                or not path.is_file():
            continue
        text = path.read_bytes()
        lines = [text.count(b"\n", 0, match.start()) + 1 for match in pattern.finditer(text)]
        offenders += [f"{relative}:{line}" for line in lines]
    assert offenders == []
