"""Bash completion for ``mjf``, generated from the command's own definitions: click's for
the interactive subcommands, and the click-free ones' :class:`CommandLine` (``run``,
``machine``, ``sync``, ``publish``, ``htcondor-wrapper``) and option lists (``status
set``). ``python3 -m mjf_hooks.cli.completion`` prints the script the packages install as
``/usr/share/bash-completion/completions/mjf`` (contrib/bash-completion/mjf, which
tests/cli/test_mjf_completion.py keeps equal to what this prints, and loads into bash).

A static script, not click's own completion, which would start Python and import click
at every Tab: this one costs nothing but bash.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import click

from .. import batch, describe, jobstatus, spec
from ..hooks.frame import COMMON_FLAGS, COMMON_VALUED, CommandLine
from ..hooks.htcondor import WRAPPER_COMMAND_LINE
from . import mjf_match, mjf_status_set
from .hook_commands import MACHINE_LINE, RUN_LINE
from .interactive import cli
from .node_commands import PUBLISH_LINE, SYNC_LINE

# The click-free subcommands' command lines (tests/cli/test_mjf_completion.py: every one
# bin/mjf dispatches without click is here).
CLICK_FREE_LINES = {"run": RUN_LINE, "machine": MACHINE_LINE, "sync": SYNC_LINE,
                    "publish": PUBLISH_LINE, "htcondor-wrapper": WRAPPER_COMMAND_LINE}
# What completes an option's value or an argument: files, a command, or these words.
FILES = "files"
COMMAND = "command"
# The click-free options that name a file.
_FILE_OPTIONS = ("--config", "--env-file", "--dir")
HELP = ("-h", "--help")


@dataclass
class Completion:
    """What may follow a subcommand path (``config check``): its subcommands, its
    options (``values``: per option taking a value, FILES, a tuple of words or None for
    nothing to offer), and what completes its arguments (FILES, COMMAND, words or None)."""

    subcommands: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    values: dict[str, object] = field(default_factory=dict)
    arguments: object = None


def completions() -> dict[str, Completion]:
    """Every subcommand path of ``mjf`` ("" for ``mjf`` itself), and what completes there."""
    found: dict[str, Completion] = {}
    _from_click(cli, "", found)
    for name, line in CLICK_FREE_LINES.items():
        found[name] = _from_command_line(line)
    found["status"].subcommands.append("set")
    found["status set"] = Completion(
        flags=list(HELP),
        values=_click_free_values(mjf_status_set.VALUED),
        arguments=tuple(f"{key}=" for key in jobstatus.KEYS))
    return found


def _from_click(command: click.Command, path: str, found: dict[str, Completion],
                parent: click.Context | None = None) -> None:
    here = Completion()
    found[path] = here
    # Under its parent, whose settings it inherits (the group's -h beside --help).
    context = click.Context(command, info_name=path.rpartition(" ")[2] or "mjf",
                            parent=parent, **command.context_settings)
    for param in command.get_params(context):
        if isinstance(param, click.Option):
            names = [*param.opts, *param.secondary_opts]
            if param.is_flag or param.count:
                here.flags += names
            else:
                here.values.update((name, _VALUES.get((path, name)) or _of_param(param))
                                   for name in names)
        elif isinstance(param, click.Argument) and here.arguments is None:
            here.arguments = _of_param(param)
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            here.subcommands.append(name)
            _from_click(sub, f"{path} {name}".strip(), found, context)


def _of_param(param: click.Parameter) -> object:
    """Its choices (a key's: the spec's key names), FILES for a path (by its type, or a
    name or metavar that says so: a location is a directory, or a URL typed whole), or
    None."""
    if isinstance(param.type, click.Choice):
        return tuple(str(choice) for choice in param.type.choices)
    if param.name == "key":
        return spec.MACHINE_KEYS + spec.JOB_KEYS
    if isinstance(param.type, (click.Path, click.File)) or param.name in _PATH_NAMES or \
            (param.metavar or "").upper() in _PATH_NAMES:
        return FILES
    return None


# Options whose values their command checks itself (not a click.Choice), and the values.
_VALUES = {("describe", "--format"): describe.FORMATS,
           ("submit-args", "--batch"): batch.NAMES,
           ("submit-args", "--format"): mjf_match.SUBMIT_FORMATS}
# The names and metavars of options and arguments that name a file or a directory.
_PATH_NAMES = ("file", "locations", "FILE", "DIR", "PATH")


def _from_command_line(line: CommandLine) -> Completion:
    return Completion(
        flags=[*COMMON_FLAGS, *line.flags, *HELP],
        values=_click_free_values(COMMON_VALUED + line.valued),
        arguments=COMMAND if line.positional_stop else None)


def _click_free_values(options) -> dict[str, object]:
    """A click-free command's valued options: those naming a file complete files."""
    return {option: FILES if option in _FILE_OPTIONS else None for option in options}


def _kind(value: object) -> str:
    """A value's or an argument's completion as the script names it."""
    if value is None:
        return "none"
    if value in (FILES, COMMAND):
        return str(value)
    return "words:" + " ".join(value)


def bash_script() -> str:
    """The completion script: three functions of the data (which words are subcommand
    paths, what completes each option's value, what may follow each path), the function
    bash calls, and its ``complete`` line."""
    found = completions()
    paths = " | ".join(f'"{path}"' for path in found if path)
    values = "\n".join(f'        "{path}:{option}") value="{_kind(value)}" ;;'
                        for path, here in found.items()
                        for option, value in sorted(here.values.items()))
    heres = "\n".join(
        f'        "{path}") subcommands="{" ".join(here.subcommands)}"; '
        f'options="{" ".join([*sorted(here.flags), *sorted(here.values)])}"; '
        f'arguments="{_kind(here.arguments)}" ;;'
        for path, here in found.items())
    return f"""\
# bash completion for mjf (mjf-hooks). Generated by `python3 -m mjf_hooks.cli.completion`
# from the command's own definitions; do not edit (tests/cli/test_mjf_completion.py).

# Whether $1 is a subcommand path (`config check`).
_mjf_is_path() {{
    case "$1" in
        {paths}) return 0 ;;
    esac
    return 1
}}

# What completes the value of option $2 of path $1 (sets value); 1 if it takes none.
_mjf_value_of() {{
    case "$1:$2" in
{values}
        *) return 1 ;;
    esac
}}

# What may follow path $1: its subcommands, its options, what completes its arguments.
_mjf_here() {{
    subcommands= options= arguments=none
    case "$1" in
{heres}
    esac
}}

_mjf_offer() {{
    case $1 in
        files) compopt -o filenames 2> /dev/null; COMPREPLY+=($(compgen -f -- "$cur")) ;;
        command) COMPREPLY+=($(compgen -c -- "$cur")) ;;
        words:*) COMPREPLY+=($(compgen -W "${{1#words:}}" -- "$cur")) ;;
    esac
}}

_mjf() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} path= word i value subcommands options arguments
    local job=0  # 1: the next word is the command a job runs; 2: its arguments
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${{COMP_WORDS[i]}}
        if ((job)); then job=2; continue; fi
        if _mjf_is_path "${{path:+$path }}$word"; then
            path="${{path:+$path }}$word"
        elif [[ $word == -- ]]; then
            job=1
        elif [[ $word == -* ]]; then
            _mjf_value_of "$path" "$word" && ((i++))  # its value is not an argument
        else
            _mjf_here "$path"
            [[ $arguments == command ]] && job=2
        fi
    done
    if ((job == 1)); then _mjf_offer command; return 0; fi
    if ((job == 2)); then _mjf_offer files; return 0; fi
    if ((COMP_CWORD > 1)) && _mjf_value_of "$path" "${{COMP_WORDS[COMP_CWORD-1]}}"; then
        _mjf_offer "$value"
        return 0
    fi
    _mjf_here "$path"
    if [[ $cur == -* ]] || [[ -z $subcommands && $arguments == none ]]; then
        _mjf_offer "words:$options"
    else
        _mjf_offer "words:$subcommands"
        _mjf_offer "$arguments"
    fi
    return 0
}}
complete -F _mjf mjf
"""


if __name__ == "__main__":
    sys.stdout.write(bash_script())
