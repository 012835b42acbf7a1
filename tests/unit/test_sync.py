"""`mjf sync`'s pass (mjf_hooks.sync), in process: its phases, each independent; the
installed command against fake batch systems is tests/cli/test_mjf_sync.py."""

from __future__ import annotations

import os
import subprocess

import pytest

from mjf_hooks import batch, config, publish, store_locations, sync
from mjf_hooks import config as config_module
from mjf_hooks.store import BACKEND_MARKER, Store
from tests.conftest import LeveledLog, printing, require, write_script

NODE = os.uname().nodename.split(".")[0]


@pytest.fixture
def node(monkeypatch):
    monkeypatch.setattr(batch, "node_name", lambda module, options: "vm.example.org")


def test_a_pass_runs_every_phase_though_one_fails():
    log = LeveledLog()
    done = sync.Pass(log)
    done.run("first", lambda: (_ for _ in ()).throw(RuntimeError("a bug")))
    done.run("second", lambda: ["did it"])
    assert done.failed == ["first"] and done.done == ["did it"]
    assert log.lines == [("error", "sync: first failed: RuntimeError: a bug")]


def test_sync_publishes_only_when_the_site_says_so(node, monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(publish, "publish", lambda *args: calls.append(args) or
                        publish.Outcome())
    base = f"[mjf]\nbase_dir = {tmp_path}\nbatch_systems = gridengine\n"
    monkeypatch.setattr(sync, "_remove_stale_jobs", lambda *args: [])
    sync.sync(config.parse(base), LeveledLog(), {})
    assert calls == []
    failed = publish.Outcome()
    failed.failed = True
    monkeypatch.setattr(publish, "publish", lambda *args: calls.append(args) or failed)
    done = sync.sync(config.parse(base + "[publish]\nsync = yes\n"), LeveledLog(), {})
    assert len(calls) == 1 and done.failed == ["publishing node facts"]


def test_a_users_private_jobs_go_when_their_batch_system_no_longer_runs_them_here(
        tmp_path, write_config, monkeypatch):
    """An LSF job's share of a host other than its first is set up by its user's starter
    (LSF_JOB_STARTER of a task RES starts) in their private directory, /tmp/mjf-<uid>,
    and no post-exec ends it there: sync does, once bjobs no longer lists the job on this
    host. Left: a job LSF still runs, one naming no batch system here (or none: `mjf
    run`'s ends itself); a private directory its user broke fails no pass."""
    require(os.geteuid() == 0, "needs root to give the private directories to their users")
    parents = (tmp_path / "tmp", tmp_path / "run-user")
    for parent in parents:
        parent.mkdir()
    monkeypatch.setattr(store_locations, "PRIVATE_PARENTS", tuple(map(str, parents)))
    private, broken = parents[0] / "mjf-65534", parents[0] / "mjf-65533"
    user_store = Store(str(private))
    for job_id, backend in (("33", "lsf"), ("34", "lsf"), ("35", None), ("36", "slurm"),
                            ("1[2]", "lsf")):
        user_store.create_job(job_id, {"job_id": job_id},
                              state={BACKEND_MARKER: backend} if backend else {})
    broken.mkdir()
    (broken / "jobs").symlink_to(private / "jobs")
    for path in (private, broken):
        subprocess.run(["chown", "-hR", f"{path.name[4:]}:{path.name[4:]}", str(path)],
                       check=True)
    bjobs = tmp_path / "bin" / "bjobs"
    write_script(bjobs, printing("JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   "
                                 "JOB_NAME   SUBMIT_TIME\n"
                                 f"34      nobody  RUN   mjf        wn1         wn1:{NODE} "
                                 "multi      Dec  3 06:57\n"))
    write_script(tmp_path / "bin" / "badmin", printing(""))  # no host closed
    conf, _ = write_config(f"batch_systems = lsf\n[lsf]\nbjobs = {bjobs}\n")
    done = sync.sync(config_module.load(str(conf)), LeveledLog(), {})
    assert done.failed == []
    assert sorted(os.listdir(private / "jobs")) == ["34", "35", "36"]
    assert [line for line in done.done if "removed" in line] == [
        f"removed job {name}: LSF no longer runs it on this node (in {private}, its user's)"
        for name in ("1[2]", "33")]
    assert os.path.islink(broken / "jobs")
