"""What `mjf config check` and `mjf config show` say: every problem of a config file, and
every effective value with where it came from.

Not on any hook's path: a hook reads its config with :func:`mjf_hooks.config.load`, which
stops at the first problem and records no origins.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import config as config_module
from . import spec
from .config import Config


def problems(path: str, missing_ok: bool,
             node: config_module.Node | None = None) -> tuple[Config, list[str]]:
    """The config a file and its drop-ins give (their valid options applied) and every
    problem of them, each one line naming the file and, where it has one, the line; as
    ``node`` sees them (this host where None). SiteInputError where the file or the
    drop-in directory cannot be read at all (a missing file only where not
    ``missing_ok``)."""
    found: list[str] = []
    text, drop_ins = config_module.read_texts(path, missing_ok, found)
    return config_module.parse(text, path, problems=found, drop_ins=drop_ins,
                               node=node), found


@dataclass(frozen=True)
class Origin:
    """Where an effective value came from: ``kind`` is ``file`` (``file``, ``line``,
    ``section`` as the file names it), ``default``, ``probed`` or ``derived`` (``how``)."""

    kind: str
    file: str | None = None
    line: int | None = None
    section: str | None = None
    how: str | None = None

    def __str__(self) -> str:
        if self.kind == "file":
            return f"{self.file}, line {self.line}, [{self.section}]"
        return f"{self.kind}: {self.how}" if self.how else self.kind

    def as_dict(self) -> dict[str, object]:
        return {name: value for name, value in self.__dict__.items() if value is not None}


@dataclass(frozen=True)
class Setting:
    """One effective value: its section and option, its text as the config writes it
    (None: unset), and where it came from."""

    section: str
    key: str
    text: str | None
    origin: Origin


def effective(path: str, named: bool) -> list[Setting]:
    """Every option of every section, as the config file at ``path`` makes it (``named``:
    an admin named it, so it must be there), with its origin; [machinefeatures] also
    with the keys `mjf machine` probes or derives. SiteInputError where the file cannot
    be read or used."""
    origins: dict[tuple[str, str], tuple[str, int, str]] = {}
    config = config_module.load(path, missing_ok=not named, origins=origins)

    def origin(section: str, key: str) -> Origin:
        found = origins.get((section, key))
        return Origin("default") if found is None else \
            Origin("file", file=found[0], line=found[1], section=found[2])

    settings = [Setting(section, key, _text(value), origin(section, key))
                for section, key, value in _options(config)]
    settings += [Setting("machinefeatures", key, text, how or origin("machinefeatures", key))
                 for key, text, how in _machine_keys(config)]
    settings += [Setting("jobfeatures", key, _text(value), origin("jobfeatures", key))
                 for key, value in sorted(config.job.items())]
    order = {name: index for index, name in enumerate(config_module.SECTIONS)}
    return sorted(settings, key=lambda setting: order[setting.section])


def _options(config: Config):
    """(section, option, value) of every option but the keys of [machinefeatures] and
    [jobfeatures]; None where unset."""
    mjf = {"base_dir": config.base_dir, "on_error": config.on_error,
           "log": config.log or "none", "legacy_keys": config.legacy_keys,
           "jobstatus": config.jobstatus, "dir_mode": f"{config.dir_mode:04o}",
           "file_mode": f"{config.file_mode:04o}",
           "command_timeout": config.command_timeout_secs, "export": config.export,
           "url_base": config.url_base, "batch_systems": config.batch_systems}
    yield from (("mjf", key, mjf[key]) for key in config_module.MJF_OPTIONS)
    per_cpu = None if config.hs06_per_cpu is None else \
        spec.format_value("hs06", config.hs06_per_cpu)
    yield "machinefeatures", "hs06_per_cpu", per_cpu
    yield "machinefeatures", "benchmark", config.benchmark
    for section, options in config_module.BACKEND_OPTIONS.items():
        yield from ((section, key, config.backend[section].get(key)) for key in options)
    yield from (("describe", key, config.describe.get(key))
                for key in config_module.DESCRIBE_OPTIONS)
    records = {"dir": config.records_dir, "format": config.record_formats,
               "keep_days": config.records_keep_days, "site": config.records_site}
    yield from (("records", key, records[key]) for key in config_module.RECORDS_OPTIONS)
    submit = dict(config.submit)
    if "hs06_per_cpu" in submit:
        submit["hs06_per_cpu"] = spec.format_value("hs06", float(submit["hs06_per_cpu"]))
    yield from (("submit", key, submit.get(key)) for key in config_module.SUBMIT_OPTIONS)
    yield "publish", "facts", config.publish_facts or "none"
    yield "publish", "sync", config.publish_on_sync
    yield "metrics", "output", config.metrics_output
    yield "metrics", "records_hours", config.metrics_records_hours


def _machine_keys(config: Config):
    """(key, file content, Origin or None where the config file set it) of each machine key
    `mjf machine` would write from the config and this host, computed as it does."""
    from . import features
    from .probe import cpu

    total = None if "total_cpu" in config.machine else cpu.total_cpu()
    physical = cpu.physical_cores() if config.legacy_keys else None
    computed = {key: sourced for key, sourced in
                features.machine_features(config, total, physical).items()
                if sourced[0] is not None}
    for key, text in sorted(features.render(computed).items()):
        if key in config.machine:
            yield key, text, None
            continue
        source = computed[key][1]
        yield key, text, Origin("probed" if source.startswith("/") else "derived", how=source)


def _text(value: object) -> str | None:
    """A value as the config file writes it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, tuple):
        return ", ".join(value)
    if isinstance(value, float):
        return f"{value:g}" if value == int(value) else str(value)
    return str(value)


def lines(path: str, settings: list[Setting]) -> list[str]:
    """`mjf config show`'s text: the file in force, then per section a ``[section]``
    line and ``key = value`` lines with their origins, aligned; an unset option says so."""
    shown = [f"{setting.key} = {setting.text}" if setting.text is not None else
             f"{setting.key} (unset)" for setting in settings]
    width = max(map(len, shown), default=0)
    out = [f"# the config in force: {path}"]
    current = None
    for setting, text in zip(settings, shown):
        if setting.section != current:
            current = setting.section
            out.append(f"[{current}]")
        out.append(f"{text:<{width}}  # {setting.origin}")
    return out


def as_json(path: str, settings: list[Setting]) -> dict[str, object]:
    """`mjf config show --json`: {"file": path, "sections": {section: {key: {"value",
    "origin"}}}}, an unset option's value null."""
    sections: dict[str, dict[str, object]] = {}
    for setting in settings:
        sections.setdefault(setting.section, {})[setting.key] = {
            "value": setting.text, "origin": setting.origin.as_dict()}
    return {"file": path, "sections": sections}
