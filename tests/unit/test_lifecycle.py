"""lifecycle: the steps every backend shares, at the seam (real directories, no daemons)."""

import os
from pathlib import Path

import pytest

from mjf_hooks import lifecycle
from mjf_hooks.config import parse
from mjf_hooks.errors import StoreError
from mjf_hooks.log import Log
from mjf_hooks.store import Store
from mjf_hooks.store_locations import store_for
from tests.conftest import LeveledLog, require, users_job


class Recorded(Log):
    """A log that keeps its lines."""

    def __init__(self) -> None:
        super().__init__("test", ())
        self.lines: list[str] = []

    def warning(self, message: str) -> None:
        self.lines.append(message)


@pytest.fixture
def site(tmp_path):
    config = parse(f"[mjf]\nbase_dir = {tmp_path}/base\n[machinefeatures]\ntotal_cpu = 8\n")
    return config, store_for(config)


def test_a_job_elsewhere_gets_the_sites_machine_features_as_they_are(site, tmp_path):
    config, store = site
    lifecycle.machine_features(config, store, Recorded())
    scratch = store_for(config, str(tmp_path / "scratch/.mjf"))
    chosen, machine = lifecycle.machine_features_for_job(config, scratch, Recorded(), store)
    assert chosen is store and machine["total_cpu"][0] == 8
    assert not (tmp_path / "scratch").exists()


def test_a_planted_machinefeatures_symlink_is_not_exported(site, tmp_path):
    config, store = site
    (tmp_path / "base").mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "base/machinefeatures")
    scratch_dir = tmp_path / "scratch"
    scratch_dir.mkdir()
    scratch = store_for(config, str(scratch_dir / ".mjf"))
    log = Recorded()
    chosen, _ = lifecycle.machine_features_for_job(config, scratch, log, store)
    assert chosen is scratch  # written beside the job instead
    assert (scratch_dir / ".mjf/machinefeatures/total_cpu").read_text() == "8"
    assert os.listdir(tmp_path / "elsewhere") == []
    assert any("machinefeatures" in line and "not exported" in line for line in log.lines)


def test_a_job_is_started_recorded_and_ended(site):
    config, store = site
    machine = lifecycle.machine_features(config, store, Recorded())
    job = lifecycle.JobStart("slurm", {"job_id": ("7", "test"), "allocated_cpu": (2, "test"),
                                       "jobstart_secs": (1795400000, "test")}, cgroup_pid=None)
    path = lifecycle.start_job(config, store, Recorded(), machine, job)
    assert Path(path, "allocated_cpu").read_text() == "2"
    assert Path(path).parent.joinpath("state/backend").read_text() == "slurm"
    assert lifecycle.end_job(None, store, Recorded(), "7")
    assert not Path(path).exists() and not lifecycle.end_job(None, store, Recorded(), "7")


def test_nothing_outside_base_dir_is_created(tmp_path):
    store = Store(str(tmp_path / "missing/base"))
    with pytest.raises(StoreError, match="missing/base"):
        store.create_job("7", {"job_id": "7"})
    assert not (tmp_path / "missing").exists()


def test_a_runner_sets_up_and_a_task_completes_what_was_pending(site, tmp_path, capsys):
    config, store = site
    elsewhere = store_for(config, str(tmp_path / "private"))
    (tmp_path / "private").mkdir()
    job = lifecycle.JobStart("lsf", {"job_id": ("9", "test"), "allocated_cpu": (1, "test"),
                                     "jobstart_secs": (1795400000, "test"),
                                     "max_rss_bytes": (2**31, "test")},
                             cgroup_pid=None, pending=True)
    variables = lifecycle.set_up_job(config, elsewhere, Recorded(), job, store)
    assert variables["JOBFEATURES"] == f"{tmp_path}/private/jobs/9/jobfeatures"
    assert variables["MACHINEFEATURES"] == f"{tmp_path}/private/machinefeatures"  # no site's
    assert elsewhere.read_job("9")[1]  # pending
    lifecycle.complete_if_pending(config, elsewhere, Recorded(), "9",
                                  {"max_rss_bytes": (2**30, "the task")}, elsewhere)
    values, pending = elsewhere.read_job("9")
    assert not pending and values["max_rss_bytes"] == str(2**30)
    dry = lifecycle.JobStart("lsf", {"job_id": ("10", "test"),
                                     "jobstart_secs": (1795400000, "test")}, cgroup_pid=None)
    lifecycle.set_up_job(config, elsewhere, Recorded(), dry, store, dry_run=True)
    printed = capsys.readouterr().out
    assert f"export JOBFEATURES={tmp_path}/private/jobs/10/jobfeatures" in printed
    assert not (tmp_path / "private/jobs/10").exists()




def test_a_jobs_end_takes_its_directory_out_of_sight_before_it_reads_the_record(
        tmp_path, monkeypatch):
    config = parse(f"[mjf]\nbase_dir = {tmp_path}/base\n[records]\ndir = {tmp_path}/records\n",
                   str(tmp_path / "mjf.conf"))
    store = store_for(config)
    store.create_job("7", {"job_id": "7", "allocated_cpu": "2"})
    seen = []

    def record(config, store, log, job_id, ending, now=None, taken=None):
        # What a reader sees as the record is read: no job 7; the keys under the trash name.
        seen.append((store.job_dir_names(), taken, store.read_job(job_id, taken)[0]))

    monkeypatch.setattr(lifecycle, "record_job", record)
    assert lifecycle.end_job(config, store, LeveledLog(), "7", ending=lifecycle.JobEnd("slurm"))
    [(visible, taken, values)] = seen
    assert visible == [] and taken.startswith(".old-7.")
    assert values == {"job_id": "7", "allocated_cpu": "2"}
    assert os.listdir(tmp_path / "base/jobs") == []


def test_a_jobs_end_that_finds_nothing_says_where_it_looked_and_which_config(tmp_path):
    config = parse(f"[mjf]\nbase_dir = {tmp_path}/base\n", str(tmp_path / "mjf.conf"))
    store = store_for(config)
    log = LeveledLog()
    # No base_dir at all: this end read another config than the start did, or none.
    assert not lifecycle.end_job(config, store, log, "9")
    assert log.lines == [("warning", f"job 9: no directory to remove in base_dir {tmp_path}/base"
                          f" ({tmp_path}/base does not exist); config {tmp_path}/mjf.conf")]
    # A start made jobs/, not this job's: said, as information (a second end, say).
    store.create_job("8", {"job_id": "8"})
    assert lifecycle.end_job(config, store, log, "8")
    assert not lifecycle.end_job(config, store, log, "8")
    assert log.lines[-1] == ("info", f"job 8: no directory to remove in base_dir "
                             f"{tmp_path}/base ({tmp_path}/base/jobs/8 does not exist); "
                             f"config {tmp_path}/mjf.conf")
    assert [level for level, _ in log.lines].count("warning") == 1


def test_a_job_whose_runner_ended_is_ended_by_the_next_hook_with_its_record(
        tmp_path, ended_runner):
    """A job whose end could not remove its directory (Slurm started its Epilog wholly as
    the job's user): root's next hook sees the process it lived in gone and ends it as its
    end would have, record included. A job whose runner lives, or of another batch
    system, is not touched."""
    from mjf_hooks.probe import process

    config = parse(f"[mjf]\nbase_dir = {tmp_path}/base\n[records]\ndir = {tmp_path}/records\n",
                   str(tmp_path / "mjf.conf"))
    store = store_for(config)
    machine = lifecycle.machine_features(config, store, Recorded())
    alive = process.identity(os.getpid())
    for job_id, backend, runner in (("7", "slurm", ended_runner), ("8", "slurm", alive),
                                    ("9", "slurm", None), ("10", "lsf", ended_runner)):
        lifecycle.start_job(config, store, Recorded(), machine, lifecycle.JobStart(
            backend, {"job_id": (job_id, "test"), "jobstart_secs": (1795400000, "test")},
            cgroup_pid=None, runner=runner))
    log = LeveledLog()
    assert lifecycle.end_jobs_left_behind(config, store, log,
                                          lifecycle.JobEnd("slurm")) == ["7"]
    assert store.job_dir_names() == ["10", "8", "9"]
    assert ("info", "removed job 7: the process it lived in has ended, and its end left "
            "its directory") in log.lines
    assert len(list((tmp_path / "records").glob("*/*-7.json"))) == 1


def test_a_runner_the_jobs_user_wrote_makes_no_hook_end_its_job(tmp_path, ended_runner):
    """A pending job's user owns its state/ and writes there a runner that has ended: the
    next Prolog or Epilog (RunInJob) does not take it for proof and leaves the job."""
    require(os.geteuid() == 0, "needs root to give the job's state/ to its user")
    config = parse(f"[mjf]\nbase_dir = {tmp_path}/base\n", str(tmp_path / "mjf.conf"))
    store = store_for(config)
    users_job(store, tmp_path / "base", "11", "slurm", ended_runner)
    assert not lifecycle.records_runner(store, "11")
    assert lifecycle.end_jobs_left_behind(config, store, LeveledLog(),
                                          lifecycle.JobEnd("slurm")) == []
    assert store.job_dir_names() == ["11"]
