"""LSF: a job's environment, resource limits and ``bjobs`` output -> job facts.

Built from IBM Spectrum LSF 10.1.0's documentation and run on volclava 2.2, an
LSF-compatible scheduler (docs/lsf.md says where the two differ). Pure functions;
:mod:`mjf_hooks.hooks.lsf` does the I/O. Facts used:

* ``LSB_JOBID``; ``LSB_JOBINDEX`` is the array index (0, or unset, for a job
  that is not an element of an array), and LSF names such a job ``1234[7]``;
* ``LSB_MCPU_HOSTS="hostA 4 hostB 2"`` lists each host with its slots;
  ``LSB_DJOB_NUMPROC`` the job's processors;
* no variable carries the run limit (``bsub -W``); ``bjobs -l JOBID`` prints it
  (``RUNLIMIT``, in minutes), on IBM LSF and volclava alike - IBM's ``bjobs -o
  runtimelimit`` is not in volclava;
* ``CPULIMIT`` is enforced as a per-process ``RLIMIT_CPU``, already divided by
  the host's CPU factor (so real seconds on this host); ``MEMLIMIT`` as
  ``RLIMIT_RSS`` unless cgroup enforcement is on.
"""

from __future__ import annotations

from ..errors import SiteInputError
from ..spec import MAX_JOB_ID_LENGTH, digits_value

NAME = "lsf"
TITLE = "LSF"


def job_store_dirs(options: dict[str, str]) -> list[tuple[str, str]]:
    """None of its own: a job whose user cannot write base_dir uses the per-user
    directory every job runner shares (:func:`mjf_hooks.store_locations.private_base_dir`)."""
    return []


def installed(options: dict[str, str]) -> bool:
    return False  # nothing to ask LSF for: see drain_query and jobs_query


def drain_query(options: dict[str, str], environ: dict[str, str], nodename: str) -> None:
    """None: an LSF host closed by an admin (``badmin hclose``) announces no time."""
    return None


def drains(output: str, node: str, now: float) -> list[tuple[int, str]]:
    return []


def jobs_query(options: dict[str, str], environ: dict[str, str], nodename: str) -> None:
    """None: the post-exec removes a job's directory (LSF runs it for every job)."""
    return None


def running_jobs(output: str) -> set[str]:
    return set()


def job_id(environ: dict[str, str]) -> str:
    """``1234``, or ``1234[7]`` for element 7 of an array job."""
    value = environ.get("LSB_JOBID", "")
    if not value:
        raise SiteInputError("LSB_JOBID is missing or empty: not run by LSF? "
                             "(use --env-file to replay a recorded environment)")
    if not (value.isascii() and value.isdigit()) or len(value) > MAX_JOB_ID_LENGTH:
        raise SiteInputError(f"LSB_JOBID={value!r} is not an LSF job id (digits)")
    raw_index = environ.get("LSB_JOBINDEX", "0") or "0"
    index = digits_value(raw_index)
    if index is None:
        raise SiteInputError(f"LSB_JOBINDEX={raw_index!r} is not an array index (digits)")
    return value if index == 0 else f"{value}[{index}]"


def job_tmpdir_name(environ: dict[str, str]) -> str:
    """The name LSF gives the job-specific temporary directory it makes (``LSB_JOB_TMPDIR``
    or ``LSF_TMPDIR``; ``$TMPDIR`` where ``LSB_SET_TMPDIR=y``): ``1234.tmpdir``, or
    ``1234_7.tmpdir`` for element 7 of an array. Raises as :func:`job_id`."""
    name = job_id(environ)
    return (name.replace("[", "_").rstrip("]") if "[" in name else name) + ".tmpdir"


def _short(host: str) -> str:
    return host.split(".", 1)[0].lower()


def cpus_on_host(environ: dict[str, str], host_names: list[str]) -> tuple[int, str]:
    """This host's slots of the job, from ``LSB_MCPU_HOSTS`` (``LSB_DJOB_NUMPROC`` if unset).

    ``host_names`` are this host's names (short names match full ones).
    """
    pairs_text = environ.get("LSB_MCPU_HOSTS", "").strip()
    if not pairs_text:
        total = environ.get("LSB_DJOB_NUMPROC", "")
        if digits_value(total):
            return digits_value(total), f"LSB_DJOB_NUMPROC={total}"
        raise SiteInputError("neither LSB_MCPU_HOSTS nor LSB_DJOB_NUMPROC gives the job's CPUs")
    words = pairs_text.split()
    if len(words) % 2 or not all(digits_value(count) for count in words[1::2]):
        raise SiteInputError(f"LSB_MCPU_HOSTS={pairs_text!r} is not pairs of host and count "
                             "such as 'hostA 4 hostB 2'")
    mine = {_short(name) for name in host_names}
    counts = [int(count) for host, count in zip(words[::2], words[1::2]) if _short(host) in mine]
    if not counts:
        raise SiteInputError(f"this host ({', '.join(host_names)}) is not in "
                             f"LSB_MCPU_HOSTS={pairs_text!r}")
    return sum(counts), f"LSB_MCPU_HOSTS={pairs_text}"


def parse_bjobs_run_limit_secs(text: str) -> int | None:
    """``bjobs -l JOBID`` -> the job's RUNLIMIT in seconds; None when it has none.

    Every LSF prints a job's limits as a line of names (``CPULIMIT  RUNLIMIT ...``) over
    a line of their values, each ``N.N min`` (IBM LSF adds ``of HOST`` where it normalised
    the limit to a host's CPU factor); a limit not set is not printed at all. Raises
    ValueError when RUNLIMIT is there without a value in minutes under it.
    """
    lines = text.splitlines()
    for number, line in enumerate(lines):
        names = line.split()
        # Only a line of limit names: a job's name or command line may hold the word too.
        if "RUNLIMIT" not in names or not all(name.isupper() and name.endswith("LIMIT")
                                              for name in names):
            continue
        below = lines[number + 1] if number + 1 < len(lines) else ""
        words = below.split()
        minutes = [words[index] for index in range(len(words) - 1) if words[index + 1] == "min"]
        index = names.index("RUNLIMIT")
        if index >= len(minutes):
            raise ValueError("bjobs -l shows RUNLIMIT without a value in minutes under it: "
                             f"{below.strip()[:80]!r}")
        try:
            value = float(minutes[index])
        except ValueError:
            raise ValueError(f"bjobs -l RUNLIMIT {minutes[index][:40]!r} is not minutes") from None
        if not 0 < value < 1e12:
            raise ValueError(f"bjobs -l RUNLIMIT {minutes[index][:40]!r} is not a positive "
                             "run limit")
        return round(value * 60)
    return None


def limit_facts(cpu_secs: int | None, rss_bytes: int | None, infinity: int) -> dict:
    """Facts from the ``RLIMIT_CPU`` and ``RLIMIT_RSS`` in force (``infinity``: no limit)."""
    facts = {}
    if cpu_secs is not None and cpu_secs != infinity and cpu_secs >= 0:
        facts["cpu_limit_secs"] = (cpu_secs, "RLIMIT_CPU (LSF's CPULIMIT, in real seconds)")
    if rss_bytes is not None and rss_bytes != infinity and rss_bytes > 0:
        facts["max_rss_bytes"] = (rss_bytes, "RLIMIT_RSS (LSF's MEMLIMIT)")
    return facts


def job_facts(environ: dict[str, str], host_names: list[str], now: int,
              limits: dict | None, run_limit: tuple | None) -> tuple[dict, list[str]]:
    """Job facts of a pre-exec or starter, and warnings about what could not be determined.

    ``host_names``: this host's names (as LSB_MCPU_HOSTS may spell them); ``limits``:
    :func:`limit_facts` of the job's own process (None outside the job, in a pre-exec);
    ``run_limit``: what ``bjobs`` said (:func:`parse_bjobs_run_limit_secs`) with its source.
    Identity errors raise.
    """
    facts: dict[str, tuple] = {"job_id": (job_id(environ), "LSB_JOBID/LSB_JOBINDEX"),
                               "jobstart_secs": (now, "time the job started")}
    warnings = []
    try:
        facts["allocated_cpu"] = cpus_on_host(environ, host_names)
    except SiteInputError as error:
        warnings.append(f"allocated_cpu not written: {error}")
    facts.update(limits or {})
    if run_limit:
        facts["wall_limit_secs"] = run_limit
    return facts, warnings
