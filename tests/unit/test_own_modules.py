"""The finder a command started -IS uses for mjf_hooks' own modules: it takes exactly the
compiled files Python's own import would take, and leaves everything else to Python."""

from __future__ import annotations

import py_compile
import subprocess
import sys

import pytest

from mjf_hooks import _OwnModules

# What Python's import writes, and py_compile too unless SOURCE_DATE_EPOCH is set (as in
# a package build, which runs these tests): a hash-based file instead.
IMPORTS_OWN = py_compile.PycInvalidationMode.TIMESTAMP


@pytest.fixture
def tree(tmp_path):
    package = tmp_path / "mjf_hooks"
    (package / "sub").mkdir(parents=True)
    for path, text in ((package / "__init__.py", ""), (package / "leaf.py", "X = 1\n"),
                       (package / "sub" / "__init__.py", "Y = 2\n")):
        path.write_text(text)
        py_compile.compile(str(path), doraise=True, invalidation_mode=IMPORTS_OWN)
    return tmp_path


def test_a_module_and_a_package_are_found_beside_their_source(tree):
    finder = _OwnModules(str(tree))
    leaf = finder.find_spec("mjf_hooks.leaf")
    assert leaf.origin == f"{tree}/mjf_hooks/leaf.py" and leaf.submodule_search_locations is None
    assert leaf.cached == f"{tree}/mjf_hooks/__pycache__/leaf.{sys.implementation.cache_tag}.pyc"
    sub = finder.find_spec("mjf_hooks.sub")
    assert sub.submodule_search_locations == [f"{tree}/mjf_hooks/sub"]


def test_it_runs_the_compiled_code(tree):
    finder = _OwnModules(str(tree))
    spec = finder.find_spec("mjf_hooks.leaf")
    module = type(sys)("mjf_hooks.leaf")
    module.__spec__ = spec
    finder.exec_module(module)
    assert module.X == 1 and spec.loader_state is None


@pytest.mark.parametrize("change", ["source edited", "no compiled file", "hash-checked",
                                    "another name", "no such module"])
def test_everything_else_is_left_to_python(tree, change):
    name = "mjf_hooks.leaf"
    source = tree / "mjf_hooks" / "leaf.py"
    cached = tree / "mjf_hooks" / "__pycache__" / f"leaf.{sys.implementation.cache_tag}.pyc"
    if change == "source edited":
        source.write_text("X = 22\n")  # another size (and maybe the same second)
    elif change == "no compiled file":
        cached.unlink()
    elif change == "hash-checked":
        py_compile.compile(str(source), doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    elif change == "another name":
        name = "mjf_hooks_other.leaf"
    else:
        name = "mjf_hooks.missing"
    assert _OwnModules(str(tree)).find_spec(name) is None


@pytest.mark.parametrize("level", [1, 2])
def test_an_optimized_interpreter_takes_the_compiled_file_it_reads(tree, level):
    """PBS starts its hooks -OO: Python reads .opt-N files there, and so does the finder."""
    for path in (tree / "mjf_hooks").rglob("*.py"):
        py_compile.compile(str(path), doraise=True, optimize=level,
                           invalidation_mode=IMPORTS_OWN)
    code = ("import sys\nfrom mjf_hooks import _OwnModules\n"
            f"spec = _OwnModules({str(tree)!r}).find_spec('mjf_hooks.leaf')\n"
            "print(spec.cached)")
    found = subprocess.run([sys.executable, f"-{'O' * level}", "-c", code], check=True,
                           capture_output=True, text=True, timeout=60, cwd="/").stdout.strip()
    tag = sys.implementation.cache_tag
    assert found == f"{tree}/mjf_hooks/__pycache__/leaf.{tag}.opt-{level}.pyc"
