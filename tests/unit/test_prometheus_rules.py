"""contrib/prometheus/mjf-rules.yml: valid rules (`promtool check rules`) whose alerts fire
where they should and only there (`promtool test rules` runs mjf-rules-test.yml)."""

import shutil
import subprocess

import pytest

from tests.conftest import CHECKOUT_ROOT, require

CONTRIB = CHECKOUT_ROOT / "contrib/prometheus"


@pytest.mark.parametrize("argv", [["check", "rules", "mjf-rules.yml"],
                                  ["test", "rules", "mjf-rules-test.yml"]])
def test_promtool_passes_the_alert_rules(argv):
    require(shutil.which("promtool") is not None, "promtool (Debian: prometheus) not installed")
    result = subprocess.run(["promtool", *argv], cwd=CONTRIB, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
