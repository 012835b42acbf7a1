"""Every skip goes through tests.conftest.require: CI (MJF_REQUIRE_INTEGRATION=1) turns
those into failures, so a test that needs root or a daemon cannot silently stop running."""

from pathlib import Path

TESTS = Path(__file__).parent.parent
ALLOWED = {TESTS / "conftest.py", Path(__file__)}  # require() itself, and this guard


def test_no_test_skips_on_its_own():
    stray = []
    for path in sorted(TESTS.rglob("*.py")):
        if path in ALLOWED:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if any(call in code for call in ("pytest.skip(", "pytest.mark.skip", "skipif(",
                                             "importorskip(")):
                stray.append(f"{path.relative_to(TESTS)}:{number}: {line.strip()}")
    assert stray == [], "skip through tests.conftest.require instead:\n" + "\n".join(stray)
