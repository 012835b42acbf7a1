"""Grid Engine: a job's environment, spool ``config`` and ``qstat`` output -> job facts.

Facts seen on a real Son of Grid Engine 8.1.9 cell (Debian's packages) and in its
documentation (sge_types(5), queue_conf(5)); pure functions, :mod:`mjf_hooks.hooks.gridengine`
does the I/O:

* ``JOB_ID``; ``SGE_TASK_ID`` is the array task (``undefined`` outside an array),
  and Grid Engine names such a task ``1234.7``;
* ``PE_HOSTFILE`` lists ``host slots queue processors`` per host (a job without a
  parallel environment has none), ``NSLOTS`` the job's slots on all hosts;
* the job's spool ``config`` (``$SGE_JOB_SPOOL_DIR/config``, readable by all) holds
  the limits the shepherd sets, **per slot** as requested or as the queue says:
  ``h_cpu``/``s_cpu`` (the shepherd sets ``RLIMIT_CPU`` to the value times this
  host's slots, and the execution daemon kills a job whose processes' sum exceeds
  that), ``h_vmem``/``s_vmem`` (``RLIMIT_AS`` and the sum, times the slots),
  ``h_rss``/``s_rss`` (``RLIMIT_RSS`` per process, *not* times the slots, and not
  enforced by Linux); ``host_slots`` the slots on this host; ``tmpdir`` the job's
  ``TMPDIR``; ``handle_as_binary``, ``no_shell``, ``shell_path``: how it starts the job;
* the run-time limit (``h_rt``/``s_rt``) is enforced by the execution daemon and
  appears neither in the spool ``config`` nor in the environment: ``qstat -j`` prints
  what the job requested (``hard resource_list: h_rt=3600,...``, times in seconds),
  ``qstat -F h_rt,s_rt -q QUEUE@HOST`` the queue instance's own limit;
* memory values are numbers with an optional multiplier: ``k``/``m``/``g`` are
  powers of 1000, ``K``/``M``/``G`` of 1024; times are seconds or ``h:m:s`` (empty
  fields are 0); ``INFINITY`` is no limit.
"""

from __future__ import annotations

from ..errors import SiteInputError
from ..spec import digits_value

NAME = "gridengine"
TITLE = "Grid Engine"

DEFAULT_SGE_ROOT = "/var/lib/gridengine"  # Debian's; sites set [gridengine] sge_root
# Limits the job's spool config carries, per slot, and what each becomes.
_CPU_LIMITS = ("h_cpu", "s_cpu")
_RSS_LIMITS = ("h_rss", "s_rss")
_VMEM_LIMITS = ("h_vmem", "s_vmem")
_RUN_LIMITS = ("h_rt", "s_rt")
_MULTIPLIERS = {"k": 1000, "m": 1000 ** 2, "g": 1000 ** 3,
                "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
NO_LIMIT = ("INFINITY", "UNDEFINED", "NONE")
# Where execd keeps a running job's spool directory: <execd_spool_dir>/<host>/active_jobs/.
ACTIVE_JOBS = "active_jobs"
# The files of it a hook reads (the shepherd's config, the parallel environment's host
# list, the usage it writes as the job ends).
SPOOL_CONFIG, PE_HOSTFILE, USAGE = "config", "pe_hostfile", "usage"


def job_store_dirs(options: dict[str, str]) -> list[tuple[str, str]]:
    """None of its own: a job whose user cannot write base_dir uses the per-user
    directory every job runner shares (:func:`mjf_hooks.store_locations.private_base_dir`)."""
    return []


def sge_root(options: dict[str, str], environ: dict[str, str] | None = None) -> str:
    return options.get("sge_root") or (environ or {}).get("SGE_ROOT") or DEFAULT_SGE_ROOT


def command_env(options: dict[str, str], environ: dict[str, str]) -> dict[str, str]:
    """The environment Grid Engine's commands run with: a fixed PATH and the cell."""
    env = {"PATH": "/usr/bin:/bin", "SGE_ROOT": sge_root(options, environ),
           "SGE_CELL": options.get("sge_cell") or environ.get("SGE_CELL") or "default"}
    if environ.get("SGE_ARCH"):
        env["SGE_ARCH"] = environ["SGE_ARCH"]
    return env


def qstat_path(options: dict[str, str]) -> str:
    return options.get("qstat") or "/usr/bin/qstat"


def installed(options: dict[str, str]) -> bool:
    """A cell's ``act_qmaster`` file names its master: this host belongs to a cell."""
    import os

    cell = options.get("sge_cell") or "default"
    return os.path.exists(os.path.join(sge_root(options), cell, "common", "act_qmaster"))


def drain_query(options: dict[str, str], environ: dict[str, str], nodename: str) -> None:
    """None: a disabled queue instance (``qmod -d``) announces no time."""
    return None


def drains(output: str, node: str, now: float) -> list[tuple[int, str]]:
    return []


def jobs_query(options: dict[str, str], environ: dict[str, str],
               nodename: str) -> tuple[list[str], dict[str, str]] | None:
    """Every user's jobs in this host's queue instances (any state: a job whose prolog
    runs is still "transferring"), as XML, whose queue names are never cut short.
    ``*@host*`` also matches the host's full name (and, harmlessly, ``host2``: a job
    listed is only ever kept)."""
    short = nodename.split(".")[0]
    if not short or not all(char.isalnum() or char in "-_" for char in short):
        return None
    return ([qstat_path(options), "-u", "*", "-q", f"*@{short}*", "-xml"],
            command_env(options, environ))


def running_jobs(output: str) -> set[str]:
    """``qstat -xml`` -> the job directory names (``1234``, ``1234.7``) of the jobs and
    array tasks it lists; a job listed with a range of tasks counts as its number alone.

    Raises ValueError for output that is not qstat's XML: nothing is then known.
    """
    from xml.etree import ElementTree  # only here: mjf sync, never a hook

    try:
        # S314 below: qstat's own output (run by root), whose text it escapes; no DTD.
        root = ElementTree.fromstring(output)  # noqa: S314
    except ElementTree.ParseError as error:
        raise ValueError(f"qstat -xml printed no XML ({error})") from None
    if root.tag != "job_info":
        raise ValueError(f"qstat -xml printed <{root.tag}>, not <job_info>")
    names = set()
    for entry in root.iter("job_list"):
        number = (entry.findtext("JB_job_number") or "").strip()
        task = (entry.findtext("tasks") or "").strip()
        if not digits_value(number):
            raise ValueError(f"qstat -xml: job number {number!r} is not digits")
        names.add(f"{number}.{int(task)}" if digits_value(task) else number)
    return names


def job_id(environ: dict[str, str]) -> str:
    """``1234``, or ``1234.7`` for task 7 of an array job."""
    value = environ.get("JOB_ID", "")
    if not value:
        raise SiteInputError("JOB_ID is missing or empty: not run by Grid Engine? "
                             "(use --env-file to replay a recorded environment)")
    if not digits_value(value):  # digits_value: at most 19 digits, far below any length limit
        raise SiteInputError(f"JOB_ID={value!r} is not a Grid Engine job id (a number from 1)")
    task = environ.get("SGE_TASK_ID", "undefined")
    if task in ("undefined", ""):
        return value
    if not digits_value(task):
        raise SiteInputError(f"SGE_TASK_ID={task!r} is not an array task id (a number from 1, "
                             "or 'undefined')")
    return f"{value}.{int(task)}"


def spool_task_name(environ: dict[str, str]) -> str:
    """The name Grid Engine gives the job's spool directory: ``<job>.<task>`` (task 1
    outside an array). Raises SiteInputError as :func:`job_id` does."""
    name = job_id(environ)
    return name if "." in name else f"{name}.1"


def spool_dir_problem(path: str, environ: dict[str, str]) -> str | None:
    """Why ``path`` ($SGE_JOB_SPOOL_DIR) is not where execd puts this job's spool
    directory (``<execd_spool_dir>/<host>/active_jobs/<job>.<task>``), or None."""
    parent, _, name = path.rstrip("/").rpartition("/")
    expected = spool_task_name(environ)
    if name != expected or parent.rpartition("/")[2] != ACTIVE_JOBS:
        return (f"not where Grid Engine keeps the spool directory of job {expected} "
                f"(JOB_ID, SGE_TASK_ID): .../{ACTIVE_JOBS}/{expected}")
    return None


def bootstrap_path(options: dict[str, str], environ: dict[str, str]) -> str:
    """The cell's ``bootstrap`` file, which names its admin user (``admin_user``)."""
    cell = options.get("sge_cell") or environ.get("SGE_CELL") or "default"
    return f"{sge_root(options, environ).rstrip('/')}/{cell}/common/bootstrap"


def bootstrap_admin_user(text: str) -> str | None:
    """The ``admin_user`` the cell's bootstrap names; ``root`` for ``none`` (Grid Engine's
    own daemons then keep root's identity); None if it names none."""
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == "admin_user":
            return "root" if fields[1].lower() == "none" else fields[1]
    return None


def parse_spool_config(text: str) -> dict[str, str]:
    """The job's spool ``config``: ``name=value`` lines."""
    entries = {}
    for line in text.splitlines():
        name, equals, value = line.partition("=")
        if equals and name:
            entries[name] = value
    return entries


def parse_number(text: str) -> float:
    """A Grid Engine number: decimal (``1.5``, ``1e3``), or with a leading ``0`` and no
    point, C style (``0x10`` hex, ``010`` octal); then an optional multiplier
    (``k``/``m``/``g`` powers of 1000, ``K``/``M``/``G`` of 1024). Raises ValueError."""
    multiplier = _MULTIPLIERS.get(text[-1:], 1)
    number = text[:-1] if multiplier != 1 else text
    # Python's int() and float() would also take spaces and underscores; C's do not.
    if not number.isascii() or not (number[:1].isdigit() or number[:1] == ".") \
            or not number.replace(".", "0").replace("+", "0").replace("-", "0").isalnum():
        raise ValueError(text)
    try:
        if number.startswith("0") and "." not in number and len(number) > 1:
            amount = float(int(number, 16 if number[1:2] in "xX" else 8))
        else:
            amount = float(number)
    except (ValueError, OverflowError):  # OverflowError: a huge octal or hex number
        raise ValueError(text) from None
    if not 0 <= amount * multiplier < 1e20:
        raise ValueError(text)
    return amount * multiplier


def parse_time_secs(text: str) -> int | None:
    """A Grid Engine time (``3600``, ``1:00:00``, ``1::1``) -> seconds; None for no limit."""
    value = text.strip()
    if value.upper() in NO_LIMIT:
        return None
    fields = value.split(":")
    try:
        if len(fields) == 1:
            return round(parse_number(value))
        if len(fields) != 3:
            raise ValueError(value)
        hours, minutes, seconds = (parse_number(field) if field else 0.0 for field in fields)
    except ValueError:
        raise ValueError(f"{value!r} is not a Grid Engine time (seconds or h:m:s)") from None
    return round(hours * 3600 + minutes * 60 + seconds)


def parse_memory_bytes(text: str) -> int | None:
    """A Grid Engine memory value (``300M``, ``2g``, ``1073741824``) -> bytes; None for
    no limit."""
    value = text.strip()
    if value.upper() in NO_LIMIT:
        return None
    try:
        return round(parse_number(value))
    except ValueError:
        raise ValueError(f"{value!r} is not a Grid Engine memory value such as 4G") from None


def parse_resource_list(output: str) -> dict[str, str]:
    """``qstat -j ID`` -> the job's hard resource requests (``h_rt=3600,h_vmem=2G``)."""
    for line in output.splitlines():
        label, colon, value = line.partition(":")
        if colon and label.strip() == "hard resource_list":
            return parse_spool_config(value.strip().replace(",", "\n"))
    return {}


def parse_queue_limits(output: str) -> dict[str, str]:
    """``qstat -F h_rt,s_rt -q QUEUE@HOST`` -> the queue instance's ``qf:`` values."""
    limits = {}
    for line in output.splitlines():
        name, equals, value = line.strip().partition("=")
        if equals and name.startswith("qf:"):
            limits[name[3:]] = value
    return limits


def _short(host: str) -> str:
    return host.split(".", 1)[0].lower()


def cpus_on_host(environ: dict[str, str], pe_hostfile: str | None,
                 host_names: list[str], pe_path: str | None = None) -> tuple[int, str]:
    """This host's slots, from ``PE_HOSTFILE`` (its text; ``NSLOTS`` without one).

    ``host_names`` are this host's names (short names match full ones); ``pe_path``
    where the text was read (default ``$PE_HOSTFILE``). A message names the file and a
    line's number, never what it holds.
    """
    if pe_hostfile is None:
        slots, hosts = environ.get("NSLOTS", ""), environ.get("NHOSTS", "1")
        if hosts != "1":  # NSLOTS counts every host's slots
            raise SiteInputError(f"no readable PE_HOSTFILE, and NSLOTS={slots[:40]!r} counts "
                                 f"the slots of NHOSTS={hosts[:40]!r} hosts")
        if digits_value(slots):
            return digits_value(slots), f"NSLOTS={slots}"
        raise SiteInputError(f"no PE_HOSTFILE and NSLOTS={slots[:40]!r} is not a number of "
                             "slots")
    path = environ.get("PE_HOSTFILE", "") if pe_path is None else pe_path
    mine = {_short(name) for name in host_names}
    counts = []
    for number, line in enumerate(pe_hostfile.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 2 or not digits_value(fields[1]):
            raise SiteInputError(f"PE_HOSTFILE {path}, line {number}: not 'host slots queue "
                                 "processors'")
        if _short(fields[0]) in mine:
            counts.append(digits_value(fields[1]))
    if not counts:
        raise SiteInputError(f"this host ({', '.join(host_names)}) is not in PE_HOSTFILE "
                             f"{path}")
    return sum(counts), f"PE_HOSTFILE {path}"


def _smallest(values: dict[str, str], names: tuple[str, ...], parse, where: str,
              warnings: list[str], slots: int = 1) -> tuple[int, str] | None:
    """The smallest of the named limits in ``values`` (hard and soft), with its source;
    each times ``slots`` unless Grid Engine keeps it per job (``<name>_is_consumable_job``)."""
    found = []
    for name in names:
        if name not in values:
            continue
        try:
            number = parse(values[name])
        except ValueError as error:
            warnings.append(f"{where} {name}: {error}; ignored")
            continue
        if number is None or number <= 0:
            continue
        times = 1 if values.get(f"{name}_is_consumable_job") == "1" else slots
        found.append((number * times, f"{name}={values[name]} ({where})"
                      + (f" x {times} slots on this host" if times != 1 else "")))
    return min(found) if found else None


def limit_facts(spool: dict[str, str], slots: int, warnings: list[str]) -> dict[str, tuple]:
    """``cpu_limit_secs`` and ``max_rss_bytes`` from the spool config's limits, for the
    job's ``slots`` on this host, as Grid Engine enforces them: CPU time and virtual
    memory per slot (the shepherd's rlimits and the execution daemon's check of the
    job's sum are the value times the slots), RSS per process (not times the slots)."""
    facts: dict[str, tuple] = {}
    cpu = _smallest(spool, _CPU_LIMITS, parse_time_secs, "spool config", warnings, slots)
    if cpu:
        facts["cpu_limit_secs"] = cpu
    # The RSS limit where there is one; else the virtual memory limit, which bounds the
    # RSS too (a job cannot have more resident than mapped), though it is no RSS limit.
    memory = _smallest(spool, _RSS_LIMITS, parse_memory_bytes, "spool config", warnings) \
        or _smallest(spool, _VMEM_LIMITS, parse_memory_bytes, "spool config", warnings, slots)
    if memory:
        facts["max_rss_bytes"] = memory
    return facts


def spool_limit_facts(spool: dict[str, str] | None, slots: int | None = None,
                      warnings: list[str] | None = None) -> dict[str, tuple]:
    """:func:`limit_facts` for the slots the spool config gives this host (``host_slots``),
    else ``slots``; nothing without either."""
    host_slots = digits_value((spool or {}).get("host_slots", "")) or slots
    if not spool or not host_slots:
        return {}
    return limit_facts(spool, host_slots, [] if warnings is None else warnings)


def wall_limit(requests: dict[str, str] | None, queue_limits: dict[str, str] | None,
               warnings: list[str]) -> tuple[int, str] | None:
    """The job's run-time limit: the smaller of ``h_rt`` and ``s_rt``, each as the job
    requested it or else as its queue instance has it (a job is only ever sent where
    its request fits; a limit it did not request is the queue's)."""
    requests, queue_limits = requests or {}, queue_limits or {}
    found = [_smallest(requests, (name,), parse_time_secs, "qstat -j", warnings)
             if name in requests else
             _smallest(queue_limits, (name,), parse_time_secs, "queue instance", warnings)
             for name in _RUN_LIMITS]
    found = [limit for limit in found if limit]
    return min(found) if found else None


def queue_instance(environ: dict[str, str], spool: dict[str, str]) -> str | None:
    """``all.q@host``: the queue instance the job runs in, from the spool config."""
    queue, host = spool.get("queue", ""), spool.get("host", "")
    if not queue or not host:
        queue, host = environ.get("QUEUE", ""), environ.get("HOSTNAME", "")
    allowed = all(char.isalnum() or char in "-_.@" for char in queue + host)
    return f"{queue}@{host}" if queue and host and allowed else None


def needs_queue_limits(requests: dict[str, str] | None) -> bool:
    """Whether the queue's limits matter: the job did not request both run-time limits."""
    return requests is not None and not all(name in requests for name in _RUN_LIMITS)


def scratch_dir(environ: dict[str, str], spool: dict[str, str]) -> str | None:
    """The job's ``TMPDIR`` (a prolog sees it as ``TMP`` and in the spool config)."""
    return environ.get("TMPDIR") or environ.get("TMP") or spool.get("tmpdir") or None


class JobInput:
    """What a prolog or starter gathered for :func:`job_facts`."""

    __slots__ = ("environ", "host_names", "pe_hostfile", "pe_path", "queue_limits", "requests",
                 "spool", "spool_problem")

    def __init__(self, environ: dict[str, str], host_names: list[str],
                 spool: dict[str, str] | None, pe_hostfile: str | None,
                 requests: dict[str, str] | None = None,
                 queue_limits: dict[str, str] | None = None,
                 pe_path: str | None = None, spool_problem: str | None = None) -> None:
        self.environ, self.host_names, self.spool = environ, host_names, spool
        self.pe_hostfile, self.requests, self.queue_limits = pe_hostfile, requests, queue_limits
        self.pe_path, self.spool_problem = pe_path, spool_problem


def job_facts(given: JobInput, now: int) -> tuple[dict, list[str]]:
    """Job facts of a prolog or starter, and warnings about what could not be determined.

    Of ``given``: ``host_names``, this host's names (as PE_HOSTFILE may spell them);
    ``spool``, the job's spool config (:func:`parse_spool_config`; None if unreadable);
    ``pe_hostfile``, its text (None without one), read at ``pe_path`` (default
    ``$PE_HOSTFILE``); ``requests``, what ``qstat -j`` says the job asked for
    (:func:`parse_resource_list`; None if not asked); ``queue_limits``, its queue
    instance's (:func:`parse_queue_limits`); ``spool_problem``, why the spool config was
    not read. Identity errors raise.
    """
    environ, host_names, spool, pe_hostfile, pe_path = \
        given.environ, given.host_names, given.spool, given.pe_hostfile, given.pe_path
    requests, queue_limits, spool_problem = given.requests, given.queue_limits, \
        given.spool_problem
    facts: dict[str, tuple] = {"job_id": (job_id(environ), "JOB_ID/SGE_TASK_ID"),
                               "jobstart_secs": (now, "time the job started")}
    warnings: list[str] = []
    slots = None
    try:
        facts["allocated_cpu"] = cpus_on_host(environ, pe_hostfile, host_names, pe_path)
        slots = facts["allocated_cpu"][0]
    except SiteInputError as error:
        warnings.append(f"allocated_cpu not written: {error}")
    if spool is None:
        warnings.append("the job's spool config is not readable"
                        + (f" ({spool_problem})" if spool_problem else "")
                        + ": cpu_limit_secs and max_rss_bytes come from the cgroup and "
                        "config alone" + ("; PE_HOSTFILE is not read either"
                                          if environ.get("PE_HOSTFILE") else ""))
    else:
        facts.update(spool_limit_facts(spool, slots, warnings))
    wall = wall_limit(requests, queue_limits, warnings)
    if wall:
        facts["wall_limit_secs"] = wall
    return facts, warnings


def job_command(argv: list[str], environ: dict[str, str],
                spool: dict[str, str] | None) -> tuple[str, list[str]]:
    """What a ``starter_method`` given ``argv`` runs to start the job as Grid Engine
    itself would have: ``(file, argv)``, ``file`` searched in PATH if it has no ``/``.

    ``argv`` is what the shepherd passes a starter: the job script and its arguments
    (``-s`` and the arguments for ``script_from_stdin``), or a binary job's command.
    Without a starter Grid Engine runs a script with the job's shell (``-S`` or the
    queue's, ``$SGE_STARTER_SHELL_PATH``), as a login shell (``-sh``) where
    ``login_shells`` lists it; the script itself in ``unix_behavior`` (its ``#!``
    line); a binary job under ``shell -c`` unless submitted with ``-shell no``. The
    spool config says which (``handle_as_binary``, ``no_shell``); unread, the argv
    is run as it is.
    """
    shell = environ.get("SGE_STARTER_SHELL_PATH") or (spool or {}).get("shell_path", "")
    mode = environ.get("SGE_STARTER_SHELL_START_MODE", "")
    if spool is None or not shell.startswith("/"):
        return argv[0], list(argv)
    login = "-" if environ.get("SGE_STARTER_USE_LOGIN_SHELL") == "true" else ""
    name = login + shell.rsplit("/", 1)[1]
    if spool.get("handle_as_binary") == "1":
        if spool.get("no_shell") == "1":
            return argv[0], list(argv)
        return shell, [name, "-c", " ".join(argv)]
    if mode == "unix_behavior":
        return argv[0], list(argv)
    return shell, [name, *argv]


def usage_facts(text: str, path: str) -> dict[str, tuple]:
    """Delivered facts from the shepherd's ``usage`` file in the job's spool directory
    (``key=value`` lines, written before the epilog runs): ``end_time`` (UNIX seconds),
    ``ru_wallclock`` (whole seconds), ``ru_utime`` + ``ru_stime`` (seconds), and
    ``ru_maxrss`` (KiB: wait4's, the largest resident set of one of the job's processes,
    not their sum). What is missing or not a plain number is left out."""
    values: dict[str, float] = {}
    for line in text.splitlines()[:64]:
        name, _, value = line.partition("=")
        whole, dot, fraction = value.strip().partition(".")
        if whole.isdigit() and whole.isascii() and len(value) <= 30 \
                and (not dot or (fraction.isdigit() and fraction.isascii())):
            values[name.strip()] = float(value) if dot else int(value)
    facts: dict[str, tuple] = {}
    if "end_time" in values and values["end_time"] > 0:
        facts["end_time"] = (values["end_time"], f"{path}: end_time")
    if "ru_wallclock" in values:
        facts["wall_secs"] = (values["ru_wallclock"], f"{path}: ru_wallclock")
    if "ru_utime" in values and "ru_stime" in values:
        facts["cpu_secs"] = (values["ru_utime"] + values["ru_stime"],
                             f"{path}: ru_utime + ru_stime")
    if "ru_maxrss" in values:
        facts["peak_memory_bytes"] = (
            int(values["ru_maxrss"]) * 1024,
            f"{path}: ru_maxrss (the largest resident set of one of its processes)")
    return facts
