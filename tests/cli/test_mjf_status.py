"""`[mjf] jobstatus = yes` (draft 0.99 $JOBSTATUS): `mjf run` gives the job one, a pilot
fills it with `mjf status set`, the site reads every job's with `mjf status`, and
`mjf drain --plan` proposes (and with --apply announces) the shutdown that wastes least."""

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from mjf_hooks import config as config_module
from mjf_hooks import jobstatus, node_status, store_locations
from mjf_hooks.cli.interactive import cli
from mjf_hooks.probe import process
from mjf_hooks.store import BACKEND_MARKER, Store
from tests import lock_holder
from tests.conftest import installed_command, require

CONFIG = "jobstatus = yes\n[machinefeatures]\ngrace_secs = 600\n"


@pytest.fixture
def site(tmp_path, write_config, monkeypatch):
    """A config offering $JOBSTATUS, its store, and no other store to find (no users'
    private directories, no HTCondor scratch directories)."""
    monkeypatch.setattr(store_locations, "PRIVATE_PARENTS", (str(tmp_path / "tmp"),
                                                       str(tmp_path / "run-user")))
    conf, base = write_config(CONFIG + f"[htcondor]\nexecute_dir = {tmp_path}/execute\n")
    monkeypatch.setenv("MJF_CONFIG", str(conf))
    for name in ("JOBSTATUS", "JOBFEATURES", "MACHINEFEATURES"):
        monkeypatch.delenv(name, raising=False)
    return conf, base, Store(str(base))


def mjf(*args, config=None, env=None, **kwargs):
    """The installed `mjf`, as a process."""
    environ = {key: value for key, value in os.environ.items()
               if key not in ("JOBSTATUS", "JOBFEATURES", "MACHINEFEATURES")}
    environ["PATH"] = f"{os.path.dirname(installed_command('mjf'))}:/usr/bin:/bin"
    if config is not None:
        environ["MJF_CONFIG"] = str(config)
    environ.update(env or {})
    return subprocess.run([installed_command("mjf"), *args], capture_output=True, text=True,
                          timeout=60, env=environ, **kwargs)


def interactive(*args):
    """`mjf ARGS` served by click, in this process (so the store seen is the fixture's)."""
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def add_job(store, job_id, cpus=4, start=None, wall=7200, status=True, backend="slurm"):
    """A job as a root hook of ``backend`` makes it (its bookkeeping says which)."""
    features = {"job_id": job_id, "allocated_cpu": str(cpus),
                "jobstart_secs": str(int(time.time()) - 100 if start is None else start)}
    if wall is not None:
        features["wall_limit_secs"] = str(wall)
    store.create_job(job_id, features, status=status, state={BACKEND_MARKER: backend})
    return store.job_status_dir(job_id)


# --- mjf run: the job's $JOBSTATUS ----------------------------------------------------

JOB = """
echo "JOBSTATUS=${JOBSTATUS-unset}"
ls -A "$(dirname "$JOBFEATURES")" | sort | tr '\\n' ' '; echo
if [ -n "${JOBSTATUS-}" ]; then
    test -d "$JOBSTATUS" && echo "empty: $(ls -A "$JOBSTATUS" | wc -l)"
    now=$(date +%s)
    mjf status set used_CPU=3 last_job_start=$now last_exp_job_end=$((now + 3600)); echo "set $?"
    mjf status set used_CPU=5; echo "more than allocated $?"
    mjf status --json j1
fi
"""


def test_mjf_run_gives_the_job_a_jobstatus_its_pilot_fills(site):
    conf, base, _ = site
    result = mjf("run", "--cpus", "4", "--wall-limit", "7200", "--job-id", "j1", "--",
                 "sh", "-c", JOB, config=conf)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"JOBSTATUS={base}/jobs/j1/jobstatus"  # beside its jobfeatures
    assert lines[1].split() == ["jobfeatures", "jobstatus", "state"]
    assert lines[2:5] == ["empty: 0", "set 0", "more than allocated 2"]
    assert "used_CPU 5 is more than the job's allocated_cpu 4" in result.stderr
    shown = json.loads("\n".join(lines[5:]))
    [job] = shown["jobs"]
    assert job["job_id"] == "j1" and job["state"] == "reports"
    assert job["values"]["used_CPU"] == "3"  # the refused update wrote nothing
    assert job["figures"]["remaining_time"] in (3599, 3600, 3601)
    assert os.listdir(base / "jobs") == []  # gone with the job


def test_without_jobstatus_the_job_gets_none(write_config):
    conf, _ = write_config("[machinefeatures]\ngrace_secs = 600\n")
    result = mjf("run", "--cpus", "4", "--wall-limit", "7200", "--job-id", "j1", "--",
                 "sh", "-c", JOB, config=conf)
    assert result.returncode == 0, result.stderr
    assert [line.split() for line in result.stdout.splitlines()] == [
        ["JOBSTATUS=unset"], ["jobfeatures", "state"]]
    conf.write_text(conf.read_text() + "[mjf]\njobstatus = no\n")
    result = mjf("run", "--", "sh", "-c", JOB, config=conf)
    assert result.stdout.splitlines()[0] == "JOBSTATUS=unset"


# --- mjf status set -------------------------------------------------------------------

@pytest.fixture
def pilot(site):
    """A job's empty jobstatus/, and the environment its pilot has."""
    _, base, store = site
    directory = add_job(store, "7", cpus=4)
    return directory, {"JOBSTATUS": directory, "JOBFEATURES": f"{base}/jobs/7/jobfeatures"}


def listing(directory):
    return {name: open(os.path.join(directory, name)).read()
            for name in sorted(os.listdir(directory))}


def test_status_set_writes_the_set_and_removes_keys(pilot):
    directory, env = pilot
    result = mjf("status", "set", "used_CPU=2", "last_job_start=1795000000",
                 "can_postpone_last_job=True", "priority_factor=-3", env=env)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert listing(directory) == {"can_postpone_last_job": "True",
                                  "last_job_start": "1795000000", "priority_factor": "-3",
                                  "used_CPU": "2"}
    result = mjf("status", "set", "priority_factor=", "used_CPU=4", env=env)  # empty: remove
    assert result.returncode == 0, result.stderr
    assert listing(directory) == {"can_postpone_last_job": "True",
                                  "last_job_start": "1795000000", "used_CPU": "4"}
    other = os.path.join(os.path.dirname(directory), "elsewhere")
    os.mkdir(other)
    assert mjf("status", "set", "--dir", other, "--timeout", "1", "used_CPU=1",
               env=env).returncode == 0
    assert listing(other) == {"used_CPU": "1"}
    help_text = mjf("status", "set", "--help", env=env)
    assert help_text.returncode == 0 and help_text.stdout.startswith("usage: mjf status set")


@pytest.mark.parametrize(("args", "message"), [
    (("used_CPU=2", "bogus=1"), "'bogus' is not a $JOBSTATUS key"),
    (("used_CPU=2", "bogus="), "'bogus' is not a $JOBSTATUS key"),
    (("used_CPU=1e3",), "used_CPU: '1e3' is not a number of cores"),
    (("used_CPU=2", "last_job_start=+1795000000"),
     "last_job_start: '+1795000000' is not a UNIX time"),
    (("used_CPU=2", "can_postpone_last_job=true"),
     "can_postpone_last_job: 'true' is not True or False"),
    (("used_CPU=2", "priority_factor=1.5"), "priority_factor: '1.5' is not an integer"),
    (("used_CPU=5",), "used_CPU 5 is more than the job's allocated_cpu 4"),
    (("used_CPU=",), "used_CPU cannot be removed"),
    (("last_job_start=1795000000",), "used_CPU must be set with the first update"),
    (("used_CPU=2", "last_exp_job_end=1795000100", "first_exp_job_end=1795000200"),
     "first_exp_job_end 1795000200 is after last_exp_job_end 1795000100"),
    ((), "give at least one KEY=VALUE"),
    (("used_CPU",), "'used_CPU' is not KEY=VALUE"),
    (("--bogus", "used_CPU=1"), "unknown option '--bogus'"),
    (("--timeout", "soon", "used_CPU=1"), "--timeout must be 0 to 3600 seconds"),
    (("--timeout", "99999", "used_CPU=1"), "--timeout must be 0 to 3600 seconds"),
    (("--timeout", "nan", "used_CPU=1"), "--timeout must be 0 to 3600 seconds"),
    (("used_CPU=1", "--timeout"), "--timeout needs a value"),
])
def test_status_set_refuses_what_is_wrong_with_2_and_writes_nothing(pilot, args, message):
    directory, env = pilot
    result = mjf("status", "set", *args, env=env)
    assert result.returncode == 2
    assert result.stderr.startswith(f"mjf status set: {message}"), result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert os.listdir(directory) == []


def test_status_set_exits_1_without_jobstatus_or_the_lock(pilot, tmp_path):
    directory, env = pilot
    result = mjf("status", "set", "used_CPU=1", env={"JOBFEATURES": env["JOBFEATURES"]})
    assert result.returncode == 1
    assert "JOBSTATUS is not set to a directory: the site does not offer" in result.stderr
    result = mjf("status", "set", "used_CPU=1", env={"JOBSTATUS": str(tmp_path / "none")})
    assert result.returncode == 1 and "none" in result.stderr
    assert mjf("status", "set", "used_CPU=1", env=env).returncode == 0
    with lock_holder.held(f"{directory}/used_CPU"):
        started = time.monotonic()
        result = mjf("status", "set", "--timeout", "0.3", "used_CPU=2", env=env)
        assert time.monotonic() - started < 10
    assert result.returncode == 1
    assert result.stderr == (f"mjf status set: {directory}/used_CPU stayed locked by another "
                             "process for 0.3 s\n")
    assert listing(directory) == {"used_CPU": "1"}




# --- mjf status -----------------------------------------------------------------------

@pytest.fixture
def jobs(site):
    """Four jobs: one whose pilot reports, one whose jobstatus/ is empty, one whose
    used_CPU is a directory, one started before the site offered $JOBSTATUS."""
    _, base, store = site
    now = int(time.time())
    reporting = add_job(store, "r1", cpus=8, start=now - 5000, wall=86400)
    jobstatus.update({"used_CPU": 6, "last_job_start": now - 1000,
                      "first_exp_job_end": now + 600, "last_exp_job_end": now + 3600,
                      "add_uncom_time": 500, "add_final_exp_waste": 1200,
                      "priority_factor": 2}, reporting)
    add_job(store, "e2", cpus=2, start=now - 100, wall=7200)
    broken = add_job(store, "b3", cpus=4, start=now - 100, wall=7200)
    os.mkdir(os.path.join(broken, "used_CPU"))
    add_job(store, "n4", cpus=1, start=now - 100, wall=7200, status=False)
    return now, base


def test_status_json_shows_values_figures_and_what_could_not_be_read(jobs):
    start, base = jobs
    result = interactive("status", "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    now = shown["now"]
    assert start <= now <= time.time()
    by_id = {job["job_id"]: job for job in shown["jobs"]}
    assert sorted(by_id) == ["b3", "e2", "n4", "r1"]
    r1 = by_id["r1"]
    assert r1["jobstatus"] == f"{base}/jobs/r1/jobstatus" and r1["state"] == "reports"
    assert r1["values"] == {"used_CPU": "6", "last_job_start": str(start - 1000),
                            "first_exp_job_end": str(start + 600),
                            "last_exp_job_end": str(start + 3600), "add_uncom_time": "500",
                            "add_final_exp_waste": "1200", "priority_factor": "2"}
    assert r1["problems"] == {}
    elapsed = now - start  # the seconds since the jobs were made: 0 or 1
    assert r1["figures"] == {
        "remaining_time": 3600 - elapsed,
        "draining_waste": (8 - 6) * (600 - elapsed) + 1200,
        "kill_waste": 500 + 6 * (1000 + elapsed),
        "priority_factor": 2, "can_postpone_last_job": None, "assumed": False}
    assert by_id["e2"]["state"] == "reports nothing" and by_id["e2"]["values"] == {}
    assert by_id["e2"]["figures"] == {
        "remaining_time": 7100 - elapsed, "draining_waste": 0,
        "kill_waste": 2 * (100 + elapsed), "priority_factor": None,
        "can_postpone_last_job": None, "assumed": True}
    assert by_id["b3"]["state"].startswith(f"unreadable: {base}/jobs/b3/jobstatus/used_CPU is "
                                           "not a regular file")
    assert by_id["b3"]["figures"]["assumed"] and by_id["b3"]["figures"]["kill_waste"] == \
        4 * (100 + elapsed)
    assert by_id["n4"]["state"].startswith("no $JOBSTATUS")
    # The job whose loss costs least first: n4 (1 x 100 s), e2 (200), b3 (400), r1 (6500).
    assert [job["job_id"] for job in shown["jobs"]] == ["n4", "e2", "b3", "r1"]


def test_status_text(jobs):
    start, base = jobs
    result = interactive("status")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    heads = [line for line in lines if line.startswith("job ")]
    assert heads[0] == "job n4  allocated_cpu 1  no $JOBSTATUS (the job started before the " \
                       "site offered it)"
    assert heads[1] == "job e2  allocated_cpu 2  reports nothing"
    assert heads[2].startswith(f"job b3  allocated_cpu 4  unreadable: {base}/jobs/b3/")
    assert heads[3] == "job r1  allocated_cpu 8  reports"
    r1 = lines[lines.index(heads[3]) + 1:]
    assert r1[0] == (f"  used_CPU=6  last_job_start={start - 1000}  first_exp_job_end="
                     f"{start + 600}  last_exp_job_end={start + 3600}  add_uncom_time=500  "
                     "add_final_exp_waste=1200  priority_factor=2")
    assert r1[1].startswith("  remaining_time 3") and "kill_waste 65" in r1[1]
    assert r1[1].endswith("priority_factor 2  can_postpone_last_job ?")
    e2 = lines[lines.index(heads[1]) + 1]
    assert e2.startswith("  assumed: remaining_time 7") and "draining_waste 0" in e2


def test_status_shows_problems_and_named_jobs_only(jobs):
    _, base = jobs
    with open(base / "jobs/e2/jobstatus/last_job_start", "w") as handle:
        handle.write("soon")  # written without the lock, and not a time
    result = interactive("status", "e2", "r1")
    assert result.exit_code == 0
    assert [line for line in result.stdout.splitlines() if line.startswith("job ")] == [
        "job e2  allocated_cpu 2  reports no valid used_CPU", "job r1  allocated_cpu 8  reports"]
    lines = result.stdout.splitlines()
    assert ("  last_job_start: last_job_start: 'soon' is not a UNIX time in seconds (2000 to "
            "2100)") in lines
    assert "  used_CPU: absent: the other keys were written without the lock" in lines
    result = interactive("status", "--json", "r1", "nope")
    assert result.exit_code == 1
    assert [job["job_id"] for job in json.loads(result.stdout)["jobs"]] == ["r1"]
    assert result.stderr == "mjf status: job nope is not on this node\n"


def test_status_waits_for_a_held_lock_at_most_the_timeout(jobs):
    _, base = jobs
    with lock_holder.held(f"{base}/jobs/r1/jobstatus/used_CPU"):
        started = time.monotonic()
        result = interactive("status", "--json", "--timeout", "0.3")
        assert 0.3 <= time.monotonic() - started < 5
    assert result.exit_code == 0
    by_id = {job["job_id"]: job for job in json.loads(result.stdout)["jobs"]}
    assert by_id["r1"]["state"] == (f"unreadable: {base}/jobs/r1/jobstatus/used_CPU stayed "
                                    "locked by another process for 0.3 s")
    assert by_id["e2"]["state"] == "reports nothing"  # the others still shown
    assert interactive("status", "--timeout", "61").exit_code == 2


def test_status_of_a_node_without_jobs(site):
    result = interactive("status", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["jobs"] == []
    assert interactive("status").stdout == ""


# --- mjf drain --plan -----------------------------------------------------------------

@pytest.fixture
def busy(site):
    """Three jobs whose waste is least if the node shuts down as `batch` ends:
    relative to now (r = T - now), in core-seconds,
      pilot: 8 cores, 6 used, last started 1000 s ago, ends by 3600 s, first by 1000 s:
             r < 3600: 6 (r + 1000) + 2 r;  r >= 3600: 2 x 1000 + 8 (r - 3600);
      batch: reports nothing, 4 cores, started 3600 s ago, wall limit 9000 (ends at 5400):
             r < 5400: 4 (r + 3600);  r >= 5400: 4 (r - 5400);
      quiet: reports nothing, 2 cores, started 100 s ago, 100000 s limit: 2 (r + 100).
    So at r = 600: 10800 + 16800 + 1400 = 29000; 3600: 2000 + 28800 + 7400 = 38200;
    5400: 16400 + 0 + 11000 = 27400 (the least); 10800: 59600 + 21600 + 21800 = 103000."""
    _, base, store = site
    now = int(time.time())
    pilot = add_job(store, "pilot", cpus=8, start=now - 20000, wall=86400)
    jobstatus.update({"used_CPU": 6, "last_job_start": now - 1000,
                      "first_exp_job_end": now + 1000, "last_exp_job_end": now + 3600}, pilot)
    add_job(store, "batch", cpus=4, start=now - 3600, wall=9000)
    add_job(store, "quiet", cpus=2, start=now - 100, wall=100000)
    return now, base


def test_drain_plan_proposes_and_changes_nothing(busy):
    now, base = busy
    result = interactive("drain", "--plan", "--within", "3h", "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["earliest"] == plan["now"] + 600 and plan["latest"] == plan["now"] + 10800
    assert plan["applied"] is False
    moments = [(c["time"], c["why"]) for c in plan["candidates"]]
    assert moments == [
        (plan["now"] + 600, "the earliest allowed (grace_secs)"),
        (now + 3600, "job pilot is expected to end (last_exp_job_end)"),
        (now + 5400, "job batch is expected to end (jobstart_secs + wall_limit_secs)"),
        (plan["now"] + 10800, "the end of the window")]
    assert plan["best"] == now + 5400
    if plan["now"] == now:  # the same second: the figures of the docstring, exactly
        assert [c["waste_core_secs"] for c in plan["candidates"]] == [29000, 38200, 27400,
                                                                       103000]
    best = plan["candidates"][2]
    assert {job["job_id"]: job for job in best["jobs"]}["batch"] == {
        "job_id": "batch", "jobstatus": str(base / "jobs/batch/jobstatus"),
        "waste_core_secs": 0,
        "why": f"assumed (reports nothing): ends by its wall limit at {now + 5400}: 0 idle "
               "after"}
    assert not (base / "machinefeatures/shutdowntime").exists()
    text = interactive("drain", "--plan", "--within", "3h")
    assert text.exit_code == 0
    lines = text.stdout.splitlines()
    assert lines[0].startswith("3 job(s) counted; window ") and "(the earliest allowed)" in lines[0]
    marked = [line for line in lines if line.startswith("* ")]
    assert len(marked) == 1 and f" {now + 5400} " in marked[0]
    assert "job batch is expected to end" in marked[0]
    assert any(line.startswith("Least waste: ") and f"({now + 5400})" in line for line in lines)
    assert lines[-1] == "Not announced: --apply does."
    assert not (base / "machinefeatures/shutdowntime").exists()
    assert not os.path.exists(base / "jobs/pilot/jobfeatures/shutdowntime_job")


def test_drain_plan_apply_announces_the_best(busy):
    now, base = busy
    result = interactive("drain", "--plan", "--within", "3h", "--apply")
    assert result.exit_code == 0, result.output
    assert (base / "machinefeatures/shutdowntime").read_text() == str(now + 5400)
    for job in ("pilot", "batch", "quiet"):
        assert (base / "jobs" / job / "jobfeatures/shutdowntime_job").read_text() == \
            str(now + 5400)
    assert "updated in 3 job(s)" in result.stdout
    assert "Not announced" not in result.stdout
    # With --json, stdout is the plan alone.
    assert interactive("drain", "--cancel").exit_code == 0
    result = interactive("drain", "--plan", "--within", "3h", "--apply", "--json")
    assert json.loads(result.stdout)["applied"] is True
    assert (base / "machinefeatures/shutdowntime").read_text() == str(now + 5400)


def test_drain_plan_on_an_idle_node_takes_the_earliest(site):
    result = interactive("drain", "--plan", "--within", "1h", "--json")
    assert result.exit_code == 0
    plan = json.loads(result.stdout)
    assert plan["best"] == plan["earliest"] == plan["now"] + 600
    assert [c["waste_core_secs"] for c in plan["candidates"]] == [0, 0]


def test_drain_plan_apply_of_the_earliest_time_as_a_second_passes(site, monkeypatch):
    # The plan's `now` is the one its --apply checks the notice against: a clock that
    # ticks between them does not make the earliest allowed time too early.
    _, base, _ = site
    clock = iter(range(1795000000, 1795000100))
    monkeypatch.setattr(time, "time", lambda: next(clock))
    result = interactive("drain", "--plan", "--within", "1h", "--apply", "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)  # its clock read after every tick reading the jobs took
    assert 1795000000 <= plan["now"] < 1795000010
    assert (base / "machinefeatures/shutdowntime").read_text() == str(plan["now"] + 600)


@pytest.mark.parametrize(("args", "message"), [
    (("--plan",), "--plan needs --within DURATION"),
    (("--within", "3h"), "give exactly one of --in, --at, --cancel and --plan"),
    (("--in", "3h", "--within", "3h"), "--within, --apply and --json go with --plan"),
    (("--in", "3h", "--apply"), "--within, --apply and --json go with --plan"),
    (("--plan", "--in", "3h", "--within", "3h"), "give exactly one of"),
])
def test_drain_plan_usage_errors(busy, args, message):
    _, base = busy
    result = interactive("drain", *args)
    assert result.exit_code == 2 and message in result.stderr
    assert not (base / "machinefeatures/shutdowntime").exists()


@pytest.mark.parametrize("within", ["5m", "599"])
def test_a_window_shorter_than_grace_is_an_error(busy, within):
    _, base = busy
    result = interactive("drain", "--plan", "--within", within, "--apply")
    assert result.exit_code == 1
    assert "before the earliest shutdown allowed (grace_secs = 600 s from now)" in result.stderr
    assert not (base / "machinefeatures/shutdowntime").exists()
    assert interactive("drain", "--plan", "--within", "soon").exit_code == 1


def test_the_installed_mjf_serves_status_and_drain_plan(jobs, site):
    conf, _, _ = site
    result = mjf("status", "--json", "r1", config=conf)
    assert result.returncode == 0, result.stderr
    assert [job["job_id"] for job in json.loads(result.stdout)["jobs"]] == ["r1"]
    result = mjf("drain", "--plan", "--within", "2h", "--json", config=conf)
    assert result.returncode == 0, result.stderr
    assert "r1" in [job["job_id"] for job in json.loads(result.stdout)["candidates"][0]["jobs"]]
    assert mjf("status", "nope", config=conf).returncode == 1


def test_a_large_store_read_over_two_cpus_shows_what_one_cpu_shows(site):
    """Over enough jobs `mjf status` reads them in one process per CPU it may use: the
    same text and JSON as one process reading them all."""
    cpus = sorted(os.sched_getaffinity(0))
    require(len(cpus) >= 2, "needs 2 CPUs to read a store in two processes")
    conf, _, store = site
    count = 2 * node_status._JOBS_PER_WORKER + 1
    for number in range(count):
        # Figures that do not count from now (both runs show the same): no used core,
        # no expected end; a job that reports nothing has no jobstart_secs.
        store.create_job(f"j{number}", {"job_id": f"j{number}", "allocated_cpu": "4"},
                         status=True)
        if number % 3:
            jobstatus.update({"used_CPU": 0, "add_uncom_time": number % 7,
                              "priority_factor": number % 5},
                             store.job_status_dir(f"j{number}"), allocated_cpu=4)

    def on(usable, *args):
        return mjf("status", *args, config=conf,
                   preexec_fn=lambda: os.sched_setaffinity(0, usable))

    (one_text, one_json), (two_text, two_json) = (
        (on(usable), on(usable, "--json")) for usable in ((cpus[0],), tuple(cpus[:2])))
    assert one_text.returncode == one_json.returncode == 0, one_text.stderr + one_json.stderr
    assert two_text.stdout == one_text.stdout

    def taken_at(result):  # the JSON says when it was taken: a second may pass between runs
        document = json.loads(result.stdout)
        del document["now"]
        return document

    assert taken_at(two_json) == taken_at(one_json)
    assert len(taken_at(one_json)["jobs"]) == count


# --- only jobs the node runs weigh in the plan -----------------------------------------

NOBODY = 65534


def plant(parent, name, uid=NOBODY, backend=None, runner=None, cpus=1_000_000, end_in=9000,
          report=True):
    """A job directory a local user made in its own store below ``parent`` (its private
    /tmp/mjf-<uid>, or an HTCondor scratch): a million cores, a pilot report, and the
    bookkeeping it chose to write; all of it the user's."""
    now = int(time.time())
    top = parent / "jobs" / name
    (top / "jobfeatures").mkdir(parents=True)
    (top / "jobstatus").mkdir()
    for key, value in (("job_id", name), ("allocated_cpu", str(cpus)),
                       ("jobstart_secs", str(now - 100)), ("wall_limit_secs", str(end_in + 100))):
        (top / "jobfeatures" / key).write_text(value)
    state = {"backend": backend, "runner": runner}
    if any(state.values()):
        (top / "state").mkdir()
        for key, value in state.items():
            if value is not None:
                (top / "state" / key).write_text(value)
    if report:
        jobstatus.update({"used_CPU": cpus, "last_job_start": now - 100,
                          "first_exp_job_end": now + end_in, "last_exp_job_end": now + end_in},
                         str(top / "jobstatus"), allocated_cpu=cpus)
    for path in (parent, *parent.rglob("*")):
        os.chown(path, uid, uid, follow_symlinks=False)
    return top


def private_store(tmp_path, uid=NOBODY):
    store = tmp_path / "tmp" / f"mjf-{uid}"
    store.mkdir(parents=True, exist_ok=True)
    store.chmod(0o700)
    return store


@contextlib.contextmanager
def sleeping(count=1):
    """``count`` live processes of NOBODY's: their identities (``runner`` files' content)."""
    require(os.geteuid() == 0, "needs root: the planted directories are another user's")
    live = []
    try:
        for _ in range(count):
            live.append(subprocess.Popen(["sleep", "600"], user=NOBODY, group=NOBODY,
                                         extra_groups=[]))
        for _ in range(100):
            if all(process.identity(one.pid) for one in live):
                break
            time.sleep(0.01)
        yield [process.identity(one.pid) for one in live]
    finally:
        for one in live:
            os.kill(one.pid, signal.SIGKILL)
            one.wait()


@pytest.fixture
def sleeper():
    """A live process of NOBODY's, and one that has ended (its identity, pid reusable)."""
    with sleeping() as (alive,):
        ended = subprocess.Popen(["true"], user=NOBODY, group=NOBODY, extra_groups=[])
        ended_identity = process.identity(ended.pid) or f"{ended.pid} 1"
        ended.wait()
        yield alive, ended_identity


def test_planted_directories_weigh_nothing_in_the_plan(busy, tmp_path, sleeper):
    """The issue's attack: any user, with no job, makes /tmp/mjf-<uid>/jobs/x with a
    million cores and a pilot report; the plan (text, JSON, --apply) stays where it was
    and lists each such directory as unverified, with why."""
    now, base = busy
    alive, ended = sleeper
    before = json.loads(interactive("drain", "--plan", "--within", "3h", "--json").stdout)
    assert before["best"] == now + 5400 and not before.get("unverified")
    store = private_store(tmp_path)
    init = process.identity(1)
    planted = {
        "no-runner": (None, None, "records no runner process and no batch system"),
        "root-runner": ("standalone", init, "is uid 0's, not the directory's uid 65534"),
        "ended-runner": ("standalone", ended, "has ended"),
        "recycled-pid": ("standalone", f"{alive.split()[0]} 1", "has ended"),
        "garbled-runner": ("standalone", "1 x\n", "is no process identity"),
        "claims-lsf": ("lsf", None, "LSF"),
        "claims-a-batch-job": ("slurm", None, "Slurm"),
        "batch": ("slurm", None, "another directory already counts for job batch"),
        "bogus-backend": ("../../etc", None, "names no batch system"),
    }
    for name, (backend, runner, _) in planted.items():
        plant(store, name, backend=backend, runner=runner)
    scratch = tmp_path / "execute" / "dir_9" / ".mjf"
    for name in ("scratch-a", "scratch-b"):  # one HTCondor scratch holds one job
        plant(scratch, name, backend="htcondor")
    result = interactive("drain", "--plan", "--within", "3h", "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["best"] == now + 5400, plan
    assert [c["why"] for c in plan["candidates"]] == [c["why"] for c in before["candidates"]]
    for candidate in plan["candidates"]:
        assert {job["job_id"] for job in candidate["jobs"]} == {"pilot", "batch", "quiet"}
        assert str(tmp_path / "tmp") not in json.dumps(candidate)
    unverified = {(Path(entry["jobstatus"]).parent.name): entry["why"]
                  for entry in plan["unverified"]}
    assert set(unverified) == {*planted, "scratch-a", "scratch-b"}, unverified
    for name, (_, _, why) in planted.items():
        assert why in unverified[name], (name, unverified[name])
    assert "holds 2 job directories" in unverified["scratch-a"]
    text = interactive("drain", "--plan", "--within", "3h", "--apply")
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"3 job(s) counted, {len(unverified)} unverified; window ")
    assert "Unverified, not counted (nothing but their user vouches for them):" in lines
    assert (base / "machinefeatures/shutdowntime").read_text() == str(now + 5400)
    shown = interactive("status").stdout
    assert shown.count("unverified (a drain plan does not count it): ") == len(unverified)


def test_a_standalone_run_counts_while_its_runner_runs_bounded_by_the_kernel(busy, tmp_path,
                                                                             sleeper):
    """A user's `mjf run` counts while its process runs as that user; what it claims is
    bounded by the CPUs that process may run on and by when it started (on a machine
    whose CPUs the batch jobs leave enough of)."""
    now, base = busy
    Store(str(base)).machine.set_key("total_cpu", "64")
    alive, _ = sleeper
    pid = int(alive.split()[0])
    top = plant(private_store(tmp_path), "run", backend="standalone", runner=alive,
                end_in=9000, report=False)
    (top / "jobfeatures" / "jobstart_secs").write_text(str(now - 86400 * 300))
    result = interactive("drain", "--plan", "--within", "3h", "--json")
    plan = json.loads(result.stdout)
    assert plan["unverified"] == []
    [job] = [job for job in plan["candidates"][0]["jobs"] if job["job_id"] == "run"]
    cpus = len(os.sched_getaffinity(pid))
    reports = {report.job_id: report for report in node_status.collect(config_module.load())}
    counted = reports["run"].counted
    assert counted.startswith(f"its runner process {pid} (uid {NOBODY}) runs"), counted
    assert f"allocated_cpu 1000000 counted as {cpus}, the CPUs process {pid} may run on" \
        in counted
    assert reports["run"].features["allocated_cpu"] == cpus
    assert reports["run"].features["jobstart_secs"] >= now - 60  # the sleeper's start
    assert job["waste_core_secs"] <= cpus * (plan["candidates"][0]["time"] - now + 60)


def test_one_job_alone_in_its_htcondor_scratch_counts(busy, tmp_path):
    require(os.geteuid() == 0, "needs root: the scratch is another user's")
    plant(tmp_path / "execute" / "dir_9" / ".mjf", "condor-job", backend="htcondor", cpus=2,
          end_in=4000)
    reports = {report.job_id: report for report in node_status.collect(config_module.load())}
    assert reports["condor-job"].counted == "it is alone in the scratch htcondor made for its job"
    assert reports["condor-job"].unverified is None


# --- what a job's user writes is bounded, and one user's processes steer nothing -------

def pending_job(store, name, uid=NOBODY, **written):
    """A job whose root Prolog left its values to complete from inside the job (Slurm
    without RunInJob): root's directory, its jobfeatures/ and state/ the user's, and in
    them what the user then ``written``."""
    now = int(time.time())
    store.create_job(name, {"job_id": name, "allocated_cpu": "2", "jobstart_secs": str(now - 100),
                            "wall_limit_secs": "7200"}, features_owner=uid, pending=True,
                     state={BACKEND_MARKER: "slurm"}, status=True, status_uid=uid)
    features = Path(store.job_features_dir(name))
    for key, value in written.items():
        (features / key).write_text(value)
        os.chown(features / key, uid, uid)


def test_what_a_pending_jobs_user_writes_names_and_weighs_nothing_beyond_the_machine(busy):
    """The user of a pending job owns its jobfeatures/: it claims another job's id, a
    million cores and a start in 2000. The job keeps the id its directory has, its cores
    are bounded by the machine's total_cpu, its start by the machine's boot."""
    require(os.geteuid() == 0, "needs root: the jobfeatures/ is another user's")
    _, base = busy
    store = Store(str(base))
    store.machine.set_key("total_cpu", "16")
    pending_job(store, "forger", job_id="pilot", allocated_cpu="1000000",
                jobstart_secs="946684800")
    reports = node_status.collect(config_module.load())
    assert sorted(report.job_id for report in reports) == ["batch", "forger", "pilot", "quiet"]
    [forger] = [report for report in reports if report.job_id == "forger"]
    assert forger.features["allocated_cpu"] == 16
    booted = process.boot_time()
    assert forger.features["jobstart_secs"] == booted
    assert "allocated_cpu 1000000 counted as 16, the machine's total_cpu" in forger.counted
    assert f"jobstart_secs 946684800 counted as {booted}, when the machine booted" \
        in forger.counted
    shown = interactive("status").stdout
    assert "job forger  allocated_cpu 16  " in shown and shown.count("job pilot ") == 1
    plan = json.loads(interactive("drain", "--plan", "--within", "3h", "--json").stdout)
    for candidate in plan["candidates"]:
        [waste] = [job["waste_core_secs"] for job in candidate["jobs"]
                   if job["job_id"] == "forger"]
        assert waste <= 16 * (candidate["time"] - booted)


def test_one_process_vouches_for_one_job(busy, tmp_path, sleeper):
    alive, _ = sleeper
    store = private_store(tmp_path)
    for number in range(4):
        plant(store, f"run{number}", backend="standalone", runner=alive, report=False)
    reports = {report.job_id: report for report in node_status.collect(config_module.load())}
    assert reports["run0"].counted is not None
    pid = alive.split()[0]
    for number in range(1, 4):
        assert reports[f"run{number}"].unverified == (
            f"its runner process {pid} already vouches for job run0"), reports[f"run{number}"]


def test_jobs_only_users_vouch_for_share_what_batch_jobs_leave_of_the_machine(busy, tmp_path):
    """Each of three processes of one user vouches for its own standalone job claiming a
    million cores: together they weigh no more than the machine's CPUs the batch jobs
    (14 of 16) do not hold."""
    _, base = busy
    Store(str(base)).machine.set_key("total_cpu", "16")
    store = private_store(tmp_path)
    with sleeping(3) as runners:
        for number, runner in enumerate(runners):
            plant(store, f"run{number}", backend="standalone", runner=runner, report=False)
        reports = node_status.collect(config_module.load())
        plan = json.loads(interactive("drain", "--plan", "--within", "3h", "--json").stdout)
    users = [report for report in reports if report.job_id.startswith("run")]
    assert all(report.counted for report in users), [report.unverified for report in users]
    assert sum(report.allocated_cpu for report in users) == 16 - 8 - 4 - 2
    assert "what the batch jobs leave of the machine's total_cpu" in users[-1].counted
    batch = {"pilot": 8, "batch": 4, "quiet": 2}
    assert {report.job_id: report.allocated_cpu for report in reports
            if report.job_id in batch} == batch
    best = next(c for c in plan["candidates"] if c["time"] == plan["best"])
    assert {job["job_id"] for job in best["jobs"]} >= set(batch)


def test_two_directories_users_named_alike_both_go_unverified(busy, tmp_path):
    """Two HTCondor jobs, each alone in its scratch, whose users named their directories
    alike: neither can take the other's name, so neither counts."""
    require(os.geteuid() == 0, "needs root: the scratch is another user's")
    for scratch in ("dir_1", "dir_2"):
        plant(tmp_path / "execute" / scratch / ".mjf", "5.0", backend="htcondor", cpus=2)
    twins = [report for report in node_status.collect(config_module.load())
             if report.job_id == "5.0"]
    assert [report.unverified for report in twins] == [
        "2 directories their users made claim job 5.0: neither is told from the other"] * 2


def test_a_pilots_figures_beyond_what_its_job_can_have_done_weigh_nothing(busy):
    """A pilot (its user's word) reports a payload started in 2000 and 10^17 CPU seconds
    of uncommitted work: both are refused, and its job weighs what it is assumed to."""
    now, base = busy
    jobstatus.update({"used_CPU": 8, "last_job_start": 946684800, "add_uncom_time": 10**17,
                      "first_exp_job_end": now + 1000, "last_exp_job_end": now + 3600},
                     str(base / "jobs/pilot/jobstatus"))
    [pilot] = [report for report in node_status.collect(config_module.load())
               if report.job_id == "pilot"]
    assert set(pilot.status.problems) == {"last_job_start", "add_uncom_time"}
    assert pilot.figures(now)["kill_waste"] is None  # no last_job_start: not figured
    plan = json.loads(interactive("drain", "--plan", "--within", "3h", "--json").stdout)
    for candidate in plan["candidates"]:
        [job] = [job for job in candidate["jobs"] if job["job_id"] == "pilot"]
        assert job["waste_core_secs"] <= 8 * (candidate["time"] - (now - 20000))
