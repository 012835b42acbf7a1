"""Facts + config -> values: precedence, derivations, legacy names, validation."""

import pytest

from mjf_hooks import config, features
from mjf_hooks.errors import SiteInputError
from mjf_hooks.probe.cgroup import CgroupLimits

BATCH = {
    "job_id": ("42", "test batch system"),
    "jobstart_secs": (1795319471, "test batch system"),
    "allocated_cpu": (4, "test batch system"),
}


def compute(conf_text="", batch=None, cgroup=None, scratch=None, total_cpu=(16, "probe")):
    conf = config.parse(conf_text)
    machine = features.machine_features(conf, total_cpu, physical_cores=8)
    job = features.job_features(conf, machine, {**BATCH, **(batch or {})}, cgroup, scratch)
    return features.render(machine), features.render(job)


def test_minimal_job_writes_identity_and_nothing_guessed():
    machine, job = compute()
    assert machine == {"total_cpu": "16"}
    assert job == {"job_id": "42", "jobstart_secs": "1795319471", "allocated_cpu": "4"}


def test_config_overrides_probed_machine_values():
    machine, _ = compute("[machinefeatures]\ntotal_cpu = 12\nhs06 = 240\ngrace_secs = 60\n")
    assert machine == {"total_cpu": "12", "hs06": "240", "grace_secs": "60"}


def test_hs06_job_is_the_share_of_the_machine():
    machine, job = compute("[machinefeatures]\nhs06 = 250\n")
    assert machine["hs06"] == "250"
    assert job["hs06_job"] == "62.5"  # 250 * 4 / 16


def test_hs06_per_cpu_gives_both_ratings():
    machine, job = compute("[machinefeatures]\nhs06_per_cpu = 10.25\n")
    assert (machine["hs06"], job["hs06_job"]) == ("164", "41")


def test_limits_take_the_smallest_that_applies():
    cgroup = CgroupLimits(1, "/sys/fs/cgroup/memory/job", 2_000_000_000, 0, 4)
    _, job = compute(
        "[jobfeatures]\nmax_rss_bytes = 3000000000\nwall_limit_secs = 7200\n",
        batch={"max_rss_bytes": (4_000_000_000, "request"), "wall_limit_secs": (3600, "req")},
        cgroup=cgroup,
    )
    assert job["max_rss_bytes"] == "2000000000"  # the enforced cgroup limit
    assert job["max_swap_bytes"] == "0"
    assert job["wall_limit_secs"] == "3600"  # the job's own request, under the site's cap


def test_config_limit_applies_when_the_batch_system_gives_none():
    _, job = compute("[jobfeatures]\nwall_limit_secs = 172800\n")
    assert job["wall_limit_secs"] == "172800"
    assert job["cpu_limit_secs"] == str(172800 * 4)


def test_cpu_limit_is_derived_only_without_an_enforced_one():
    _, job = compute(batch={"wall_limit_secs": (100, "req"), "cpu_limit_secs": (50, "req")})
    assert job["cpu_limit_secs"] == "50"
    _, job = compute(batch={"wall_limit_secs": (100, "req")})
    assert job["cpu_limit_secs"] == "400"


def test_scratch_config_beats_filesystem_size():
    _, job = compute(scratch=(10**12, "statvfs"))
    assert job["scratch_limit_bytes"] == str(10**12)
    _, job = compute("[jobfeatures]\nscratch_limit_bytes = 5000\n", scratch=(10**12, "statvfs"))
    assert job["scratch_limit_bytes"] == "5000"


def test_grace_secs_job_defaults_to_the_machines():
    _, job = compute("[machinefeatures]\ngrace_secs = 3600\n")
    assert job["grace_secs_job"] == "3600"
    _, job = compute("[machinefeatures]\ngrace_secs = 3600\n[jobfeatures]\ngrace_secs_job = 60\n")
    assert job["grace_secs_job"] == "60"


def test_shutdowntime_job_follows_a_machine_shutdown_already_set():
    conf = config.parse("")
    machine = features.machine_features(conf, (16, "probe"))
    machine["shutdowntime"] = (1795400000, "machinefeatures/shutdowntime")
    job = features.render(features.job_features(conf, machine, BATCH))
    assert job["shutdowntime_job"] == "1795400000"


def test_legacy_keys_are_opt_in_and_use_powers_of_1000():
    machine, job = compute(
        "[mjf]\nlegacy_keys = yes\n[jobfeatures]\nscratch_limit_bytes = 20000000000\n",
        batch={"max_rss_bytes": (2_500_000_000, "req"), "wall_limit_secs": (3600, "req")},
    )
    assert {k: machine[k] for k in ("log_cores", "jobslots", "phys_cores")} == {
        "log_cores": "16", "jobslots": "16", "phys_cores": "8"}
    assert job["allocated_CPU"] == "4"
    assert job["mem_limit_MB"] == "2500"
    assert job["disk_limit_GB"] == "20"
    assert job["wall_limit_secs_lrms"] == "3600" and job["cpufactor_lrms"] == "1"
    plain_machine, plain_job = compute()
    assert not set(plain_machine) & {"log_cores"} and "allocated_CPU" not in plain_job


@pytest.mark.parametrize(("batch", "message"), [
    ({"allocated_cpu": (-2, "SLURM_JOB_CPUS_PER_NODE")},
     "allocated_cpu from SLURM_JOB_CPUS_PER_NODE"),
    ({"job_id": ("a b", "env")}, "job_id from env"),
    ({"wall_limit_secs": (1.5, "ad")}, "wall_limit_secs from ad"),
])
def test_bad_batch_values_name_key_value_and_source(batch, message):
    with pytest.raises(SiteInputError, match=message):
        compute(batch=batch)


def test_missing_identity_is_a_clear_error():
    conf = config.parse("")
    with pytest.raises(SiteInputError, match="job_id"):
        features.job_features(conf, {}, {"jobstart_secs": (1, "x")})


@pytest.mark.parametrize(("read", "now", "expected"), [
    (1795400000, 1795300000, "1795300000"),  # a drain moved the shutdown earlier
    (1795300000, 1795400000, "1795400000"),  # ... or later
    (1795300000, None, None),  # a drain was cancelled
])
def test_a_drain_while_the_job_directory_is_built_reaches_the_job(tmp_path, read, now,
                                                                  expected):
    """The Prolog read the machine's shutdowntime, then a drain changed it and updated
    every job it could see - before this job's directory appeared."""
    from mjf_hooks import lifecycle
    from mjf_hooks.log import Log
    from mjf_hooks.store_locations import store_for

    conf = config.parse(f"[mjf]\nbase_dir = {tmp_path}\n")
    store = store_for(conf)
    machine = features.machine_features(conf, (16, "probe"), physical_cores=8)
    machine["shutdowntime"] = (read, "machinefeatures/shutdowntime as the Prolog read it")
    store.machine.set_key("shutdowntime", None if now is None else str(now))
    path = lifecycle.start_job(conf, store, Log("test", ("stderr",)), machine,
                               lifecycle.JobStart("slurm", BATCH, cgroup_pid=None))
    found = tmp_path / "jobs/42/jobfeatures/shutdowntime_job"
    assert (found.read_text() if found.exists() else None) == expected
    assert path == f"{tmp_path}/jobs/42/jobfeatures"
