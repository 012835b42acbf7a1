"""`mjf publish` on the real OpenPBS complex, end to end: the node's hs06 as its
``resources_available.hs06``, a job placed by `mjf submit-args` on it, a requirement
above it left queued with the scheduler's reason.

Runs as root (CI), on the one-node complex of tests/integration/pbs_complex.py. The test
makes the ``hs06`` resource (``type=float, flag=h``: PBS's scheduler compares a numeric
host resource as an amount, request <= available) and adds it to the scheduler's
``resources:`` line, as a site would once; it removes both, and the node's value,
afterwards. PBS's commands are run through recording wrappers (``[pbs] pbs_exec``), so
what `mjf publish` ran is known: a second publish with nothing changed runs
``pbsnodes`` alone.
"""

from __future__ import annotations

import os
import shlex
import signal
import time

import pytest

from tests.integration.pbs_complex import (
    PBS_EXEC,
    PBS_HOME,
    mjf,
    mjf_complex,
    pbs_command,
    qmgr,
    qsub,
)
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

SCHED_CONFIG = PBS_HOME / "sched_priv" / "sched_config"


def wait_for_mom_resourcedef(name: str, timeout: float = 60) -> None:
    path = PBS_HOME / "mom_priv" / "hooks" / "resourcedef"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and any(line.split()[:1] == [name]
                                 for line in path.read_text().splitlines()):
            return
        time.sleep(0.2)
    raise AssertionError(f"the mom never got resource {name} ({path})")


def delete_resource(name: str, timeout: float = 30) -> None:
    """PBS refuses to delete a resource a job asked for while it keeps that job, in its
    history too: those jobs are purged first (this complex is the tests' own)."""
    for job_id in pbs_command("qselect", "-x", check=False).stdout.split():
        pbs_command("qdel", "-x", "-W", "force", job_id, check=False)
    deadline = time.monotonic() + timeout
    while True:
        deleted = qmgr(f"delete resource {name}", check=False)
        if deleted.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert deleted.returncode == 0, f"resource {name} left: {deleted.stdout}{deleted.stderr}"


def reload_scheduler() -> None:
    os.kill(int((PBS_HOME / "sched_priv" / "sched.lock").read_text().split()[0]), signal.SIGHUP)


@pytest.fixture(scope="module")
def complex_():
    with mjf_complex() as started:
        # A run killed before its clean-up may have left it: made again only if absent.
        if qmgr("list resource hs06", check=False).returncode != 0:
            qmgr("create resource hs06 type=float, flag=h")
        # Until the mom has the server's resourcedef, pbs_python there cannot read a job
        # asking for hs06: the whole hook event fails, and the job runs without MJF.
        wait_for_mom_resourcedef("hs06")
        original = SCHED_CONFIG.read_text()
        SCHED_CONFIG.write_text(original.replace('\nresources: "ncpus, mem,',
                                                 '\nresources: "ncpus, mem, hs06,', 1))
        reload_scheduler()
        wrappers = started.job_root / "pbs" / "bin"
        wrappers.mkdir(parents=True)
        started.pbs_log = started.job_root / "pbs.log"
        for command in ("pbsnodes", "qmgr", "qstat", "pbs_rstat"):
            recording(wrappers / command, str(PBS_EXEC / "bin" / command), started.pbs_log)
        SITE_CONFIG.write_text(
            started.good_config + f"[pbs]\npbs_exec = {wrappers.parent}\n[publish]\nfacts = hs06\n")
        try:
            yield started
        finally:
            SCHED_CONFIG.write_text(original)
            reload_scheduler()
            qmgr(f"unset node {started.node} resources_available.hs06", check=False)
            delete_resource("hs06")


def node_hs06(complex_) -> str | None:
    import json

    output = pbs_command("pbsnodes", "-v", complex_.node, "-F", "json").stdout
    return json.loads(output)["nodes"][complex_.node]["resources_available"].get("hs06")


def test_publish_writes_once_and_a_job_lands_by_it(complex_):
    first = mjf("publish")
    assert first.returncode == 0, first.stderr
    assert f"hs06 unset -> {HS06}" in first.stdout, first.stdout + first.stderr
    assert float(node_hs06(complex_)) == HS06
    writes = [line for line in recorded(complex_.pbs_log) if line.startswith("-c ")]
    assert writes == [f"-c set node {complex_.node} resources_available.hs06={HS06}"]

    # Nothing changed: one read, no write, nothing said.
    before = len(recorded(complex_.pbs_log))
    again = mjf("publish")
    assert (again.returncode, again.stdout) == (0, ""), again.stderr
    assert recorded(complex_.pbs_log)[before:] == [f"-v {complex_.node} -F json"]

    # The options mjf submit-args prints, exactly, as the job's own user submits them.
    printed = mjf("submit-args", "--batch", "pbs", MEETS)
    assert printed.returncode == 0, printed.stderr
    words = shlex.split(printed.stdout)
    assert words == ["-l", f"select=1:ncpus=2:mem=200mb:hs06={HS06 - 5}",
                     "-l", "walltime=0:10:00"]
    script = install_match_job(complex_.job_root, MEETS)
    out = complex_.job_root / "out" / "placed.json"
    job_id = qsub(complex_, "mjfuser1", "placed", *words,
                  command=["/usr/bin/python3", str(script), str(out)])
    assert_matched(out, complex_.mom_log)
    assert complex_.job(job_id)["Exit_status"] == 0

    # Above the node's published hs06: queued, never run, the scheduler saying why.
    above = mjf("submit-args", "--batch", "pbs", ABOVE)
    assert above.returncode == 0, above.stderr
    job_id = qsub(complex_, "mjfuser1", "above", *shlex.split(above.stdout),
                  command=["/bin/true"], wait=False)
    try:
        deadline = time.monotonic() + 60
        job = complex_.job(job_id)
        while "hs06" not in job.get("comment", "") and time.monotonic() < deadline:
            time.sleep(0.5)
            job = complex_.job(job_id)
        assert job["job_state"] == "Q", job
        assert "Insufficient amount of resource: hs06" in job.get("comment", ""), job
        assert f"R: {HS06 + 5}" in job["comment"], job
    finally:
        pbs_command("qdel", "-W", "force", job_id, check=False)


def test_a_changed_value_is_set_and_a_failed_write_is_one_warning(complex_):
    mjf("publish")  # whatever the test before left
    SITE_CONFIG.write_text(SITE_CONFIG.read_text().replace(
        "[machinefeatures]\n", f"[machinefeatures]\nhs06 = {HS06 + 1}.5\n"))
    changed = mjf("publish")
    assert changed.returncode == 0, changed.stderr
    assert float(node_hs06(complex_)) == HS06 + 1.5

    # A resource the complex does not have: qmgr refuses the whole statement; one
    # warning, exit 1, the node's hs06 untouched.
    SITE_CONFIG.write_text(SITE_CONFIG.read_text().replace(
        "facts = hs06\n", "facts = hs06, total_cpu\n").replace(
        f"hs06 = {HS06 + 1}.5\n", ""))
    try:
        failed = mjf("publish")
    finally:
        SITE_CONFIG.write_text(SITE_CONFIG.read_text().replace(
            "facts = hs06, total_cpu\n", "facts = hs06\n"))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    warnings = [line for line in failed.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "total_cpu" in warnings[0], failed.stderr
    assert float(node_hs06(complex_)) == HS06 + 1.5
    restored = mjf("publish")
    assert restored.returncode == 0 and float(node_hs06(complex_)) == HS06, restored.stderr
