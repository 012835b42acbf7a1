"""The locations `mjf show`, `check`, `describe` and `match` are given: which hold machine
features, which job features, which are base_dirs. No click: `mjf describe` runs without
it (:mod:`mjf_hooks.cli.mjf_describe`); the click commands turn a :class:`UsageError` into
theirs."""

from __future__ import annotations

import os

from ..errors import MJFError
from ..options import UsageError
from ..reader import Features, JobView, is_url

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..check import Listing

# What reading a location may raise: the reader's errors, and OSError as a safety net
# (the reader turns those into ReadError): a message, never a traceback.
UNREADABLE = (MJFError, OSError)


def classify(locations: tuple[str, ...],
             ) -> tuple[Features | None, list[Features], list[Listing]]:
    """Machine features, named job features and listed base_dirs' jobs to look at:
    from the environment, or the locations given.

    A location ending in ``machinefeatures`` or ``jobfeatures`` (a directory or
    a URL) is that; a local base_dir means its machine features and every job
    in its ``jobs/`` (listed: they may end while being read); a job's directory
    means its ``jobfeatures``. UsageError for a location that is none of these.
    """
    if not locations:
        view = JobView.from_environ()
        return view.machine, [view.job] if view.job else [], []
    machine, jobs, listings = None, [], []
    for location in locations:
        location = location.rstrip("/") or "/"
        last = location.rsplit("/", 1)[-1]
        if last == "machinefeatures":
            machine = Features(location)
        elif last == "jobfeatures":
            jobs.append(Features(location))
        elif not is_url(location) and os.path.isdir(os.path.join(location, "machinefeatures")):
            from ..check import list_jobs

            machine = Features(os.path.join(location, "machinefeatures"))
            listings.append(list_jobs(location))
        elif not is_url(location) and os.path.isdir(os.path.join(location, "jobfeatures")):
            jobs.append(Features(os.path.join(location, "jobfeatures")))
        else:
            raise UsageError(
                f"cannot tell whether {location} holds machine or job features"
                f"{_why_unreadable(location)}: give a .../machinefeatures or .../jobfeatures "
                "location, a job directory or a base_dir"
            )
    return machine, jobs, listings


def _why_unreadable(location: str) -> str:
    """The system's reason a local location cannot be looked into (a typo, permissions)."""
    if is_url(location):
        return ""
    try:
        os.listdir(location)
    except OSError as error:
        return f" ({error.strerror or error})"
    return ""
