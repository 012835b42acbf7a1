"""The records tests' fixtures: a records directory and its config, a site, a drop box."""

from __future__ import annotations

import os
import stat
import time

import pytest

from mjf_hooks.config import parse
from mjf_hooks.records import filing as record_filing
from mjf_hooks.records import store as record_store
from mjf_hooks.store_locations import store_for
from tests.conftest import require
from tests.unit.records.support import (
    JOB_KEYS,
    Recorded,
    config_for,
)


@pytest.fixture
def records_dir(tmp_path):
    return tmp_path / "records"


@pytest.fixture
def config(records_dir):
    return config_for(records_dir)


@pytest.fixture
def east_of_utc(monkeypatch):
    """Local time 9 hours ahead of UTC, so a local date would be the wrong day."""
    monkeypatch.setenv("TZ", "JST-9")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def site(tmp_path):
    config = parse(f"[mjf]\nbase_dir = {tmp_path}/base\n[machinefeatures]\nbenchmark = "
                   f"HEPSPEC\n[records]\ndir = {tmp_path}/records\nformat = sss\n")
    store = store_for(config)
    store.create_job("job.1", JOB_KEYS)
    return config, store


@pytest.fixture
def as_root():
    """record_job writes the record itself only as root; a user's is handed in."""
    require(os.geteuid() == 0, "needs root: as a job's user record_job hands the record in")


@pytest.fixture
def drop_box(as_root, config, records_dir):
    """The records directory with root's drop box, as the first `mjf sync` makes it."""
    assert record_filing.ingest(config, Recorded()) == 0
    incoming = records_dir / record_store.INCOMING
    info = os.lstat(incoming)
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == 0
    assert stat.S_IMODE(info.st_mode) == 0o1733
    return incoming


@pytest.fixture
def site_with_records(tmp_path, records_dir):
    config = parse(f"[mjf]\nbase_dir = {tmp_path}/base\n[records]\ndir = {records_dir}\n"
                   "format = sss\n")
    (tmp_path / "base/jobs").mkdir(parents=True)
    assert record_filing.ingest(config, Recorded()) == 0  # makes the drop box
    return config, tmp_path / "base/jobs", records_dir / "incoming"
