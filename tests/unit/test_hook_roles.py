"""The frame every hook command with roles shares (hook.run_roles), and the one way a role
asks its batch system (HookContext.query)."""

import pytest

from mjf_hooks.config import Config
from mjf_hooks.hooks.frame import HookContext, run_roles
from mjf_hooks.log import Log


@pytest.fixture
def conf(tmp_path):
    path = tmp_path / "mjf.conf"
    path.write_text(f"[mjf]\nbase_dir = {tmp_path}/base\nlog = stderr\n")
    return str(path)


def test_a_role_gets_its_arguments_and_names_the_job(conf, capsys, monkeypatch):
    monkeypatch.setenv("JOB", "42")
    seen = []

    def starter(context, args):
        seen.append((args, context.log.context))
        return 7

    roles = {"prolog": lambda context, args: 0, "starter": starter}
    assert run_roles("mjf-x", ["--config", conf, "starter", "a", "b"], roles, "usage: x",
                     with_arguments=("starter",), job=lambda environ: environ["JOB"],
                     positional_stop=True) == 7
    assert seen == [(["a", "b"], "mjf-x starter job 42")]


@pytest.mark.parametrize(("argv", "line"), [
    (["epilog"], "unknown role 'epilog': give prolog, taskprolog or starter"),
    ([], "unknown role '': give prolog, taskprolog or starter"),
    (["prolog", "x"], "prolog takes no arguments, got ['x']"),
])
def test_a_wrong_role_is_one_line_and_a_hook_exits_0(conf, capsys, argv, line):
    roles = dict.fromkeys(("prolog", "taskprolog", "starter"), lambda context, args: 1)
    assert run_roles("mjf-x", ["--config", conf, *argv], roles, "usage: x",
                     positional_stop=True) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and line in err


def _context(options: dict[str, str]) -> HookContext:
    config = Config()
    config.command_timeout_secs = 5
    config.backend["pbs"] = options
    return HookContext(config, {}, {}, [], Log("test", ("stderr",)))


def test_a_query_switched_off_asks_nothing(capsys):
    def command(options):
        raise AssertionError("asked")

    assert _context({"query_qstat": "no"}).query("pbs", "query_qstat", command, "x",
                                                 lambda output, argv: output) is None
    assert capsys.readouterr().err == ""


def test_a_query_parses_what_the_command_prints():
    found = _context({}).query("pbs", "query_qstat",
                               lambda options: (["/bin/echo", "a", "b"], {}), "x",
                               lambda output, argv: (output, argv[0]))
    assert found == ("a b\n", "/bin/echo")


@pytest.mark.parametrize(("command", "line"), [
    (lambda options: (["/bin/false"], {}), "nothing written"),
    (lambda options: (["/no/such/command"], {}), "nothing written"),
    (lambda options: (["/bin/echo", "garbled"], {}), "/bin/echo printed no record"),
])
def test_a_query_that_fails_is_one_warning(capsys, command, line):
    def parse(output, argv):
        raise ValueError(f"{argv[0]} printed no record")

    assert _context({}).query("pbs", None, command, "nothing written", parse) is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "warning" in err and line in err
