"""Reports how many bad-input cases ran, per entry point (pytest's terminal summary)."""

from __future__ import annotations

_KINDS = {"test_case": "in-process", "test_plan_case": "in-process",
          "test_publish_case": "in-process",
          "test_installed_command": "installed command",
          "test_sh_taskprolog": "installed command"}


def pytest_collection_modifyitems(config, items):
    cases = {}
    for item in items:
        case = getattr(item, "callspec", None) and item.callspec.params.get("case")
        if case is not None and item.originalname in _KINDS:
            cases[item.nodeid] = (case.entry, _KINDS[item.originalname])
    config._mjf_corpus = cases


def pytest_terminal_summary(terminalreporter, config):
    cases = getattr(config, "_mjf_corpus", {})
    ran: dict[tuple[str, str], int] = {}
    outcomes: dict[str, int] = {}
    for outcome in ("passed", "failed", "xfailed", "xpassed"):
        for report in terminalreporter.stats.get(outcome, []):
            if report.nodeid in cases and report.when in ("call", "setup"):
                ran[cases[report.nodeid]] = ran.get(cases[report.nodeid], 0) + 1
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
    if not ran:
        return
    write = terminalreporter.write_line
    terminalreporter.section("bad-input corpus")
    for entry in sorted({entry for entry, _ in ran}):
        counts = [f"{ran[(entry, kind)]} {kind}" for kind in sorted(set(_KINDS.values()))
                  if (entry, kind) in ran]
        write(f"{entry:32} {', '.join(counts)}")
    summary = ", ".join(f"{count} {outcome}" for outcome, count in sorted(outcomes.items()))
    write(f"bad-input corpus: {sum(ran.values())} cases ran ({summary})")
