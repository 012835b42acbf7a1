"""`mjf describe`'s work, without click: the slot its locations describe, its text in each
format, and the fast path :mod:`mjf_hooks.cli.mjf` dispatches to before click is loaded.

`mjf describe` is what a site's information system or a pilot runs to describe a slot:
click alone (~2.5x a bare interpreter start) cost most of it. The fast path serves a
well-formed command line that describes a slot in plain ASCII; whatever it does not serve
(``--help``, an option it does not know, a location that cannot be read, text that is not
plain ASCII, which click encodes its own way) it leaves to the click command
(:func:`mjf_hooks.cli.mjf_match.describe_command`), so messages, output and exit statuses
are click's, as they were before this path existed.
"""

from __future__ import annotations

import errno
import os
import sys
import time

from .. import config as config_module
from .. import describe
from ..json_text import json_text
from ..options import UsageError
from ..reader import Features, is_url
from .locations import UNREADABLE, classify

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..config import Config

COMMAND = "mjf describe"
# `mjf describe`'s command line, defined once: the click command
# (:func:`mjf_hooks.cli.mjf_match.describe_command`) declares its --format from FORMAT
# (its --config is every subcommand's), and :func:`fast` reads what VALUED names; a test
# holds the two the same.
FORMAT = {"name": "--format", "dest": "format_", "default": "classad", "metavar": "FORMAT",
          "help": "classad (default), dirac, glue2 or json."}
VALUED = {"--format": "format_", "--config": "config"}
# Set, click completes the command line instead of running it (the variable of prog "mjf").
_COMPLETION = "_MJF_COMPLETE"


def slot_of(locations: tuple[str, ...], config: Config,
            ) -> tuple[describe.Options, describe.Slot, list[str]]:
    """(describe options, the slot, a line per value left out) of the locations, for `mjf
    describe` and `mjf match`. UsageError or one of UNREADABLE where they cannot be read."""
    options, machine_raw, job_raw = _describe_inputs(locations, config)
    slot, problems = describe.slot(machine_raw, job_raw, _text("/proc/cpuinfo"),
                                   _text("/etc/os-release") or _text("/usr/lib/os-release"),
                                   time.time())
    return options, slot, problems


def _describe_inputs(locations: tuple[str, ...], config: Config):
    """(options, machine features, job features or None) for `mjf describe`, as raw texts."""
    options = describe.Options(**config.describe, benchmark=config.benchmark)
    machine, jobs, _ = classify(locations)  # a base_dir: its node, not its jobs
    if len(jobs) > 1:
        raise UsageError("give one job: a description is of one slot")
    job = jobs[0] if jobs else None
    if machine is None and job is not None and not is_url(job.location):
        # A job directory of a base_dir: <base_dir>/jobs/<id>/jobfeatures.
        candidate = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
            job.location))), "machinefeatures")
        if os.path.isdir(candidate):
            machine = Features(candidate)
    if machine is None and job is None:
        machine_dir = os.path.join(config.base_dir, "machinefeatures")
        if os.path.isdir(machine_dir):
            machine = Features(machine_dir)
        else:  # this node as `mjf machine` would describe it
            from .. import features
            from ..probe import cpu

            total = None if "total_cpu" in config.machine else cpu.total_cpu()
            return options, features.render(features.machine_features(config, total)), None
    return (options, machine.read_all() if machine else {},
            job.read_all() if job else None)


def _text(path: str) -> str:
    """A small system file's text; empty when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(1 << 20)
    except OSError:
        return ""


def text(format_: str, options: describe.Options, slot: describe.Slot) -> str:
    """What `mjf describe --format FORMAT` prints: the ClassAd, or the document as JSON
    laid out as ``json.dumps(document, indent=2)``, with its final newline."""
    if format_ == "classad":
        return describe.classad_text(describe.classad(slot))
    arch = os.uname().machine
    document = {"dirac": lambda: describe.dirac(slot, options),
                "glue2": lambda: describe.glue2(slot, arch, options.benchmark),
                "json": lambda: describe.everything(slot, options, arch)}[format_]()
    return json_text(document, indent=2, sort_keys=False) + "\n"


def fast(argv: list[str]) -> int | None:
    """`mjf describe ARGV...` without click; None where click is to serve it (the
    module says which), having written nothing."""
    if _COMPLETION in os.environ:
        return None  # a shell asks click to complete the command line
    values: dict[str, str | None] = {"format_": FORMAT["default"], "config": None}
    locations, options_end = [], False
    arguments = iter(argv)
    for arg in arguments:
        if options_end or arg == "-" or not arg.startswith("-"):
            locations.append(arg)
            continue
        if arg == "--":
            options_end = True
            continue
        name, equals, value = arg.partition("=")
        if name not in VALUED:
            return None
        if not equals:
            value = next(arguments, "-")  # none: click's message
            if value.startswith("-"):
                return None  # click decides whether that is a value or an option
        values[VALUED[name]] = value
    format_, named = values["format_"], values["config"]
    if format_ not in describe.FORMATS:
        return None
    try:
        config = config_module.load_named(config_module.named_path(named))
        options, slot, problems = slot_of(tuple(locations), config)
        out = text(format_, options, slot)
    except (UsageError, *UNREADABLE):
        return None
    warnings = "".join(f"{COMMAND}: warning: {problem}\n" for problem in problems)
    # Click strips ANSI escapes from what it writes to a pipe, and encodes by its own
    # rules: what is not plain ASCII (a value's text) is written by click.
    if not (out + warnings).isascii() or "\x1b" in out + warnings:
        return None
    try:
        if warnings:
            sys.stderr.write(warnings)
            sys.stderr.flush()
        sys.stdout.write(out)
        sys.stdout.flush()
    except OSError as error:
        if error.errno != errno.EPIPE:
            raise
        # As click does when its reader has gone: status 1, nothing more written.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 1
    return 0
