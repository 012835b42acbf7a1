"""The docs, the packaging and the code say the same: the installed commands, the config
options, the drains `mjf sync` follows; and the docs hold together (every page opens
with its summary, every relative link and anchor resolves, the map lists every page)."""

from __future__ import annotations

import configparser
import importlib.util
import re
from pathlib import Path

import pytest

from mjf_hooks import batch, config, spec
from mjf_hooks.cli.node_commands import SYNC_USAGE

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))


def scripts() -> list[str]:
    """The installed commands: setup.cfg's scripts, the one list they come from."""
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    return [Path(line).name for line in setup["options"]["scripts"].split()]


def python_scripts() -> list[str]:
    return [name for name in scripts()
            if "python" in (ROOT / "bin" / name).read_text().splitlines()[0]]


def section(text: str, heading: str) -> str:
    """The text under ``heading`` (a whole heading line) up to the next heading of its
    level or above."""
    level = heading.split(" ")[0]
    start = text.index(f"\n{heading}\n")
    rest = text[start + len(heading) + 2:]
    ends = [match.start() for match in re.finditer(f"^#{{1,{len(level)}}} ", rest, re.M)]
    return rest[:ends[0]] if ends else rest


def first_cells(table_text: str) -> list[str]:
    """The first cell of each row of the Markdown tables in ``table_text``, header and
    rule excepted."""
    cells = []
    for line in table_text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            cells.append(line.split("|")[1].strip())
    return cells[1:] if cells else cells  # not the header


def code_spans(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


# The installed commands.

def test_the_rpm_spec_installs_every_command():
    text = (ROOT / "rpm/mjf-hooks.spec.in").read_text()
    listed = re.search(r"^%global mjf_commands (.*)$", text, re.M).group(1).split()
    assert sorted(listed) == sorted(scripts())
    files = text[text.index("\n%files\n"):]
    assert sorted(re.findall(r"^%\{_bindir\}/(\S+)$", files, re.M)) == sorted(scripts())


def test_the_debian_package_test_checks_every_command():
    path = ROOT / "tests/packaging/test_deb.py"
    source = path.read_text()
    if "setup.cfg" in source:
        return  # it takes its commands from setup.cfg itself: nothing to drift apart
    spec_ = importlib.util.spec_from_file_location("test_deb_commands", path)
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    assert sorted(module.COMMANDS) == sorted(scripts())


def test_vermin_checks_every_python_command():
    text = (ROOT / "tests/run").read_text()
    call = text[text.index('"$venv/bin/vermin" --target=3.9-'):]
    call = call[:call.index("\n#")]
    checked = [Path(word).name for word in call.split() if word.startswith("bin/")]
    assert sorted(checked) == sorted(python_scripts())


def test_the_docs_command_table_lists_every_command():
    text = (DOCS / "install.md").read_text()
    table = text.split("these commands:\n\n")[1].split("\n\n")[0]
    listed = [cell.strip("`") for cell in first_cells(table)]
    assert sorted(listed) == sorted(scripts())


def test_the_manual_pages_named_in_install_are_one_per_command():
    text = section((DOCS / "install.md").read_text(), "## Manual pages")
    named = re.findall(r"`([\w.-]+)\((\d)\)`", text.split("\n\n")[0])
    assert sorted(set(named)) == sorted([*((name, "1" if name == "mjf" else "8")
                                      for name in scripts()), ("mjf.conf", "5")])


def test_the_design_contract_names_every_command():
    text = (DOCS / "design.md").read_text()
    item = text[text.index("- **Installed commands**:"):]
    item = item[:item.index("\n- ")]
    assert sorted(code_spans(item)) == sorted(scripts())


# The batch systems, as mjf_hooks.batch has them.

def package_descriptions() -> dict[str, str]:
    """What each package says it is: setup.cfg's description (PyPI, pip show), the
    .deb's Description and the RPM's %description."""
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    control = (ROOT / "debian/control").read_text()
    deb = control[control.index("\nDescription: "):]
    spec_ = (ROOT / "rpm/mjf-hooks.spec.in").read_text()
    rpm = spec_[spec_.index("\n%description\n"):spec_.index("\n%prep\n")]
    return {"setup.cfg": setup["metadata"]["description"], "debian/control": deb,
            "mjf-hooks.spec.in": rpm}


@pytest.mark.parametrize("where", sorted(package_descriptions()))
def test_every_package_description_names_every_batch_system(where):
    text = " ".join(package_descriptions()[where].split())
    assert [batch.backend(name).TITLE for name in batch.NAMES
            if batch.backend(name).TITLE not in text] == []


# The `mjf` subcommands, as its click group has them.

def subcommands() -> list[str]:
    from mjf_hooks.cli.interactive import cli

    return sorted(cli.commands)


def test_the_install_command_table_names_every_subcommand():
    text = (DOCS / "install.md").read_text()
    table = text.split("these commands:\n\n")[1].split("\n\n")[0]
    (row,) = [line for line in table.splitlines() if line.startswith("| `mjf` |")]
    assert sorted(code_spans(row.split("|")[2])) == subcommands()


@pytest.mark.parametrize("name", subcommands())
def test_every_subcommand_is_documented(name):
    """Each has its place in the docs, named as it is typed."""
    assert any(f"`mjf {name}" in page.read_text() for page in PAGES), name


# The config options.

def options() -> list[tuple[str, str]]:
    """Every (section, option) the config parser takes."""
    machine = [key for key in spec.MACHINE_KEYS if spec.KEYS[key].configurable]
    job = [key for key in spec.JOB_KEYS if spec.KEYS[key].configurable]
    found = [("mjf", key) for key in config.MJF_OPTIONS]
    found += [("machinefeatures", key) for key in (*machine, *config.EXTRA_MACHINE_OPTIONS)]
    found += [("jobfeatures", key) for key in job]
    found += [(name, key) for name, keys in config.BACKEND_OPTIONS.items() for key in keys]
    found += [("describe", key) for key in config.DESCRIBE_OPTIONS]
    found += [("records", key) for key in config.RECORDS_OPTIONS]
    found += [("submit", key) for key in config.SUBMIT_OPTIONS]
    found += [("publish", key) for key in config.PUBLISH_OPTIONS]
    found += [("metrics", key) for key in config.METRICS_OPTIONS]
    return found


def test_the_options_listed_here_are_the_ones_the_parser_takes():
    assert sorted({name for name, _ in options()}) == sorted(config.SECTIONS)
    for name, key in options():  # each is a known option: any error is about its value
        try:
            config.parse(f"[{name}]\n{key} = ?\n")
        except Exception as error:
            assert "unknown option" not in str(error) and "not an MJF key" not in str(error)
    with pytest.raises(Exception, match="unknown option"):
        config.parse("[mjf]\nno_such_option = 1\n")


@pytest.mark.parametrize("name,key", options())
def test_every_option_is_in_the_configuration_reference(name, key):
    table = section((DOCS / "configuration.md").read_text(), f"## `[{name}]`")
    keys = [span for cell in first_cells(table) for span in code_spans(cell)]
    assert key in keys, f"[{name}] {key} is not in docs/configuration.md"


def example_sections() -> dict[str, list[str]]:
    """contrib/mjf.conf.example's options, set or commented out, by section."""
    found: dict[str, list[str]] = {}
    current = ""
    for line in (ROOT / "contrib/mjf.conf.example").read_text().splitlines():
        header = re.match(r"^\[(\w+)\]$", line)
        if header:
            current = header.group(1)
            found[current] = []
        setting = re.match(r"^(?:# )?(\w+) = ", line)
        if setting and current:
            found[current].append(setting.group(1))
    return found


@pytest.mark.parametrize("name,key", options())
def test_every_option_is_in_the_example_config(name, key):
    assert key in example_sections().get(name, []), \
        f"[{name}] {key} is not in contrib/mjf.conf.example"


def test_the_example_config_is_valid_as_it_is_and_with_every_option_set():
    text = (ROOT / "contrib/mjf.conf.example").read_text()
    default = config.parse(text, "mjf.conf.example")
    assert default.base_dir == config.DEFAULT_BASE_DIR and default.records_dir is None
    everything = re.sub(r"^# (\w+ = )", r"\1", text, flags=re.M)
    assert everything != text
    parsed = config.parse(everything, "mjf.conf.example, every option set")
    assert parsed.records_dir and parsed.batch_systems


# The drains `mjf sync` follows.

def followed_drains() -> list[str]:
    """The batch systems whose drains `mjf sync` follows: those whose module names a
    command that tells of a drain."""
    return [batch.backend(name).TITLE for name in batch.NAMES
            if batch.backend(name).drain_query({}, {}, "node") is not None]


def test_some_batch_system_drains_are_followed():
    assert "Slurm" in followed_drains()


@pytest.mark.parametrize("title", followed_drains())
def test_every_followed_drain_is_named_in_sync_help_and_the_docs(title):
    assert title in " ".join(SYNC_USAGE.split())
    text = section((DOCS / "commands.md").read_text(),
                   "## `mjf sync` - for a systemd timer or cron")
    assert title in " ".join(text.split())


# The docs hold together.

def test_every_page_starts_with_its_title_and_a_one_line_summary():
    for page in PAGES:
        title, blank, summary, after = page.read_text().split("\n")[:4]
        assert title.startswith("# ") and blank == "" and after == "", page.name
        assert summary and not summary.startswith(("#", "|", "-", "`")), page.name


def test_the_map_lists_every_page():
    text = (DOCS / "README.md").read_text()
    linked = set(re.findall(r"\]\(([\w-]+\.md)(?:#[^)]*)?\)", text))
    assert sorted(page.name for page in PAGES if page.name != "README.md") == sorted(linked)


def slug(heading: str) -> str:
    """The anchor a code host gives a heading (GitHub's rule)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return "".join(char for char in text if char.isalnum() or char in " -_").replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, seen, fenced = set(), {}, False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"^#{1,6} ", line):
            name = slug(line.lstrip("#"))
            count = seen.get(name, 0)
            seen[name] = count + 1
            found.add(name if count == 0 else f"{name}-{count}")
    return found


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *PAGES, *sorted((ROOT / "contrib").glob("*/README.md"))]


@pytest.mark.parametrize("path", markdown_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, fragment = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        missing = not resolved.exists() or not resolved.is_relative_to(ROOT)
        if missing or (fragment and resolved.suffix == ".md"
                       and fragment not in anchors(resolved)):
            broken.append(target)
    assert broken == []


def test_both_packages_ship_the_docs():
    assert "docs" in (ROOT / "debian/mjf-hooks.docs").read_text().split()
    doc_line = re.search(r"^%doc (.*)$", (ROOT / "rpm/mjf-hooks.spec.in").read_text(),
                         re.M).group(1)
    assert "docs" in doc_line.split()


@pytest.mark.parametrize("name", batch.NAMES)
def test_every_batch_system_has_its_page_and_contrib_points_there(name):
    assert (DOCS / f"{name}.md").is_file()
    assert f"../../docs/{name}.md" in (ROOT / "contrib" / name / "README.md").read_text()


def test_every_key_is_in_the_key_table():
    table = (DOCS / "keys.md").read_text()
    listed = [span for cell in first_cells(table) for span in code_spans(cell)]
    assert sorted(set(spec.KEYS) - set(listed)) == []
    text = " ".join(table.split())
    assert [legacy.name for legacy in spec.LEGACY_KEYS if legacy.name not in text] == []
