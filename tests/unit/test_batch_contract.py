"""Every batch module in batch.NAMES provides the declared interface (batch/contract.py)."""

import configparser
import inspect
from pathlib import Path

import pytest

from mjf_hooks import batch, publish, submit
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


@pytest.mark.parametrize("name", batch.NAMES)
def test_each_batch_system_has_its_submit_options(name):
    module = submit.submitter(name)
    assert _parameters(module.options) == _declared(contract.SubmitOptions, "options")
    assert module.DIRECTIVE is None or isinstance(module.DIRECTIVE, str)
    assert submit.BATCH_SYSTEMS == batch.NAMES


def test_the_protocol_declares_what_the_conformance_test_checks():
    declared = {name for name in vars(contract.BatchModule) if not name.startswith("_")}
    declared |= set(contract.BatchModule.__annotations__)
    assert declared == set(contract.REQUIRED)



ROOT = Path(__file__).resolve().parents[2]


def _scripts() -> list[str]:
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    return [Path(line).name for line in setup["options"]["scripts"].split()]


def _places() -> list[tuple[str, str]]:
    """docs/adding-a-batch-system.md's table: (where, when) of each place."""
    text = (ROOT / "docs/adding-a-batch-system.md").read_text()
    rows = [line.split("|")[1:-1] for line in text.splitlines()
            if line.startswith("| ") and line.count("`") >= 2]
    return [(where.strip().strip("`"), when.strip()) for _, where, when in rows]


def test_the_table_of_places_is_there():
    places = dict(_places())
    assert places["mjf_hooks/batch/<name>.py"] == "always"
    assert places["mjf_hooks/publish/<name>.py"] == "if it publishes"
    assert len(places) >= 15


@pytest.mark.parametrize("name", batch.NAMES)
def test_each_batch_system_has_every_place_adding_one_lists(name):
    """docs/adding-a-batch-system.md: every place of its table, for this batch system."""
    special = {
        "batch.NAMES": lambda: name in batch.NAMES,
        "config.BACKEND_OPTIONS": lambda: name in BACKEND_OPTIONS,
        "bin/mjf-<name>*": lambda: any(script.startswith(f"mjf-{name}")
                                       and (ROOT / "bin" / script).is_file()
                                       for script in _scripts()),
    }
    missing = []
    for where, when in _places():
        if when == "if it publishes" and name not in publish.PUBLISHERS:
            continue
        assert when in ("always", "if it publishes"), where
        if where in special:
            present = special[where]()
        else:
            pattern = where.replace("<name>", name).replace("<version>", "*").rstrip("/")
            present = any(ROOT.glob(pattern))
        if not present:
            missing.append(where.replace("<name>", name))
    assert not missing, f"{name}: missing {', '.join(missing)}"
