"""The interface every batch module provides, as a type: :class:`BatchModule`.

Only the tests (tests/unit/test_batch_contract.py checks every name in
:data:`mjf_hooks.batch.NAMES` against it) and type checkers import this module: it
imports ``typing``, which no hook may pay for at start-up.

A function's parameter names are part of the contract (the conformance test compares
signatures). What a batch system's hooks are given differs from one to the next (an
environment, ClassAds, a job's attributes, what its commands printed): each module
declares it as its own class, ``JobInput``, which ``job_facts`` takes.
"""

from __future__ import annotations

from typing import Protocol


class BatchModule(Protocol):
    """What :mod:`mjf_hooks.sync`, :mod:`mjf_hooks.lifecycle` and the hook commands use of
    a batch module (``mjf_hooks/batch/<NAME>.py``)."""

    NAME: str
    """The module's name (one of ``batch.NAMES``): recorded in each job's
    ``state/backend``, and its ``[NAME]`` config section."""
    TITLE: str
    """The batch system's name in messages."""

    JobInput: type
    """What a hook of the batch system gathered for ``job_facts`` (its environment, the
    text its commands printed, ...): a class of its own, with ``__slots__``."""

    def job_facts(self, given, now: int) -> tuple[dict[str, tuple], list[str]]:
        """``given`` (a ``JobInput``) and the time -> ``({key: (value, source)},
        warnings)``: pure, so tests feed recorded data; identity errors raise."""

    def installed(self, options: dict[str, str]) -> bool:
        """Whether this node looks like it runs the batch system, when ``[mjf]
        batch_systems`` does not say (``options``: its config section)."""

    def job_store_dirs(self, options: dict[str, str]) -> list[tuple[str, str]]:
        """Where its jobs keep stores outside base_dir: ``[(parent, subpath)]``."""

    def drain_query(self, options: dict[str, str], environ: dict[str, str],
                    nodename: str) -> tuple[list[str], dict[str, str]] | None:
        """The command that tells of a drain of this machine, or None."""

    def drains(self, output: str, node: str, now: float) -> list[tuple[int, str]]:
        """``drain_query``'s output -> ``[(UNIX time the machine must be empty, what)]``."""

    def jobs_query(self, options: dict[str, str], environ: dict[str, str],
                   nodename: str) -> tuple[list[str], dict[str, str]] | None:
        """The command that lists this node's running jobs, or None where the batch
        system itself removes what its jobs leave."""

    def running_jobs(self, output: str) -> set[str]:
        """``jobs_query``'s output -> the job directory names that still run (ValueError
        for output it cannot read)."""


class JobIdFromEnvironment(Protocol):
    """Optional: where a hook's environment carries the job's id (every batch system but
    HTCondor, whose id is in the job ad that ``job_facts`` reads)."""

    def job_id(self, environ: dict[str, str]) -> str:
        """The job's id (SiteInputError if there is none)."""


class OwnNodeName(Protocol):
    """Optional: where the batch system's name for this host may differ from its host
    name (Slurm's ``NodeName``, PBS's ``PBS_MOM_NODE_NAME``)."""

    def node_name(self, options: dict[str, str]) -> str:
        """The name the batch system knows this host by."""


class UsageReports(Protocol):
    """Optional: where a hook of the job's user reports what the job used (its
    ``usage/``), for the record of a job whose end `mjf sync` does."""

    USAGE_SOURCE: str
    """Where that report comes from, as a record names the source of its values."""


class Publisher(Protocol):
    """Optional, a module of its own: ``mjf_hooks/publish/<NAME>.py``, for a batch system
    `mjf publish` writes the node's facts into (its name in ``publish.PUBLISHERS``)."""

    def read_query(self, options: dict[str, str],
                   node: str) -> tuple[list[str], dict[str, str]]:
        """The command that prints what this node publishes."""

    def published(self, output: str, names: list[str]) -> dict[str, str]:
        """Its output -> ``{name: value text}`` of ``names`` (ValueError: unreadable)."""

    def write_commands(self, options: dict[str, str], node: str, changes: dict[str, str],
                       published: dict[str, str]) -> list[tuple[list[str], dict[str, str]]]:
        """The commands that set ``changes`` (names and values already checked)."""


PUBLISHER = ("read_query", "published", "write_commands")


class SubmitOptions(Protocol):
    """A module of its own for every batch system: ``mjf_hooks/submit/<NAME>.py``, what
    `mjf submit-args --batch NAME` prints."""

    DIRECTIVE: str | None
    """What begins a job script's line of these options (``#SBATCH``); None where they
    are lines of a submit description (HTCondor's, given with ``-append``)."""

    def options(self, needs, settings) -> list[list[str]]:
        """A job's needs (:class:`mjf_hooks.match.reduce.Needs`) and the site's settings
        (:class:`mjf_hooks.submit.Settings`) -> the options, one list of words per line;
        Unexpressible naming a clause the batch system cannot express."""

REQUIRED = ("NAME", "TITLE", "JobInput", "job_facts", "installed", "job_store_dirs", "drain_query",
            "drains", "jobs_query", "running_jobs")
OPTIONAL = {"job_id": JobIdFromEnvironment, "node_name": OwnNodeName}
OPTIONAL_TEXTS = {"USAGE_SOURCE": UsageReports}
