"""Site configuration: ``/etc/mjf/mjf.conf`` (or ``$MJF_CONFIG``), INI syntax.

A missing file means all defaults - the default file, and any file a hook is given -
except where an admin named it (``load(missing_ok=False)``: a typo is not a config of
defaults). Everything else that is wrong in the file is a SiteInputError naming the
file, line, section, key and reason: a hook never guesses what an admin meant.

The parser is our own, and deliberately small: configparser would pull ``re``
into every job start and cannot say which line was wrong; the format here is
plain ``[section]`` and ``key = value`` lines, ``#``/``;`` comments (also
after a value, when preceded by whitespace).

The sh TaskProlog (bin/mjf-slurm-taskprolog) reads ``[mjf] base_dir`` from the
same file with ``read`` and ``[[:space:]]``: lines end at a newline only and only
ASCII whitespace is stripped. So here too, and a line with any other control or
space character is refused rather than read differently by the two.
"""

from __future__ import annotations

import os

from . import spec
from .errors import SiteInputError

DEFAULT_PATH = "/etc/mjf/mjf.conf"
DEFAULT_BASE_DIR = "/run/mjf"
DEFAULT_COMMAND_TIMEOUT_SECS = 5.0
LOG_DESTINATIONS = ("syslog", "stderr")
# What the sh TaskProlog's [[:space:]] strips (C locale); "\n" ends the line.
_SPACE = " \t\r\v\f"

# Numbers. A decimal with a fraction is a float: its two-decimal text is written
# exactly only up to 15 significant digits, so 13 before the point.
_MAX_WHOLE_DIGITS = 13
MAX_FRACTIONAL = 10**_MAX_WHOLE_DIGITS  # a value with a fraction is below this
# hs06_per_cpu x total_cpu (at most 100000 processors, the plausible count `mjf check`
# allows) stays below MAX_FRACTIONAL, so hs06 and hs06_job are always written exactly.
MAX_HS06_PER_CPU = 1000000
MAX_COMMAND_TIMEOUT_SECS = 300

# The options of [mjf]: the parser takes these and no others.
MJF_OPTIONS = ("base_dir", "on_error", "log", "legacy_keys", "jobstatus", "dir_mode",
               "file_mode", "command_timeout", "export", "url_base", "batch_systems")
# [machinefeatures] and [jobfeatures] take the configurable MJF keys of their scope,
# and [machinefeatures] these config-only helpers, which are not keys themselves.
EXTRA_MACHINE_OPTIONS = ("hs06_per_cpu", "benchmark")
# [machinefeatures] benchmark: what the hs06 and hs06_job numbers were measured with. The
# keys keep their names (every reader reads hs06/hs06_job); HEPscore23 is on HS06's scale.
# Spelled as WLCG and APEL's configuration spell them; read in any case.
BENCHMARKS = ("HEPSPEC", "HEPscore23")
DEFAULT_BENCHMARK = "HEPSPEC"
# Options of the batch-system backends: section -> option -> what it must be.
# A tuple lists the values allowed.
BACKEND_OPTIONS = {
    "slurm": {"scontrol": "absolute path", "scratch_dir": "absolute path", "nodename": "name"},
    "htcondor": {
        "job_id": ("global", "cluster_proc"),
        "wall_limit_attribute": "attribute name",
        "wall_limit_unit": ("seconds", "minutes", "hours"),
        "next_wrapper": "absolute path",
        "execute_dir": "absolute path",
    },
    "lsf": {"bjobs": "absolute path", "query_bjobs": ("yes", "no"),
            "memory_unit": ("KB", "MB", "GB", "TB")},
    "gridengine": {"sge_root": "absolute path", "sge_cell": "name",
                   "qstat": "absolute path", "query_qstat": ("yes", "no"),
                   "qconf": "absolute path"},
    "pbs": {"pbs_exec": "absolute path", "qstat": "absolute path",
            "query_qstat": ("yes", "no"), "tmpdir": "absolute path",
            "cgroup_prefix": "absolute path"},
}
# `mjf describe`: who this slot is, for DIRAC's resource description (all optional).
DESCRIBE_OPTIONS = ("site", "gridce", "tags", "platform")
# `mjf submit-args`: the HS06 per CPU a CPUTime is divided by, the names node facts are
# published under, Grid Engine's parallel environment (all optional).
SUBMIT_OPTIONS = ("hs06_per_cpu", "hs06_name", "hs06_per_cpu_name", "total_cpu_name",
                  "gridengine_pe")
# The node facts `mjf submit-args` asks for and `mjf publish` publishes; each is
# published and asked for under one name, [submit] <fact>_name (default: the fact's).
NODE_FACTS = ("hs06", "hs06_per_cpu", "total_cpu")
# [publish]: which node facts `mjf publish` writes into the batch systems, and whether
# `mjf sync` publishes too (off by default).
PUBLISH_OPTIONS = ("facts", "sync")
DEFAULT_PUBLISH_FACTS = ("hs06",)
# [records]: a record per job of what MJF promised against what it used (off by default).
RECORDS_OPTIONS = ("dir", "format", "keep_days", "site")
RECORD_FORMATS = ("sss", "apel")
DEFAULT_RECORD_FORMATS = ("sss",)
DEFAULT_RECORDS_KEEP_DAYS = 90
# [metrics]: the file `mjf sync` writes `mjf metrics` to (none by default), and the
# hours of ended jobs whose records its figures sum.
METRICS_OPTIONS = ("output", "records_hours")
DEFAULT_METRICS_RECORDS_HOURS = 24
SECTIONS = ("mjf", "machinefeatures", "jobfeatures", *BACKEND_OPTIONS, "describe", "records",
             "submit", "publish", "metrics")


class Config:
    """The validated site configuration (read-only after load)."""

    __slots__ = (
        "backend",
        "base_dir",
        "batch_systems",
        "benchmark",
        "command_timeout_secs",
        "describe",
        "dir_mode",
        "drop_ins",
        "export",
        "file_mode",
        "hs06_per_cpu",
        "job",
        "jobstatus",
        "legacy_keys",
        "log",
        "machine",
        "metrics_output",
        "metrics_records_hours",
        "on_error",
        "path",
        "publish_facts",
        "publish_on_sync",
        "record_formats",
        "records_dir",
        "records_keep_days",
        "records_site",
        "submit",
        "url_base",
    )

    def __init__(self, path: str = DEFAULT_PATH) -> None:
        self.path = path
        self.drop_ins: tuple[str, ...] = ()  # the drop-ins read after it, in that order
        self.base_dir = DEFAULT_BASE_DIR
        self.on_error = "continue"
        self.log: tuple[str, ...] = LOG_DESTINATIONS
        self.legacy_keys = False
        # Give every job an empty $JOBSTATUS directory its pilot may fill (draft 0.99).
        self.jobstatus = False
        self.dir_mode = 0o755
        self.file_mode = 0o644
        self.command_timeout_secs = DEFAULT_COMMAND_TIMEOUT_SECS
        # What the variables say: the directories' paths, or URLs under url_base
        # (an HTTP server that serves base_dir, see contrib/nginx).
        self.export = "path"
        self.url_base: str | None = None
        # The batch systems `mjf sync` asks about drains and stale jobs; None: every one
        # whose command is installed here.
        self.batch_systems: tuple[str, ...] | None = None
        # Static key values from [machinefeatures] / [jobfeatures], parsed.
        self.machine: dict[str, int | float] = {}
        self.job: dict[str, int | float] = {}
        self.hs06_per_cpu: float | None = None
        # What hs06/hs06_job were measured with: one of BENCHMARKS (canonical spelling).
        self.benchmark = DEFAULT_BENCHMARK
        # Backend sections, e.g. backend["slurm"]["scontrol"].
        self.backend: dict[str, dict[str, str]] = {name: {} for name in BACKEND_OPTIONS}
        # [describe]: site, gridce, platform as strings; tags as a tuple of strings.
        self.describe: dict[str, object] = {}
        # [records]: where each job's record goes (None: no records), in which formats
        # besides the JSON that `mjf records` reads, for how long, and the APEL site name.
        self.records_dir: str | None = None
        self.record_formats: tuple[str, ...] = DEFAULT_RECORD_FORMATS
        self.records_keep_days = DEFAULT_RECORDS_KEEP_DAYS
        self.records_site: str | None = None
        # [submit]: hs06_per_cpu as a float; the names and the PE as strings.
        self.submit: dict[str, object] = {}
        # [publish]: the node facts `mjf publish` writes, and whether `mjf sync` does.
        self.publish_facts: tuple[str, ...] = DEFAULT_PUBLISH_FACTS
        self.publish_on_sync = False
        # [metrics]: where `mjf sync` writes the metrics (None: it does not), and the
        # window of ended jobs their record figures sum, in hours.
        self.metrics_output: str | None = None
        self.metrics_records_hours = DEFAULT_METRICS_RECORDS_HOURS

    def fact_names(self) -> dict[str, str]:
        """Each node fact's name in the batch systems: ``[submit] <fact>_name``, else the
        fact's own. The one naming `mjf submit-args` asks for and `mjf publish` writes."""
        return {fact: str(self.submit.get(f"{fact}_name", fact)) for fact in NODE_FACTS}


def config_path(environ: dict[str, str] | None = None) -> str:
    """The config file in force: ``$MJF_CONFIG`` or the default."""
    environ = os.environ if environ is None else environ
    return environ.get("MJF_CONFIG") or DEFAULT_PATH


def named_path(option: str | None = None, environ: dict[str, str] | None = None) -> str | None:
    """The config file an admin named: ``--config``'s ``option``, else ``$MJF_CONFIG``;
    None where neither names one (the default file is then in force)."""
    environ = os.environ if environ is None else environ
    return option or environ.get("MJF_CONFIG") or None


def load_named(named: str | None) -> Config:
    """The config of an admin command: the file named (:func:`named_path`), which must be
    there, or the default file (missing: all defaults)."""
    return load(named or DEFAULT_PATH, missing_ok=named is None)


def require_readable(named: str | None) -> None:
    """For a command that reads no config: a file named that cannot be read is an error
    all the same (SiteInputError), so that a typo never passes unnoticed."""
    if named:
        read_bytes(named, missing_ok=False)


def load(path: str | None = None, missing_ok: bool = True,
         origins: dict[tuple[str, str], tuple[str, int, str]] | None = None) -> Config:
    """Read and validate the config file and its drop-ins (:func:`drop_in_paths`). A
    missing file gives the defaults where ``missing_ok`` (the default path; a hook's), and
    is an error where not (a file an admin named); its drop-ins are read either way.
    ``origins``, where given, is filled as :func:`parse` fills it."""
    path = path or config_path()
    text, drop_ins = read_texts(path, missing_ok)
    return parse(text, path, origins=origins, drop_ins=drop_ins)


def read_texts(path: str, missing_ok: bool, problems: list[str] | None = None
               ) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The config file's text and its drop-ins' ((path, text) each, in order). A file that
    cannot be read or is not UTF-8 is a SiteInputError; with ``problems`` (`mjf config
    check`), one that is not UTF-8 and a drop-in that cannot be read are appended to it
    instead and left out (the main file read as empty, so that its drop-ins are still
    checked). A missing main file is empty where ``missing_ok``."""

    def text_of(file: str, raw: bytes) -> str | None:
        try:
            return decoded(raw, file)
        except SiteInputError as error:
            if problems is None:
                raise
            problems.append(str(error))
            return None

    text = text_of(path, read_bytes(path, missing_ok)) or ""
    drop_ins = []
    for drop_in in drop_in_paths(path):
        try:
            raw = read_bytes(drop_in, missing_ok=False)
        except SiteInputError as error:
            if problems is None:
                raise
            problems.append(str(error))
            continue
        drop_in_text = text_of(drop_in, raw)
        if drop_in_text is not None:
            drop_ins.append((drop_in, drop_in_text))
    return text, tuple(drop_ins)


def drop_in_paths(path: str) -> list[str]:
    """The drop-ins of the config file at ``path``: the ``*.conf`` files of ``PATH.d/``
    (``/etc/mjf/mjf.conf.d/``), in the order they are read, which is their names' (by
    code point, as ``LC_ALL=C ls`` lists them); hidden ones, and anything else an editor
    or a package manager leaves there (``.rpmnew``, ``.dpkg-dist``, ``~``), are not read.
    Empty without the directory; SiteInputError where it cannot be read."""
    directory = f"{path}.d"
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as error:
        raise SiteInputError(f"{shown_path(directory)}: cannot read the config's drop-in "
                             f"directory: {error.strerror}") from None
    return [f"{directory}/{name}" for name in sorted(names)
            if name.endswith(".conf") and not name.startswith(".")]


def read_bytes(path: str, missing_ok: bool = True) -> bytes:
    """The config file's content; empty (all defaults) for a missing file where
    ``missing_ok``. SiteInputError naming the path where it cannot be read."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError as error:
        if missing_ok:
            return b""
        strerror = error.strerror
    except OSError as error:
        strerror = error.strerror
    raise SiteInputError(f"{shown_path(path)}: cannot read the config: {strerror}")


def decoded(raw: bytes, path: str) -> str:
    """The config file's text. SiteInputError where it is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SiteInputError(
            f"{path}: not UTF-8 text (byte {error.start}); save the config as UTF-8"
        ) from None


def shown_path(path: str) -> str:
    """A config path as a message shows it: ``$MJF_CONFIG`` may hold anything."""
    return path if len(path) <= 200 else f"{path[:200]}..."


def parse(text: str, path: str = DEFAULT_PATH, problems: list[str] | None = None,
          origins: dict[tuple[str, str], tuple[str, int, str]] | None = None,
          drop_ins: tuple[tuple[str, str], ...] = (), node: Node | None = None) -> Config:
    """Validate config text; ``path`` is only used in messages. ``drop_ins``: the
    (path, text) of the files read after it, in that order (:func:`drop_in_paths`).

    Without ``problems`` the first problem is a SiteInputError (a hook's parse stops
    there); with it, every problem is appended to it, one message each, and the options
    that were valid are applied (`mjf config check`).

    Which line sets an option (docs/configuration.md, "One config for a cluster"): of the
    sections that apply to ``node`` (this host where None), the most specific - a
    ``host=`` section over a ``cpu=`` one over a plain one; at the same level a later file
    over an earlier one, but two different sections that both apply and give the option
    different values are a problem, never a silent pick. Every line is validated, whether
    it applies here or not, so that a file is equally valid on every node.

    ``origins``, where given, gets where each option applied was set: (section, key) ->
    (file, line, the section header as written). Only `mjf config show` asks: a hook's
    parse records nothing."""
    config = Config(path)
    config.drop_ins = tuple(file for file, _ in drop_ins)
    chosen: dict[tuple[str, str], _Entry] = {}
    scratch: Config | None = None  # where a line that does not apply here is validated
    node = node or Node()
    # Each line is applied once, in the files' order (so problems come in that order, and
    # a hook stops at the first): to the config where it is the one that applies so far
    # (a later one that applies then overwrites it), else to a scratch config.
    for file, file_text in ((path, text), *drop_ins):
        for entry in _entries(file_text, file, problems):
            target = (entry.section, entry.key)
            held = chosen.get(target)
            here = entry.when is None or node.matches(*entry.when)
            applies = here and (
                held is None or entry.level > held.level
                or (entry.level == held.level and (entry.level == 0 or entry.when == held.when)))
            if here and not applies and entry.level == held.level \
                    and entry.when != held.when and entry.value != held.value:
                _refuse(problems, f"{entry.where()}: clashes with {held.where()}: both "
                        "sections apply to this node, and neither is more specific")
                continue
            if not applies and scratch is None:
                scratch = Config(path)
            try:
                _apply(config if applies else scratch, entry.section, entry.key, entry.value)
            except ValueError as error:
                _refuse(problems, f"{entry.where()}: {error}")
                continue
            if applies:
                chosen[target] = entry
    if origins is not None:
        origins.update((target, (entry.file, entry.line, entry.header))
                       for target, entry in chosen.items())
    lines = {key: entry for (section, key), entry in chosen.items()
             if section == "machinefeatures"}
    problem = _derived_hs06_problem(config)
    if problem:
        per_cpu, cpus = lines["hs06_per_cpu"], lines["total_cpu"]
        elsewhere = "" if cpus.file == per_cpu.file else f" of {cpus.file}"
        _refuse(problems, f"{per_cpu.where()}: {problem} (total_cpu on line "
                f"{cpus.line}{elsewhere})")
    if "apel" in config.record_formats and config.records_dir \
            and not (config.records_site or config.describe.get("site")):
        _refuse(problems, f"{path}: [records] format apel needs the site's name: set "
                "[records] site (or [describe] site) to its GOCDB name")
    if config.export == "url" and not config.url_base:
        _refuse(problems, f"{path}: [mjf] export = url needs [mjf] url_base, the URL that "
                "serves base_dir")
    return config


class _Entry:
    """One ``key = value`` line: its section, and the node it is for (``when``: None for
    every node, else (``host`` or ``cpu``, the pattern)), as written in ``header``."""

    __slots__ = ("file", "header", "key", "level", "line", "section", "value", "when")

    def __init__(self, section: str, when: tuple[str, str] | None, header: str, key: str,
                 value: str, file: str, line: int) -> None:
        self.section, self.when, self.header = section, when, header
        self.key, self.value, self.file, self.line = key, value, file, line
        self.level = 0 if when is None else _LEVELS[when[0]]

    def where(self) -> str:
        return f"{self.file}, line {self.line}: [{self.header}] {self.key} = {self.value!r}"


# What a section may be qualified by, and how specific each is: a host's own section over
# its CPU model's, and either over a section for every node.
_LEVELS = {"cpu": 1, "host": 2}
# Sections that must be the same on every node: the sh TaskProlog reads [mjf] itself, and
# cannot tell which node's section applies.
_UNQUALIFIED = ("mjf",)


class Node:
    """This node as a config section may name it: its host name (the full name and the
    first label, either matching) and its CPU model (the first ``model name`` of
    /proc/cpuinfo, as the kernel names it; read only where a ``cpu=`` section asks).
    Given values stand in for the host's (`mjf config check --host/--cpu-model`)."""

    __slots__ = ("_cpu_model", "_host")

    def __init__(self, host: str | None = None, cpu_model: str | None = None) -> None:
        self._host = host
        self._cpu_model = cpu_model

    def matches(self, kind: str, pattern: str) -> bool:
        if kind == "host":
            if self._host is None:
                self._host = os.uname().nodename
            host = self._host.lower()
            return glob_match(pattern.lower(), host) or \
                glob_match(pattern.lower(), host.partition(".")[0])
        if self._cpu_model is None:
            from .probe import cpu

            self._cpu_model = cpu.model_name() or ""
        return glob_match(pattern, self._cpu_model)


def glob_match(pattern: str, text: str) -> bool:
    """Whether ``text`` is what ``pattern`` describes: ``*`` any run of characters, ``?``
    any one, everything else itself (no character classes: a CPU model's brackets and
    parentheses are its own). Not fnmatch, which loads ``re`` into every job start."""
    # The classic two-pointer walk: remember the last *, and on a mismatch let it take
    # one more character.
    p = t = 0
    star, resume = -1, 0
    while t < len(text):
        if p < len(pattern) and pattern[p] in ("?", text[t]):
            p, t = p + 1, t + 1
        elif p < len(pattern) and pattern[p] == "*":
            star, resume = p, t
            p += 1
        elif star >= 0:
            p, resume = star + 1, resume + 1
            t = resume
        else:
            return False
    return all(char == "*" for char in pattern[p:])


def _refuse(problems: list[str] | None, message: str) -> None:
    """A problem of the file: raised at once, or listed where all are asked for."""
    if problems is None:
        raise SiteInputError(message)
    problems.append(message)


def _entries(text: str, path: str, problems: list[str] | None = None):
    """Yield each :class:`_Entry` of INI text, strictly: a line that is wrong is refused
    (:func:`_refuse`), and so are the lines of a section that is."""
    section: tuple[str, tuple[str, str] | None, str] | None = None
    seen: set[tuple[str, str]] = set()
    # Not splitlines(): it also ends lines at \r, \v, \f, \x1c-\x1e, \x85, \u2028 and
    # \u2029, where the sh TaskProlog's `read` does not.
    for number, raw_line in enumerate(text.split("\n"), 1):
        line = raw_line.strip(_SPACE)
        if not line or line[0] in "#;":
            continue
        if "\0" in line:
            _refuse(problems, f"{path}, line {number}: contains a NUL byte")
            continue
        content = _strip_inline_comment(line)  # a comment may hold anything
        if not content.replace("\t", " ").isprintable():
            char = next(c for c in content if c != "\t" and not c.isprintable())
            _refuse(problems,
                    f"{path}, line {number}: contains {char!r}, a control character or a "
                    "space other than ASCII space and tab (the sh TaskProlog would read the "
                    "line differently)")
            continue
        if line.startswith("["):
            section = _section(line, path, number, problems)
            continue
        key, equals, value = line.partition("=")
        key = key.strip().lower()
        if not equals or not key:
            _refuse(problems, f"{path}, line {number}: {line!r} is not `key = value`")
            continue
        if section is None:
            _refuse(problems, f"{path}, line {number}: `{key}` comes before any [section]")
            continue
        if section is _REFUSED_SECTION:  # already said: its lines are not read
            continue
        value = _strip_inline_comment(value).strip()
        name, when, header = section
        if (header, key) in seen:
            _refuse(problems, f"{path}, line {number}: [{header}] {key} is set twice")
            continue
        seen.add((header, key))
        yield _Entry(name, when, header, key, value, path, number)


# What a section header that was refused leaves its lines under: none of them is read.
_REFUSED_SECTION = ("", None, "")


def _section(line: str, path: str, number: int, problems: list[str] | None):
    """The section a header line opens: (its name, the node it is for or None, the header
    as written), or _REFUSED_SECTION. ``[name]`` is for every node; ``[name host=PATTERN]``
    and ``[name cpu=PATTERN]`` (the pattern may be in double quotes) for some."""
    if not line.endswith("]"):
        _refuse(problems, f"{path}, line {number}: {line!r} is not a [section] header")
        return _REFUSED_SECTION
    inside = line[1:-1].strip()
    name, _, qualifier = inside.replace("\t", " ").partition(" ")
    name = name.lower()
    if name not in SECTIONS:
        _refuse(problems, f"{path}, line {number}: unknown section [{name}]; "
                f"known: {', '.join(f'[{known}]' for known in SECTIONS)}")
        return _REFUSED_SECTION
    qualifier = qualifier.strip()
    if not qualifier:
        return name, None, name
    kind, equals, pattern = qualifier.partition("=")
    kind, pattern = kind.strip().lower(), pattern.strip()
    if len(pattern) >= 2 and pattern[0] == pattern[-1] == '"':
        pattern = pattern[1:-1]
    if not equals or kind not in _LEVELS or not pattern or '"' in pattern:
        _refuse(problems, f"{path}, line {number}: [{inside}]: after the section's name, "
                'only host=PATTERN or cpu=PATTERN (a pattern in double quotes may hold '
                'spaces), e.g. [machinefeatures cpu="AMD EPYC 7543 32-Core Processor"]')
        return _REFUSED_SECTION
    if name in _UNQUALIFIED:
        _refuse(problems, f"{path}, line {number}: [{inside}]: [{name}] applies to every "
                "node (the sh TaskProlog reads it), so it cannot be for some nodes only")
        return _REFUSED_SECTION
    return name, (kind, pattern), f"{name} {kind}={pattern}" if " " not in pattern \
        else f'{name} {kind}="{pattern}"'


def _strip_inline_comment(value: str) -> str:
    for marker in (" #", "\t#", " ;", "\t;"):
        cut = value.find(marker)
        if cut >= 0:
            value = value[:cut]
    return value


def _apply(config: Config, section: str, key: str, value: str) -> None:
    if section == "mjf":
        _apply_mjf_option(config, key, value)
    elif section in BACKEND_OPTIONS:
        options = BACKEND_OPTIONS[section]
        if key not in options:
            raise ValueError(f"unknown option; [{section}] takes {', '.join(sorted(options))}")
        config.backend[section][key] = _backend_value(options[key], value)
    elif section == "describe":
        _apply_describe_option(config, key, value)
    elif section == "records":
        _apply_records_option(config, key, value)
    elif section == "submit":
        _apply_submit_option(config, key, value)
    elif section == "publish":
        _apply_publish_option(config, key, value)
    elif section == "metrics":
        _apply_metrics_option(config, key, value)
    elif section == "machinefeatures" and key in EXTRA_MACHINE_OPTIONS:
        if key == "benchmark":
            config.benchmark = _benchmark(value)
        else:
            config.hs06_per_cpu = _hs06_per_cpu(value)
    else:
        scope = spec.MACHINE if section == "machinefeatures" else spec.JOB
        spec.key_for_config(scope, key)
        parsed = _static_value(key, value)
        (config.machine if scope == spec.MACHINE else config.job)[key] = parsed


def _apply_mjf_option(config: Config, key: str, value: str) -> None:
    if key not in MJF_OPTIONS:
        raise ValueError(f"unknown option; [mjf] takes {', '.join(MJF_OPTIONS)}")
    if key == "base_dir":
        config.base_dir = _absolute_path(value)
    elif key == "on_error":
        if value not in ("continue", "fail"):
            raise ValueError("must be `continue` (log and let the job run) or `fail`")
        config.on_error = value
    elif key == "log":
        destinations = tuple(part.strip() for part in value.split(",") if part.strip())
        if destinations == ("none",):
            destinations = ()
        elif not destinations or not set(destinations) <= set(LOG_DESTINATIONS):
            raise ValueError("must be `syslog`, `stderr`, both (comma-separated) or `none`")
        config.log = destinations
    elif key == "legacy_keys":
        config.legacy_keys = _boolean(value)
    elif key == "jobstatus":
        config.jobstatus = _boolean(value)
    elif key in ("dir_mode", "file_mode"):
        widest = 0o755 if key == "dir_mode" else 0o644
        mode = _octal_mode(value)
        if mode & ~widest:
            raise ValueError(f"may only narrow the default {widest:04o}")
        if not mode & 0o400 or (key == "dir_mode" and not mode & 0o100):
            raise ValueError("must leave the owner able to read (and enter directories)")
        setattr(config, key, mode)
    elif key == "export":
        if value not in ("path", "url"):
            raise ValueError("must be `path` or `url` (then set url_base too)")
        config.export = value
    elif key == "url_base":
        if not value.startswith(("http://", "https://")) or any(c.isspace() for c in value):
            raise ValueError("must be an http:// or https:// URL that serves base_dir")
        config.url_base = value.rstrip("/")
    elif key == "batch_systems":
        names = tuple(part.strip() for part in value.split(",") if part.strip())
        if not names or not set(names) <= set(BACKEND_OPTIONS):
            raise ValueError(f"must name batch systems this node runs: "
                             f"{', '.join(BACKEND_OPTIONS)} (comma-separated)")
        config.batch_systems = names
    elif key == "command_timeout":
        timeout = float(_plain_number(value))
        if not timeout > 0:  # also 0.000...1 with more zeros than a float holds
            raise ValueError("must be a positive number of seconds")
        if timeout > MAX_COMMAND_TIMEOUT_SECS:
            raise ValueError(f"must be between 0 and {MAX_COMMAND_TIMEOUT_SECS} seconds")
        config.command_timeout_secs = timeout


def _apply_describe_option(config: Config, key: str, value: str) -> None:
    if key not in DESCRIBE_OPTIONS:
        raise ValueError(f"unknown option; [describe] takes {', '.join(DESCRIBE_OPTIONS)}")
    if key == "tags":
        tags = tuple(part.strip() for part in value.split(","))
        if not value or not all(_is_describe_token(tag) for tag in tags):
            raise ValueError("must be tags (printable ASCII without spaces, quotes or "
                             "backslashes), comma-separated")
        config.describe[key] = tags
        return
    if not _is_describe_token(value) or "," in value:
        raise ValueError("must be printable ASCII without spaces, commas, quotes or "
                         "backslashes")
    config.describe[key] = value


def _apply_records_option(config: Config, key: str, value: str) -> None:
    if key == "benchmark":
        raise ValueError("the benchmark is the machine's: set [machinefeatures] benchmark "
                         "(records and mjf describe both carry it)")
    if key not in RECORDS_OPTIONS:
        raise ValueError(f"unknown option; [records] takes {', '.join(RECORDS_OPTIONS)}")
    if key == "dir":
        config.records_dir = _absolute_path(value)
    elif key == "format":
        formats = tuple(part.strip().lower() for part in value.split(","))
        if not value or not set(formats) <= set(RECORD_FORMATS):
            raise ValueError(f"must be {' and/or '.join(RECORD_FORMATS)} (comma-separated); "
                             "the JSON that `mjf records` reads is always written")
        config.record_formats = tuple(dict.fromkeys(formats))
    elif key == "keep_days":
        if not _is_digits(value) or int(value) < 1 or len(value) > 6:
            raise ValueError("must be a whole number of days, 1 or more")
        config.records_keep_days = int(value)
    elif key == "site":
        if not _is_describe_token(value) or "," in value:
            raise ValueError("must be the site's GOCDB name: printable ASCII without "
                             "spaces, commas, quotes or backslashes")
        config.records_site = value


def _apply_submit_option(config: Config, key: str, value: str) -> None:
    if key not in SUBMIT_OPTIONS:
        raise ValueError(f"unknown option; [submit] takes {', '.join(SUBMIT_OPTIONS)}")
    if key == "hs06_per_cpu":
        config.submit[key] = _hs06_per_cpu(value)
        return
    if not is_fact_name(value):
        raise ValueError("must be a name of letters, digits and _, starting with a letter")
    config.submit[key] = value


def is_fact_name(value: str) -> bool:
    """A node fact's name in a batch system. It goes into submit options, ``qconf`` and
    ``qmgr`` arguments as it is: nothing a shell, a resource list or a qmgr statement
    would read differently (letters, digits and _, a letter first, at most 64)."""
    return bool(value) and value.isascii() and value[0].isalpha() and len(value) <= 64 \
        and value.replace("_", "a").isalnum()


def _apply_publish_option(config: Config, key: str, value: str) -> None:
    if key not in PUBLISH_OPTIONS:
        raise ValueError(f"unknown option; [publish] takes {', '.join(PUBLISH_OPTIONS)}")
    if key == "sync":
        config.publish_on_sync = _boolean(value)
        return
    facts = tuple(part.strip() for part in value.split(","))
    if facts == ("none",):
        config.publish_facts = ()
    elif not value or not set(facts) <= set(NODE_FACTS):
        raise ValueError(f"must be node facts among {', '.join(NODE_FACTS)} "
                         "(comma-separated), or none")
    else:
        config.publish_facts = tuple(dict.fromkeys(facts))


def _apply_metrics_option(config: Config, key: str, value: str) -> None:
    if key not in METRICS_OPTIONS:
        raise ValueError(f"unknown option; [metrics] takes {', '.join(METRICS_OPTIONS)}")
    if key == "output":
        path = _absolute_path(value)
        if not path.endswith(".prom"):
            raise ValueError("must end in .prom: node_exporter's textfile collector reads "
                             "only such files")
        config.metrics_output = path
        return
    if not _is_digits(value) or not 1 <= int(value) <= 8760 or len(value) > 4:
        raise ValueError("must be a whole number of hours, 1 to 8760 (a year)")
    config.metrics_records_hours = int(value)


def _is_describe_token(value: str) -> bool:
    """A DIRAC name or tag: goes into ClassAd and JDL strings as it is, so nothing to escape."""
    return bool(value) and value.isascii() and value.isprintable() \
        and not any(char in value for char in " \t\"'\\")


def _backend_value(kind: str | tuple[str, ...], value: str) -> str:
    if isinstance(kind, tuple):
        if value not in kind:
            raise ValueError(f"must be one of {', '.join(kind)}")
        return value
    if kind == "absolute path":
        return _absolute_path(value)
    if kind == "name":  # a host's or a cell's: also a file name
        if not value or not value.isascii() or value.startswith((".", "-")) \
                or not value.replace("_", "a").replace("-", "a").replace(".", "a").isalnum():
            raise ValueError("must be a name of letters, digits, _ - . (not starting with "
                             ". or -)")
        return value
    if not value or not value.isascii() or value[0].isdigit() \
            or not value.replace("_", "a").isalnum():
        raise ValueError("must be a ClassAd attribute name (letters, digits, _)")
    return value


# PATH_MAX on Linux, terminating NUL included: a longer path cannot be opened at all.
_MAX_PATH_CHARS = 4095


def _absolute_path(value: str) -> str:
    """The path, with ``.`` and ``//`` normalised away; ``..`` is refused, not resolved:
    normpath's ``/a/link/..`` is ``/a`` where the kernel's is the link target's parent, and
    the sh TaskProlog uses base_dir as written (``/x/absent/../base`` does not exist)."""
    if not value.startswith("/"):
        raise ValueError("must be an absolute path")
    if len(value) > _MAX_PATH_CHARS:
        raise ValueError(f"is longer than {_MAX_PATH_CHARS} characters, the longest path "
                         "Linux opens")
    if ".." in value.split("/"):
        raise ValueError("must not contain `..`: the sh TaskProlog reads the path literally "
                         "(and `..` after a symlink is not the parent it seems); write the "
                         "path it resolves to")
    return os.path.normpath(value)


def _boolean(value: str) -> bool:
    lowered = value.lower()
    if lowered in ("1", "yes", "true", "on"):
        return True
    if lowered in ("0", "no", "false", "off"):
        return False
    raise ValueError("must be yes or no")


def _octal_mode(value: str) -> int:
    if not value or not value.isascii() or not all(char in "01234567" for char in value):
        raise ValueError("must be an octal mode such as 0750")
    return int(value, 8)


def _plain_number(value: str) -> str:
    """The canonical text (``007.50`` -> ``7.5``) of plain ASCII digits with at most one
    ``.`` and digits after it; ValueError for anything else.

    Not float(): it also takes signs, exponents, ``_``, ``inf``/``nan``, spaces and
    non-ASCII digits (``\\u0661``), values no reader of the files expects.
    """
    whole, dot, fraction = value.partition(".")
    if not _is_digits(whole) or (dot and not _is_digits(fraction)):
        raise ValueError("must be a plain number such as 5 or 2.5 (ASCII digits, at most "
                         "one `.`)")
    whole, fraction = whole.lstrip("0") or "0", fraction.rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole


def _is_digits(text: str) -> bool:
    return bool(text) and text.isascii() and text.isdigit()


def _static_value(name: str, value: str) -> int | float | str:
    """A configured key value, parsed; refused unless its file would say the same.

    Integers are exact up to spec.MAX_INTEGER (spec.parse_value checks that). A decimal
    (hs06, hs06_job) is written with at most two fraction digits: ``0.001`` would become
    ``0``, and beyond 15 significant digits a float no longer holds the value.
    """
    parsed = spec.parse_value(name, value)  # strict syntax; the reasons admins know
    if spec.KEYS[name].kind != spec.DECIMAL or isinstance(parsed, int):
        return parsed
    canonical = _plain_number(value)
    whole, _, fraction = canonical.partition(".")
    if not fraction:  # 2400.0: a whole number, exact up to MAX_INTEGER
        return spec.parse_value(name, whole)
    if len(whole) > _MAX_WHOLE_DIGITS:
        raise ValueError(f"is too large to write with its fraction: {name} may have a "
                         f"fraction below {MAX_FRACTIONAL}, and be a whole number up to "
                         f"{spec.MAX_INTEGER}")
    number = float(canonical)
    written = spec.format_value(name, number)
    if written != canonical:
        raise ValueError(f"has more than two decimals: {name} files are written with at "
                         f"most two, so it would be written as {written}")
    return number


def _hs06_per_cpu(value: str) -> float:
    """HS06 per processor: positive, two decimals at most, at most MAX_HS06_PER_CPU."""
    canonical = _plain_number(value)
    whole, _, fraction = canonical.partition(".")
    if canonical == "0":
        raise ValueError("must be a positive number")
    if len(fraction) > 2:
        raise ValueError("has more than two decimals: hs06 and hs06_job are written with "
                         "at most two")
    if len(whole) > len(str(MAX_HS06_PER_CPU)) or float(canonical) > MAX_HS06_PER_CPU:
        raise ValueError(f"is larger than {MAX_HS06_PER_CPU} per processor")
    return float(canonical)


def _benchmark(value: str) -> str:
    """The benchmark hs06 and hs06_job come from, in its canonical spelling."""
    for name in BENCHMARKS:
        if value.lower() == name.lower():
            return name
    raise ValueError(f"must be {' or '.join(BENCHMARKS)} (in any case): the benchmark the "
                     "hs06 and hs06_job values come from")


def _derived_hs06_problem(config: Config) -> str | None:
    """Why hs06 = hs06_per_cpu x the configured total_cpu could not be written, if so."""
    per_cpu, cpus = config.hs06_per_cpu, config.machine.get("total_cpu")
    if per_cpu is None or cpus is None or "hs06" in config.machine:
        return None
    if per_cpu * cpus < MAX_FRACTIONAL:
        return None
    return (f"hs06 = hs06_per_cpu x total_cpu = {spec.format_value('hs06', per_cpu)} x {cpus} "
            f"would be {MAX_FRACTIONAL} or more, too large to write exactly")
