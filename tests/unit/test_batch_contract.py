"""Every batch module in batch.NAMES provides the declared interface (batch/contract.py)."""

import inspect

import pytest

from mjf_hooks import batch
from mjf_hooks.batch import contract


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
    assert callable(module.job_facts)
    for member in contract.REQUIRED:
        assert hasattr(module, member), f"batch/{name}.py has no {member}"
        if inspect.isfunction(getattr(contract.BatchModule, member, None)):
            assert _parameters(getattr(module, member)) == \
                _declared(contract.BatchModule, member), f"batch/{name}.py: {member}"
    for member, protocol in contract.OPTIONAL.items():
        if hasattr(module, member):
            assert _parameters(getattr(module, member)) == _declared(protocol, member), \
                f"batch/{name}.py: {member}"


def test_the_protocol_declares_what_the_conformance_test_checks():
    declared = {name for name in vars(contract.BatchModule) if not name.startswith("_")}
    declared |= set(contract.BatchModule.__annotations__)
    assert declared == set(contract.REQUIRED)

