"""`mjf_hooks.node_status` (the draft-0.99 figures of each job) and `mjf_hooks.drainplan` (the
shutdown time that wastes least), on JobReports built by hand; and `node_status.collect` on a
real store."""

import os
import time

import pytest

from mjf_hooks import config as config_module
from mjf_hooks import drainplan, jobstatus, node_status, store_locations
from mjf_hooks.errors import StoreError
from mjf_hooks.store import Store
from tests import lock_holder
from tests.conftest import require

NOW = 1795000000


def report(job_id="j", features=None, values=None, offered=True, unreadable=None):
    """A job as `mjf status` sees it: its jobfeatures, and its pilot's values (None: no
    status read)."""
    job = node_status.JobReport(job_id, f"/base/jobs/{job_id}/jobstatus", dict(features or {}))
    job.offered = offered
    job.unreadable = unreadable
    if values is not None:
        job.status = jobstatus.Status()
        job.status.values = dict(values)
        job.status.raw = {key: jobstatus.format_value(key, value)
                          for key, value in values.items()}
    return job


# A pilot on 8 cores running 6 single-core payloads: the last started 1000 s ago, the
# first to end in 600 s, the last in 3600 s.
PILOT = {"used_CPU": 6, "last_job_start": NOW - 1000, "first_exp_job_end": NOW + 600,
         "last_exp_job_end": NOW + 3600, "last_max_job_end": NOW + 7200,
         "add_uncom_time": 500, "add_final_exp_waste": 1200, "can_postpone_last_job": True,
         "priority_factor": 3}
EIGHT = {"allocated_cpu": 8, "jobstart_secs": NOW - 20000, "wall_limit_secs": 86400}


# --- figures --------------------------------------------------------------------------

def test_figures_of_a_reporting_pilot():
    assert report(features=EIGHT, values=PILOT).figures(NOW) == {
        "remaining_time": 3600,  # last_exp_job_end - now = NOW + 3600 - NOW
        "draining_waste": 2400,  # (8 - 6) * (NOW + 600 - NOW) + 1200 = 1200 + 1200
        "kill_waste": 6500,  # 500 + 6 * (NOW - (NOW - 1000)) = 500 + 6000
        "priority_factor": 3, "can_postpone_last_job": True, "assumed": False}


def test_figures_later_on():
    figures = report(features=EIGHT, values=PILOT).figures(NOW + 100)
    assert figures["remaining_time"] == 3500  # NOW + 3600 - (NOW + 100)
    assert figures["draining_waste"] == 2200  # 2 * (600 - 100) + 1200
    assert figures["kill_waste"] == 7100  # 500 + 6 * (1000 + 100)


def test_past_times_count_as_now():
    values = {**PILOT, "first_exp_job_end": NOW - 20, "last_exp_job_end": NOW - 10,
              "last_max_job_end": NOW - 5, "last_job_start": NOW + 50}  # a clock ahead
    figures = report(features=EIGHT, values=values).figures(NOW)
    assert figures["remaining_time"] == 0  # not -10
    assert figures["draining_waste"] == 1200  # 2 * max(-20, 0) + 1200
    assert figures["kill_waste"] == 500  # 500 + 6 * max(-50, 0)


def test_missing_add_values_count_as_zero():
    values = {key: value for key, value in PILOT.items() if not key.startswith("add_")}
    figures = report(features=EIGHT, values=values).figures(NOW)
    assert figures["draining_waste"] == 1200  # (8 - 6) * 600 + 0
    assert figures["kill_waste"] == 6000  # 0 + 6 * 1000


def test_figures_without_their_inputs_are_none():
    figures = report(features={}, values={"used_CPU": 6}).figures(NOW)
    assert figures == {"remaining_time": None, "draining_waste": None, "kill_waste": None,
                       "priority_factor": None, "can_postpone_last_job": None,
                       "assumed": False}
    # No allocated_cpu: no draining_waste, whatever the pilot says.
    assert report(features={}, values=PILOT).figures(NOW)["draining_waste"] is None
    # An idle pilot loses nothing but its uncommitted time, last_job_start or not.
    idle = report(features=EIGHT, values={"used_CPU": 0, "add_uncom_time": 42})
    assert idle.figures(NOW)["kill_waste"] == 42
    assert report(features=EIGHT, values={"used_CPU": 0}).figures(NOW)["kill_waste"] == 0
    # Idle cores never count negative: more used than allocated is 0 idle.
    over = report(features={"allocated_cpu": 4}, values=PILOT)
    assert over.figures(NOW)["draining_waste"] == 1200  # max(4 - 6, 0) * 600 + 1200


def test_jobs_that_report_nothing_get_assumed_figures():
    # One payload on all 4 cores since it started an hour ago, to its 2 h wall limit.
    features = {"allocated_cpu": 4, "jobstart_secs": NOW - 3600, "wall_limit_secs": 7200}
    expected = {"remaining_time": 3600,  # NOW - 3600 + 7200 - NOW
                "draining_waste": 0,
                "kill_waste": 14400,  # 4 * (NOW - (NOW - 3600))
                "priority_factor": None, "can_postpone_last_job": None, "assumed": True}
    for job in (report(features=features),  # no status read
                report(features=features, values={}),  # an empty jobstatus/
                report(features=features, values={"last_job_start": NOW}),  # no used_CPU
                report(features=features, offered=False),
                report(features=features, unreadable="locked")):
        assert job.figures(NOW) == expected
    assert report(features=features).planned_end() == NOW + 3600
    # Past its wall limit: 0 remaining. Started in the future (a skewed clock): 0 lost.
    assert report(features=features).figures(NOW + 9000)["remaining_time"] == 0
    late = report(features={**features, "jobstart_secs": NOW + 60})
    assert late.figures(NOW)["kill_waste"] == 0
    # Without a wall limit or a start, what needs it is unknown.
    no_limit = report(features={"allocated_cpu": 4, "jobstart_secs": NOW - 3600})
    assert no_limit.figures(NOW)["remaining_time"] is None
    assert no_limit.figures(NOW)["kill_waste"] == 14400 and no_limit.planned_end() is None
    assert report(features={"allocated_cpu": 4}).figures(NOW)["kill_waste"] is None
    assert report(features={"jobstart_secs": NOW}).figures(NOW)["kill_waste"] is None


def test_describe_and_as_dict():
    assert report(unreadable="it is a FIFO").describe() == "unreadable: it is a FIFO"
    assert report(offered=False).describe().startswith("no $JOBSTATUS")
    assert report().describe() == "reports nothing"
    assert report(values={}).describe() == "reports nothing"
    assert report(values={"last_job_start": NOW}).describe() == "reports no valid used_CPU"
    assert report(values={"used_CPU": 1}).describe() == "reports"
    job = report("7", features=EIGHT, values={"used_CPU": 1, "priority_factor": -2})
    job.status.problems = {"last_job_start": "a symlink: not followed"}
    assert job.as_dict(NOW) == {
        "job_id": "7", "jobstatus": "/base/jobs/7/jobstatus", "counted": None,
        "unverified": None, "features": EIGHT, "state": "reports",
        "values": {"used_CPU": "1", "priority_factor": "-2"},
        "problems": {"last_job_start": "a symlink: not followed"},
        "figures": job.figures(NOW)}
    assert report("8").as_dict(NOW)["values"] == {}


def test_least_critical_first():
    four = {"allocated_cpu": 4, "jobstart_secs": NOW - 100}
    jobs = [
        report("a", EIGHT, {"used_CPU": 1, "last_job_start": NOW - 100}),  # kill 100
        report("b", EIGHT, {"used_CPU": 1, "last_job_start": NOW - 50}),  # kill 50
        report("c", EIGHT, {"used_CPU": 1, "last_job_start": NOW - 100,
                            "priority_factor": 1}),  # kill 100, higher priority
        report("d", EIGHT, {"used_CPU": 1, "last_job_start": NOW - 100,
                            "priority_factor": -1}),  # kill 100, lower priority
        report("e", {}),  # reports nothing, allocated_cpu unknown: kill unknown
        report("f", EIGHT, {"used_CPU": 2}),  # no last_job_start: kill unknown
        report("g", four),  # reports nothing: assumed kill 4 * 100 = 400
        report("0", EIGHT, {"used_CPU": 1, "last_job_start": NOW - 100}),  # as a, by id
    ]
    ordered = [job.job_id for job in node_status.least_critical_first(jobs, NOW)]
    assert ordered == ["b", "d", "0", "a", "c", "g", "e", "f"]


def test_priority_factor_orders_only_one_users_jobs():
    """Draft 3.9: priority_factor is not to compare jobs of different users. Of equal cost,
    each user's jobs stay together, in their own priority order."""
    def owned(job_id, owner, priority):
        job = report(job_id, EIGHT, {"used_CPU": 1, "last_job_start": NOW - 100,
                                     "priority_factor": priority})
        job.owner = owner
        return job

    jobs = [owned("a1", 1001, 5), owned("b1", 1002, -9), owned("a2", 1001, 1),
            owned("b2", 1002, 3)]
    ordered = [job.job_id for job in node_status.least_critical_first(jobs, NOW)]
    assert ordered == ["a2", "a1", "b1", "b2"]


# --- drain plan: each job's waste -----------------------------------------------------

def test_a_reporting_pilot_that_winds_down_before_the_shutdown():
    job = report("p", EIGHT, PILOT)
    assert drainplan.expected_end(job, NOW) == (NOW + 3600, "last_exp_job_end")
    # draining_waste 2400 (at now) + all 8 cores idle from its end to the shutdown.
    waste, why = drainplan.job_waste(job, NOW + 4000, NOW)
    assert waste == 2400 + 8 * 400
    assert why == f"its payloads end by {NOW + 3600}: draining_waste 2400 + 3200 idle after"
    assert drainplan.job_waste(job, NOW + 3600, NOW)[0] == 2400  # exactly at its end


def test_a_reporting_pilot_killed_by_the_shutdown():
    job = report("p", EIGHT, PILOT)
    # kill_waste at T = 500 + 6 * (T - (NOW - 1000)); its 2 free cores idle until T.
    waste, why = drainplan.job_waste(job, NOW + 1000, NOW)
    assert waste == (500 + 6 * 2000) + 2 * 1000  # 12500 + 2000
    assert why == ("payloads running at the shutdown are lost: kill_waste 12500 + 2000 idle "
                   "until then")
    missing = report("p", EIGHT, {k: v for k, v in PILOT.items() if not k.startswith("add_")})
    assert drainplan.job_waste(missing, NOW + 1000, NOW)[0] == 6 * 2000 + 2 * 1000


def test_a_reporting_pilot_whose_expected_end_is_past():
    values = {**PILOT, "first_exp_job_end": NOW - 200, "last_exp_job_end": NOW - 100}
    job = report("p", EIGHT, values)
    assert drainplan.expected_end(job, NOW) == (NOW, "last_exp_job_end")
    # draining_waste at now: 2 * max(-200, 0) + 1200 = 1200; then 8 idle cores for 600 s.
    assert drainplan.job_waste(job, NOW + 600, NOW)[0] == 1200 + 8 * 600


def test_a_job_that_reports_nothing_ends_by_its_wall_limit_or_is_killed():
    # 4 cores, started an hour ago, 2 h wall limit: ends at NOW + 3600.
    job = report("n", {"allocated_cpu": 4, "jobstart_secs": NOW - 3600,
                       "wall_limit_secs": 7200})
    assert drainplan.expected_end(job, NOW) == (NOW + 3600, "jobstart_secs + wall_limit_secs")
    waste, why = drainplan.job_waste(job, NOW + 4000, NOW)
    assert waste == 4 * 400  # idle after its end
    assert why == (f"assumed (reports nothing): ends by its wall limit at {NOW + 3600}: "
                   "1600 idle after")
    waste, why = drainplan.job_waste(job, NOW + 600, NOW)
    assert waste == 4 * (3600 + 600)  # everything since its start is lost
    assert why == "assumed (reports nothing): killed at the shutdown: 16800 of work lost"
    # Past its wall limit already: expected to end now.
    over = report("o", {"allocated_cpu": 4, "jobstart_secs": NOW - 9000,
                        "wall_limit_secs": 7200})
    assert drainplan.expected_end(over, NOW)[0] == NOW
    assert drainplan.job_waste(over, NOW + 600, NOW)[0] == 4 * 600


def test_a_job_without_a_wall_limit_is_killed_whenever_the_shutdown_is():
    job = report("n", {"allocated_cpu": 4, "jobstart_secs": NOW - 3600})
    assert drainplan.expected_end(job, NOW) == (None, "")
    assert drainplan.job_waste(job, NOW + 600, NOW)[0] == 4 * 4200
    assert drainplan.job_waste(job, NOW + 10**6, NOW)[0] == 4 * (3600 + 10**6)
    # No start known either: counted from now.
    assert drainplan.job_waste(report("m", {"allocated_cpu": 4}), NOW + 600, NOW)[0] == 2400


def test_a_pilot_that_reports_too_little_is_assumed():
    values = {key: value for key, value in PILOT.items() if key != "last_job_start"}
    job = report("t", {"allocated_cpu": 4, "jobstart_secs": NOW - 3600,
                       "wall_limit_secs": 7200}, values)
    assert drainplan.expected_end(job, NOW)[1] == "jobstart_secs + wall_limit_secs"
    waste, why = drainplan.job_waste(job, NOW + 600, NOW)
    assert waste == 4 * 4200 and why.startswith("assumed (reports too little): killed")


def test_a_job_whose_allocated_cpu_is_unknown_is_not_counted():
    for job in (report("u", {"jobstart_secs": NOW - 3600, "wall_limit_secs": 7200}),
                report("v", {"jobstart_secs": NOW - 3600}, PILOT)):  # reports, but no bound
        assert drainplan.job_waste(job, NOW + 600, NOW) == (
            0, "allocated_cpu unknown: not counted")


# --- drain plan: candidates and the best ----------------------------------------------

def test_plan_candidates_and_the_best():
    pilot = report("p", EIGHT, PILOT)  # expected end NOW + 3600
    batch = report("n", {"allocated_cpu": 4, "jobstart_secs": NOW - 3600,
                         "wall_limit_secs": 5400})  # ends by NOW + 1800
    early = report("e", {"allocated_cpu": 1, "jobstart_secs": NOW - 3600,
                         "wall_limit_secs": 3700})  # ends NOW + 100, before the window
    late = report("l", {"allocated_cpu": 1, "jobstart_secs": NOW,
                        "wall_limit_secs": 9000})  # ends NOW + 9000, after it
    candidates = drainplan.plan([pilot, batch, early, late], NOW, NOW + 600, NOW + 7200)
    assert [(c.time, c.why) for c in candidates] == [
        (NOW + 600, "the earliest allowed (grace_secs)"),
        (NOW + 1800, "job n is expected to end (jobstart_secs + wall_limit_secs)"),
        (NOW + 3600, "job p is expected to end (last_exp_job_end)"),
        (NOW + 7200, "the end of the window")]
    wastes = {c.time - NOW: {job.job_id: waste for job, waste, _ in c.jobs}
              for c in candidates}
    # p: T < NOW+3600 killed: 500 + 6 * (T - NOW + 1000) + 2 * (T - NOW); else 2400 + 8 *
    #    (T - NOW - 3600).  n: T < NOW+1800 killed: 4 * (T - NOW + 3600); else 4 * (T -
    #    NOW - 1800).  e: ended: 1 * (T - NOW - 100).  l: killed: 1 * (T - NOW).
    assert wastes == {
        600: {"p": 500 + 6 * 1600 + 2 * 600, "n": 4 * 4200, "e": 500, "l": 600},
        1800: {"p": 500 + 6 * 2800 + 2 * 1800, "n": 0, "e": 1700, "l": 1800},
        3600: {"p": 2400, "n": 4 * 1800, "e": 3500, "l": 3600},
        7200: {"p": 2400 + 8 * 3600, "n": 4 * 5400, "e": 7100, "l": 7200}}
    assert [c.waste for c in candidates] == [29200, 24400, 16700, 67100]
    chosen = drainplan.best(candidates)
    assert chosen.time == NOW + 3600
    assert chosen.as_dict() == {
        "time": NOW + 3600, "why": "job p is expected to end (last_exp_job_end)",
        "waste_core_secs": 16700,
        "jobs": [{"job_id": job.job_id, "jobstatus": job.location, "waste_core_secs": waste,
                  "why": why} for job, waste, why in chosen.jobs]}


def test_plan_ends_at_the_window_edges_and_shared_ends_make_one_candidate():
    a = report("a", {"allocated_cpu": 2, "jobstart_secs": NOW, "wall_limit_secs": 600})
    b = report("b", {"allocated_cpu": 2, "jobstart_secs": NOW, "wall_limit_secs": 1200})
    c = report("c", {"allocated_cpu": 2, "jobstart_secs": NOW, "wall_limit_secs": 1200})
    d = report("d", {"allocated_cpu": 2, "jobstart_secs": NOW, "wall_limit_secs": 1800})
    candidates = drainplan.plan([a, b, c, d], NOW, NOW + 600, NOW + 1800)
    assert [(c.time - NOW, c.why) for c in candidates] == [
        (600, "the earliest allowed (grace_secs)"),
        (1200, "job b is expected to end (jobstart_secs + wall_limit_secs)"),
        (1800, "the end of the window")]
    # No jobs, or a window of one moment: the earliest is the only candidate.
    assert [c.time for c in drainplan.plan([], NOW, NOW + 600, NOW + 600)] == [NOW + 600]
    assert drainplan.best(drainplan.plan([], NOW, NOW + 600, NOW + 900)).time == NOW + 600


def test_best_takes_the_least_waste_then_the_earliest():
    def candidate(moment, waste):
        made = drainplan.Candidate(moment, "test")
        made.jobs = [(report("x", {}), waste, ""), (report("y", {}), 0, "")]
        return made

    later, earlier, worse = candidate(200, 5), candidate(100, 5), candidate(50, 7)
    assert drainplan.best([later, worse, earlier]) is earlier
    assert drainplan.best([worse, candidate(300, 6)]).time == 300
    # Jobs that waste the same whenever (allocated_cpu unknown): the earliest.
    unknown = report("u", {})
    assert drainplan.best(drainplan.plan([unknown], NOW, NOW + 600, NOW + 3600)).time == \
        NOW + 600


# --- collect, on a real store ---------------------------------------------------------



def in_workers(monkeypatch, processes=3):
    """collect reads even a small store in ``processes`` processes (as on that many CPUs)."""
    monkeypatch.setattr(node_status, "_JOBS_PER_WORKER", 1)
    monkeypatch.setattr(node_status.os, "sched_getaffinity", lambda pid: set(range(processes)),
                        raising=False)


@pytest.fixture(params=["one process", "workers"])
def node(request, tmp_path, write_config, monkeypatch):
    """A base_dir with jobs, and no other store (users' private directories) to find;
    collect reads it in one process, or split over workers."""
    monkeypatch.setattr(store_locations, "PRIVATE_PARENTS", (str(tmp_path / "tmp"),
                                                       str(tmp_path / "run-user")))
    if request.param == "workers":
        in_workers(monkeypatch)
    conf, base = write_config(f"jobstatus = yes\n[htcondor]\nexecute_dir = {tmp_path}/exec\n")
    store = Store(str(base))
    return config_module.load(str(conf)), store, base


def test_collect_reads_every_job_and_waits_once_for_all_held_locks(node):
    config, store, base = node
    features = {"allocated_cpu": "4", "jobstart_secs": str(NOW), "wall_limit_secs": "7200"}
    for name in ("j1", "j2", "j3", "j4", "j5"):
        store.create_job(name, {"job_id": name, **features}, status=name != "j4")
    jobstatus.update({"used_CPU": 2, "last_job_start": NOW}, str(base / "jobs/j1/jobstatus"))
    jobstatus.update({"used_CPU": 3}, str(base / "jobs/j2/jobstatus"))
    jobstatus.update({"used_CPU": 1}, str(base / "jobs/j5/jobstatus"))
    with lock_holder.held(*(base / f"jobs/{name}/jobstatus/used_CPU" for name in ("j2", "j5"))):
        started = time.monotonic()
        reports = {job.job_id: job for job in node_status.collect(config, timeout=1)}
        took = time.monotonic() - started
    assert 1 <= took < 1.9  # not 1 s for each of the two held locks
    assert sorted(reports) == ["j1", "j2", "j3", "j4", "j5"]
    assert reports["j1"].status.values == {"used_CPU": 2, "last_job_start": NOW}
    assert reports["j1"].features == {"allocated_cpu": 4, "jobstart_secs": NOW,
                                      "wall_limit_secs": 7200}
    assert reports["j1"].location == f"{base}/jobs/j1/jobstatus"
    assert reports["j2"].status is None  # waited for at most the timeout, in all:
    for name in ("j2", "j5"):
        assert reports[name].unreadable == (f"{base}/jobs/{name}/jobstatus/used_CPU stayed "
                                            "locked by another process for 1 s")
    assert reports["j3"].describe() == "reports nothing"
    assert reports["j4"].describe().startswith("no $JOBSTATUS")
    # Named jobs only; the lock now free.
    reports = node_status.collect(config, ("j2", "j9"), timeout=0.5)
    assert [job.job_id for job in reports] == ["j2"] and reports[0].status.values == {
        "used_CPU": 3}
    assert not [path for path in open_files() if path.startswith(str(base))]  # all closed


def open_files():
    paths = []
    for name in os.listdir("/proc/self/fd"):
        try:
            paths.append(os.readlink(f"/proc/self/fd/{name}"))
        except OSError:
            pass  # the listing's own, closed since
    return paths


def test_collect_reports_a_broken_jobstatus_and_shows_the_others(node):
    config, store, base = node
    store.create_job("ok", {"job_id": "ok", "allocated_cpu": "2"}, status=True)
    store.create_job("dir", {"job_id": "dir", "allocated_cpu": "2"}, status=True)
    store.create_job("link", {"job_id": "link"}, status=True)
    jobstatus.update({"used_CPU": 3}, str(base / "jobs/ok/jobstatus"))  # 3 > 2
    (base / "jobs/dir/jobstatus/used_CPU").mkdir()
    (base / "jobs/link/jobstatus").rmdir()
    os.symlink(base / "jobs/ok/jobstatus", base / "jobs/link/jobstatus")
    reports = {job.job_id: job for job in node_status.collect(config, timeout=0.1)}
    assert reports["ok"].status.values == {}  # used_CPU above allocated_cpu: refused
    assert "allocated_cpu 2" in reports["ok"].status.problems["used_CPU"]
    assert reports["ok"].describe() == "reports no valid used_CPU"
    assert reports["dir"].describe().startswith("unreadable: ")
    assert "used_CPU is not a regular file" in reports["dir"].unreadable
    assert reports["link"].offered and "refusing to follow it" in reports["link"].unreadable


def test_collect_takes_only_the_files_of_the_jobstatus_owner(node):
    require(os.geteuid() == 0, "needs root to give a jobstatus/ to another user")
    config, store, base = node
    store.create_job("u", {"job_id": "u", "allocated_cpu": "2"}, status=True, status_uid=65534)
    directory = base / "jobs/u/jobstatus"
    assert directory.stat().st_uid == 65534
    jobstatus.update({"used_CPU": 1, "priority_factor": 4}, str(directory))  # root's files
    [job] = node_status.collect(config, timeout=0.1)
    assert job.unreadable == (f"{directory}/used_CPU belongs to uid 0, not the job's user "
                              "65534")
    os.chown(directory / "used_CPU", 65534, 65534)  # the pilot's, but for one
    [job] = node_status.collect(config, timeout=0.1)
    assert job.status.values == {"used_CPU": 1}
    assert job.status.problems == {
        "priority_factor": "priority_factor belongs to uid 0, not the job's user 65534"}


def test_an_unverified_job_weighs_nothing_and_adds_no_candidate():
    """Only counted jobs weigh: a directory nothing but its user vouches for - a million
    cores, a pilot report - changes neither the candidates nor the best time."""
    real = report("real", features={"allocated_cpu": 4, "jobstart_secs": NOW - 100,
                                    "wall_limit_secs": 3600})
    planted = report("planted", features={"allocated_cpu": 1_000_000,
                                          "jobstart_secs": NOW - 100,
                                          "wall_limit_secs": 9100},
                     values={"used_CPU": 1_000_000, "last_job_start": NOW - 100,
                             "first_exp_job_end": NOW + 9000, "last_exp_job_end": NOW + 9000})
    alone = drainplan.plan([real], NOW, NOW + 600, NOW + 10800)
    planted.unverified = "its directory (uid 1001) records no runner process"
    both = drainplan.plan([real, planted], NOW, NOW + 600, NOW + 10800)
    assert [(c.time, c.waste) for c in both] == [(c.time, c.waste) for c in alone]
    assert drainplan.best(both).time == drainplan.best(alone).time == NOW + 3500
    assert all([job for job, _, _ in c.jobs] == [real] for c in both)
    assert drainplan.counted([real, planted]) == [real]
    planted.unverified = None  # what the plan did before: the planted job decides
    assert drainplan.best(drainplan.plan([real, planted], NOW, NOW + 600,
                                         NOW + 10800)).time == NOW + 9000


def test_an_unverified_job_is_never_the_least_critical():
    cheap = report("cheap", features={"allocated_cpu": 1, "jobstart_secs": NOW - 10})
    dear = report("dear", features={"allocated_cpu": 8, "jobstart_secs": NOW - 10000})
    cheap.unverified = "its runner process 4242 has ended"
    assert [job.job_id for job in node_status.least_critical_first([cheap, dear], NOW)] == [
        "dear", "cheap"]


# --- collect over worker processes ----------------------------------------------------

def mixed_store(store, base):
    """Jobs of every kind collect tells apart, in a store of its own."""
    features = {"allocated_cpu": "4", "jobstart_secs": str(NOW), "wall_limit_secs": "7200"}
    for number in range(10):
        store.create_job(f"j{number}", {"job_id": f"j{number}", **features},
                         status=number != 4)
    for number, values in ((1, {"used_CPU": 2, "last_job_start": NOW}), (2, {"used_CPU": 3}),
                           (5, {**PILOT, "used_CPU": 1}), (8, {"used_CPU": 4})):
        jobstatus.update(values, str(base / f"jobs/j{number}/jobstatus"))
    (base / "jobs/j6/jobstatus/priority_factor").write_text("high")
    (base / "jobs/j7/jobstatus").rmdir()
    os.symlink(base / "jobs/j1/jobstatus", base / "jobs/j7/jobstatus")
    (base / "jobs/j8/jobfeatures/allocated_cpu").write_text("2")  # used_CPU 4 refused
    (base / "jobs/j9/jobstatus/used_CPU").mkdir()


def shown(reports):
    return [(job.as_dict(NOW), job.owner, job.backend) for job in reports]


@pytest.mark.parametrize("job_ids", [(), ("j2", "j7", "j8", "j42")])
def test_workers_report_what_one_process_reports(node, monkeypatch, job_ids):
    config, store, base = node
    mixed_store(store, base)
    with monkeypatch.context() as one:
        one.setattr(node_status, "_JOBS_PER_WORKER", 10**9)
        alone = node_status.collect(config, job_ids, timeout=0.1)
    for processes in (2, 3, 11):
        in_workers(monkeypatch, processes)
        assert shown(node_status.collect(config, job_ids, timeout=0.1)) == shown(alone)
    assert len(alone) == (10 if not job_ids else 3)
    assert not [path for path in open_files() if path.startswith(str(base))]


def test_workers_wait_once_for_all_held_locks(node, monkeypatch):
    config, store, base = node
    mixed_store(store, base)
    in_workers(monkeypatch)
    with lock_holder.held(*(base / f"jobs/{name}/jobstatus/used_CPU" for name in ("j1", "j8"))):
        reports = {job.job_id: job for job in node_status.collect(config, timeout=0.5)}
    for name in ("j1", "j8"):  # one in the first share (read here), one in a worker's
        assert reports[name].unreadable == (f"{base}/jobs/{name}/jobstatus/used_CPU stayed "
                                            "locked by another process for 0.5 s")
    assert reports["j2"].status.values == {"used_CPU": 3}


OPEN_JOB = node_status._open_job


def failing_open_job(monkeypatch, failing, fail):
    """_open_job fails (``fail()``) on the job directory ``failing``, in whichever
    process reads it (one job only: another patched before is undone)."""
    real = OPEN_JOB

    def open_job(jobs, name):
        if name == failing:
            fail()
        return real(jobs, name)

    monkeypatch.setattr(node_status, "_open_job", open_job)


def test_what_a_worker_raises_is_raised_as_one_process_raises_it(node, monkeypatch):
    config, store, base = node
    mixed_store(store, base)

    def fail():
        raise OSError(5, "Input/output error", "j8")

    failing_open_job(monkeypatch, "j8", fail)  # in the last share: a worker's
    with pytest.raises(OSError) as raised:
        node_status.collect(config, timeout=0.1)
    assert str(raised.value) == "[Errno 5] Input/output error: 'j8'"
    assert not [path for path in open_files() if path.startswith(str(base))]


def test_what_the_command_raises_while_workers_read_leaves_none_behind(node, monkeypatch):
    config, store, base = node
    mixed_store(store, base)
    in_workers(monkeypatch)

    def fail():
        raise OSError(5, "Input/output error", "j0")

    failing_open_job(monkeypatch, "j0", fail)  # in the first share: this process's own
    with pytest.raises(OSError, match="j0"):
        node_status.collect(config, timeout=0.1)
    with pytest.raises(ChildProcessError):  # every worker waited for
        os.waitpid(-1, os.WNOHANG)
    assert not [path for path in open_files() if path.startswith(str(base))]


def test_a_worker_that_ends_without_its_reports_is_an_error(node, monkeypatch):
    config, store, base = node
    mixed_store(store, base)
    in_workers(monkeypatch)
    failing_open_job(monkeypatch, "j8", lambda: os._exit(3))
    with pytest.raises(StoreError, match=r"^the process reading 2 of the jobs ended without "
                                         r"its reports \(exit status 3\)$"):
        node_status.collect(config, timeout=0.1)
    failing_open_job(monkeypatch, "j9", lambda: os.kill(os.getpid(), 9))
    with pytest.raises(StoreError, match=r"\(signal 9\)$"):
        node_status.collect(config, timeout=0.1)
    assert not [path for path in open_files() if path.startswith(str(base))]


def test_a_small_store_is_read_in_one_process(monkeypatch):
    monkeypatch.setattr(node_status.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3},
                        raising=False)
    each = node_status._JOBS_PER_WORKER
    names = [f"j{number}" for number in range(4 * each + 1)]
    assert node_status._shares(names[:2 * each - 1]) == [names[:2 * each - 1]]
    assert node_status._shares(names[:2 * each]) == [names[:each], names[each:2 * each]]
    assert [name for share in node_status._shares(names) for name in share] == names
    assert len(node_status._shares(names)) == 4
    assert node_status._shares([]) == [[]]
