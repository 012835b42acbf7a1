"""A newcomer changing ``mjf_hooks/[P/]X.py`` finds its tests by the module's name: every
module has a test module the rule below finds, or is listed in ``ELSEWHERE`` with where
its tests are and why they are there (docs/testing.md, "Where a module's tests are")."""

from __future__ import annotations

from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]

# Modules whose tests are not where the rule looks, with where they are and why.
ELSEWHERE = {
    "mjf_hooks/http_deadline.py": ("tests/unit/test_reader_http.py",
                                   "the reader's requests, against servers that trickle"),
    "mjf_hooks/__init__.py": ("tests/unit/test_own_modules.py",
                              "the package's own module finder is all it holds"),
    "mjf_hooks/check.py": ("tests/unit/test_reader_and_check.py",
                           "the validator reads what the reader reads, tested together"),
    "mjf_hooks/classad_files.py": ("tests/unit/test_htcondor.py",
                                   "the ClassAd files HTCondor's starter writes"),
    "mjf_hooks/config_report.py": ("tests/cli/test_mjf_config.py",
                                   "`mjf config check` and `show`, as the command"),
    "mjf_hooks/drainplan.py": ("tests/unit/test_node_status.py",
                               "a plan is made of the job reports node_status gives"),
    "mjf_hooks/errors.py": ("tests/unit/test_hook_roles.py", "error types; used everywhere"),
    "mjf_hooks/hook_failures.py": ("tests/cli/test_mjf_metrics.py",
                                   "the hooks' failure counters, read as metrics"),
    "mjf_hooks/hooks/__init__.py": ("tests/unit/test_hook_roles.py", "a docstring"),
    "mjf_hooks/hooks/frame.py": ("tests/unit/test_hook_roles.py",
                                 "the frame every hook runs in, through its roles"),
    "mjf_hooks/hooks/standalone.py": ("tests/cli/test_mjf_run.py", "`mjf run`"),
    "mjf_hooks/hooks/starter.py": ("tests/cli/test_mjf_lsf.py",
                                   "the pre-start and starter of LSF and Grid Engine"),
    "mjf_hooks/json_text.py": ("tests/unit/records/test_job.py",
                               "JSON as json.dumps writes it, for a record"),
    "mjf_hooks/log.py": ("tests/unit/test_hook_roles.py", "every hook's log lines"),
    "mjf_hooks/options.py": ("tests/unit/test_hook_roles.py",
                             "the click-free option parser of every hook"),
    "mjf_hooks/records/report.py": ("tests/cli/test_mjf_records.py",
                                    "`mjf records` as a table, totals or JSON"),
    "mjf_hooks/signals.py": ("tests/cli/test_mjf_run.py",
                             "signal numbers `mjf run` forwards"),
    "mjf_hooks/status_format.py": ("tests/cli/test_mjf_status.py",
                                   "`mjf status` and `mjf drain --plan` as printed"),
    "mjf_hooks/store_locations.py": ("tests/unit/test_store.py", "where stores live"),
    "mjf_hooks/user_bounds.py": ("tests/cli/test_mjf_status.py",
                                 "what a job's user wrote, bounded, as status shows it"),
    "mjf_hooks/cli/__init__.py": ("tests/cli/test_mjf_commands.py", "a docstring"),
    "mjf_hooks/cli/config_option.py": ("tests/cli/test_mjf_config.py",
                                       "the --config every click subcommand takes"),
    "mjf_hooks/cli/hook_commands.py": ("tests/cli/test_mjf_run.py", "mjf run and machine"),
    "mjf_hooks/cli/interactive.py": ("tests/cli/test_mjf_commands.py", "the click group"),
    "mjf_hooks/cli/locations.py": ("tests/cli/test_mjf_describe.py",
                                   "what a location given holds"),
    "mjf_hooks/cli/mjf.py": ("tests/cli/test_command_start.py", "the dispatch"),
    "mjf_hooks/cli/node_commands.py": ("tests/cli/test_mjf_sync.py", "mjf sync and publish"),
    "mjf_hooks/cli/mjf_status_set.py": ("tests/cli/test_mjf_status.py", "mjf status set"),
    "mjf_hooks/cli/mjf_show.py": ("tests/cli/test_mjf_commands.py",
                                  "mjf show, get, remaining and check"),
}


def found_tests(module: Path) -> list[str]:
    """Where the rule looks for ``mjf_hooks/[P/]X.py``'s tests: ``tests/unit/[P/]test_X.py``
    or ``test_X_*.py`` (more than one), ``tests/unit/test_P_X.py``, ``tests/unit/test_P.py``
    (a package's small modules together), ``tests/cli/test_mjf_X.py`` (a command's module,
    through the installed command); a package's ``__init__.py`` is ``P`` itself."""
    parts = module.relative_to(CHECKOUT / "mjf_hooks").with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts:
        return []
    name, package = parts[-1], parts[:-1]
    unit = CHECKOUT / "tests" / "unit"
    patterns = [f"{'/'.join(package)}/test_{name}.py" if package else f"test_{name}.py",
                f"{'/'.join(package)}/test_{name}_*.py" if package else f"test_{name}_*.py",
                f"test_{name}.py", f"test_{'_'.join(parts)}.py"]
    if package:
        patterns.append(f"test_{package[-1]}.py")
    found = [str(path.relative_to(CHECKOUT)) for pattern in patterns
             for path in unit.glob(pattern)]
    command = CHECKOUT / "tests" / "cli" / f"test_mjf_{name.removeprefix('mjf_')}.py"
    return found + ([str(command.relative_to(CHECKOUT))] if command.exists() else [])


def test_every_module_has_its_test_module_or_says_where_its_tests_are():
    modules = sorted(path for path in (CHECKOUT / "mjf_hooks").rglob("*.py")
                     if "__pycache__" not in path.parts)
    unfound = [str(path.relative_to(CHECKOUT)) for path in modules
               if not found_tests(path)
               and str(path.relative_to(CHECKOUT)) not in ELSEWHERE]
    assert unfound == [], "give each a test module the rule finds, or list it in ELSEWHERE"


def test_what_is_listed_elsewhere_is_so():
    """Each listed module exists, has no test module the rule finds (else the entry is
    stale), and its tests are where the entry says."""
    for module, (tests, why) in ELSEWHERE.items():
        assert (CHECKOUT / module).is_file(), module
        assert not found_tests(CHECKOUT / module), f"{module}: found by the rule now"
        assert (CHECKOUT / tests).is_file(), f"{module}: {tests}"
        assert why
