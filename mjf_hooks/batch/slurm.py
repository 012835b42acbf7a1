"""Slurm: a job's Prolog/TaskProlog environment and ``scontrol`` output -> job facts.

Everything here is a pure function of text (an environment mapping, a line of
``scontrol show ... -o``); the hook in :mod:`mjf_hooks.hooks.slurm` does the I/O.
Facts are ``{mjf key: (value, source)}`` as :mod:`mjf_hooks.features` expects.

Facts about Slurm's contract (the Slurm docs, and docs/slurm.md):

* Prolog/Epilog get ``SLURM_JOB_ID``, ``SLURM_JOB_UID/GID``, ``SLURMD_NODENAME``,
  ``SLURM_JOB_NODELIST`` (or ``SLURM_NODELIST``) and ``SLURM_JOB_CPUS_PER_NODE``
  (compressed: ``4(x2),2``); from 23.02 also ``SLURM_JOB_START_TIME`` and
  ``SLURM_JOB_END_TIME`` (the projected end: end - start is the time limit).
* No memory request reaches the Prolog; ``scontrol show job -o`` has
  ``MinMemoryNode=``/``MinMemoryCPU=`` in MiB-based units and ``TimeLimit=``.
* The TaskProlog sees ``SLURM_MEM_PER_NODE`` or ``SLURM_MEM_PER_CPU`` (MiB).
"""

from __future__ import annotations

import os
import time

from ..errors import SiteInputError
from ..spec import EARLIEST_TIME, LATEST_TIME, MAX_JOB_ID_LENGTH, digits_value

MIB = 1024**2
# Slurm memory sizes: a number of MiB, or with a K/M/G/T suffix (powers of 1024).
_MEMORY_UNITS = {"K": 1024, "M": MIB, "G": 1024**3, "T": 1024**4}
_NO_LIMIT = {"UNLIMITED", "INFINITE", "NONE", "N/A", "(NULL)", ""}  # compared uppercased


_BIN_DIRS = ("/usr/bin", "/usr/local/bin", "/opt/slurm/bin")


def command_path(name: str, scontrol: str | None = None) -> str | None:
    """A Slurm command (``scontrol``, ``squeue``): beside the configured ``[slurm]
    scontrol`` if there is one, else the first of the usual places that has it."""
    if scontrol:
        return scontrol if name == "scontrol" else os.path.join(os.path.dirname(scontrol), name)
    return next((path for path in (os.path.join(directory, name) for directory in _BIN_DIRS)
                 if os.path.exists(path)), None)


NAME = "slurm"
TITLE = "Slurm"
# Where a job's record takes what it used from: the job's cgroup is gone by the Epilog
# (Slurm removes it first), so its usage report, read there by the TaskEpilog as the
# job's user.
USAGE_SOURCE = "the job's cgroup, read by its TaskEpilog (as the job's user)"


def job_store_dirs(options: dict[str, str]) -> list[tuple[str, str]]:
    """None outside base_dir: the Prolog runs as root."""
    return []


def node_name(options: dict[str, str]) -> str:
    """``[slurm] nodename`` where slurm.conf's ``NodeName`` for this host is not its host
    name (``NodeHostname=`` set, or ``slurmd -N``)."""
    return options.get("nodename") or os.uname().nodename


def installed(options: dict[str, str]) -> bool:
    return command_path("scontrol", options.get("scontrol")) is not None


def drain_query(options: dict[str, str], environ: dict[str, str],
                nodename: str) -> tuple[list[str], dict[str, str]] | None:
    """Maintenance reservations (``scontrol show reservation``)."""
    scontrol = command_path("scontrol", options.get("scontrol")) or "/usr/bin/scontrol"
    return [scontrol, "show", "reservation", "-o"], command_env(environ)


def drains(output: str, node: str, now: float) -> list[tuple[int, str]]:
    return maintenance_drains(output, node, now)


def jobs_query(options: dict[str, str], environ: dict[str, str],
               nodename: str) -> tuple[list[str], dict[str, str]] | None:
    """The jobs Slurm runs on this node (``squeue -w``); None without squeue."""
    squeue = command_path("squeue", options.get("scontrol"))
    if squeue is None or not os.path.exists(squeue):
        return None
    return [squeue, "-h", "-w", nodename.split(".")[0], "-o", "%A"], command_env(environ)


def running_jobs(output: str) -> set[str]:
    return {line.strip() for line in output.splitlines() if line.strip()}


def command_env(environ: dict[str, str]) -> dict[str, str]:
    """The environment Slurm's commands run with: a fixed PATH, and the job's (or the
    caller's) ``SLURM_CONF`` where one is set."""
    env = {"PATH": "/usr/bin:/bin"}
    if environ.get("SLURM_CONF"):
        env["SLURM_CONF"] = environ["SLURM_CONF"]
    return env


def maintenance_drains(output: str, node: str, now: float) -> list[tuple[int, str]]:
    """``scontrol show reservation -o`` -> (start, what) of each reservation with the
    ``MAINT`` flag that covers ``node`` (a short host name) and has not ended."""
    found = []
    for line in output.splitlines():
        record = parse_scontrol_record(line)
        flags = record.get("Flags", "").upper().split(",")
        if "MAINT" not in flags or "ReservationName" not in record:
            continue
        nodes = record.get("Nodes", "")
        try:
            covered = nodes.upper() == "ALL" or node in {
                name.split(".")[0] for name in expand_hostlist(nodes)}
        except ValueError:
            continue
        start = parse_local_time(record.get("StartTime", ""))
        end = parse_local_time(record.get("EndTime", ""))
        if covered and start is not None and (end is None or end > now):
            found.append((start, f"Slurm maintenance reservation {record['ReservationName']}"))
    return found


def job_id(environ: dict[str, str]) -> str:
    """The job id of a Slurm hook's environment: plain digits, else SiteInputError."""
    value = environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID") or ""
    if not value:
        raise SiteInputError("SLURM_JOB_ID is missing or empty: not run by Slurm? "
                             "(use --env-file to replay a recorded environment)")
    if not (value.isascii() and value.isdigit()) or len(value) > MAX_JOB_ID_LENGTH:
        raise SiteInputError(f"SLURM_JOB_ID={value!r} is not a Slurm job id (digits)")
    return value


# Bounds of an expanded host list, checked before any name is made: far more hosts
# than a Slurm cluster has, and longer names than a host has (Linux: 64 characters).
MAX_HOSTS = 100000
MAX_HOST_NAME = 255


def expand_hostlist(text: str) -> list[str]:
    """Expand a Slurm host list: ``vm[01-03,7],gpu[1-2]x`` -> every host name, in order.

    ValueError for a malformed list, or one that names more than MAX_HOSTS hosts or a
    name longer than MAX_HOST_NAME: nested ranges multiply (``a[0-99999]b[0-99999]`` is
    10^10 names), so the count is taken before anything is expanded.
    """
    patterns, total = [], 0
    for item in _split_outside_brackets(text.strip()):
        if not item:
            raise ValueError(f"empty host name in {text!r}")
        parts, count = _parse_host(item)
        total += count
        if total > MAX_HOSTS:
            raise ValueError(f"{text!r} names more than {MAX_HOSTS} hosts")
        patterns.append(parts)
    hosts: list[str] = []
    for parts in patterns:
        hosts.extend(_expand_host(parts))
    return hosts


def _split_outside_brackets(text: str) -> list[str]:
    items, depth, current = [], 0, []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in {text!r}")
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise ValueError(f"unbalanced '[' in {text!r}")
    items.append("".join(current))
    return items


def _parse_host(item: str) -> tuple[list, int]:
    """One host pattern -> (its parts, how many names it makes).

    A part is a literal string or a bracket's ranges, a list of (first, last, width).
    The count stops growing past MAX_HOSTS: it only has to show that it is too many.
    """
    parts: list = []
    count, length, position = 1, 0, 0
    while position < len(item):
        start = item.find("[", position)
        if start < 0:
            start = end = len(item)
        else:
            end = item.find("]", start)
            if end < 0:
                raise ValueError(f"unbalanced '[' in {item!r}")
        if start > position:
            parts.append(item[position:start])
            length += start - position
        if end > start:
            ranges, numbers, width = [], 0, 0
            for part in item[start + 1:end].split(","):
                first, dash, last = part.partition("-")
                low, high = digits_value(first), digits_value(last if dash else first)
                if low is None or high is None or high < low:
                    raise ValueError(f"bad range {part!r} in {item!r}")
                ranges.append((low, high, len(first)))
                numbers = min(numbers + high - low + 1, MAX_HOSTS + 1)
                width = max(width, len(first), len(str(high)))
            parts.append(ranges)
            count = min(count * numbers, MAX_HOSTS + 1)
            length += width
        if length > MAX_HOST_NAME:
            raise ValueError(f"{item!r} makes host names longer than {MAX_HOST_NAME} "
                             "characters")
        position = end + 1
    return parts, count


def _expand_host(parts: list) -> list[str]:
    """Every name of a parsed host pattern, in order (its count was checked)."""
    names = [""]
    for part in parts:
        if isinstance(part, str):
            names = [name + part for name in names]
        else:
            numbers = [f"{number:0{width}d}" for low, high, width in part
                       for number in range(low, high + 1)]
            names = [name + number for name in names for number in numbers]
    return names


def parse_cpus_per_node(text: str) -> list[int]:
    """``SLURM_JOB_CPUS_PER_NODE`` (``4(x2),2``) -> one CPU count per node."""
    counts = []
    for part in text.strip().split(","):
        number, marker, repeat = part.partition("(x")
        if marker:
            if not repeat.endswith(")") or digits_value(repeat[:-1]) is None:
                raise ValueError(f"bad repeat in {part!r}")
            repeat = repeat[:-1]
        cpus = digits_value(number)
        if not cpus:
            raise ValueError(f"{part!r} is not a CPU count such as 4 or 4(x2)")
        count = digits_value(repeat) if marker else 1
        if not 0 < count <= MAX_HOSTS:
            raise ValueError(f"bad repeat count in {part!r}")
        if len(counts) + count > MAX_HOSTS:  # one entry per node, as in the node list
            raise ValueError(f"names more than {MAX_HOSTS} nodes")
        counts.extend([cpus] * count)
    return counts


def cpus_on_node(environ: dict[str, str]) -> tuple[int, str]:
    """This node's CPUs of the job and a description of where that came from."""
    raw_counts = environ.get("SLURM_JOB_CPUS_PER_NODE", "")
    try:
        counts = parse_cpus_per_node(raw_counts)
    except ValueError as error:
        raise SiteInputError(f"SLURM_JOB_CPUS_PER_NODE={raw_counts!r}: {error}") from None
    if len(counts) == 1:
        return counts[0], f"SLURM_JOB_CPUS_PER_NODE={raw_counts}"
    index, nodes = node_share(environ)
    if nodes != len(counts):
        raise SiteInputError(
            f"SLURM_JOB_CPUS_PER_NODE={raw_counts!r} has {len(counts)} entries for "
            f"{nodes} nodes in {_node_list_name(environ)}="
            f"{environ.get(_node_list_name(environ), '')!r}"
        )
    return counts[index - 1], (f"SLURM_JOB_CPUS_PER_NODE={raw_counts} "
                               f"(node {index} of {nodes})")


def _node_list_name(environ: dict[str, str]) -> str:
    return "SLURM_JOB_NODELIST" if environ.get("SLURM_JOB_NODELIST") else "SLURM_NODELIST"


def node_share(environ: dict[str, str]) -> tuple[int, int]:
    """Which of the job's nodes this is: (its place in the job's node list, from 1; the
    number of nodes), from ``SLURMD_NODENAME`` and ``SLURM_JOB_NODELIST`` (or
    ``SLURM_NODELIST``). Each node's values are its share of a multi-node job, and its
    record says which share (docs/records.md)."""
    node = environ.get("SLURMD_NODENAME", "")
    list_name = _node_list_name(environ)
    nodelist = environ.get(list_name, "")
    try:
        nodes = expand_hostlist(nodelist)
    except ValueError as error:
        raise SiteInputError(f"{list_name}={nodelist!r}: {error}") from None
    if node not in nodes:
        raise SiteInputError(f"this node (SLURMD_NODENAME={node!r}) is not in the job's "
                             f"node list {list_name}={nodelist!r}")
    return nodes.index(node) + 1, len(nodes)


def parse_scontrol_record(line: str) -> dict[str, str]:
    """One ``scontrol show ... -o`` record -> {field: value}.

    Fields are ``Name=value`` separated by spaces; a word without ``=`` belongs
    to the previous value (e.g. a ``Command=`` path with spaces).
    """
    record: dict[str, str] = {}
    last = None
    for word in line.strip().split(" "):
        name, equals, value = word.partition("=")
        if equals and name and " " not in name and (name[0].isupper() or last is None):
            record[name] = value
            last = name
        elif last is not None:
            record[last] += " " + word
    return record


def parse_duration_secs(text: str) -> int | None:
    """A Slurm time limit (``[D-]HH:MM:SS``, ``MM:SS``, ``MM``) in seconds; None if unlimited."""
    text = text.strip()
    if text.upper() in _NO_LIMIT or text == "Partition_Limit":
        return None
    days, dash, clock = text.partition("-")
    if not dash:
        days, clock = "0", text
    parts = clock.split(":")
    numbers = [digits_value(part) for part in [days, *parts]]
    if None in numbers or len(parts) > 3:
        raise ValueError(f"{text!r} is not a Slurm time such as 1-00:00:00")
    days, *numbers = numbers
    if dash:  # days-hours[:minutes[:seconds]]
        hours, minutes, seconds = ([*numbers, 0, 0])[:3]
    elif len(numbers) == 3:  # hours:minutes:seconds
        hours, minutes, seconds = numbers
    else:  # minutes[:seconds]
        hours, (minutes, seconds) = 0, ([*numbers, 0])[:2]
    seconds += hours * 3600 + minutes * 60
    return days * 86400 + seconds


def parse_memory_bytes(text: str) -> int | None:
    """A Slurm memory size (``200M``, ``4G``, ``1024``) in bytes; None for 0 or unset."""
    text = text.strip()
    if text.upper() in _NO_LIMIT:
        return None
    unit = MIB
    if text and text[-1].upper() in _MEMORY_UNITS:
        unit = _MEMORY_UNITS[text[-1].upper()]
        text = text[:-1]
    number = digits_value(text)
    if number is None:
        raise ValueError("is not a memory size such as 200M or 4G")
    return number * unit or None


def parse_local_time(text: str) -> int | None:
    """``2026-11-22T05:11:42`` (scontrol's local time) -> UNIX seconds."""
    date, _, clock = text.partition("T")
    fields = date.split("-") + clock.split(":")
    numbers = [digits_value(field) for field in fields]
    if len(numbers) != 6 or None in numbers:
        return None
    try:
        return int(time.mktime((*numbers, 0, 0, -1)))
    except (OverflowError, ValueError):  # a year such as 9999999999
        return None


def needs_scontrol(environ: dict[str, str]) -> bool:
    """Whether the Prolog must ask scontrol: Slurm < 23.02 gives no time limit."""
    return not (environ.get("SLURM_JOB_START_TIME") and environ.get("SLURM_JOB_END_TIME"))


class JobInput:
    """What the Prolog gathered for :func:`job_facts`: its ``environ``; ``job`` and
    ``partition``, scontrol records (None when not asked or unavailable)."""

    __slots__ = ("environ", "job", "partition")

    def __init__(self, environ: dict[str, str], job: dict[str, str] | None = None,
                 partition: dict[str, str] | None = None) -> None:
        self.environ, self.job, self.partition = environ, job, partition


def job_facts(given: JobInput, now: int) -> tuple[dict, list[str]]:
    """Job facts for the Prolog, and warnings about what could not be determined.
    Identity errors raise; a fact that cannot be read is a warning and is left out."""
    environ, job, partition = given.environ, given.job, given.partition
    facts: dict[str, tuple] = {"job_id": (job_id(environ), "SLURM_JOB_ID")}
    warnings: list[str] = []
    try:
        facts["allocated_cpu"] = cpus_on_node(environ)
    except SiteInputError as error:
        warnings.append(f"allocated_cpu not written: {error}")

    start = _env_seconds(environ, "SLURM_JOB_START_TIME")
    end = _env_seconds(environ, "SLURM_JOB_END_TIME")
    if not needs_scontrol(environ) and (start is None or end is None or end <= start):
        # Slurm >= 23.02 gave both (so scontrol is not asked), but not a start and a
        # later end: the time limit is not known.
        warnings.append(
            "wall_limit_secs not written: SLURM_JOB_START_TIME="
            f"{environ['SLURM_JOB_START_TIME'][:40]!r} and SLURM_JOB_END_TIME="
            f"{environ['SLURM_JOB_END_TIME'][:40]!r} are not a start and a later end "
            "(UNIX seconds)")
    if start is not None:
        facts["jobstart_secs"] = (start, "SLURM_JOB_START_TIME")
    elif job and parse_local_time(job.get("StartTime", "")):
        facts["jobstart_secs"] = (parse_local_time(job["StartTime"]), "scontrol StartTime")
    else:
        facts["jobstart_secs"] = (now, "time the Prolog ran")

    if start is not None and end is not None and end > start:
        facts["wall_limit_secs"] = (end - start, "SLURM_JOB_END_TIME - SLURM_JOB_START_TIME")
    elif job is not None:
        _time_limit(job, partition, facts, warnings)

    if job is not None:
        _memory(job, facts, warnings)
    return facts, warnings


def _env_seconds(environ: dict[str, str], name: str) -> int | None:
    """A UNIX time in ``name``; None unless plain digits of a plausible time."""
    value = digits_value(environ.get(name, ""))
    return value if value is not None and EARLIEST_TIME <= value <= LATEST_TIME else None


def _time_limit(job: dict[str, str], partition: dict[str, str] | None, facts: dict,
                warnings: list[str]) -> None:
    raw = job.get("TimeLimit", "")
    field = "scontrol TimeLimit"
    if raw == "Partition_Limit" and partition is not None:
        for name in ("DefaultTime", "MaxTime"):
            if partition.get(name, "NONE").upper() not in _NO_LIMIT:
                raw, field = partition[name], f"scontrol partition {name}"
                break
    source = f"{field}={raw}"
    try:
        limit = parse_duration_secs(raw)
    except ValueError as error:
        warnings.append(f"wall_limit_secs not written: {field} {error}")
        return
    if limit:
        facts["wall_limit_secs"] = (limit, source)


def _memory(job: dict[str, str], facts: dict, warnings: list[str]) -> None:
    for field, per_cpu in (("MinMemoryNode", False), ("MinMemoryCPU", True)):
        if field not in job:
            continue
        try:
            size = parse_memory_bytes(job[field])
        except ValueError as error:
            warnings.append(f"max_rss_bytes not written: scontrol {field}={job[field]!r} {error}")
            return
        if size is None:
            return
        if per_cpu:
            if "allocated_cpu" not in facts:
                return
            cpus = facts["allocated_cpu"][0]
            facts["max_rss_bytes"] = (size * cpus, f"scontrol {field}={job[field]} x {cpus} CPUs")
        else:
            facts["max_rss_bytes"] = (size, f"scontrol {field}={job[field]}")
        return


def completion_needed(facts: dict, settings: dict[str, str]) -> bool:
    """Whether the first task must complete the values: an unknown memory request, or
    memory limits that only the job's cgroup will show (``settings``: slurm.conf and
    cgroup.conf, :func:`parse_settings`)."""
    constrained = any(settings.get(name, "no").lower() == "yes"
                      for name in ("constrainramspace", "constrainswapspace"))
    return constrained or "max_rss_bytes" not in facts


def in_job_cgroup(proc_cgroup: str, job_id: str) -> bool:
    """Whether a process whose ``/proc/self/cgroup`` is ``proc_cgroup`` runs inside job
    ``job_id``'s cgroup (a Prolog with ``PrologFlags=RunInJob``, Slurm >= 23.11): a
    ``job_<id>`` level in its memory hierarchy (cgroup v1), or its unified one (v2)."""
    level = f"job_{job_id}"
    for line in proc_cgroup.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        unified = number == "0" and controllers == ""
        if (unified or "memory" in controllers.split(",")) and level in path.split("/"):
            return True
    return False


# uid_t and gid_t are 32 bits; (uid_t) -1 means "unchanged" to chown.
_MAX_ID = 2**32 - 2


def job_owner(environ: dict[str, str], uid_needed: bool) -> tuple[int | None, int | None]:
    """The job's uid (where ``uid_needed``, else None) and gid. The Prolog gives a job's
    directory the job's group always (so narrowed modes still let it read), its
    jobfeatures/ to the job's user only while its values are pending (to complete them
    from inside the job), and its jobstatus/ (where the site offers one) to that user."""
    return _id(environ, "SLURM_JOB_UID") if uid_needed else None, _id(environ, "SLURM_JOB_GID")


def _id(environ: dict[str, str], name: str) -> int | None:
    value = environ.get(name, "")
    number = digits_value(value)
    if value and (number is None or number > _MAX_ID):
        raise SiteInputError(f"{name}={value!r} is not a user or group id (0 to {_MAX_ID})")
    return number


def task_memory_facts(environ: dict[str, str]) -> dict[str, tuple]:
    """The memory request a TaskProlog sees (``SLURM_MEM_PER_NODE``/``_PER_CPU``, MiB)."""
    per_node = environ.get("SLURM_MEM_PER_NODE", "")
    per_cpu = environ.get("SLURM_MEM_PER_CPU", "")
    cpus = environ.get("SLURM_CPUS_ON_NODE", "")
    if digits_value(per_node):
        return {"max_rss_bytes": (digits_value(per_node) * MIB, f"SLURM_MEM_PER_NODE={per_node}")}
    if digits_value(per_cpu) and digits_value(cpus):
        return {"max_rss_bytes": (digits_value(per_cpu) * digits_value(cpus) * MIB,
                                  f"SLURM_MEM_PER_CPU={per_cpu} x SLURM_CPUS_ON_NODE={cpus}")}
    return {}


def parse_settings(text: str) -> dict[str, str]:
    """``Name=value`` lines of slurm.conf / cgroup.conf -> {lowercased name: value}."""
    settings = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        name, equals, value = line.partition("=")
        if equals and name.strip() and " " not in name.strip():
            settings[name.strip().lower()] = value.strip()
    return settings


def job_cgroup_level(job_id: str):
    """For :func:`mjf_hooks.probe.cgroup.usage`: the job's level (``job_<id>``) of a
    cgroup path of a process inside the job (a TaskEpilog runs in its step's), whose
    counters include every step's, ended ones too; None outside the job."""
    level = f"job_{job_id}"

    def pick(path: str) -> str | None:
        parts = path.split("/")
        return "/".join(parts[:parts.index(level) + 1]) if level in parts else None

    return pick


def ending(environ: dict[str, str], now: float) -> tuple[dict[str, tuple], str | None,
                                                         str | None]:
    """What the Epilog's environment says of the job's end: (Delivered facts, the job's
    user, its partition). ``SLURM_JOB_END_TIME`` (Slurm >= 23.02) is the real end, except
    with ``PrologFlags=RunInJob``, where it is the start plus the time limit: one later
    than now is not an end yet, and is not taken."""
    delivered: dict[str, tuple] = {}
    end = _env_seconds(environ, "SLURM_JOB_END_TIME")
    if end is not None and end <= now + 1:
        delivered["end_time"] = (end, "SLURM_JOB_END_TIME")
    return (delivered, environ.get("SLURM_JOB_USER") or None,
            environ.get("SLURM_JOB_PARTITION") or None)
