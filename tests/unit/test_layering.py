"""The layers: each module imports only from its own layer or those below it (imports
inside functions too), no import circles, the library never imports its entry points
(hooks/, cli/), the hooks never the `mjf` command, and the entry points import each
other in one direction only."""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

PACKAGE = Path(__file__).parent.parent.parent / "mjf_hooks"


def imported_modules(path: Path) -> set[str]:
    """Absolute names of the mjf_hooks modules a file imports (anywhere in it)."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] \
                if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith("mjf_hooks")}


# Bottom to top (docs/design.md, "Layers"): a module of one imports only from its own
# layer and those below. A new module is placed here, or this test fails.
LAYERS = (
    ("foundations", ("mjf_hooks", "errors", "log", "signals", "terminal", "json_text", "spec",
                     "options", "timeparse", "jobstatus", "classad_files")),
    ("reading the host, safely; the config",
     ("safefs", "probe", "probe.*", "config", "external_command", "http_deadline")),
    ("the layout and the facts: pure functions of what was read",
     ("store", "store_locations", "hook_failures", "batch", "batch.contract", "batch.slurm",
      "batch.htcondor", "batch.lsf", "batch.gridengine", "batch.pbs", "features", "exports",
      "user_bounds", "records", "records.job", "records.store", "records.report", "reader",
      "check",
      "config_report", "containers", "describe", "match", "match.*", "submit", "submit.*")),
    ("the batch systems this node runs, asked", ("batch.here",)),
    ("the steps", ("lifecycle", "drain", "drainplan", "records.filing", "records.reading",
                   "node_status", "status_format", "publish", "publish.*")),
    ("the pass and the reports built on the steps", ("metrics", "sync")),
    ("the entry points", ("hooks", "hooks.*", "cli", "cli.*")),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each module of mjf_hooks -> the modules of mjf_hooks it imports anywhere (inside
    functions too): ``from package import name`` imports package.name where that is a
    module, else the package."""
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name in paths)
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - node.level + 1] \
                    if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                for alias in node.names:
                    if f"{module}.{alias.name}" in paths:
                        found.add(f"{module}.{alias.name}")
                    elif module in paths:
                        found.add(module)
        graph[name] = found - {name}
    return graph


def layer_of(module: str) -> int | None:
    short = module if module == "mjf_hooks" else module.removeprefix("mjf_hooks.")
    return next((index for index, (_, patterns) in enumerate(LAYERS)
                 if any(fnmatch.fnmatchcase(short, pattern) for pattern in patterns)), None)


def test_every_module_imports_only_from_its_layer_and_below():
    graph = import_graph()
    assert [module for module in graph if layer_of(module) is None] == [], \
        "place each new module in LAYERS (and docs/design.md)"
    upward = sorted(f"{module} ({LAYERS[layer_of(module)][0]}) imports {imported} "
                    f"({LAYERS[layer_of(imported)][0]})"
                    for module, imports in graph.items() for imported in imports
                    if layer_of(imported) > layer_of(module))
    assert upward == []


def test_there_is_no_import_circle():
    """Not even through an import inside a function: a circle means two modules that
    cannot be understood, tested or loaded one without the other."""
    graph = import_graph()
    circles = []
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for imported in sorted(graph[module]):
            if state.get(imported) == "open":
                circles.append(" -> ".join([*path[path.index(imported):], imported]))
            elif imported not in state:
                visit(imported, [*path, imported])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert circles == []


def test_the_library_imports_no_entry_point():
    """Neither the hooks (hooks/) nor the `mjf` command (cli/) are imported by the
    library they stand on; the hooks never import the `mjf` command."""
    def offenders(outside: tuple[str, ...], prefixes: tuple[str, ...]) -> dict:
        found = {str(path.relative_to(PACKAGE)): sorted(
                     name for name in imported_modules(path) if name.startswith(prefixes))
                 for path in PACKAGE.rglob("*.py")
                 if not set(path.relative_to(PACKAGE).parts) & set(outside)}
        return {path: names for path, names in found.items() if names}

    assert offenders(("cli", "hooks"), ("mjf_hooks.cli", "mjf_hooks.hooks")) == {}
    assert offenders(("cli",), ("mjf_hooks.cli",)) == {}


def test_the_entry_points_import_in_one_direction():
    for click_free in ("hook_commands", "node_commands"):
        hooks = imported_modules(PACKAGE / f"cli/{click_free}.py")
        assert "mjf_hooks.cli.interactive" not in hooks and "mjf_hooks.cli.mjf" not in hooks
    assert "mjf_hooks.cli.mjf" not in imported_modules(PACKAGE / "cli/interactive.py")


def test_the_pilot_library_stands_alone():
    """A pilot may carry mjf_hooks/jobstatus.py by itself: it imports nothing of the
    suite, and only the standard library."""
    path = PACKAGE / "jobstatus.py"
    assert imported_modules(path) == set()
    tree = ast.parse(path.read_text())
    names = {alias.name.split(".")[0] for node in ast.walk(tree)
             if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    # What it may use, all of the standard library (sys.stdlib_module_names is 3.10+).
    assert names <= {"__future__", "_thread", "errno", "fcntl", "os", "stat", "threading",
                     "time", "urllib"}


def test_a_pilot_status_update_loads_no_click():
    """`mjf status set` runs at every payload start and end: no click on its path."""
    import subprocess
    import sys

    code = ("import sys; from mjf_hooks.cli import mjf; "
            "sys.argv = ['mjf', 'status', 'set', '--help']; "
            "import contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()): mjf.main(sys.argv[1:])\n"
            "print('click' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"
