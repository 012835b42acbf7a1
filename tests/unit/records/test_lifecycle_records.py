"""How a job's end writes its record (lifecycle.end_job, record_job): the job's promise
against what it used, or no record and its files kept for the next try."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mjf_hooks import lifecycle
from mjf_hooks.records import reading as record_reading
from tests.unit.records.support import (
    GIB,
    JOB_KEYS,
    Recorded,
    read_record,
)


def test_a_record_holds_the_jobs_promise_and_what_it_used(as_root, site, tmp_path):
    config, store = site
    ending = lifecycle.JobEnd("slurm", {"end_time": (1700003600, "the epilog's clock"),
                                        "cpu_secs": (10000.5, "cgroup cpu.stat"),
                                        "peak_memory_bytes": (GIB, "cgroup memory.peak")},
                              user="alice", queue="short")
    log = Recorded()
    path = lifecycle.record_job(config, store, log, "job.1", ending, now=1800000000)
    assert path == f"{tmp_path}/records/2023-11-14/1700003600-job.1.json"
    data = read_record(path)
    assert data["requested"] == {"allocated_cpu": 4, "max_rss_bytes": 2 * GIB,
                                 "wall_limit_secs": 7200, "cpu_limit_secs": 28800,
                                 "scratch_limit_bytes": 10 * GIB, "hs06_job": 40,
                                 "start_time": 1700000000}
    # wall_secs = end_time - jobstart_secs = 1700003600 - 1700000000 = 3600
    # consumption rate = 10000.5 / (3600 * 4)
    assert data["delivered"] == {
        "end_time": {"value": 1700003600, "source": "the epilog's clock"},
        "wall_secs": {"value": 3600, "source": "end_time - jobstart_secs"},
        "cpu_secs": {"value": 10000.5, "source": "cgroup cpu.stat"},
        "peak_memory_bytes": {"value": GIB, "source": "cgroup memory.peak"},
        "consumption_rate": {"value": pytest.approx(10000.5 / 14400),
                             "source": "derived: cpu_secs / (wall_secs * allocated_cpu)"},
    }
    assert data["job_id"] == "job.1" and data["user"] == "alice" and data["queue"] == "short"
    assert data["backend"] == "slurm" and data["node"] == os.uname().nodename
    assert data["benchmark"] == "HEPSPEC"
    assert sorted(os.listdir(Path(path).parent)) == ["1700003600-job.1.json",
                                                     "1700003600-job.1.xml"]
    assert any(path in line for line in log.at("info"))
    assert log.at("error") == [] and log.at("warning") == []
    assert os.path.isdir(store.job_features_dir("job.1"))  # record_job removes nothing


def test_without_an_end_time_the_clock_is_the_end(as_root, site):
    config, store = site
    path = lifecycle.record_job(config, store, Recorded(), "job.1",
                                lifecycle.JobEnd("lsf"), now=1700000500.5)
    data = read_record(path)
    assert data["delivered"]["end_time"] == {"value": 1700000500.5,
                                             "source": "the clock as the job's end ran"}
    assert data["delivered"]["wall_secs"] == {"value": 500.5,
                                              "source": "end_time - jobstart_secs"}
    assert Path(path).name == "1700000500-job.1.json"


def test_a_measured_wall_time_is_kept_and_unknown_values_left_out(as_root, site):
    config, store = site
    ending = lifecycle.JobEnd("standalone", {"end_time": (1700003600, "clock"),
                                             "wall_secs": (3599.25, "mjf run's clock"),
                                             "cpu_secs": (None, "not measured")})
    data = read_record(lifecycle.record_job(config, store, Recorded(), "job.1", ending))
    assert data["delivered"]["wall_secs"] == {"value": 3599.25, "source": "mjf run's clock"}
    assert "cpu_secs" not in data["delivered"] and "consumption_rate" not in data["delivered"]
    assert "user" not in data and "queue" not in data


def test_an_end_before_the_start_gives_no_negative_wall_time(as_root, site):
    config, store = site
    ending = lifecycle.JobEnd("slurm", {"end_time": (1699999000, "a wrong clock")})
    data = read_record(lifecycle.record_job(config, store, Recorded(), "job.1", ending))
    assert data["delivered"]["wall_secs"]["value"] == 0


def test_a_job_without_a_directory_gets_no_record(site, tmp_path):
    config, store = site
    log = Recorded()
    ending = lifecycle.JobEnd("slurm", {"end_time": (1700003600, "clock")})
    assert lifecycle.record_job(config, store, log, "other", ending) is None
    assert not (tmp_path / "records").exists()
    assert log.at("error") == [] and log.at("warning") == []


def test_an_invalid_key_value_is_left_out_with_a_warning(as_root, site, tmp_path):
    config, store = site
    store.create_job("job.2", {**JOB_KEYS, "job_id": "job.2", "allocated_cpu": "four",
                               "max_rss_bytes": "-5"})
    log = Recorded()
    ending = lifecycle.JobEnd("slurm", {"end_time": (1700003600, "clock"),
                                        "cpu_secs": (100, "cgroup")})
    data = read_record(lifecycle.record_job(config, store, log, "job.2", ending))
    assert "allocated_cpu" not in data["requested"]
    assert "max_rss_bytes" not in data["requested"]
    assert data["requested"]["wall_limit_secs"] == 7200
    warnings = log.at("warning")
    assert len(warnings) == 2
    assert any("job.2" in line and "allocated_cpu" in line and "'four'" in line
               for line in warnings)
    assert any("max_rss_bytes" in line for line in warnings)


def test_end_job_writes_the_record_then_removes_the_directory(as_root, site, tmp_path):
    config, store = site
    log = Recorded()
    ending = lifecycle.JobEnd("slurm", {"end_time": (1700003600, "clock")})
    assert lifecycle.end_job(config, store, log, "job.1", ending=ending)
    assert not os.path.exists(store.job_features_dir("job.1"))
    assert [data["job_id"] for data in
            record_reading.read_all(str(tmp_path / "records")).records] == ["job.1"]


def test_an_unwritable_records_directory_does_not_keep_the_jobs_files(site, tmp_path):
    config, store = site
    (tmp_path / "records").write_text("a regular file where the directory should be")
    log = Recorded()
    ending = lifecycle.JobEnd("slurm", {"end_time": (1700003600, "clock")})
    assert lifecycle.end_job(config, store, log, "job.1", ending=ending)
    assert not os.path.exists(os.path.dirname(store.job_features_dir("job.1")))
    errors = log.at("error")
    assert len(errors) == 1 and "job job.1 not recorded" in errors[0]
    assert "\n" not in errors[0]
    assert (tmp_path / "records").read_text().startswith("a regular file")


def test_an_internal_error_in_the_record_does_not_keep_the_jobs_files(site, tmp_path,
                                                                     monkeypatch):
    config, store = site

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(lifecycle, "record_job", broken)
    log = Recorded()
    ending = lifecycle.JobEnd("slurm", {"end_time": (1700003600, "clock")})
    assert lifecycle.end_job(config, store, log, "job.1", ending=ending)
    assert not os.path.exists(store.job_features_dir("job.1"))
    assert log.at("error") == ["job job.1 not recorded: internal error RuntimeError: a bug"]


def test_a_dry_run_writes_no_record_and_removes_nothing(site, tmp_path, capsys):
    config, store = site
    ending = lifecycle.JobEnd("slurm", {"end_time": (1700003600, "clock")})
    assert not lifecycle.end_job(config, store, Recorded(), "job.1", dry_run=True, ending=ending)
    assert capsys.readouterr().out == f"would remove {store.job_features_dir('job.1')}\n"
    assert os.path.isdir(store.job_features_dir("job.1"))
    assert not (tmp_path / "records").exists()


def test_end_job_without_an_ending_or_a_records_dir_writes_no_record(site, tmp_path):
    config, store = site
    assert lifecycle.end_job(config, store, Recorded(), "job.1")
    assert not (tmp_path / "records").exists()
    store.create_job("job.1", JOB_KEYS)
    config.records_dir = None
    ending = lifecycle.JobEnd("slurm", {"end_time": (1700003600, "clock")})
    assert lifecycle.end_job(config, store, Recorded(), "job.1", ending=ending)
    assert not (tmp_path / "records").exists()
