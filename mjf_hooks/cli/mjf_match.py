"""`mjf describe` and `mjf match`: this job slot for matchmaking, and a job's
requirements against it."""

from __future__ import annotations

import json
import os
import shlex
import sys

import click

from ..errors import MJFError
from ..options import UsageError
from ..terminal import printable
from . import mjf_describe
from .config_option import config_option
from .locations import UNREADABLE


@click.command("describe")
@click.option(mjf_describe.FORMAT["name"], mjf_describe.FORMAT["dest"],
              default=mjf_describe.FORMAT["default"], metavar=mjf_describe.FORMAT["metavar"],
              help=mjf_describe.FORMAT["help"])
@click.argument("locations", nargs=-1)
@config_option()
def describe_command(format_: str, locations: tuple[str, ...], config) -> None:
    """Describe this job slot for matchmaking: ClassAd (glideinWMS MJF_* and GLUE 1.3),
    DIRAC's resource description, GLUE 2, or all of them as JSON.

    LOCATIONS: a .../machinefeatures and a .../jobfeatures (directories or URLs), a job
    directory, or a base_dir (the node alone); by default $MACHINEFEATURES and
    $JOBFEATURES, else this node. Errors are one line and exit status 2.
    """
    from .. import describe

    def fail(message: str) -> None:
        click.echo(f"mjf describe: {message}", err=True)
        sys.exit(2)

    if format_ not in describe.FORMATS:
        fail(f"unknown format {format_!r}: give one of {', '.join(describe.FORMATS)}")
    options, slot = _slot_of("mjf describe", locations, config, fail)
    click.echo(mjf_describe.text(format_, options, slot), nl=False)


def _slot_of(command: str, locations: tuple[str, ...], config, fail):
    """(describe options, the slot) of the locations, for `mjf describe` and `mjf match`;
    a value that cannot be read is a warning, a location that cannot be read ``fail``s."""
    try:
        options, slot, problems = mjf_describe.slot_of(locations, config)
    except (UsageError, *UNREADABLE) as error:
        fail(str(error))
    for problem in problems:
        click.echo(f"{command}: warning: {problem}", err=True)
    return options, slot


@click.command("match")
@click.option("--explain", is_flag=True, help="Say which clause failed, with both sides' values.")
@click.option("--jdl", "jdls", multiple=True, metavar="PATH",
              help="A JDL file (gLite or DIRAC), or a directory of them; repeatable.")
@click.option("--location", "locations", multiple=True, metavar="LOCATION",
              help="The slot to match (as for mjf describe); default: this job, else the node.")
@click.argument("expression", required=False)
@config_option()
def match_command(explain: bool, jdls: tuple[str, ...], locations: tuple[str, ...],
                  expression: str | None, config) -> None:
    """Does this job slot satisfy a job's requirements? Exit 0 yes, 1 no, 2 unreadable.

    EXPRESSION: ClassAd Requirements, gLite style (other.X) or HTCondor style (TARGET.X),
    against `mjf describe --format classad`. --jdl: JDL files; one whose Requirements is
    an expression is judged so, a DIRAC JDL (its keys, or RFC #7's Requirements = [...])
    by DIRAC's rules against `mjf describe --format dirac`. Needs HTCondor's ClassAd
    library: pip install 'mjf-hooks[match]'.
    """
    from .. import describe
    from ..match import Verdict
    from ..match.classad import ClassAdSlot
    from ..match.dirac import DiracResource, jdl_requirements

    def fail(message: str) -> None:
        click.echo(f"mjf match: {message}", err=True)
        sys.exit(2)

    if (expression is None) == (not jdls):
        fail("give a requirement EXPRESSION or --jdl PATH, not both and not neither")
    options, slot = _slot_of("mjf match", locations, config, fail)
    try:
        classad_slot = ClassAdSlot(describe.classad(slot))
        if expression is not None:
            verdicts = [("", classad_slot.requirements(expression, explain))]
        else:
            resource = DiracResource(describe.dirac(slot, options))
            verdicts = [(path, Verdict(False, unreadable=why) if text is None else
                         jdl_requirements(text, classad_slot, resource, explain))
                        for path, text, why in _jdl_texts(jdls)]
    except MJFError as error:  # the library is missing
        fail(str(error))
    for path, verdict in verdicts:
        where = f"{printable(path)}: " if path else ""
        for warning in verdict.warnings:
            click.echo(f"mjf match: {where}warning: {printable(warning)}", err=True)
        if verdict.unreadable:
            click.echo(f"mjf match: {where}{printable(verdict.unreadable)}", err=True)
            continue
        click.echo(f"{where}{'match' if verdict.matched else 'no match'}")
        for reason in verdict.reasons:
            click.echo(f"  {printable(reason)}")
    sys.exit(max(verdict.exit_code for _, verdict in verdicts))


# A JDL is a few kilobytes; a file larger than this is no JDL, and is not read whole.
_JDL_MAX_BYTES = 1 << 20


def _jdl_texts(paths: tuple[str, ...]) -> list[tuple[str, str | None, str | None]]:
    """``(path, text, None)`` of each JDL given (a file, or every regular file of a
    directory, in name order), or ``(path, None, why)`` for one that cannot be read: one
    file never keeps the others from being judged."""
    found: list[tuple[str, str | None, str | None]] = []
    for path in paths:
        if not os.path.isdir(path):
            found.append(_jdl_text(path))
            continue
        try:
            names = sorted(os.listdir(path))
        except OSError as error:
            found.append((path, None, error.strerror or str(error)))
            continue
        found += [_jdl_text(os.path.join(path, name)) for name in names
                  if os.path.isfile(os.path.join(path, name))]
    if not found:
        found.append((", ".join(paths), None, "no JDL file there"))
    return found


def _jdl_text(path: str) -> tuple[str, str | None, str | None]:
    """One JDL file's text, or why it cannot be read: a regular file of at most
    _JDL_MAX_BYTES, read as safefs reads what is not ours (a FIFO never waited on)."""
    from ..safefs import RefusedPath, read_bounded, shown_path

    try:
        data = read_bounded(path, _JDL_MAX_BYTES)
    except RefusedPath as refusal:  # its message begins with the path, shown once
        why = str(refusal)[len(shown_path(path)):].lstrip(":").strip()
        return path, None, why[3:] if why.startswith("is ") else why
    try:
        return path, data.decode("utf-8"), None
    except UnicodeDecodeError as error:
        return path, None, f"not UTF-8 text (byte {error.start + 1}): not read as a JDL"



# `mjf submit-args --format`'s values.
SUBMIT_FORMATS = ("words", "directives", "json")


@click.command("submit-args")
@click.option("--batch", required=True, metavar="BATCH",
              help="slurm, pbs, gridengine, htcondor or lsf.")
@click.option("--format", "format_", default="words", metavar="FORMAT",
              help="words (default: shell words), directives (job-script lines) or json.")
@click.option("--jdl", metavar="PATH", help="A JDL file (gLite or DIRAC) instead of EXPRESSION.")
@click.option("--hs06-per-cpu", "hs06_per_cpu", metavar="HS06",
              help="The HS06 per CPU a DIRAC CPUTime is divided by (default: [submit] "
                   "hs06_per_cpu, else this node's from [machinefeatures]).")
@click.argument("expression", required=False)
@config_option()
def submit_args_command(batch: str, format_: str, jdl: str | None, hs06_per_cpu: str | None,
                        expression: str | None, config) -> None:
    """Print the submit options that place a job only on nodes satisfying its requirements.

    EXPRESSION: ClassAd Requirements over GLUE 1.3 and MJF_* attributes (as mjf match
    reads them); --jdl: a gLite JDL's Requirements, or a DIRAC JDL's keys. Cores, memory,
    wall and CPU time become the batch system's requests; hs06, hs06 per CPU, total_cpu
    and tags the node facts the site publishes. A requirement the batch system cannot
    express (a tag that is no LSF resource name, a value beyond what its option holds)
    is an error naming the clause: one line, exit status 2. Needs HTCondor's ClassAd
    library: pip install 'mjf-hooks[match]'.
    """
    from .. import submit as submit_options
    from ..match.reduce import expression_needs, jdl_needs

    def fail(message: str) -> None:
        click.echo(f"mjf submit-args: {printable(message)}", err=True)
        sys.exit(2)

    if batch not in submit_options.BATCH_SYSTEMS:
        fail(f"unknown batch system {batch!r}: give one of "
             f"{', '.join(submit_options.BATCH_SYSTEMS)}")
    if format_ not in SUBMIT_FORMATS:
        fail(f"unknown format {format_!r}: give words, directives or json")
    if (expression is None) == (jdl is None):
        fail("give a requirement EXPRESSION or --jdl PATH, not both and not neither")
    try:
        per_cpu = _hs06_per_cpu(hs06_per_cpu, config)
        if jdl is not None:
            path, text, why = _jdl_text(jdl)
            if text is None:
                fail(f"{path}: {why}")
            needs = jdl_needs(text, per_cpu)
        else:
            needs = expression_needs(expression)
        settings = submit_options.Settings(
            names=config.fact_names(),  # the names `mjf publish` writes the facts under
            gridengine_pe=str(config.submit.get("gridengine_pe", "smp")),
            htcondor_wall_attribute=config.backend["htcondor"].get("wall_limit_attribute",
                                                                   "AllowedJobDuration"),
            htcondor_wall_unit=config.backend["htcondor"].get("wall_limit_unit", "seconds"),
            lsf_memory_unit=_lsf_memory_unit(config) if batch == "lsf" else None)
        lines = submit_options.options(needs, batch, settings)
    except MJFError as error:  # the config, the library missing, or the requirement
        fail(str(error))
    for warning in needs.warnings:
        click.echo(f"mjf submit-args: warning: {printable(warning)}", err=True)
    if format_ == "json":
        click.echo(json.dumps({"batch": batch, "needs": needs.to_json(),
                               "options": submit_options.words(batch, lines),
                               "directives": submit_options.directives(batch, lines)},
                              indent=2))
    elif format_ == "directives":
        click.echo("\n".join(submit_options.directives(batch, lines)))
    else:
        click.echo(" ".join(shlex.quote(word) for word in submit_options.words(batch, lines)))


def _hs06_per_cpu(given: str | None, config) -> float | None:
    """The HS06 per CPU: the option, [submit] hs06_per_cpu, else this node's."""
    from .. import config as config_module
    from ..errors import SiteInputError

    if given is not None:
        try:
            return config_module._hs06_per_cpu(given)
        except ValueError as error:
            raise SiteInputError(f"--hs06-per-cpu {given!r}: {error}") from None
    if "hs06_per_cpu" in config.submit:
        return float(config.submit["hs06_per_cpu"])
    if config.hs06_per_cpu:
        return config.hs06_per_cpu
    hs06, cpus = config.machine.get("hs06"), config.machine.get("total_cpu")
    return hs06 / cpus if hs06 and cpus else None


def _lsf_memory_unit(config) -> str | None:
    """The unit of a plain ``bsub -M`` number here: ``[lsf] memory_unit``, else
    ``LSF_UNIT_FOR_LIMITS`` of this host's ``lsf.conf`` (``$LSF_ENVDIR``, else ``/etc``);
    None where neither says (-M then carries its unit, as IBM LSF takes it)."""
    import os

    from ..batch import lsf

    if config.backend["lsf"].get("memory_unit"):
        return str(config.backend["lsf"]["memory_unit"])
    path = os.path.join(os.environ.get("LSF_ENVDIR") or "/etc", "lsf.conf")
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return lsf.unit_for_limits(handle.read(1 << 20))
    except OSError:
        return None
