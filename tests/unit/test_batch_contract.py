"""Every batch module in batch.NAMES provides the declared interface (batch/contract.py)."""

import configparser
import inspect
from pathlib import Path

import pytest

from mjf_hooks import batch, publish
from mjf_hooks.batch import contract
from mjf_hooks.config import BACKEND_OPTIONS


def _parameters(function) -> list[str]:
    names = list(inspect.signature(function).parameters)
    return names[1:] if names[:1] == ["self"] else names


def _declared(protocol, name: str) -> list[str]:
    return _parameters(getattr(protocol, name))


@pytest.mark.parametrize("name", batch.NAMES)
def test_each_batch_module_provides_the_declared_names_and_signatures(name):
    module = batch.backend(name)
    assert name == module.NAME
    assert isinstance(module.TITLE, str) and module.TITLE
    assert isinstance(module.JobInput, type) and "__slots__" in vars(module.JobInput)
    for member in contract.REQUIRED:
        assert hasattr(module, member), f"batch/{name}.py has no {member}"
        if inspect.isfunction(getattr(contract.BatchModule, member, None)):
            assert _parameters(getattr(module, member)) == \
                _declared(contract.BatchModule, member), f"batch/{name}.py: {member}"
    for member, protocol in contract.OPTIONAL.items():
        if hasattr(module, member):
            assert _parameters(getattr(module, member)) == _declared(protocol, member), \
                f"batch/{name}.py: {member}"
    for member, protocol in contract.OPTIONAL_TEXTS.items():
        assert member in protocol.__annotations__
        assert isinstance(getattr(module, member, ""), str), f"batch/{name}.py: {member}"


@pytest.mark.parametrize("name", publish.PUBLISHERS)
def test_each_publisher_is_a_batch_system_with_the_declared_functions(name):
    assert name in batch.NAMES
    module = publish.publisher(name)
    for member in contract.PUBLISHER:
        assert _parameters(getattr(module, member)) == _declared(contract.Publisher, member), \
            f"publish/{name}.py: {member}"
    assert publish.publisher("lsf") is None


def test_the_protocol_declares_what_the_conformance_test_checks():
    declared = {name for name in vars(contract.BatchModule) if not name.startswith("_")}
    declared |= set(contract.BatchModule.__annotations__)
    assert declared == set(contract.REQUIRED)



ROOT = Path(__file__).resolve().parents[2]


def _scripts() -> list[str]:
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    return [Path(line).name for line in setup["options"]["scripts"].split()]


@pytest.mark.parametrize("name", batch.NAMES)
def test_each_batch_system_has_what_adding_one_lists(name):
    """docs/adding-a-batch-system.md: the pieces besides the batch module."""
    missing = [piece for piece, present in [
        (f"[{name}] in config.BACKEND_OPTIONS", name in BACKEND_OPTIONS),
        (f"mjf_hooks/hooks/{name}.py", (ROOT / f"mjf_hooks/hooks/{name}.py").is_file()),
        (f"a bin/mjf-{name}* launcher in setup.cfg's scripts",
         any(script.startswith(f"mjf-{name}") and (ROOT / "bin" / script).is_file()
             for script in _scripts())),
        (f"contrib/{name}/", (ROOT / "contrib" / name).is_dir()),
        (f"tests/fixtures/{name}-<version>/", any((ROOT / "tests/fixtures").glob(f"{name}-*"))),
        (f"tests/unit/test_{name}.py", (ROOT / f"tests/unit/test_{name}.py").is_file()),
        (f"tests/cli/test_mjf_{name}.py", (ROOT / f"tests/cli/test_mjf_{name}.py").is_file()),
        (f"tests/corpus/backends/{name}.py",
         (ROOT / f"tests/corpus/backends/{name}.py").is_file()),
        (f"benchmarks/mjf_bench/scenarios/{name}.py",
         (ROOT / f"benchmarks/mjf_bench/scenarios/{name}.py").is_file()),
    ] if not present]
    assert not missing, f"{name}: missing {', '.join(missing)}"
