"""One module per batch system: what it says about its jobs, as pure functions of text.

Every batch module provides the same names, declared once as a type,
:class:`mjf_hooks.batch.contract.BatchModule` (the seam the rest of the suite uses; a
new batch system adds one module, see docs/adding-a-batch-system.md).
tests/unit/test_batch_contract.py checks every name in :data:`NAMES` against it:

``NAME``, ``TITLE``
    recorded in each job's ``state/backend``, and its ``[NAME]`` config section; the
    name messages use.
``JobInput`` and ``job_facts(given, now)``
    what a hook of the batch system gathered (its environment, the text its commands
    printed: a class of the module's own), and from it and the time ``({mjf key: (value,
    source)}, warnings)``: pure, so tests feed recorded data.
``installed(options)``
    whether this node looks like it runs the batch system (``options``: its config
    section), when ``[mjf] batch_systems`` does not say.
``drain_query(options, environ, nodename)`` and ``drains(output, node, now)``
    the command (argv, environment) that tells of a drain of this machine, or None;
    and its output -> ``[(UNIX time the machine must be empty, what)]``.
``jobs_query(options, environ, nodename)`` and ``running_jobs(output)``
    the command that lists this node's running jobs, or None where the batch system
    itself removes what its jobs leave (then nothing here is ever proven gone); and
    its output -> the job directory names that still run (ValueError for output it
    cannot read: then nothing is removed).
``job_store_dirs(options)``
    where its jobs keep stores outside base_dir: ``[(parent, subpath)]``, a store at
    ``<parent>/<entry>/<subpath>`` for each entry (HTCondor: each job's scratch).
    The per-user directory of a job whose user cannot write base_dir is shared by
    every job runner (:func:`mjf_hooks.store_locations.private_base_dir`).

Optional (with these signatures where present):

``job_id(environ)``
    the job's id from a hook's environment (SiteInputError if there is none), where
    the environment carries it: every batch system but HTCondor, whose id is in the
    job ad that its ``job_facts`` reads.
``node_name(options)``
    the name the batch system knows this host by, where that may differ from its
    host name (Slurm's ``NodeName``); :func:`node_name` gives the host name otherwise.
"""

NAMES = ("slurm", "htcondor", "lsf", "gridengine", "pbs")


def node_name(module, options: dict[str, str]) -> str:
    """This host's name for the batch system ``module`` (see ``node_name`` above)."""
    import os

    own = getattr(module, "node_name", None)
    return own(options) if own else os.uname().nodename


def backend(name: str):
    """The batch module called ``name`` (one of NAMES), imported when first needed."""
    if name not in NAMES:
        raise KeyError(name)
    return __import__(f"mjf_hooks.batch.{name}", fromlist=["NAME"])
