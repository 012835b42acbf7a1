"""`mjf publish`: this node's facts where its batch system matches jobs on them.

The shared part, which names no batch system: which facts (``[publish] facts``) under
which names (:meth:`mjf_hooks.config.Config.fact_names`: ``[submit] <fact>_name``, the
names `mjf submit-args` asks for), their values (what `mjf machine` writes), what differs
from what the batch system holds, and running its commands. Each batch system that
can be written to has a module here, pure functions of text (as ``batch/<name>.py``)::

    read_query(options, node)  -> (argv, env) that prints what this node publishes
    published(output, names)   -> {name: value text} of those names (ValueError: unreadable)
    write_commands(options, node, changes, published) -> [(argv, env)] that set ``changes``

A batch system without one is not written to: HTCondor's slots carry the facts from
``mjf-htcondor-cron`` (STARTD_CRON, the ``MJF_MACHINE_*`` attributes), LSF reads its
resources from its own files.

Every value is checked before it goes into a command (a number with at most two
decimals; a name of letters, digits and _; a node name of letters, digits, ``-_.``),
each command is an argv (no shell), and what already holds is not written: a pass that
changes nothing runs the reads alone. A read or a write that fails is one warning line;
nothing else is changed, and the next pass tries again.
"""

from __future__ import annotations

from .. import batch
from ..config import Config, is_fact_name
from ..external_command import ask
from ..log import Log

PUBLISHERS = ("gridengine", "pbs", "slurm")


class Outcome:
    """What a pass did (``done``: a line per batch system written to) and whether a read
    or a write failed (each said in its one warning line)."""

    __slots__ = ("done", "failed")

    def __init__(self) -> None:
        self.done: list[str] = []
        self.failed = False


def publisher(name: str):
    """The publish module of the batch system ``name``, or None where it has none."""
    if name not in PUBLISHERS:
        return None
    return __import__(f"mjf_hooks.publish.{name}", fromlist=["read_query"])


def hundredths(text: str) -> int:
    """A value as written in a key file (``62.5``, ``4``) in hundredths; ValueError for
    anything else: only a plain number of at most two decimals goes into a command."""
    whole, dot, fraction = text.partition(".")
    if not (whole.isascii() and whole.isdigit()) or len(whole) > 15 or (dot and not (
            fraction.isascii() and fraction.isdigit() and len(fraction) <= 2)):
        raise ValueError(f"{text[:40]!r} is not a plain number of at most two decimals")
    return int(whole) * 100 + int(fraction.ljust(2, "0") if dot else "0")


def as_text(value: int) -> str:
    """Hundredths as the plain number they are (``6250`` -> ``62.5``)."""
    whole, fraction = divmod(value, 100)
    return str(whole) if not fraction else f"{whole}.{fraction:02d}".rstrip("0")


def fact_values(machine: dict[str, str],
                facts: tuple[str, ...]) -> tuple[dict[str, str], list[str]]:
    """``({fact: value text}, warnings)`` of the node facts among ``facts`` from the
    machine features' texts; a fact without a value is a warning, never guessed.
    ``hs06_per_cpu`` is ``hs06 / total_cpu`` rounded down: a node never claims more."""
    values, warnings = {}, []
    for fact in facts:
        try:
            if fact == "hs06_per_cpu":
                cpus = int(machine["total_cpu"]) if machine.get("total_cpu", "").isdigit() else 0
                if not cpus:
                    raise KeyError("total_cpu")
                values[fact] = as_text(hundredths(machine["hs06"]) // cpus)
            else:
                values[fact] = as_text(hundredths(machine[fact]))
        except KeyError as missing:
            warnings.append(f"{fact} is not published: this node has no {missing.args[0]} "
                            "value (set it in [machinefeatures])")
        except ValueError as error:
            warnings.append(f"{fact} is not published: {error}")
    return values, warnings


def wanted(config: Config, machine: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """``({name in the batch system: value text}, warnings)``: the selected facts under
    the site's names (checked again here: they go into commands)."""
    names = config.fact_names()
    values, warnings = fact_values(machine, config.publish_facts)
    published = {}
    for fact, value in values.items():
        if is_fact_name(names[fact]):
            published[names[fact]] = value
        else:
            warnings.append(f"{fact} is not published: its name {names[fact][:70]!r} is not "
                            "letters, digits and _")
    return published, warnings


def same_number(published: str | None, value: str) -> bool:
    """Whether the batch system's text (``25``, ``25.000000``, ``2.5e1``) is ``value``."""
    if published is None or not published.isascii() or not published.strip() or \
            not all(char in "0123456789.+-eE" for char in published.strip()):
        return False
    try:
        return round(float(published) * 100) == hundredths(value)
    except (ValueError, OverflowError):
        return False


def changes(want: dict[str, str], published: dict[str, str]) -> dict[str, str]:
    """The names whose published value is not the wanted one (or absent)."""
    return {name: value for name, value in want.items()
            if not same_number(published.get(name), value)}


def is_node_name(name: str) -> bool:
    """A host name as a batch system's command takes it: letters, digits, ``-_.``, not
    starting with ``-`` or ``.`` (no option, no qmgr syntax)."""
    return bool(name) and len(name) <= 255 and name.isascii() and name[0] not in "-." \
        and name.replace("-", "a").replace("_", "a").replace(".", "a").isalnum()


def machine_values(config: Config) -> dict[str, str]:
    """This node's machine features as `mjf machine` writes them (texts), not written."""
    from .. import features
    from ..probe import cpu

    total = None if "total_cpu" in config.machine else cpu.total_cpu()
    return features.render(features.machine_features(config, total))


def publish(config: Config, log: Log, machine: dict[str, str], dry_run: bool = False) -> Outcome:
    """One pass over the batch systems this node runs that can be written to."""
    from ..batch.here import batch_systems

    outcome = Outcome()
    want, warnings = wanted(config, machine)
    for warning in warnings:
        log.warning(warning)
    if not want:
        return outcome
    for module in batch_systems(config):
        writer = publisher(module.NAME)
        if writer is not None:
            _publish_to(config, log, module, writer, want, dry_run, outcome)
    return outcome


def _publish_to(config: Config, log: Log, module, writer, want: dict[str, str], dry_run: bool,
                outcome: Outcome) -> None:
    options = config.backend[module.NAME]
    node = batch.node_name(module, options).split(".")[0]
    unchanged = f"nothing published to {module.TITLE} this time"
    if not is_node_name(node):
        log.warning(f"{module.TITLE}: this host's name {node[:70]!r} is not a node name "
                    f"(letters, digits, -_.): {unchanged}")
        outcome.failed = True
        return
    published = _read(config, log, module, writer, node, list(want), unchanged)
    if published is None:
        outcome.failed = True
        return
    to_write = changes(want, published)
    if not to_write:
        return
    what = ", ".join(f"{name} {published.get(name, 'unset')} -> {value}"
                     for name, value in to_write.items())
    kept = f"{module.TITLE} node {node}: not all of {', '.join(to_write)} published (the " \
        "next run tries again)"
    for argv, env in writer.write_commands(options, node, to_write, published):
        if dry_run:
            outcome.done.append(f"{module.TITLE}: would run {' '.join(argv)}")
        elif ask(argv, config.command_timeout_secs, env, log, kept) is None:
            outcome.failed = True
            return
    if dry_run:
        return
    # Some commands (qconf) say an error and exit 0: what holds now is what counts.
    after = _read(config, log, module, writer, node, list(to_write), "not known whether it "
                  "was published")
    left = changes(to_write, after) if after is not None else to_write
    if left:
        if after is not None:
            log.warning(f"{module.TITLE} node {node}: the write of {', '.join(left)} did not "
                        "take (the next run tries again)")
        outcome.failed = True
        return
    outcome.done.append(f"{module.TITLE} node {node}: {what}")
    log.info(f"published to {module.TITLE} node {node}: {what}")


def _read(config: Config, log: Log, module, writer, node: str, names: list[str],
          unknown: str) -> dict[str, str] | None:
    """What the batch system holds for ``names`` on ``node``; None (one warning) if the
    read failed or its output could not be read."""
    argv, env = writer.read_query(config.backend[module.NAME], node)
    output = ask(argv, config.command_timeout_secs, env, log, unknown)
    if output is None:
        return None
    try:
        return writer.published(output, names)
    except ValueError as error:
        log.warning(f"{module.TITLE}: {error}: {unknown}")
        return None
