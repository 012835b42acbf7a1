"""`mjf metrics`: the node's MJF state in Prometheus's text exposition format - the values
a dashboard reads, the file node_exporter's textfile collector reads (written whole),
what a hostile job's user can and cannot put in it, and the hooks' failure counters."""

import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mjf_hooks import config as config_module
from mjf_hooks import hook_failures, jobstatus, metrics
from mjf_hooks.store import BACKEND_MARKER
from tests.cli.test_mjf_status import (  # noqa: F401 - site: a fixture
    NOBODY,
    add_job,
    interactive,
    mjf,
    pending_job,
    plant,
    private_store,
    site,
    sleeping,
)
from tests.conftest import LeveledLog, installed_command, require

SAMPLE = re.compile(r'^([a-z_:][a-z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-z_]+)="((?:[^"\\]|\\.)*)"(?:,|$)')


@pytest.fixture
def node(site):  # noqa: F811 - the fixture imported above
    """`mjf status`'s site: a config offering $JOBSTATUS, its store, no other store."""
    return site


def parse_exposition(text: str) -> dict[tuple[str, frozenset], float]:
    """Every sample of an exposition, strictly: each family announced by HELP and TYPE
    before its samples, every line one of the three."""
    samples, announced = {}, set()
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            announced.add(line.split()[2])
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        name, labels, value = match.groups()
        assert name in announced or name.rsplit("_", 1)[0] in announced, line
        pairs = frozenset((key, re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m[1], m[1]), raw))
                          for key, raw in LABEL.findall(labels or ""))
        samples[(name, pairs)] = float(value)
    return samples


def label_sets(text: str) -> list[tuple[str, str]]:
    """Each sample line's name and labels, as written (a repeated one is node_exporter's
    error: it drops the series)."""
    return [(match[1], match[2] or "") for match in map(SAMPLE.match, text.splitlines())
            if match]


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())))


def promtool_check(text: str) -> None:
    require(shutil.which("promtool") is not None, "promtool (Debian: prometheus) not installed")
    result = subprocess.run(["promtool", "check", "metrics"], input=text, text=True,
                            capture_output=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


# --- what it says -----------------------------------------------------------------------

def test_the_node_its_jobs_and_their_pilots(node):
    conf, _, store = node
    now = int(time.time())
    store.machine.set_key("shutdowntime", str(now + 7200))
    store.machine.set_key("grace_secs", "600")
    add_job(store, "41", cpus=4, start=now - 100, wall=3600, status=False)
    status_dir = add_job(store, "42", cpus=8, start=now - 200, wall=7200)
    jobstatus.update({"used_CPU": 6, "last_job_start": now - 50,
                      "last_exp_job_end": now + 1000, "first_exp_job_end": now + 500,
                      "can_postpone_last_job": True}, status_dir, allocated_cpu=8)
    add_job(store, "7.0", backend="gridengine")
    result = mjf("metrics", config=conf)
    assert result.returncode == 0, result.stderr
    promtool_check(result.stdout)
    samples = parse_exposition(result.stdout)
    assert value(samples, "mjf_machine_draining") == 1
    assert value(samples, "mjf_machine_shutdowntime_timestamp_seconds") == now + 7200
    assert value(samples, "mjf_machine_grace_seconds") == 600
    assert value(samples, "mjf_jobs", batch_system="slurm") == 2
    assert value(samples, "mjf_jobs", batch_system="gridengine") == 1
    assert value(samples, "mjf_jobs", batch_system="htcondor") == 0
    slurm41 = {"job_id": "41", "batch_system": "slurm"}
    slurm42 = {"job_id": "42", "batch_system": "slurm"}
    assert value(samples, "mjf_job_allocated_cpu", **slurm41) == 4
    assert value(samples, "mjf_job_status_reported", **slurm41) == 0
    # No pilot: assumed to run to its wall limit.
    assert 3500 - 60 <= value(samples, "mjf_job_remaining_time_seconds", **slurm41) <= 3500
    assert value(samples, "mjf_job_used_cpu", **slurm41) is None
    # A pilot that reports: its own figures.
    assert value(samples, "mjf_job_status_reported", **slurm42) == 1
    assert value(samples, "mjf_job_used_cpu", **slurm42) == 6
    assert value(samples, "mjf_job_can_postpone_last_job", **slurm42) == 1
    assert value(samples, "mjf_job_last_exp_job_end_timestamp_seconds", **slurm42) == now + 1000
    assert 900 <= value(samples, "mjf_job_remaining_time_seconds", **slurm42) <= 1000
    # (8 - 6) idle cores until the first payload ends, 500 s from now at most.
    assert 0 < value(samples, "mjf_job_draining_waste_cpu_seconds", **slurm42) <= 2 * 500
    for line in result.stdout.splitlines():
        assert line.isascii() and line.isprintable()
    assert "# TYPE mjf_jobs gauge" in result.stdout


def test_output_is_replaced_whole_and_never_through_a_planted_symlink(node, tmp_path):
    conf, _, _ = node
    target = tmp_path / "textfile" / "mjf.prom"
    target.parent.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    target.symlink_to(victim)
    result = mjf("metrics", "--output", str(target), config=conf)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert victim.read_text() == "precious\n"
    assert not target.is_symlink() and oct(target.stat().st_mode & 0o777) == "0o644"
    assert os.listdir(target.parent) == ["mjf.prom"]  # no temporary file left
    assert "mjf_machine_draining 0\n" in target.read_text()
    missing = mjf("metrics", "--output", str(tmp_path / "absent" / "mjf.prom"), config=conf)
    assert missing.returncode == 1 and "absent" in missing.stderr


def test_mjf_sync_writes_them_where_the_config_says(write_config, tmp_path):
    out = tmp_path / "mjf.prom"
    body = f"batch_systems = slurm\n[slurm]\nscontrol = /bin/true\n[metrics]\noutput = {out}\n"
    conf, _ = write_config(body)
    assert mjf("sync", config=conf).returncode == 0
    samples = parse_exposition(out.read_text())
    assert value(samples, "mjf_sync_failed_phases") == 0
    assert value(samples, "mjf_jobs", batch_system="slurm") == 0
    # A phase that fails (records kept below a file): the pass says so, and so do they.
    (tmp_path / "file").write_text("")
    conf, _ = write_config(body + f"[records]\ndir = {tmp_path}/file/records\n")
    assert mjf("sync", config=conf).returncode == 1
    assert value(parse_exposition(out.read_text()), "mjf_sync_failed_phases") == 1


# --- what a job's user cannot do to it -----------------------------------------------

ODD_IDS = ['a"b\\c', "x{y}=z,w", "#HELP", "9" * 200, "é".encode().decode("ascii", "replace")]


def test_a_hostile_jobstatus_and_odd_ids_keep_the_file_valid(node):
    conf, _, store = node
    for job_id in ODD_IDS:
        if job_id.isascii():
            add_job(store, job_id)
    status_dir = add_job(store, "hostile", cpus=2)
    hostile = {"used_CPU": "9" * 400, "last_job_start": "1e400",
               "last_exp_job_end": "NaN", "priority_factor": "-99999999999999999999",
               "can_postpone_last_job": 'True"} 1\nmjf_forged 1', "add_uncom_time": "+Inf",
               'bad"name\n': "1", "first_exp_job_end": "\x00\xff"}
    for name, content in hostile.items():
        with open(os.path.join(status_dir, name), "w", encoding="latin-1") as handle:
            handle.write(content)
    os.symlink("/etc/shadow", os.path.join(status_dir, "last_max_job_end"))
    os.mkfifo(os.path.join(status_dir, "add_final_exp_waste"))
    # Features past any bound, as a broken hook might leave them.
    store.create_job("huge", {"job_id": "huge", "allocated_cpu": "9" * 19,
                              "jobstart_secs": "1", "wall_limit_secs": "9" * 30},
                     state={BACKEND_MARKER: "slurm"})
    result = mjf("metrics", config=conf)
    assert result.returncode == 0, result.stderr
    promtool_check(result.stdout)
    samples = parse_exposition(result.stdout)
    ids = {dict(labels).get("job_id") for _, labels in samples}
    assert {job_id for job_id in ODD_IDS if job_id.isascii()} <= ids
    assert "mjf_forged" not in {name for name, _ in samples}
    hostile_job = {"job_id": "hostile", "batch_system": "slurm"}
    assert value(samples, "mjf_job_status_reported", **hostile_job) == 0
    assert value(samples, "mjf_job_allocated_cpu", **hostile_job) == 2
    for name, _ in samples:
        assert not name.startswith("mjf_job_") or name in KNOWN_JOB_METRICS, name
    assert len(result.stdout.splitlines()) < 400


KNOWN_JOB_METRICS = {
    "mjf_job_allocated_cpu", "mjf_job_start_timestamp_seconds", "mjf_job_wall_limit_seconds",
    "mjf_job_status_reported", "mjf_job_remaining_time_seconds",
    "mjf_job_draining_waste_cpu_seconds", "mjf_job_kill_waste_cpu_seconds",
    *(f"mjf_job_{key.lower()}{metrics._STATUS_SUFFIX[kind]}"
      for key, kind in jobstatus.KEYS.items())}


def test_a_label_or_number_out_of_bounds_is_left_out():
    family = metrics.Family("mjf_x", metrics.GAUGE, "help with \\ and\nnewline")
    family.add(1, job_id='ok"\\')
    family.add(2, job_id="new\nline")
    family.add(3, job_id="x" * 201)
    family.add(2**63)
    family.add(float("nan"))
    family.add(float("inf"))
    family.add(0.5)
    assert metrics.exposition([family]) == (
        "# HELP mjf_x help with \\\\ and\\nnewline\n# TYPE mjf_x gauge\n"
        'mjf_x{job_id="ok\\"\\\\"} 1\nmjf_x 0.5\n')
    assert metrics.exposition([metrics.Family("mjf_y", metrics.GAUGE, "none")]) == ""


def test_no_more_than_max_jobs_get_series(node, monkeypatch):
    _, _, store = node
    monkeypatch.setattr(metrics, "MAX_JOBS", 3)
    for number in range(5):
        add_job(store, str(number), status=False)
    samples = parse_exposition(metrics.exposition(metrics.gather(config_module.load())))
    assert value(samples, "mjf_jobs_omitted") == 2
    assert len([key for key in samples if key[0] == "mjf_job_allocated_cpu"]) == 3


def test_a_job_only_its_user_vouches_for_is_counted_not_labelled(node):
    _, _, store = node
    add_job(store, "mine", backend="no such batch system")
    samples = parse_exposition(metrics.exposition(metrics.gather(config_module.load())))
    assert value(samples, "mjf_jobs_unverified") == 1
    assert all(dict(labels).get("job_id") != "mine" for _, labels in samples)


# --- the hooks' failure counters --------------------------------------------------------

def test_failing_hooks_count_by_entry_point_and_reason(write_config, tmp_path):
    conf, base = write_config()
    base.mkdir()
    env = {**os.environ, "MJF_CONFIG": str(conf)}
    subprocess.run([installed_command("mjf-slurm"), "nonsense"], env=env, capture_output=True,
                   timeout=60)
    subprocess.run([installed_command("mjf-lsf"), "--config", str(conf), "post-exec", "x"],
                   env=env, capture_output=True, timeout=60)
    broken = tmp_path / "broken.conf"
    broken.write_text("[mjf]\nno_such_option = 1\n")
    # A broken config: counted where the default base_dir is (not here), nothing made.
    subprocess.run([installed_command("mjf-slurm"), "prolog", "--config", str(broken)],
                   env=env, capture_output=True, timeout=60)
    assert hook_failures.counts(str(base)) == {("mjf-slurm", "input"): 1,
                                              ("mjf-lsf post-exec", "usage"): 1}
    samples = parse_exposition(metrics.exposition(metrics.gather(config_module.load(str(conf)))))
    assert value(samples, "mjf_hook_failures_total", entry_point="mjf-lsf post-exec",
                 reason="usage") == 1


def test_hooks_failing_together_lose_no_count(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: hook_failures.record(str(base), "mjf-slurm prolog",
                                                     OSError("x")), range(400)))
    hook_failures.record(str(base), "mjf-slurm prolog", ValueError("a bug"))
    assert hook_failures.counts(str(base)) == {("mjf-slurm prolog", "system"): 400,
                                              ("mjf-slurm prolog", "internal"): 1}


def test_counting_makes_nothing_outside_base_dir_and_never_fails(tmp_path):
    hook_failures.record(str(tmp_path / "absent"), "mjf-slurm", "config")
    assert not (tmp_path / "absent").exists()
    (tmp_path / "base").mkdir()
    hook_failures.record(str(tmp_path / "base"), "Evil/../name", "config")
    hook_failures.record(str(tmp_path / "base"), "mjf-slurm", "made-up reason")
    assert not (tmp_path / "base" / "state").exists()
    state = tmp_path / "base" / "state"
    state.mkdir()
    (state / "hook_failures").symlink_to(tmp_path)
    hook_failures.record(str(tmp_path / "base"), "mjf-slurm", "config")  # refused, quietly
    assert hook_failures.counts(str(tmp_path / "base")) == {}
    assert sorted(os.listdir(tmp_path)) == ["base"]


@pytest.mark.parametrize("text,problem", [
    ("output = mjf.prom", "absolute"), ("output = /var/lib/x/mjf.txt", ".prom"),
    ("records_hours = 0", "hours"), ("records_hours = 9000", "hours"),
    ("records_hours = 1.5", "hours"), ("colour = red", "unknown option")])
def test_a_wrong_metrics_option_is_refused(text, problem):
    with pytest.raises(Exception, match=re.escape(problem)):
        config_module.parse(f"[metrics]\n{text}\n")


def test_metrics_options():
    config = config_module.parse("[metrics]\noutput = /var/lib/node-exporter/mjf.prom\n"
                                 "records_hours = 168\n")
    assert config.metrics_output == "/var/lib/node-exporter/mjf.prom"
    assert config.metrics_records_hours == 168
    assert config_module.parse("").metrics_output is None
    assert interactive("metrics", "--help").exit_code == 0


@pytest.mark.parametrize(("argv", "imported"), [(["prolog", "--dry-run"], False),
                                                (["nonsense"], True)])
def test_only_a_failing_hook_loads_the_counters(write_config, argv, imported):
    """Hooks are measured against a bare interpreter start: the counters cost a hook that
    succeeds nothing."""
    conf, _ = write_config()
    code = ("import sys\nfrom mjf_hooks.hooks.slurm import main\n"
            f"main({argv!r})\nprint('mjf_hooks.hook_failures' in sys.modules)")
    env = {**os.environ, "MJF_CONFIG": str(conf), "SLURM_JOB_ID": "5",
           "SLURM_JOB_START_TIME": "1", "SLURM_JOB_END_TIME": "61"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=60)
    assert result.stdout.splitlines()[-1] == str(imported), result.stderr


def test_a_records_directory_that_cannot_be_read_leaves_out_only_its_figures(
        write_config, tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    records.chmod(0o777)  # others may write: refused
    conf, _ = write_config(f"[records]\ndir = {records}\n")
    result = mjf("metrics", config=conf)
    assert result.returncode == 0, result.stderr
    assert "no record figures" in result.stderr and str(records) in result.stderr
    samples = parse_exposition(result.stdout)
    assert value(samples, "mjf_machine_draining") == 0
    assert not any(name.startswith("mjf_records_") for name, _ in samples)


def test_the_record_figures_sum_the_window(write_config, tmp_path):
    from mjf_hooks.records import job as job_record
    from mjf_hooks.records import store as record_store

    conf, _ = write_config(f"[records]\ndir = {tmp_path}/records\n[metrics]\nrecords_hours = 2\n")
    config = config_module.load(str(conf))
    now = time.time()
    for job_id, ended, cpu, peak in (("1", now - 60, 1800.0, 10**9), ("2", now - 120, 3600.0, 1),
                                     ("3", now - 3 * 3600, 7200.0, 1)):
        record = job_record.Record(job_id, allocated_cpu=2, max_rss_bytes=10**8,
                                   start_time=int(ended - 3600), end_time=int(ended),
                                   wall_secs=3600.0, cpu_secs=cpu, peak_memory_bytes=peak,
                                   sources=dict.fromkeys(("end_time", "wall_secs", "cpu_secs",
                                                          "peak_memory_bytes"), "the test"))
        record_store.write(config, record)
    samples = parse_exposition(metrics.exposition(metrics.gather(config, now)))
    assert value(samples, "mjf_records_window_seconds") == 7200
    assert value(samples, "mjf_records_jobs") == 2  # job 3 ended before the window
    assert value(samples, "mjf_records_allocated_cpu_seconds") == 2 * 2 * 3600
    assert value(samples, "mjf_records_used_cpu_seconds") == 1800 + 3600
    assert value(samples, "mjf_records_jobs_over_promise", promise="memory") == 1
    assert value(samples, "mjf_records_jobs_over_promise", promise="wall") == 0


# --- what a job's user can no longer steer --------------------------------------------

def test_a_job_is_labelled_by_its_directory_never_by_the_id_its_user_wrote(node):
    """A pending job's user owns its jobfeatures/ and writes another job's job_id there
    (and a million cores): each job keeps its own series, one label set each."""
    require(os.geteuid() == 0, "needs root: the jobfeatures/ is another user's")
    conf, _, store = node
    store.machine.set_key("total_cpu", "16")
    add_job(store, "victim", cpus=4)
    pending_job(store, "forger", job_id="victim", allocated_cpu="1000000")
    result = mjf("metrics", config=conf)
    assert result.returncode == 0, result.stderr
    written = label_sets(result.stdout)
    assert len(written) == len(set(written)), "a label set written twice"
    samples = parse_exposition(result.stdout)
    assert value(samples, "mjf_job_allocated_cpu", job_id="victim", batch_system="slurm") == 4
    assert value(samples, "mjf_job_allocated_cpu", job_id="forger", batch_system="slurm") == 16


def plant_many(store, names, runner):
    """Standalone job directories, as many as ``names``, all naming one ``runner``
    process; all of them NOBODY's, as that user would make them."""
    for name in names:
        top = store / "jobs" / name
        (top / "jobfeatures").mkdir(parents=True)
        (top / "state").mkdir()
        (top / "jobfeatures" / "allocated_cpu").write_text("64")
        (top / "state" / "backend").write_text("standalone")
        (top / "state" / "runner").write_text(runner)
    for directory, subdirectories, files in os.walk(store):
        for entry in (directory, *(os.path.join(directory, name)
                                   for name in subdirectories + files)):
            os.chown(entry, NOBODY, NOBODY, follow_symlinks=False)


def test_one_users_sleep_and_1100_directories_take_no_batch_jobs_series(node, tmp_path):
    """The review's attack: one `sleep` of a local user vouches for 1,100 standalone
    directories whose names sort before the real batch job's."""
    _, _, store = node
    add_job(store, "zz-batch", cpus=4)
    with sleeping() as (runner,):
        plant_many(private_store(tmp_path), [f"a{number:04}" for number in range(1100)],
                   runner)
        samples = parse_exposition(metrics.exposition(metrics.gather(config_module.load())))
    assert value(samples, "mjf_job_allocated_cpu", job_id="zz-batch", batch_system="slurm") == 4
    assert value(samples, "mjf_jobs", batch_system="standalone") == 1
    assert value(samples, "mjf_jobs_unverified") == 1099
    assert value(samples, "mjf_jobs_omitted") == 0


def test_jobs_only_a_user_vouches_for_never_take_a_batch_jobs_series(node, tmp_path,
                                                                    monkeypatch):
    _, _, store = node
    monkeypatch.setattr(metrics, "MAX_JOBS", 2)
    add_job(store, "zz-batch", cpus=4)
    with sleeping(3) as runners:
        for number, runner in enumerate(runners):
            plant(private_store(tmp_path), f"a{number}", backend="standalone", runner=runner,
                  report=False)
        samples = parse_exposition(metrics.exposition(metrics.gather(config_module.load())))
    assert value(samples, "mjf_jobs", batch_system="standalone") == 3
    assert value(samples, "mjf_job_allocated_cpu", job_id="zz-batch", batch_system="slurm") == 4
    assert value(samples, "mjf_jobs_omitted") == 2


def test_records_a_user_handed_in_are_shown_apart_from_roots(write_config, tmp_path):
    """Any local user may hand records in: absurd figures in them never reach the node's
    sums (the efficiency alert), only figures of their own."""
    from mjf_hooks.records import filing as record_filing
    from mjf_hooks.records import job as job_record
    from mjf_hooks.records import store as record_store

    require(os.geteuid() == 0, "needs root: root files the hand-ins")
    conf, _ = write_config(f"[records]\ndir = {tmp_path}/records\n")
    config = config_module.load(str(conf))
    now = time.time()
    sources = dict.fromkeys(("end_time", "wall_secs", "cpu_secs", "peak_memory_bytes"), "test")

    def record(job_id, cpus, wall):
        return job_record.Record(job_id, allocated_cpu=cpus, max_rss_bytes=10**8,
                                 start_time=int(now - 3600), end_time=int(now - 60),
                                 wall_secs=wall, cpu_secs=float(wall), peak_memory_bytes=1,
                                 sources=sources)

    record_store.write(config, record("roots", 2, 3600.0))
    record_filing.ingest(config, LeveledLog())  # makes the drop box
    for number in range(3):
        handed = record_store.hand_in(config, record(f"forged{number}", 2**62, 2.0**62))
        os.chown(handed, NOBODY, NOBODY)
    assert record_filing.ingest(config, LeveledLog()) == 3
    samples = parse_exposition(metrics.exposition(metrics.gather(config, now)))
    assert value(samples, "mjf_records_jobs") == 1
    assert value(samples, "mjf_records_allocated_cpu_seconds") == 2 * 3600
    assert value(samples, "mjf_records_used_cpu_seconds") == 3600
    assert value(samples, "mjf_records_handed_in_jobs") == 3
    assert value(samples, "mjf_records_handed_in_allocated_cpu_seconds") == \
        pytest.approx(3 * 2.0**124)
