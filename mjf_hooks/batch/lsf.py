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


_BIN_DIRS = ("/usr/bin", "/usr/local/bin")


def command_path(options: dict[str, str], name: str) -> str | None:
    """An LSF command (``bjobs``, ``badmin``): beside the configured ``[lsf] bjobs`` if
    there is one (LSF keeps its commands together, in ``LSF_BINDIR``), else the first of
    the usual places that has it."""
    import os

    if options.get("bjobs"):
        return os.path.join(os.path.dirname(options["bjobs"]), name)
    return next((path for path in (os.path.join(directory, name) for directory in _BIN_DIRS)
                 if os.path.exists(path)), None)


def installed(options: dict[str, str]) -> bool:
    """LSF's admin command is on this host (where ``[lsf] bjobs`` says, or the usual
    places)."""
    import os

    path = command_path(options, "badmin")
    return path is not None and os.path.exists(path)


def command_env(environ: dict[str, str]) -> dict[str, str]:
    """What LSF's commands run with: a fixed PATH, and the caller's ``LSF_ENVDIR`` (where
    ``lsf.conf`` is; ``/etc`` without it). Only `mjf sync` asks, as root, with the admin's
    environment."""
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
    if environ.get("LSF_ENVDIR"):
        env["LSF_ENVDIR"] = environ["LSF_ENVDIR"]
    return env


def _host_argument(nodename: str) -> str | None:
    """This host's short name, where it is one LSF can be asked about."""
    short = nodename.split(".")[0]
    return short if short and all(char.isalnum() or char in "-_" for char in short) else None


def drain_query(options: dict[str, str], environ: dict[str, str],
                nodename: str) -> tuple[list[str], dict[str, str]] | None:
    """``badmin hhist HOST``: when an admin closed (``badmin hclose``) or opened this host."""
    badmin, host = command_path(options, "badmin"), _host_argument(nodename)
    if badmin is None or host is None:
        return None
    return [badmin, "hhist", host], command_env(environ)


def drains(output: str, node: str, now: float) -> list[tuple[int, str]]:
    """``badmin hhist HOST`` -> (when it was closed, what) while the last thing an admin
    did to ``node`` was to close it: a closed host takes no new job, so MJF announces it
    as shutting down from then on; opening it again withdraws that.

    Each event is one line, ``Thu Dec  3 06:56:19: Host <vm> closed by administrator
    <root>.`` (a year after the time where the LSF prints one); a line that is not such
    an event is skipped."""
    closed: tuple[int, str] | None = None
    for line in output.splitlines():
        when_text, colon, event = line.partition(": Host <")
        name, bracket, action = event.partition("> ")
        if not colon or not bracket or name.split(".")[0].lower() != node.lower():
            continue
        if action.startswith("closed by administrator"):
            when = _event_time(when_text, now)
            if when is not None:
                closed = (when, f"LSF host closed by {action[len('closed by '):].rstrip('.')}")
        elif action.startswith("opened by administrator"):
            closed = None
    return [closed] if closed else []


def _event_time(text: str, now: float) -> int | None:
    """``Thu Dec  3 06:56:19`` (this machine's local time; the year where given, else the
    latest that is not in the future) -> UNIX seconds; None if it is not such a time."""
    import time

    words = text.split()
    if len(words) not in (4, 5):
        return None
    years = [words[4]] if len(words) == 5 else \
        [str(time.localtime(now).tm_year), str(time.localtime(now).tm_year - 1)]
    for year in years:
        try:
            parsed = time.strptime(" ".join([*words[1:4], year]), "%b %d %H:%M:%S %Y")
        except ValueError:
            return None
        seconds = int(time.mktime(parsed))
        if seconds <= now + 86400:  # not after tomorrow: else the year before
            return seconds
    return None


def jobs_query(options: dict[str, str], environ: dict[str, str],
               nodename: str) -> tuple[list[str], dict[str, str]] | None:
    """``bjobs -u all -w -m HOST``: every user's unfinished jobs on this host (a job killed
    while its pre-exec ran gets no post-exec: its directory is removed by `mjf sync`).

    bjobs says ``No unfinished job found`` on stderr and exits 254 where there is none, as
    it does for a failure: so it runs under ``sh`` with its stderr in its output and its
    status dropped, and :func:`running_jobs` tells the two apart by the text."""
    bjobs, host = command_path(options, "bjobs"), _host_argument(nodename)
    if bjobs is None or host is None:
        return None
    return (["/bin/sh", "-c", '"$@" 2>&1; exit 0', "sh", bjobs, "-u", "all", "-w", "-m", host],
            command_env(environ))


def running_jobs(output: str) -> set[str]:
    """``bjobs -w`` -> the job directory names of the jobs it lists: ``1234``, and
    ``1234[7]`` too where its name ends in ``[7]`` (an array's element). Raises
    ValueError for output that is not bjobs' table (``No unfinished job found`` is an empty one)."""
    lines = [line for line in output.splitlines() if line.strip()]
    if len(lines) == 1 and lines[0].startswith("No unfinished job found"):
        return set()
    if not lines or lines[0].split()[:3] != ["JOBID", "USER", "STAT"]:
        raise ValueError(f"bjobs printed {lines[0][:80] if lines else 'nothing'!r}, not its "
                         "table of jobs")
    names = set()
    for line in lines[1:]:
        words = line.split()
        if not digits_value(words[0]):
            continue  # a host of a job on several, on a line of its own
        names.add(words[0])
        # The name is before the submission time (its last three words): an array's
        # element is NAME[INDEX]. A job's own name may end so too: both are kept.
        name = words[-4] if len(words) >= 8 else ""
        index = name.rpartition("[")[2].rstrip("]") if name.endswith("]") else ""
        if digits_value(index) is not None:
            names.add(f"{words[0]}[{int(index)}]")
    return names


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


MEMORY_UNITS = ("KB", "MB", "GB", "TB")


def unit_for_limits(lsf_conf: str) -> str | None:
    """``lsf.conf``'s ``LSF_UNIT_FOR_LIMITS`` (the unit of a plain ``bsub -M`` number), if
    it sets one of :data:`MEMORY_UNITS`; None where it does not (IBM LSF then takes KB,
    volclava MB: ``[lsf] memory_unit`` tells which)."""
    unit = None
    for line in lsf_conf.splitlines():
        name, equals, value = line.strip().partition("=")
        if equals and name.strip() == "LSF_UNIT_FOR_LIMITS":
            unit = value.strip().strip("\"'").upper() or None
    return unit if unit in MEMORY_UNITS else None


# Units of bjobs' memory figures (IBM LSF also prints Gbytes and Tbytes).
_BJOBS_MEMORY_UNITS = {"Kbytes": 2**10, "Mbytes": 2**20, "Gbytes": 2**30, "Tbytes": 2**40}


def parse_bjobs_usage(text: str, source: str) -> dict[str, tuple]:
    """``bjobs -l JOBID`` of an ended job -> what it used, as a record's Delivered values:
    ``cpu_secs`` (``The CPU time used is 6.1 seconds.``, from the job's rusage when it
    ended) and ``peak_memory_bytes`` (``MAX MEM: 212 Mbytes``, the most LSF's samples of
    the job's processes saw). A figure that is not there, or not such, is left out."""
    found: dict[str, tuple] = {}
    seconds, unit = _figure_after(text, "The CPU time used is ")
    if seconds is not None and unit.startswith("second"):
        found["cpu_secs"] = (seconds, f"{source}: CPU time used")
    amount, unit = _figure_after(text, "MAX MEM:")
    if amount is not None and unit.rstrip(";") in _BJOBS_MEMORY_UNITS:
        found["peak_memory_bytes"] = (round(amount * _BJOBS_MEMORY_UNITS[unit.rstrip(";")]),
                                      f"{source}: MAX MEM")
    return found


def _figure_after(text: str, marker: str) -> tuple[float | None, str]:
    """The number after ``marker`` in ``text`` (None: none, or not one from 0 to 1e12) and
    the word after it (its unit)."""
    at = text.find(marker)
    words = text[at + len(marker):].split(None, 2) if at >= 0 else []
    if len(words) < 2:
        return None, ""
    try:
        value = float(words[0])
    except ValueError:
        return None, ""
    return (value if 0 <= value < 1e12 else None), words[1]


def remote_task_starter(environ: dict[str, str], host_names: list[str],
                        starter: str) -> str | None:
    """The ``LSF_JOB_STARTER`` a job across hosts gets from its starter: ``starter``
    (``mjf-lsf starter``), in front of the one the job has. LSF's RES runs each task a job
    starts on a host through ``lsrun``/``lsgrun`` (volclava has no ``blaunch``) as
    ``/bin/sh -c "$LSF_JOB_STARTER COMMAND ARGS"``, with the job's environment: so the
    job's other hosts each set up their share of it. None where ``LSB_MCPU_HOSTS`` names
    no other host, or the job's starter begins with ``starter`` already."""
    hosts = environ.get("LSB_MCPU_HOSTS", "").split()[::2]
    mine = {_short(name) for name in host_names}
    if all(_short(host) in mine for host in hosts):
        return None
    current = environ.get("LSF_JOB_STARTER", "").strip()
    if current == starter or current.startswith(starter + " "):
        return None
    return f"{starter} {current}".rstrip()


def limit_facts(cpu_secs: int | None, rss_bytes: int | None, infinity: int) -> dict:
    """Facts from the ``RLIMIT_CPU`` and ``RLIMIT_RSS`` in force (``infinity``: no limit)."""
    facts = {}
    if cpu_secs is not None and cpu_secs != infinity and cpu_secs >= 0:
        facts["cpu_limit_secs"] = (cpu_secs, "RLIMIT_CPU (LSF's CPULIMIT, in real seconds)")
    if rss_bytes is not None and rss_bytes != infinity and rss_bytes > 0:
        facts["max_rss_bytes"] = (rss_bytes, "RLIMIT_RSS (LSF's MEMLIMIT)")
    return facts


class JobInput:
    """What a pre-exec or starter gathered for :func:`job_facts`: its ``environ``;
    ``host_names``, this host's names (as LSB_MCPU_HOSTS may spell them); ``limits``,
    :func:`limit_facts` of the job's own process (None outside the job, in a pre-exec);
    ``run_limit``, what ``bjobs`` said (:func:`parse_bjobs_run_limit_secs`) with its
    source."""

    __slots__ = ("environ", "host_names", "limits", "run_limit")

    def __init__(self, environ: dict[str, str], host_names: list[str],
                 limits: dict | None = None, run_limit: tuple | None = None) -> None:
        self.environ, self.host_names, self.limits, self.run_limit = \
            environ, host_names, limits, run_limit


def job_facts(given: JobInput, now: int) -> tuple[dict, list[str]]:
    """Job facts of a pre-exec or starter, and warnings about what could not be
    determined. Identity errors raise."""
    environ, host_names, limits, run_limit = given.environ, given.host_names, \
        given.limits, given.run_limit
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
