"""The layers: the library never imports its entry points (hooks/, cli/), the hooks
never the `mjf` command, and the entry points import each other in one direction only."""

import ast
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
    hooks = imported_modules(PACKAGE / "cli/hook_commands.py")
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
