"""External commands: a bounded output is an error, never cut; HTCondor is asked about
this machine only (a pool lists tens of thousands of slots)."""

import os

import pytest

from mjf_hooks.batch import here, htcondor
from mjf_hooks.config import Config
from mjf_hooks.external_command import MAX_OUTPUT_BYTES, CommandError, run_command
from mjf_hooks.log import Log
from tests.conftest import write_script

NODE = os.uname().nodename


def test_output_over_the_bound_is_an_error_naming_the_command():
    with pytest.raises(CommandError, match=rf"/bin/sh -c .*printed more than {MAX_OUTPUT_BYTES}"):
        run_command(["/bin/sh", "-c", f"head -c {MAX_OUTPUT_BYTES + 1} /dev/zero"], 10)
    exact = run_command(["/bin/sh", "-c", f"head -c {MAX_OUTPUT_BYTES} /dev/zero"], 10)
    assert len(exact) == MAX_OUTPUT_BYTES


def test_an_endless_printer_is_stopped_at_the_bound_not_at_the_timeout():
    with pytest.raises(CommandError, match="printed more than"):
        run_command(["/usr/bin/yes"], 30)


# A pool's collector: without a constraint every slot of the pool, this machine's last;
# with one, what matches (as condor_status would evaluate it for these names).
FAKE_CONDOR_STATUS = r'''echo "$@" > "$(dirname "$0")/argv"
case " $* " in
    *" -constraint "*) ;;
    *) i=0; while [ $i -lt 40000 ]; do
           echo "wn$i.other.example.org,false,undefined"; i=$((i + 1)); done ;;
esac
echo "MACHINE,true,1795400000"
'''


@pytest.fixture
def condor_status(tmp_path, monkeypatch):
    path = write_script(tmp_path / "condor_status", FAKE_CONDOR_STATUS.replace("MACHINE", NODE))
    monkeypatch.setattr(htcondor, "CONDOR_STATUS", str(path))
    return path


def test_htcondor_is_asked_about_this_machine_only(condor_status):
    assert here.drain_time(htcondor, Config(), Log("test", ())) == 1795400000
    argv = (condor_status.parent / "argv").read_text().split()
    assert "-constraint" in argv and f'"{NODE.split(".")[0]}"' in argv


@pytest.mark.parametrize(("nodename", "machines", "other"), [
    ("wn01", ['"wn01"', '"wn01.example.org"'], '"wn011.example.org"'),
    ("wn01.example.org", ['"wn01"', '"wn01.example.org"'], '"wn0"'),
])
def test_the_constraint_matches_short_and_full_names(nodename, machines, other):
    constraint = htcondor.machine_constraint(nodename)
    for machine in machines:
        assert f"Machine == {machine}" in constraint or \
            'substr(Machine, 0, 5) == "wn01."' in constraint
    assert other not in constraint


def test_a_name_that_cannot_be_quoted_matches_nothing():
    assert htcondor.machine_constraint('a"b') == "false"
