"""PBS parsers and facts: job attributes as OpenPBS 23.06's hooks and qstat give them
(tests/fixtures/pbs-23.06/), and Torque's and OpenPBS's documented prologue argv."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mjf_hooks.batch import pbs
from mjf_hooks.errors import SiteInputError

MIB = 2**20
NOW = 1795444160


def values(facts):
    return {key: value for key, (value, _) in facts.items()}


@pytest.mark.parametrize(("text", "expected"), [
    ("300mb", 300 * MIB), ("204800kb", 200 * MIB), ("2gb", 2 * 1024 * MIB), ("1024", 1024),
    ("1024b", 1024), ("2GB", 2 * 1024 * MIB), ("1tb", 1024 ** 4), ("8w", 64), ("1kw", 8192),
])
def test_sizes_are_powers_of_1024_and_words_are_8_bytes(text, expected):
    assert pbs.parse_size_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "mb", "1.5gb", "-1mb", "1 mb", "1xb", "1kmb", "\uff11mb"])
def test_a_size_that_is_not_one_is_refused(text):
    with pytest.raises(ValueError, match="PBS size"):
        pbs.parse_size_bytes(text)


@pytest.mark.parametrize(("text", "expected"), [
    ("00:10:00", 600), ("90:00", 5400), ("5400", 5400), ("1:00:00", 3600),
    ("00:00:01.6", 2), ("00:00:01.4", 1), ("240:00:00", 864000),
])
def test_durations(text, expected):
    assert pbs.parse_duration_secs(text) == expected


@pytest.mark.parametrize("text", ["", "1:2:3:4", "a:00", "-5", "00:00:1e3", "1.2.3"])
def test_a_duration_that_is_not_one_is_refused(text):
    with pytest.raises(ValueError, match="PBS duration"):
        pbs.parse_duration_secs(text)


@given(st.integers(0, 10**6), st.integers(0, 59), st.integers(0, 59))
def test_durations_round_trip(hours, minutes, seconds):
    assert pbs.parse_duration_secs(f"{hours:02d}:{minutes:02d}:{seconds:02d}") == \
        hours * 3600 + minutes * 60 + seconds


@given(st.integers(0, 2**40), st.sampled_from(["", "b", "kb", "mb", "gb", "KB", "Mb"]))
def test_sizes_round_trip(number, unit):
    factor = {"": 1, "b": 1, "kb": 1024, "mb": MIB, "gb": 1024 * MIB}[unit.lower()]
    assert pbs.parse_size_bytes(f"{number}{unit}") == number * factor


@given(st.text(max_size=30))
def test_size_and_duration_parsers_raise_only_value_error(text):
    for parse in (pbs.parse_size_bytes, pbs.parse_duration_secs):
        try:
            parse(text)
        except ValueError:
            pass


@pytest.mark.parametrize("job", ["4.vm", "12[3].vm", "123.server.example.org", "4",
                                 "12[].vm", "7.pbs-server_1"])
def test_job_ids(job):
    assert pbs.checked_job_id(job) == job


@pytest.mark.parametrize("job", ["", "vm", "4.", "4.vm/x", "../4.vm", "4[x].vm", "4 .vm",
                                 "4.vm\n", "x" * 300, "4[3.vm", "-4.vm"])
def test_a_job_id_that_is_not_one_is_refused(job):
    with pytest.raises(SiteInputError, match="not a PBS job id"):
        pbs.checked_job_id(job)


def test_exec_vnode_chunks_and_this_hosts_share():
    text = "(vm:ncpus=1:mem=204800kb)+(vm:ncpus=1)+(other:ncpus=4:mem=1gb)"
    assert pbs.parse_exec_vnode(text) == [("vm", {"ncpus": "1", "mem": "204800kb"}),
                                          ("vm", {"ncpus": "1"}),
                                          ("other", {"ncpus": "4", "mem": "1gb"})]
    assert pbs.host_share(text, ["vm"]) == {"ncpus": 2, "mem": 200 * MIB}
    # a chunk spanning vnodes; vnodes of a multi-vnode mom are named host[N]
    spanning = "(vm[0]:ncpus=2:mem=100mb+vm[1]:ncpus=2:mem=100mb)+(b:ncpus=1)"
    assert pbs.host_share(spanning, ["vm.example.org"]) == {"ncpus": 4, "mem": 200 * MIB}
    assert pbs.host_share(spanning, ["b"]) == {"ncpus": 1}


# A job of three chunks on three moms of one host (place=scatter), as each mom's hook
# adapter handed it over: vnode_list (``vnodes``) is the whole job's on every mom.
SCATTER = "(vm:ncpus=1:mem=102400kb)+(vm-m1:ncpus=1:mem=102400kb)+(vm-m2:ncpus=2:mem=204800kb)"


@pytest.mark.parametrize(("node", "share"), [
    ("vm", {"ncpus": 1, "mem": 100 * MIB}), ("vm-m1", {"ncpus": 1, "mem": 100 * MIB}),
    ("vm-m2", {"ncpus": 2, "mem": 200 * MIB})])
def test_each_mom_of_a_multi_node_job_takes_its_own_chunks(node, share):
    attributes = {"exec_vnode": SCATTER, "vnodes": "vm-m1,vm-m2,vm", "node": node}
    # The host name (every mom's here) is not a vnode of each of them.
    own = [pbs.mom_node(attributes, "vm")]
    assert pbs.host_share(SCATTER, own) == share
    facts, warnings = pbs.job_facts(pbs.JobInput({"id": "270.vm", **attributes}, own), NOW)
    assert (values(facts)["allocated_cpu"], values(facts)["max_rss_bytes"], warnings) == \
        (share["ncpus"], share["mem"], [])


@pytest.mark.parametrize(("exec_vnode", "own", "share"), [
    (SCATTER, "vm", (1, 3)), (SCATTER, "vm-m1", (2, 3)), (SCATTER, "vm-m2", (3, 3)),
    ("(vm:ncpus=2)+(vm:ncpus=1)", "vm", (1, 1)),  # chunks of one mom: one node
    # a multi-vnode mom's vnodes are host[N]: one node, wherever its chunks are
    ("(a[0]:ncpus=2+a[1]:ncpus=2)+(b:ncpus=1)+(a[2]:ncpus=1)", "b.example.org", (2, 2)),
    ("(A.example.org:ncpus=1)+(b:ncpus=1)+(a[1]:ncpus=1)", "b", (2, 2)),
])
def test_a_moms_place_among_the_jobs_nodes_is_their_order_in_exec_vnode(exec_vnode, own,
                                                                         share):
    assert pbs.node_share(exec_vnode, [own]) == share


def test_a_mom_exec_vnode_does_not_name_has_no_place():
    with pytest.raises(ValueError, match="none of this host's vnodes"):
        pbs.node_share(SCATTER, ["vm-m9"])


def test_without_the_adapters_node_the_hosts_node_name_is_its_own():
    assert pbs.mom_node({"vnodes": "vm-m1,vm"}, "vm-m1") == "vm-m1"
    assert pbs.host_share(SCATTER, [pbs.mom_node({}, "vm.example.org")]) == \
        {"ncpus": 1, "mem": 100 * MIB}


@pytest.mark.parametrize("text", ["", "vm:ncpus=1", "(vm:ncpus=1", "(vm:ncpus)", "(:ncpus=1)",
                                  "(vm:ncpus=1))", "x(vm:ncpus=1)"])
def test_an_exec_vnode_that_is_not_one_is_refused(text):
    with pytest.raises(ValueError, match="exec_vnode"):
        pbs.parse_exec_vnode(text)


def test_an_exec_vnode_without_this_host_is_an_error():
    with pytest.raises(ValueError, match="none of this host's vnodes"):
        pbs.host_share("(other:ncpus=1)", ["vm"])


@given(st.text(alphabet="()+:=abvm0123456789[]", max_size=40))
def test_the_exec_vnode_parser_raises_only_value_error(text):
    try:
        pbs.host_share(text, ["vm"])
    except ValueError:
        pass


def test_facts_from_a_hooks_attributes():
    attributes = {"id": "4.vm", "euser": "mjfuser1", "Resource_List.walltime": "00:10:00",
                  "Resource_List.ncpus": "2", "Resource_List.mem": "300mb",
                  "Resource_List.cput": "00:05:00",
                  "exec_vnode": "(vm:ncpus=2:mem=307200kb)"}
    facts, warnings = pbs.job_facts(pbs.JobInput(attributes, ["vm"]), NOW)
    assert warnings == []
    assert values(facts) == {"job_id": "4.vm", "jobstart_secs": NOW, "allocated_cpu": 2,
                             "wall_limit_secs": 600, "cpu_limit_secs": 300,
                             "max_rss_bytes": 300 * MIB}
    assert "exec_vnode" in facts["allocated_cpu"][1]


def test_the_cgroup_limit_wins_when_lower():
    attributes = {"id": "4.vm", "exec_vnode": "(vm:ncpus=2:mem=300mb)"}
    facts, _ = pbs.job_facts(pbs.JobInput(attributes, ["vm"], (100 * MIB, "the job's cgroup")), NOW)
    assert facts["max_rss_bytes"] == (100 * MIB, "the job's cgroup")


def test_a_multi_host_job_gets_this_hosts_share_not_the_totals():
    attributes = {"id": "5.vm", "Resource_List.ncpus": "6", "Resource_List.mem": "3gb",
                  "exec_vnode": "(vm:ncpus=2:mem=1gb)+(other:ncpus=4:mem=2gb)"}
    facts, _ = pbs.job_facts(pbs.JobInput(attributes, ["vm"]), NOW)
    assert values(facts)["allocated_cpu"] == 2
    assert values(facts)["max_rss_bytes"] == 1024 * MIB


def test_bad_attributes_are_warnings_and_the_rest_is_kept():
    attributes = {"id": "4.vm", "exec_vnode": "garbage", "Resource_List.walltime": "soon",
                  "Resource_List.ncpus": "2", "Resource_List.mem": "lots"}
    facts, warnings = pbs.job_facts(pbs.JobInput(attributes, ["vm"]), NOW)
    # An unreadable exec_vnode: the job's totals may be several hosts', so none is taken.
    assert values(facts) == {"job_id": "4.vm", "jobstart_secs": NOW}
    assert len(warnings) == 3
    assert any("exec_vnode" in warning for warning in warnings)
    assert any("allocated_cpu not written" in warning for warning in warnings)
    assert any("wall_limit_secs" in warning for warning in warnings)
    facts, warnings = pbs.job_facts(
        pbs.JobInput({**attributes, "exec_vnode": "(vm:ncpus=2)"}, ["vm"]), NOW)
    assert "max_rss_bytes" not in facts and values(facts)["allocated_cpu"] == 2


def test_a_bad_job_id_is_fatal():
    with pytest.raises(SiteInputError):
        pbs.job_facts(pbs.JobInput({"id": "../x"}, ["vm"]), NOW)


def test_torque_prologue_argv():
    argv = ["123.torque.example.org", "alice", "users", "myjob",
            "neednodes=1:ppn=4,nodes=1:ppn=4,walltime=02:00:00,mem=4gb", "batch", "atlas"]
    attributes = pbs.prologue_attributes(argv)
    assert attributes["queue"] == "batch" and attributes["Account_Name"] == "atlas"
    facts, warnings = pbs.job_facts(pbs.JobInput(attributes, ["wn1"]), NOW)
    assert warnings == []
    assert values(facts) == {"job_id": "123.torque.example.org", "jobstart_secs": NOW,
                             "allocated_cpu": 4, "wall_limit_secs": 7200,
                             "max_rss_bytes": 4096 * MIB}


def test_torque_nodes_naming_hosts_take_this_hosts_ppn():
    attributes = pbs.prologue_attributes(
        ["9.srv", "u", "g", "j", "nodes=wn1:ppn=2+wn2:ppn=8,walltime=1:00:00,mem=8gb"])
    facts, _ = pbs.job_facts(pbs.JobInput(attributes, ["wn2.example.org"]), NOW)
    assert values(facts)["allocated_cpu"] == 8
    assert "max_rss_bytes" not in facts  # mem is the whole job's, on two hosts


def test_openpbs_prologue_argv_has_only_id_user_group():
    assert pbs.prologue_attributes(["4.vm", "mjfuser1", "mjfuser1"]) == {
        "id": "4.vm", "euser": "mjfuser1", "egroup": "mjfuser1"}
    with pytest.raises(SiteInputError, match="at least"):
        pbs.prologue_attributes(["4.vm"])


def test_epilogue_argv_gives_what_the_job_used():
    argv = ["4.vm", "mjfuser1", "mjfuser1", "job", "1234",
            "ncpus=2,mem=300mb,walltime=00:10:00",
            "cpupercent=0,cput=00:00:03,mem=20480kb,ncpus=2,vmem=0kb,walltime=00:00:05",
            "workq", "", "0"]
    attributes = pbs.epilogue_attributes(argv)
    delivered, warnings = pbs.ending_facts(attributes, NOW)
    assert warnings == []
    assert values(delivered) == {"end_time": NOW, "wall_secs": 5, "cpu_secs": 3,
                                 "peak_memory_bytes": 20 * MIB}
    assert attributes["queue"] == "workq"


def test_a_sister_moms_zero_walltime_is_not_measured():
    """A sister mom keeps no wall time of its own: its execjob_end says
    ``walltime=00:00:00`` after seconds of work, which is no measurement."""
    attributes = {"resources_used.walltime": "00:00:00", "resources_used.cput": "00:00:08",
                  "resources_used.mem": "0kb"}
    delivered, warnings = pbs.ending_facts(attributes, NOW)
    assert (values(delivered), warnings) == ({"end_time": NOW, "cpu_secs": 8}, [])


def test_qstat_f_with_continued_lines():
    text = ("Job Id: 4.vm\n    Job_Name = STDIN\n    Resource_List.walltime = 00:10:00\n"
            "    exec_vnode = (vm:ncpus=1:mem=102400kb)+(vm:ncpu\n\ts=1:mem=102400kb)\n"
            "    euser = mjfuser1\n")
    attributes = pbs.parse_qstat_f(text)
    assert attributes["id"] == "4.vm"
    assert attributes["exec_vnode"] == "(vm:ncpus=1:mem=102400kb)+(vm:ncpus=1:mem=102400kb)"
    assert attributes["euser"] == "mjfuser1"


def test_cgroup_paths_of_pbs_cgroups():
    assert pbs.cgroup_paths("/pbs_jobs.service/jobid", "4.vm") == {
        "memory": "/pbs_jobs.service/jobid/4.vm", "cpuset": "/pbs_jobs.service/jobid/4.vm",
        "": "/pbs_jobs.service/jobid/4.vm"}
