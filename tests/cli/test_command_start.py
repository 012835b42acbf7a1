"""How an installed command starts: `python3 -IS`, as the packages install it.

-S skips site's start-up work; each command's first block adds this interpreter's
site-packages itself (where pip puts a package, else site's own rule), and takes all of
site where the package is found only through a .pth file (an editable install).
docs/design.md, "Python itself".
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import syslog
from pathlib import Path

import pytest

import mjf_hooks
from mjf_hooks import log
from tests.conftest import CHECKOUT_ROOT, installed_command

PYTHON_COMMANDS = sorted(path.name for path in (CHECKOUT_ROOT / "bin").iterdir()
                         if path.read_text().startswith("#!/usr/bin/env python3"))


def start_block(text: str) -> str:
    """What a command does before importing its entry point."""
    return text.split("\nfrom mjf_hooks", 1)[0]


def test_every_command_starts_the_same_way():
    blocks = {name: start_block((CHECKOUT_ROOT / "bin" / name).read_text())
              for name in PYTHON_COMMANDS}
    assert len(blocks) >= 9 and len(set(blocks.values())) == 1, blocks
    assert "sys.flags.no_site" in blocks["mjf-slurm"]


def site_ran(python: str, command: str) -> bool:
    """Whether ``command``'s start block, run by ``python -IS``, ran site's whole start-up
    (it alone gives builtins exit()); the package must be importable after it."""
    probe = (start_block(Path(installed_command(command)).read_text())
             + "\nimport builtins\nran = hasattr(builtins, 'exit')\nimport mjf_hooks\nprint(ran)")
    return subprocess.run([python, "-IS", "-c", probe], capture_output=True, text=True,
                          check=True, timeout=60).stdout.split() == ["True"]


@pytest.mark.parametrize("command", PYTHON_COMMANDS)
def test_started_isolated_without_site_a_command_finds_its_install(command):
    result = subprocess.run([sys.executable, "-IS", installed_command(command), "--help"],
                            capture_output=True, text=True, timeout=60)
    # A job runner takes --help for its job; every command runs our code.
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "usage" in result.stdout.lower() or "mjf" in result.stderr, result.stderr[-2000:]
    # Not site's whole start-up (no sitecustomize, no .pth file's code): the package found
    # where site itself would look.
    assert not site_ran(sys.executable, command)


def test_a_command_installed_by_pip_finds_its_install_without_importing_site():
    """Where pip put the package (a virtualenv's site-packages, as in the tests), the start
    block finds it without site's module, a sixtieth of a bare start; elsewhere (Debian's
    dist-packages: the packaging tests start the .deb's commands) it asks site's rule."""
    probe = (start_block(Path(installed_command("mjf-slurm")).read_text())
             + "\nimport mjf_hooks\nprint('site' in sys.modules, mjf_hooks.__file__)")
    result = subprocess.run([sys.executable, "-IS", "-c", probe], capture_output=True,
                            text=True, check=True, timeout=60)
    imported_site, found = result.stdout.split()
    site_packages = sysconfig.get_path("purelib")
    assert imported_site == "False" and found.startswith(f"{site_packages}/"), result.stdout


def test_an_install_only_a_pth_file_leads_to_still_starts(tmp_path):
    """An editable install: the package is found through a .pth file alone, which only
    site's whole start-up reads; the command then runs it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = str(venv / "bin" / "python")
    site_packages = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True).stdout.strip()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "mjf_hooks").symlink_to(Path(mjf_hooks.__file__).parent)
    (Path(site_packages) / "mjf-hooks-test.pth").write_text(f"{elsewhere}\n")
    result = subprocess.run([python, "-IS", installed_command("mjf-slurm"), "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "usage: mjf-slurm" in result.stdout, result.stderr
    assert site_ran(python, "mjf-slurm")


def test_an_interactive_command_takes_all_of_site_for_click_and_collects_as_python_does():
    """click (and the ClassAd library) may be installed where only site finds them; a
    command a person waits for may run long, with Python's own garbage collection."""
    probe = ("import sys, builtins, gc\nimport mjf_hooks\nsys.argv = ['mjf', '--help']\n"
             "from mjf_hooks.cli.mjf import main\ntry:\n    main()\nexcept SystemExit:\n"
             "    pass\nprint(hasattr(builtins, 'exit'), 'click' in sys.modules, gc.isenabled())")
    site_packages = str(Path(mjf_hooks.__file__).parent.parent)
    result = subprocess.run([sys.executable, "-IS", "-c",
                             f"import sys\nsys.path.append({site_packages!r})\n{probe}"],
                            capture_output=True, text=True, timeout=60)
    assert "Usage: mjf" in result.stdout, result.stderr[-2000:]
    assert result.stdout.split()[-3:] == ["True", "True", "True"]


def test_log_priorities_are_syslogs_own():
    """log.py names them without importing syslog, which most hook runs never need."""
    assert log._PRIORITIES == {"error": syslog.LOG_ERR, "warning": syslog.LOG_WARNING,
                               "info": syslog.LOG_INFO, "debug": syslog.LOG_DEBUG}


def probe(python: str, command: str, after: str) -> list[str]:
    """What ``after`` prints once ``command``'s start block ran, under ``python -IS``."""
    code = start_block(Path(installed_command(command)).read_text()) + "\n" + after
    return subprocess.run([python, "-IS", "-c", code], capture_output=True, text=True,
                          check=True, timeout=60).stdout.split()


def test_a_command_loads_its_own_modules_without_searching_and_skips_collections():
    after = ("import gc, atexit\nimport mjf_hooks.hooks.slurm as slurm\n"
             "print(type(slurm.__spec__.loader).__name__, gc.isenabled(),"
             " slurm.__cached__ == slurm.__spec__.cached, slurm.__file__.endswith('slurm.py'))")
    assert probe(sys.executable, "mjf-slurm", after) == ["_OwnModules", "False", "True",
                                                          "True"]


def started_as_packaged(code: str) -> subprocess.CompletedProcess:
    """``code`` run by this interpreter started -IS, as the packages start a command, with
    this package's install on its path."""
    site_packages = str(Path(mjf_hooks.__file__).parent.parent)
    return subprocess.run([sys.executable, "-IS", "-c",
                           f"import sys\nsys.path.append({site_packages!r})\n{code}"],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("body", "status", "out", "err"), [
    ("print('done', end='')", 0, "done", ""),  # buffered output is written
    ("return 3", 3, "", ""),
    ("raise SystemExit(4)", 4, "", ""),
    ("raise SystemExit('why')", 1, "", "why\n"),  # Python's own end: it prints it
    ("raise KeyError('bug')", 1, "", "KeyError"),
    ("import threading; threading.Thread(target=lambda: __import__('time').sleep(0.2))"
     ".start(); print('waited', end='')", 0, "waited", ""),
])
def test_a_command_started_as_packaged_ends_as_sys_exit_would(body, status, out, err):
    """run_command ends a -S command at once, after its atexit functions and with its
    output flushed; anything unusual ends the normal way."""
    result = started_as_packaged("import sys, atexit\nimport mjf_hooks\n"
                                 "atexit.register(lambda: sys.stderr.write(''))\n"
                                 f"def main():\n    {body}\n"
                                 "mjf_hooks.run_command(main)\n")
    assert result.returncode == status and result.stdout == out, result
    assert err in result.stderr if err else result.stderr == ""


def test_atexit_functions_run_before_a_command_ends_at_once(tmp_path):
    marker = tmp_path / "ran"
    started_as_packaged(f"import atexit\nimport mjf_hooks\n"
                        f"atexit.register(lambda: open({str(marker)!r}, 'w').close())\n"
                        "mjf_hooks.run_command(lambda: 0)\n").check_returncode()
    assert marker.exists()


# The object's end is seen only where the collection at exit is not frozen away either:
# the device alone, and (the control, showing the probe would see a teardown) the
# interactive defaults, which undo both.
@pytest.mark.parametrize(("undo", "said"), [
    ("import atexit, gc; atexit.unregister(gc.freeze)", ""),
    ("mjf_hooks.interactive_defaults()", "torn down"),
])
def test_a_command_started_as_packaged_skips_the_interpreters_teardown(undo, said):
    """What run_command saves (docs/performance.md): a -S command ends without the
    interpreter freeing every module's objects one by one, so an object that says when
    it is freed never says so."""
    # Written straight to the descriptor: sys.stderr may be gone by then.
    result = started_as_packaged("import os, sys\nimport mjf_hooks\n"
                                 "class Noisy:\n    def __del__(self, write=os.write):\n"
                                 "        write(2, b'torn down')\n"
                                 f"kept = Noisy()\n{undo}\n"
                                 "mjf_hooks.run_command(lambda: 0)\n")
    assert result.returncode == 0 and result.stderr == said, result
