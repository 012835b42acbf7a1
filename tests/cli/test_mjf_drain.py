"""`mjf drain`: the machine's and every job's shutdown times, the grace promise, cancel."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from mjf_hooks import config as config_module
from mjf_hooks.store import OWN_PREFIX, Store
from tests.conftest import installed_command, require


@pytest.fixture
def node(write_config):
    conf, base = write_config("[machinefeatures]\ngrace_secs = 600\n")
    store = Store(str(base))
    store.create_job("1", {"job_id": "1"})
    store.create_job("2", {"job_id": "2", "shutdowntime_job": "1800000000"},
                     state={OWN_PREFIX + "shutdowntime_job": "1800000000"})
    return conf, base, store


def drain(conf, *args):
    return subprocess.run([installed_command("mjf"), "drain", *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "MJF_CONFIG": str(conf)})


def values(base, job):
    path = base / "jobs" / job / "jobfeatures"
    return {p.name: p.read_text() for p in path.iterdir() if not p.name.startswith(".")}


def test_drain_sets_machine_and_job_shutdown_times(node):
    conf, base, _ = node
    before = int(time.time())
    result = drain(conf, "--in", "2h")
    assert result.returncode == 0, result.stderr
    shutdown = int((base / "machinefeatures/shutdowntime").read_text())
    assert before + 7200 <= shutdown <= int(time.time()) + 7200
    assert values(base, "1")["shutdowntime_job"] == str(shutdown)
    assert values(base, "2")["shutdowntime_job"] == str(shutdown)  # earlier than its own
    assert "updated in 2 job(s)" in result.stdout
    # A job's own earlier shutdown stays.
    assert drain(conf, "--at", "1900000000").returncode == 0
    assert values(base, "2")["shutdowntime_job"] == "1800000000"
    assert values(base, "1")["shutdowntime_job"] == "1900000000"


def test_a_job_starting_during_a_drain_gets_it(node):
    conf, base, _ = node
    assert drain(conf, "--in", "1h").returncode == 0
    shutdown = (base / "machinefeatures/shutdowntime").read_text()
    job = subprocess.run([installed_command("mjf"), "run", "--wall-limit", "7200", "--", "sh", "-c",
                          'cat "$JOBFEATURES/shutdowntime_job"; echo; mjf check >/dev/null; '
                          'echo $?'],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "MJF_CONFIG": str(conf), "PATH":
                              f"{os.path.dirname(installed_command('mjf'))}:/usr/bin:/bin"})
    first, status = job.stdout.splitlines()
    assert first == shutdown
    assert status in ("0", "1")  # mjf check: no error (warnings for unconfigured hs06)


def test_too_little_notice_is_refused_with_the_earliest_allowed_time(node):
    conf, base, _ = node
    result = drain(conf, "--in", "5m")
    assert result.returncode == 1
    assert "less than the grace_secs = 600 s of notice" in result.stderr
    assert "the earliest allowed is" in result.stderr and "--force overrides" in result.stderr
    assert not (base / "machinefeatures/shutdowntime").exists()
    assert "shutdowntime_job" not in values(base, "1")
    forced = drain(conf, "--in", "5m", "--force")
    assert forced.returncode == 0 and "FORCED" in forced.stderr
    assert (base / "machinefeatures/shutdowntime").exists()


def test_cancel_restores_each_jobs_own(node):
    conf, base, _ = node
    drain(conf, "--in", "1h")
    result = drain(conf, "--cancel")
    assert result.returncode == 0 and "restored in 2 job(s)" in result.stdout
    assert not (base / "machinefeatures/shutdowntime").exists()
    assert "shutdowntime_job" not in values(base, "1")
    assert values(base, "2")["shutdowntime_job"] == "1800000000"
    assert drain(conf, "--cancel").returncode == 0  # idempotent


@pytest.mark.parametrize("args", [(), ("--in", "1h", "--cancel"), ("--in", "soon"),
                                  ("--at", "next tuesday")])
def test_usage_errors(node, args):
    result = drain(node[0], *args)
    assert result.returncode in (1, 2) and result.stderr


@pytest.mark.parametrize(("args", "reason"), [
    (("--at", "99999999999999999999"), "is not a UNIX time"),
    (("--in", "99999999999999d"), "longer than this century"),
    (("--in", "9" * 5000), "is not a duration"),
    (("--at", "1795393251000"), "not a plausible shutdown time in UNIX seconds"),
    (("--at", "9999-12-31T23:59"), "not a plausible shutdown time in UNIX seconds"),
    (("--at", "0001-01-01T00:00"), "0001-01-01T00:00"),
    (("--at", "1795393251000", "--force"), "not a plausible shutdown time"),
    (("--at", "١٧٩٥٣٩٣٢٥١"), "is not a UNIX time"),
])
def test_implausible_times_are_refused_and_reach_no_job(node, args, reason):
    conf, base, _ = node
    result = drain(conf, *args)
    assert result.returncode == 1 and reason in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1
    assert not (base / "machinefeatures/shutdowntime").exists()
    assert "shutdowntime_job" not in values(base, "1")


def test_a_past_time_without_a_grace_promise_says_it_is_past(write_config):
    conf, base = write_config()
    result = drain(conf, "--at", str(int(time.time()) - 60))
    assert result.returncode == 1
    assert "is in the past; --force overrides" in result.stderr
    assert " = 0 s" not in result.stderr
    assert not (base / "machinefeatures/shutdowntime").exists()


def test_drain_over_many_jobs_is_fast(write_config):
    conf, base = write_config("[machinefeatures]\ngrace_secs = 60\n")
    store = Store(str(base))
    for number in range(500):
        store.create_job(str(number), {"job_id": str(number)})
    started = time.monotonic()
    config = config_module.load(str(conf))
    from mjf_hooks.drain import drain as do_drain
    from mjf_hooks.log import Log

    do_drain(config, store, Log("test", ()), int(time.time()) + 3600)
    assert time.monotonic() - started < 10  # the figure itself: benchmarks/run
    assert all(values(base, str(n))["shutdowntime_job"] for n in (0, 499))


def test_drain_reaches_htcondor_jobs_in_their_scratch_dirs(tmp_path, write_config):
    require(os.geteuid() == 0, "needs root to give the scratch directories to another user")
    execute = tmp_path / "execute"
    conf, base = write_config(f"[machinefeatures]\ngrace_secs = 60\n"
                              f"[htcondor]\nexecute_dir = {execute}\n")
    scratch = execute / "dir_1234"
    scratch.mkdir(parents=True)
    job = Store(str(scratch / ".mjf")).create_job("vm#1.0#17", {"job_id": "vm#1.0#17"})
    other = tmp_path / "elsewhere"
    Store(str(other)).create_job("victim", {"job_id": "victim"})
    (execute / "dir_666").mkdir()
    os.symlink(other, execute / "dir_666" / ".mjf")  # planted: never followed
    (execute / "dir_777/.mjf").mkdir(parents=True)
    os.symlink(other / "jobs", execute / "dir_777/.mjf/jobs")  # planted deeper: refused
    for path in [scratch, *scratch.rglob("*")]:
        os.chown(path, 65534, 65534)
    result = drain(conf, "--in", "1h")
    assert result.returncode == 0, result.stderr
    assert "skipped" in result.stderr and "dir_777" in result.stderr
    shutdown = (base / "machinefeatures/shutdowntime").read_text()
    assert (Path(job) / "shutdowntime_job").read_text() == shutdown
    assert not (other / "jobs/victim/jobfeatures/shutdowntime_job").exists()
    assert drain(conf, "--cancel").returncode == 0
    assert not (Path(job) / "shutdowntime_job").exists()


def test_drain_reaches_the_jobs_users_keep_in_their_own_directories(tmp_path, write_config,
                                                                     monkeypatch):
    require(os.geteuid() == 0, "needs root to give the directories to another user")
    from mjf_hooks import drain as drain_module
    from mjf_hooks import store_locations
    from mjf_hooks.log import Log

    tmp, runtime = tmp_path / "tmp", tmp_path / "run-user"
    monkeypatch.setattr(store_locations, "PRIVATE_PARENTS", (str(tmp), str(runtime)))
    conf, base = write_config("[machinefeatures]\ngrace_secs = 60\n")
    tmp.mkdir()
    (runtime / "4321").mkdir(parents=True)
    lsf_job = Path(Store(str(tmp / "mjf-4321")).create_job("77", {"job_id": "77"}))
    run_job = Path(Store(str(runtime / "4321/mjf")).create_job("h.1.2", {"job_id": "h.1.2"}))
    wrong = Path(Store(str(tmp / "mjf-999")).create_job("78", {"job_id": "78"}))  # not 999's
    for path in [tmp / "mjf-4321", tmp / "mjf-999", runtime / "4321",
                 *(tmp / "mjf-4321").rglob("*"), *(tmp / "mjf-999").rglob("*"),
                 *(runtime / "4321").rglob("*")]:
        os.chown(path, 4321, 4321)
    os.symlink(tmp / "mjf-4321", tmp / "mjf-5")  # planted: never followed
    config = config_module.load(str(conf))
    shutdown = int(time.time()) + 3600
    drain_module.drain(config, Store(str(base)), Log("test", ()), shutdown)
    assert (lsf_job / "shutdowntime_job").read_text() == str(shutdown)
    assert (run_job / "shutdowntime_job").read_text() == str(shutdown)
    assert not (wrong / "shutdowntime_job").exists()
    drain_module.cancel(config, Store(str(base)), Log("test", ()))
    assert not (lsf_job / "shutdowntime_job").exists()
