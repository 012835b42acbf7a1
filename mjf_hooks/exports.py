"""How a job is told where its features are: the MACHINEFEATURES and JOBFEATURES (and
JOBSTATUS) variables, as paths or as the URLs ``url_base`` serves them at, and the
``export`` lines a TaskProlog prints."""

from __future__ import annotations

import os

from .config import Config
from .store import JOB_STATUS_DIR


def exports(config: Config, machine_dir: str, job_dir: str) -> dict[str, str]:
    """The variables a job gets: the directories, or with ``export = url`` their URLs.

    Only what lies under ``base_dir`` has a URL (the server serves base_dir);
    a directory elsewhere (an HTCondor scratch, a private fallback) stays a path.
    ``JOBSTATUS`` (where the site offers it and the job has one) is always a path: the
    job's pilot writes there.
    """
    variables = {"MACHINEFEATURES": _exported(config, machine_dir),
                 "JOBFEATURES": _exported(config, job_dir)}
    if config.jobstatus:
        status_dir = os.path.join(os.path.dirname(job_dir), JOB_STATUS_DIR)
        if os.path.isdir(status_dir):
            variables["JOBSTATUS"] = status_dir
    return variables


def _exported(config: Config, path: str) -> str:
    if config.export != "url":
        return path
    return served_url(config, path) or path


def served_url(config: Config, path: str) -> str | None:
    """The URL at which ``url_base`` serves a path of ``base_dir``; None for a path
    elsewhere, or where no ``url_base`` is set."""
    prefix = config.base_dir.rstrip("/") + "/"
    if not config.url_base or not path.startswith(prefix):
        return None
    return config.url_base + "/" + "/".join(_url_quote(part)
                                            for part in path[len(prefix):].split("/"))


# RFC 3986 characters a path segment may hold as they are.
_URL_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                      "-._~!$&'()*+,;=:@")


def _url_quote(segment: str) -> str:
    # Not urllib.parse.quote: it would pull `re` into every hook that exports.
    return "".join(char if char in _URL_SAFE else f"%{ord(char):02X}" for char in segment)


def export_lines(variables: dict[str, str]) -> str:
    """The variables as a TaskProlog prints them (and a dry run shows them)."""
    return "".join(f"export {name}={value}\n" for name, value in variables.items())
