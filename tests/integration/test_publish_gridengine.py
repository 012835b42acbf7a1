"""`mjf publish` on the real Grid Engine cell, end to end: the node's hs06 as its
``complex_values``, a job placed by `mjf submit-args` on it, a requirement above it refused.

Runs as root (CI), on the one-node cell of tests/integration/gridengine_cell.py. The test
makes the ``hs06`` complex (``DOUBLE``, relop ``<=``: Grid Engine asks ``request <=
host``) as a site would once, and removes it and the host's value afterwards. qconf is
run through a recording wrapper (``[gridengine] qconf``), so what `mjf publish` ran is
known: a second publish with nothing changed runs ``qconf -se`` alone.
"""

from __future__ import annotations

import shlex

import pytest

from tests.integration.gridengine_cell import mjf, mjf_cell, qconf, qsub
from tests.integration.publish_side import (
    ABOVE,
    HS06,
    MEETS,
    assert_matched,
    install_match_job,
    recorded,
    recording,
)
from tests.integration.site import SITE_CONFIG

pytestmark = pytest.mark.integration

COMPLEX = "hs06 hs06 DOUBLE <= YES NO 0 0"


@pytest.fixture(scope="module")
def cell():
    with mjf_cell() as started:
        original = qconf("-sc").stdout
        (started.root / "complexes").write_text(original.rstrip("\n") + f"\n{COMPLEX}\n")
        qconf("-Mc", str(started.root / "complexes"))
        log = started.job_root / "qconf.log"
        wrapper = recording(started.job_root / "qconf", "/usr/bin/qconf", log)
        started.qconf_log = log
        SITE_CONFIG.write_text(
            started.good_config + f"[gridengine]\nqconf = {wrapper}\n[publish]\nfacts = hs06\n"
            "[submit]\ngridengine_pe = mjf_smp\n")
        try:
            yield started
        finally:
            qconf("-dattr", "exechost", "complex_values", "hs06", started.host, check=False)
            (started.root / "complexes").write_text(original)
            qconf("-Mc", str(started.root / "complexes"), check=False)


def host_complex_values(cell) -> str:
    line = next(line for line in qconf("-se", cell.host).stdout.splitlines()
                if line.startswith("complex_values"))
    return line.split(None, 1)[1]


def test_publish_writes_once_and_a_job_lands_by_it(cell):
    first = mjf(cell, "publish")
    assert first.returncode == 0, first.stderr
    assert f"hs06 unset -> {HS06}" in first.stdout, first.stdout + first.stderr
    assert f"hs06={HS06}" in host_complex_values(cell)
    writes = [line for line in recorded(cell.qconf_log) if not line.startswith("-se ")]
    assert writes == [f"-aattr exechost complex_values hs06={HS06} {cell.host}"]

    # Nothing changed: one read, no write, nothing said.
    before = len(recorded(cell.qconf_log))
    again = mjf(cell, "publish")
    assert (again.returncode, again.stdout) == (0, ""), again.stderr
    assert recorded(cell.qconf_log)[before:] == [f"-se {cell.host}"]

    # The options mjf submit-args prints, exactly, as the job's own user submits them.
    printed = mjf(cell, "submit-args", "--batch", "gridengine", MEETS)
    assert printed.returncode == 0, printed.stderr
    words = shlex.split(printed.stdout)
    assert words == ["-pe", "mjf_smp", "2", "-l", f"h_rt=600,h_vmem=100M,hs06={HS06 - 5}"]
    script = install_match_job(cell.job_root, MEETS)
    out = cell.job_root / "out" / "placed.json"
    qsub(cell, "mjfuser1", "placed", *words,
         command=["-b", "y", "/usr/bin/python3", str(script), str(out)])
    assert_matched(out, cell.messages)

    # Above the node's published hs06: qsub -w e refuses it, naming no queue that fits.
    above = mjf(cell, "submit-args", "--batch", "gridengine", ABOVE)
    assert above.returncode == 0, above.stderr
    refused = cell.as_user("mjfuser1", ["qsub", "-w", "e", "-q", "mjf.q", "-o", "/dev/null",
                                        "-e", "/dev/null", *shlex.split(above.stdout),
                                        "-b", "y", "/bin/true"], check=False)
    assert refused.returncode != 0, refused.stdout
    assert "no suitable queues" in refused.stdout + refused.stderr, refused.stdout + refused.stderr
    cell.wait_until_no_jobs()


def test_a_changed_value_is_modified_and_a_failed_write_is_one_warning(cell):
    mjf(cell, "publish")  # whatever the test before left
    SITE_CONFIG.write_text(SITE_CONFIG.read_text().replace(
        "[machinefeatures]\n", f"[machinefeatures]\nhs06 = {HS06 + 1}.5\n"))
    changed = mjf(cell, "publish")
    assert changed.returncode == 0, changed.stderr
    assert f"hs06={HS06 + 1}.5" in host_complex_values(cell)
    assert any(line.startswith(f"-mattr exechost complex_values hs06={HS06 + 1}.5 ")
               for line in recorded(cell.qconf_log))

    # A complex the cell does not have: qconf refuses it; one warning, exit 1, the
    # host's other values untouched.
    SITE_CONFIG.write_text(SITE_CONFIG.read_text().replace(
        "facts = hs06\n", "facts = hs06, total_cpu\n"))
    try:
        failed = mjf(cell, "publish")
    finally:
        SITE_CONFIG.write_text(SITE_CONFIG.read_text().replace(
            "facts = hs06, total_cpu\n", "facts = hs06\n").replace(
            f"hs06 = {HS06 + 1}.5\n", ""))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    warnings = [line for line in failed.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "total_cpu" in warnings[0], failed.stderr
    assert f"hs06={HS06 + 1}.5" in host_complex_values(cell)
    assert "total_cpu" not in host_complex_values(cell)
    restored = mjf(cell, "publish")
    assert restored.returncode == 0 and f"hs06={HS06}" in host_complex_values(cell), \
        restored.stderr
