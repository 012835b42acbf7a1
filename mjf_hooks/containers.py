"""What a pilot adds to a container's command line so that its payload sees MJF.

Pure logic: the job's variables (a mapping) in, binds and variables out, then the
words of one runtime's options and their printed form. The command (``mjf
container-args``) reads the environment and the config at the edge.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import MJFError
from .reader import is_url

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

# The runtimes, and the command each one runs as (to say when it is not installed).
RUNTIMES = {"apptainer": "apptainer", "bubblewrap": "bwrap", "charliecloud": "ch-run"}
FORMATS = ("shell", "lines", "json", "names")

# The variables, in the order they are passed, and whether the payload may write there:
# only $JOBSTATUS, which the pilot fills (draft 0.99).
VARIABLES = (("MACHINEFEATURES", False), ("JOBFEATURES", False), ("JOBSTATUS", True))
# Their directories' names under --inside DIR.
INSIDE_NAMES = {"MACHINEFEATURES": "machinefeatures", "JOBFEATURES": "jobfeatures",
                "JOBSTATUS": "jobstatus"}


class ContainerError(MJFError):
    """This job's MJF cannot be passed into the container (no MJF, a path a runtime
    cannot express, no URL for a directory)."""


@dataclass(frozen=True)
class Bind:
    source: str
    destination: str
    writable: bool


@dataclass(frozen=True)
class Plan:
    """What the container needs: directories to bind, variables to set (in order), and
    variables to remove (a path the container cannot reach)."""

    binds: tuple[Bind, ...]
    environment: tuple[tuple[str, str], ...]
    unset: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        """The variable names a runtime that cleans the environment must let through."""
        return [name for name, _ in self.environment]


def plan(environ: Mapping[str, str], *, urls: bool = False,
         served: Callable[[str], str | None] | None = None,
         inside: str | None = None) -> Plan:
    """The binds and variables for the job whose variables are ``environ``.

    Paths are bound at the same path (or under ``inside``), read-only but for
    $JOBSTATUS; a URL is passed as it is. With ``urls``, ``served`` gives the URL of a
    path (None: not served) and nothing is bound: $JOBSTATUS, which cannot be a URL
    (its pilot writes there), is left out, and unset where the runtime passes the
    host's environment.
    """
    if not environ.get("JOBFEATURES"):
        raise ContainerError("$JOBFEATURES is not set: this is not a job with MJF, so there "
                             "is nothing to pass into a container")
    if inside is not None:
        inside = _checked_path("--inside", inside)
    binds: list[Bind] = []
    environment: list[tuple[str, str]] = []
    unset: list[str] = []
    for name, writable in VARIABLES:
        value = environ.get(name)
        if not value:
            continue
        if is_url(value):
            environment.append((name, value))
            continue
        path = _checked_path(f"${name}", value)
        if urls and writable:
            unset.append(name)
            continue
        if urls:
            url = served(path) if served else None
            if url is None:
                raise ContainerError(f"${name} = {path} is not under base_dir, so no URL "
                                     "serves it: bind it (leave out --url)")
            environment.append((name, url))
            continue
        destination = path if inside is None else posixpath.join(inside, INSIDE_NAMES[name])
        binds.append(Bind(path, destination, writable))
        environment.append((name, destination))
    return Plan(tuple(binds), tuple(environment), tuple(unset))


def _checked_path(what: str, path: str) -> str:
    if not path.startswith("/"):
        raise ContainerError(f"{what} = {path!r} is not an absolute path or an http(s) URL")
    if ".." in path.split("/"):
        raise ContainerError(f"{what} = {path!r} has a `..` component")
    return posixpath.normpath(path) if path != "/" else path


def runtime_args(runtime: str, the_plan: Plan) -> tuple[list[str], list[str]]:
    """(the options for ``runtime``, warnings) that bind and set what ``the_plan`` says."""
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown runtime {runtime!r}")
    return _BUILDERS[runtime](the_plan)


def _apptainer(the_plan: Plan) -> tuple[list[str], list[str]]:
    words: list[str] = []
    warnings: list[str] = []
    for bind in the_plan.binds:
        mode = "" if bind.writable else ":ro"
        if any(char in bind.source + bind.destination for char in ":,"):
            # --bind splits at `:` and `,`; --mount is CSV, where a quoted field may hold both.
            fields = ["type=bind", f"src={bind.source}", f"dst={bind.destination}"]
            fields += [] if bind.writable else ["ro"]
            words += ["--mount", ",".join(_csv_field(field) for field in fields)]
        else:
            words += ["--bind", f"{bind.source}:{bind.destination}{mode}"]
    for name, value in the_plan.environment:
        if "," in value:
            # --env splits its value at commas; the host's environment still carries it.
            warnings.append(f"${name} holds a comma, which apptainer's --env cannot pass: it "
                            f"reaches the payload only from the host environment (without "
                            f"--cleanenv) or as APPTAINERENV_{name}")
            continue
        words += ["--env", f"{name}={value}"]
    # apptainer cannot unset a variable: empty is what MJF's readers take as unset.
    for name in the_plan.unset:
        words += ["--env", f"{name}="]
    return words, warnings


def _csv_field(field: str) -> str:
    if any(char in field for char in ',"\n'):
        return '"' + field.replace('"', '""') + '"'
    return field


def _bubblewrap(the_plan: Plan) -> tuple[list[str], list[str]]:
    words: list[str] = []
    for bind in the_plan.binds:
        words += ["--bind" if bind.writable else "--ro-bind", bind.source, bind.destination]
    for name, value in the_plan.environment:
        words += ["--setenv", name, value]
    for name in the_plan.unset:
        words += ["--unsetenv", name]
    return words, []


def _charliecloud(the_plan: Plan) -> tuple[list[str], list[str]]:
    words: list[str] = []
    for bind in the_plan.binds:
        if ":" in bind.source or ":" in bind.destination:
            raise ContainerError(f"{bind.source} holds a `:`, which ch-run's --bind cannot "
                                 "express: use another runtime, or --url")
        same = bind.source == bind.destination
        words.append(f"--bind={bind.source}" if same
                     else f"--bind={bind.source}:{bind.destination}")
    settings = [f"--set-env={name}={value}" for name, value in the_plan.environment]
    # ch-run expands `$` in --set-env values unless told not to (for all of them).
    if any("$" in value for _, value in the_plan.environment):
        words.append("--env-no-expand")
    unsets = [f"--unset-env={name}" for name in the_plan.unset]
    return words + settings + unsets, []


_BUILDERS = {"apptainer": _apptainer, "bubblewrap": _bubblewrap, "charliecloud": _charliecloud}


def render(format_: str, runtime: str, the_plan: Plan, words: list[str]) -> str:
    """The printed form: ``shell`` (one line of shell-quoted words, for ``eval``),
    ``lines`` (one word a line), ``json`` (everything), ``names`` (the variable names,
    one a line, for an environment whitelist)."""
    if format_ == "shell":
        return " ".join(shlex.quote(word) for word in words) + "\n" if words else ""
    if format_ == "lines":
        for word in words:
            if "\n" in word:
                raise ContainerError(f"{word!r} holds a newline: use --format shell or json")
        return "".join(word + "\n" for word in words)
    if format_ == "names":
        return "".join(name + "\n" for name in the_plan.names)
    if format_ == "json":
        return json.dumps({
            "runtime": runtime, "args": words,
            "binds": [{"source": bind.source, "destination": bind.destination,
                       "read_only": not bind.writable} for bind in the_plan.binds],
            "environment": dict(the_plan.environment), "names": the_plan.names,
        }, indent=2) + "\n"
    raise ValueError(f"unknown format {format_!r}")
