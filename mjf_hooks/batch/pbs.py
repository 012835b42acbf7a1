"""PBS (OpenPBS, PBS Professional, Torque): a job's attributes -> job facts.

Facts seen on a real OpenPBS 23.06 complex (``tests/fixtures/pbs-23.06/``) and in the
PBS Professional and Torque documentation; pure functions, :mod:`mjf_hooks.hooks.pbs`
does the I/O. A job is described by its *attributes*, named as ``qstat -f`` prints
them (``Resource_List.walltime``, ``exec_vnode``, ``euser``...), whoever gave them:

* PBS's execjob hooks (``pbs.event().job``, handed over by the hook adapter
  ``contrib/pbs/mjf_hook.py``), ``id`` the job id (``4.vm``; an array sub-job
  ``12[3].vm``);
* ``qstat -f JOBID`` (an OpenPBS classic prologue, whose argv is only the job id,
  user and group);
* a Torque prologue's argv, whose fifth word is the resource list
  (``walltime=01:00:00,nodes=1:ppn=2,mem=300mb``).

Units: a *size* is a number with an optional ``b``/``kb``/``mb``/``gb``/``tb``/``pb``
suffix (powers of 1024, any case; ``w`` words of 8 bytes); a *duration* is
``[[hh:]mm:]ss`` or seconds. ``exec_vnode`` is the job's chunks, ``+``-joined
parenthesised groups of ``vnode:res=value:...`` joined by ``+``; this host's share is
the sum over the vnodes its mom manages. ``Resource_List.mem``/``ncpus`` are the
whole job's (on every host), ``cput`` the whole job's CPU time.
"""

from __future__ import annotations

from ..errors import SiteInputError
from ..spec import MAX_JOB_ID_LENGTH, digits_value

NAME = "pbs"
TITLE = "PBS"

DEFAULT_PBS_EXEC = "/opt/pbs"
PBS_CONF = "/etc/pbs.conf"  # PBS_EXEC, PBS_MOM_NODE_NAME: the host's PBS settings
DEFAULT_TMPDIR = "/var/tmp"  # the mom's $tmpdir; a job's TMPDIR is <it>/pbs.<job id>
# Where the bundled pbs_cgroups hook puts a job, in each cgroup hierarchy.
DEFAULT_CGROUP_PREFIX = "/pbs_jobs.service/jobid"

_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4,
               "p": 1024 ** 5}
_ID_SUFFIX_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")
# The attributes a hook hands over, and the ones a record uses at the end of a job.
RESOURCE_LIST = "Resource_List."
RESOURCES_USED = "resources_used."


def job_store_dirs(options: dict[str, str]) -> list[tuple[str, str]]:
    """None: every PBS hook runs as root, so a job's directory is always in base_dir."""
    return []


def pbs_conf_value(pbs_conf: str | None, name: str) -> str | None:
    """A ``NAME=value`` setting of ``/etc/pbs.conf``'s text (its first); None where unset
    or empty."""
    for line in (pbs_conf or "").splitlines():
        key, equals, value = line.partition("=")
        if equals and key.strip() == name and value.strip():
            return value.strip()
    return None


def pbs_exec(options: dict[str, str], pbs_conf: str | None = None) -> str:
    """Where PBS is installed: ``[pbs] pbs_exec``, else ``/etc/pbs.conf``'s PBS_EXEC."""
    configured = pbs_conf_value(pbs_conf, "PBS_EXEC")
    return options.get("pbs_exec") or (
        configured if configured and configured.startswith("/") else DEFAULT_PBS_EXEC)


def read_pbs_conf() -> str | None:
    """``/etc/pbs.conf``'s text (None if it cannot be read): PBS's own file, read as such
    a file is (:func:`mjf_hooks.safefs.read_bounded`)."""
    from ..safefs import RefusedPath, read_bounded, text_of

    try:
        return text_of(read_bounded(PBS_CONF))
    except RefusedPath:
        return None


def command_path(options: dict[str, str], command: str) -> str:
    """A PBS command of this host's install (``<pbs_exec>/bin/<command>``)."""
    return f"{pbs_exec(options, read_pbs_conf())}/bin/{command}"


def command_env() -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


def installed(options: dict[str, str]) -> bool:
    """``/etc/pbs.conf`` (OpenPBS, PBS Professional) says this host belongs to a complex."""
    import os

    return bool(options.get("pbs_exec")) or os.path.exists(PBS_CONF)


def node_name(options: dict[str, str]) -> str:
    """This mom's host name as PBS knows it: ``/etc/pbs.conf``'s ``PBS_MOM_NODE_NAME``
    where set, else the host name."""
    import os

    return pbs_conf_value(read_pbs_conf(), "PBS_MOM_NODE_NAME") or os.uname().nodename


def drain_query(options: dict[str, str], environ: dict[str, str],
                nodename: str) -> tuple[list[str], dict[str, str]]:
    """Every reservation (``pbs_rstat -f``): a maintenance reservation of this host
    (``pbs_rsub --hosts``) says when it must be empty. An offline node
    (``pbsnodes -o``) says no time, only a comment."""
    return [command_path(options, "pbs_rstat"), "-f"], command_env()


# Reservation states that no longer (or not yet) hold the host.
_RESERVATION_GONE = ("RESV_UNCONFIRMED", "RESV_FINISHED", "RESV_BEING_DELETED", "RESV_DELETED",
                     "RESV_DELETING_JOBS")


def drains(output: str, node: str, now: float) -> list[tuple[int, str]]:
    """``pbs_rstat -f`` -> (start, what) of each maintenance reservation (id ``M...``)
    whose ``resv_nodes`` hold this host and that has not ended. Its times are the
    local time of pbs_rstat (``Wed Nov 25 23:20:00 2026``), which runs here."""
    found = []
    for reservation in parse_reservations(output):
        name = reservation.get("id", "")
        if not name.startswith("M") or reservation.get("reserve_state") in _RESERVATION_GONE:
            continue
        try:
            covered = any(is_own_vnode(vnode, [node]) for vnode, _ in
                          parse_exec_vnode(reservation.get("resv_nodes", "")))
            start = parse_ctime(reservation.get("reserve_start", ""))
            end = parse_ctime(reservation.get("reserve_end", ""))
        except ValueError:
            continue
        if covered and end > now:
            found.append((start, f"PBS maintenance reservation {name}"))
    return found


def parse_reservations(output: str) -> list[dict[str, str]]:
    """``pbs_rstat -f`` -> one dict of attributes per reservation (``id``: its Resv ID)."""
    reservations: list[dict[str, str]] = []
    for line in output.splitlines():
        if line.startswith("Resv ID:"):
            reservations.append({"id": line[len("Resv ID:"):].strip()})
        elif reservations:
            name, equals, value = line.partition(" = ")
            if equals and name:
                reservations[-1][name.strip()] = value.strip()
    return reservations


def parse_ctime(text: str) -> int:
    """``Wed Nov 25 23:20:00 2026`` (this host's local time) -> UNIX seconds."""
    import time

    try:
        return int(time.mktime(time.strptime(text.strip(), "%a %b %d %H:%M:%S %Y")))
    except (ValueError, OverflowError):
        raise ValueError(f"{text[:40]!r} is not a time such as Wed Nov 25 23:20:00 2026") \
            from None


def jobs_query(options: dict[str, str], environ: dict[str, str],
               nodename: str) -> tuple[list[str], dict[str, str]] | None:
    """Every vnode of this host (``pbsnodes -H``: a multi-vnode mom's ``host[N]`` too)
    with the jobs the server has placed there, a job whose execjob_begin runs included.
    Torque's pbsnodes has no ``-H`` and fails: then nothing is removed (its epilogue
    removes a job's directory)."""
    short = nodename.split(".")[0]
    if not short or not all(char.isalnum() or char in "-_" for char in short):
        return None
    return [command_path(options, "pbsnodes"), "-H", "-F", "json", short], command_env()


def nodes_json(output: str) -> list[tuple[str, object]]:
    """``pbsnodes -F json`` -> its ``nodes`` as (name, entry) pairs; ValueError for output
    that is not that (nested too deep for the JSON parser too)."""
    import json  # only here: mjf sync and mjf publish, never a hook

    try:
        return list(json.loads(output)["nodes"].items())
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        raise ValueError(f"pbsnodes -F json printed no nodes: {output[:80]!r}") from None


def running_jobs(output: str) -> set[str]:
    """``pbsnodes -H -F json`` -> the directory names of the jobs on this host's vnodes
    (``jobs``: ``4.vm/0``, one entry per CPU). Raises ValueError for output that does
    not describe the host (an unknown host is an ``Error`` entry, exit status 0)."""
    from ..errors import StoreError
    from ..store import job_dir_name

    entries = nodes_json(output)
    if not entries:
        raise ValueError("pbsnodes -H listed no vnode of this host")
    names = set()
    for vnode, entry in entries:
        if not isinstance(entry, dict) or "Error" in entry or "state" not in entry:
            raise ValueError(f"pbsnodes: vnode {vnode!r}: {str(entry)[:80]}")
        jobs = entry.get("jobs", [])
        if not isinstance(jobs, list):
            raise ValueError(f"pbsnodes: vnode {vnode!r}: jobs {str(jobs)[:80]!r}")
        for slot in jobs:
            job = str(slot).rsplit("/", 1)[0].strip()
            try:
                names.add(job_dir_name(checked_job_id(job, "pbsnodes: a job")))
            except (SiteInputError, StoreError) as error:
                raise ValueError(str(error)) from None
    return names


# ---------------------------------------------------------------- ids and values

def job_id(environ: dict[str, str]) -> str:
    """The job id from a job's environment (``PBS_JOBID``, as a profile script sees it)."""
    value = environ.get("PBS_JOBID", "")
    if not value:
        raise SiteInputError("PBS_JOBID is missing or empty: not a PBS job?")
    return checked_job_id(value, "PBS_JOBID")


def checked_job_id(value: str, what: str = "the job id") -> str:
    """``4.vm``, ``12[3].vm``, ``123.server.example.org`` (or without the server):
    digits, an optional ``[index]``, an optional ``.server``."""
    number, dot, server = value.partition(".")
    index = ""
    if number.endswith("]") and "[" in number:
        number, _, index = number[:-1].partition("[")
    valid = (digits_value(number) is not None and (not index or digits_value(index) is not None)
             and (not dot or (server and set(server) <= _ID_SUFFIX_CHARS))
             and len(value) <= MAX_JOB_ID_LENGTH)
    if not valid:
        raise SiteInputError(f"{what} {value[:80]!r} is not a PBS job id such as 4.server "
                             "or 12[3].server")
    return value


def parse_size_bytes(text: str) -> int:
    """A PBS size (``300mb``, ``204800kb``, ``2gb``, ``1024``, ``8w``) -> bytes."""
    value = text.strip().lower()
    word = value.endswith("w")
    unit = value[:-1] if word or value.endswith("b") else value
    digits = unit.rstrip("kmgtp")
    prefix = unit[len(digits):]
    number = digits_value(digits)
    if number is None or prefix not in _SIZE_UNITS or len(prefix) > 1:
        raise ValueError(f"{text.strip()[:40]!r} is not a PBS size such as 300mb")
    return number * _SIZE_UNITS[prefix] * (8 if word else 1)


def parse_duration_secs(text: str) -> int:
    """A PBS duration (``01:30:00``, ``90:00``, ``5400``, ``00:00:01.5``) -> seconds."""
    value = text.strip()
    fields = value.split(":")
    seconds_text, _, fraction = fields[-1].partition(".")
    numbers = [digits_value(field) for field in [*fields[:-1], seconds_text]]
    if len(fields) > 3 or None in numbers or (fraction and digits_value(fraction) is None):
        raise ValueError(f"{value[:40]!r} is not a PBS duration such as 01:30:00")
    total = 0
    for number in numbers:
        total = total * 60 + number
    return total + (fraction[:1] >= "5" if fraction else 0)


# ---------------------------------------------------------------- where the job runs

def parse_exec_vnode(text: str) -> list[tuple[str, dict[str, str]]]:
    """``(vm:ncpus=1:mem=204800kb)+(vm:ncpus=1)`` -> ``[(vnode, {resource: value})]``,
    one entry per vnode of each chunk (a chunk may span vnodes: ``(a:ncpus=1+b:ncpus=1)``)."""
    entries = []
    for chunk in _split_chunks(text.strip()):
        for part in chunk.split("+"):
            vnode, *resources = part.split(":")
            values = {}
            for resource in resources:
                name, equals, value = resource.partition("=")
                if not equals or not name:
                    raise ValueError(f"exec_vnode {text[:80]!r}: {resource!r} is not "
                                     "resource=value")
                values[name] = value
            if not vnode:
                raise ValueError(f"exec_vnode {text[:80]!r}: a chunk without a vnode")
            entries.append((vnode, values))
    return entries


def _split_chunks(text: str) -> list[str]:
    chunks, depth, start = [], 0, 0
    for position, char in enumerate(text):
        if char == "(":
            if depth == 0:
                start = position + 1
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise ValueError(f"exec_vnode {text[:80]!r}: unbalanced parentheses")
            if depth == 0:
                chunks.append(text[start:position])
        elif depth == 0 and char != "+":
            raise ValueError(f"exec_vnode {text[:80]!r} is not (vnode:resource=value)+...")
    if depth or not chunks:
        raise ValueError(f"exec_vnode {text[:80]!r} is not (vnode:resource=value)+...")
    return chunks


def _mom_of(vnode: str) -> str:
    """The node a vnode is on, by PBS's naming: ``host[N]`` is on ``host``; a short name
    and a full one are the same node."""
    name = vnode.lower()
    base = name.split("[", 1)[0] if name.endswith("]") else name
    return base.split(".", 1)[0]


def is_own_vnode(vnode: str, own: list[str]) -> bool:
    """Whether a vnode is this mom's: one of its vnodes by name, or named after its host
    (``host`` or ``host[0]``; a short name matches a full one)."""
    names = {name.lower() for name in own}
    return vnode.lower() in names or _mom_of(vnode) in {name.split(".", 1)[0]
                                                       for name in names}


def mom_node(attributes: dict[str, str], node: str) -> str:
    """This mom's node name, its natural vnode: as the hook adapter gives it (``node``:
    ``pbs.get_local_nodename()``, the mom's ``PBS_MOM_NODE_NAME`` or short host name),
    else ``node`` (this host's, from :func:`node_name`). Its share of a job's
    ``exec_vnode`` is that vnode's and the ``host[N]`` ones named after it
    (:func:`is_own_vnode`).

    Not the adapter's ``vnodes``: an execjob event's vnode_list holds every vnode of the
    job, on each of its moms (OpenPBS fills it from the whole exec_vnode); and not the
    host name: several moms may share a host, each its own node."""
    return attributes.get("node") or node


def node_share(exec_vnode: str, own: list[str]) -> tuple[int, int]:
    """Which of the job's nodes this mom is: (its place among the nodes of ``exec_vnode``
    in their order there, from 1 - the first is the job's primary mom; the number of its
    nodes). Raises ValueError for an exec_vnode that cannot be read or names none of
    ``own``. A multi-vnode mom whose vnodes are not named ``host[N]`` counts as a node per
    vnode: nothing in exec_vnode says they are one."""
    vnodes = [vnode for vnode, _ in parse_exec_vnode(exec_vnode)]
    nodes = list(dict.fromkeys(_mom_of(vnode) for vnode in vnodes))
    mine = next((vnode for vnode in vnodes if is_own_vnode(vnode, own)), None)
    if mine is None:
        raise ValueError(f"exec_vnode {exec_vnode[:80]!r} names none of this host's vnodes "
                         f"({', '.join(own)})")
    return nodes.index(_mom_of(mine)) + 1, len(nodes)


def host_share(exec_vnode: str, own: list[str]) -> dict[str, int]:
    """This host's ``ncpus`` and ``mem`` (bytes) of the job, summed over its vnodes.

    Raises ValueError for an exec_vnode that cannot be read or names none of ``own``."""
    share: dict[str, int] = {}
    found = False
    for vnode, values in parse_exec_vnode(exec_vnode):
        if not is_own_vnode(vnode, own):
            continue
        found = True
        if "ncpus" in values:
            count = digits_value(values["ncpus"])
            if count is None:
                raise ValueError(f"exec_vnode {exec_vnode[:80]!r}: ncpus={values['ncpus']!r}")
            share["ncpus"] = share.get("ncpus", 0) + count
        if "mem" in values:
            share["mem"] = share.get("mem", 0) + parse_size_bytes(values["mem"])
    if not found:
        raise ValueError(f"exec_vnode {exec_vnode[:80]!r} names none of this host's vnodes "
                         f"({', '.join(own)})")
    return share


# ---------------------------------------------------------------- the job's facts

class JobInput:
    """What a hook gathered for :func:`job_facts`: the job's ``attributes``; ``own_vnodes``,
    this mom's vnode names (and host names); ``cgroup_memory``, the memory limit of the
    job's cgroup (pbs_cgroups), ``(bytes, source)``, if it has one."""

    __slots__ = ("attributes", "cgroup_memory", "own_vnodes")

    def __init__(self, attributes: dict[str, str], own_vnodes: list[str],
                 cgroup_memory: tuple | None = None) -> None:
        self.attributes, self.own_vnodes, self.cgroup_memory = \
            attributes, own_vnodes, cgroup_memory


def job_facts(given: JobInput, now: int) -> tuple[dict, list[str]]:
    """Job facts from a job's attributes, and warnings about what could not be read.
    A job id that is not one raises SiteInputError."""
    attributes, own_vnodes, cgroup_memory = given.attributes, given.own_vnodes, \
        given.cgroup_memory
    facts: dict[str, tuple] = {"job_id": (checked_job_id(attributes.get("id", "")), "job id"),
                               "jobstart_secs": (now, "time the job started")}
    warnings: list[str] = []
    resources = {name[len(RESOURCE_LIST):]: value for name, value in attributes.items()
                 if name.startswith(RESOURCE_LIST)}
    share: dict[str, int] = {}
    exec_vnode = attributes.get("exec_vnode", "")
    if exec_vnode:
        try:
            share = host_share(exec_vnode, own_vnodes)
        except ValueError as error:
            warnings.append(f"allocated_cpu and max_rss_bytes not taken from exec_vnode: {error}")
    single_host = _single_host(resources, exec_vnode)
    if "ncpus" in share:
        facts["allocated_cpu"] = (share["ncpus"], f"exec_vnode {exec_vnode} (this host's ncpus)")
    else:
        cpus = _cpus_without_exec_vnode(resources, own_vnodes, single_host)
        if cpus:
            facts["allocated_cpu"] = cpus
        else:
            warnings.append("allocated_cpu not written: neither exec_vnode nor "
                            "Resource_List (ncpus, nodes=N:ppn=P) gives this host's CPUs")
    for key, resource in (("wall_limit_secs", "walltime"), ("cpu_limit_secs", "cput")):
        if resource in resources:
            try:
                facts[key] = (parse_duration_secs(resources[resource]),
                              f"Resource_List.{resource}={resources[resource]}")
            except ValueError as error:
                warnings.append(f"{key} not written: Resource_List.{resource}: {error}")
    memory = []
    if "mem" in share:
        memory.append((share["mem"], f"exec_vnode {exec_vnode} (this host's mem)"))
    elif "mem" in resources and single_host:
        try:
            memory.append((parse_size_bytes(resources["mem"]),
                           f"Resource_List.mem={resources['mem']}"))
        except ValueError as error:
            warnings.append(f"max_rss_bytes: Resource_List.mem: {error}")
    if cgroup_memory:
        memory.append(cgroup_memory)
    if memory:
        facts["max_rss_bytes"] = min(memory)
    return facts, warnings


def _single_host(resources: dict[str, str], exec_vnode: str) -> bool:
    """Whether the whole job runs on one host (then its totals are this host's)."""
    if exec_vnode:
        return False  # exec_vnode gives this host's share itself
    nodes = resources.get("nodes", "")
    if nodes:
        specs = nodes.split("+")
        return len(specs) == 1 and digits_value(specs[0].split(":", 1)[0]) in (1, None)
    return digits_value(resources.get("nodect", "1")) == 1


def _cpus_without_exec_vnode(resources: dict[str, str], own: list[str],
                             single_host: bool) -> tuple | None:
    """Torque's ``nodes=N:ppn=P`` (or ``host:ppn=P+...``), else ``ncpus``/``procs`` of a
    job on one host."""
    nodes = resources.get("nodes", "")
    for spec in nodes.split("+") if nodes else []:
        first, *properties = spec.split(":")
        ppn = next((digits_value(value) for name, _, value in
                    (prop.partition("=") for prop in properties) if name == "ppn"), 1)
        mine = digits_value(first) is not None or is_own_vnode(first, own)
        if mine and ppn:
            return ppn, f"Resource_List.nodes={nodes} (ppn on this host)"
    if single_host:
        for name in ("ncpus", "procs"):
            count = digits_value(resources.get(name, ""))
            if count:
                return count, f"Resource_List.{name}={resources[name]}"
    return None


def scratch_dir(tmpdir_root: str, job: str) -> str:
    """The job's ``TMPDIR``: the mom's ``$tmpdir`` (``/var/tmp``), ``pbs.<job id>``."""
    return f"{tmpdir_root.rstrip('/')}/pbs.{job}"


def cgroup_paths(prefix: str, job: str) -> dict[str, str]:
    """Where pbs_cgroups puts a job, as ``/proc/<pid>/cgroup`` would name it, per
    controller (``""``: cgroup v2)."""
    path = f"/{prefix.strip('/')}/{job}"
    return {"memory": path, "cpuset": path, "": path}


def ending_facts(attributes: dict[str, str], now: int) -> tuple[dict, list[str]]:
    """What PBS measured of a finished job (``resources_used.*``, in execjob_end and in
    an epilogue's argv): end time, wall time, CPU time, memory (PBS's peak); a zero wall
    time or peak is no measurement."""
    delivered: dict[str, tuple] = {"end_time": (now, "time the job ended")}
    warnings = []
    for name, resource, parse in (("wall_secs", "walltime", parse_duration_secs),
                                  ("cpu_secs", "cput", parse_duration_secs),
                                  ("peak_memory_bytes", "mem", parse_size_bytes)):
        text = attributes.get(RESOURCES_USED + resource)
        if text is None:
            continue
        try:
            value = parse(text)
        except ValueError as error:
            warnings.append(f"the record has no {name}: resources_used.{resource}: {error}")
            continue
        # PBS samples memory every few seconds: a job ended before the first sample
        # shows 0kb, which is no peak. A sister mom of a multi-node job keeps no wall
        # time (00:00:00 after seconds of work): the job's own clock counts there.
        if value or resource == "cput":
            delivered[name] = (value, f"PBS resources_used.{resource}={text}")
    return delivered, warnings


# ---------------------------------------------------------------- what PBS prints

def parse_attribute_lines(text: str) -> dict[str, str]:
    """``name=value`` lines (what the hook adapter hands over) -> attributes.

    Lines end at ``\n`` only: splitlines() would also end one at a ``\v`` or ``\x1c``
    inside a value (a job name), which could then forge a later ``id=`` line."""
    attributes = {}
    for line in text.split("\n"):
        name, equals, value = line.partition("=")
        if equals and name:
            attributes[name] = value
    return attributes


def parse_qstat_f(text: str) -> dict[str, str]:
    """``qstat -f JOBID`` -> the job's attributes (``id`` from its ``Job Id:`` line).

    A long value continues on lines indented by a tab; Torque and OpenPBS both print
    ``    name = value``."""
    attributes: dict[str, str] = {}
    last = None
    for line in text.splitlines():
        if line.startswith("Job Id:"):
            attributes["id"] = line[len("Job Id:"):].strip()
            last = None
        elif line.startswith("\t") and last is not None:
            attributes[last] += line.strip()
        else:
            name, equals, value = line.strip().partition(" = ")
            if equals and name:
                attributes[name] = value
                last = name
    return attributes


def parse_resource_words(text: str) -> dict[str, str]:
    """A prologue's or epilogue's resource list (``walltime=01:00:00,nodes=1:ppn=2``)
    -> ``{resource: value}``."""
    resources = {}
    for word in text.split(","):
        name, equals, value = word.strip().partition("=")
        if equals and name:
            resources[name] = value
    return resources


def prologue_attributes(argv: list[str]) -> dict[str, str]:
    """A classic prologue's argv -> attributes: Torque passes job id, user, group, job
    name, resource list, queue, account; OpenPBS only the first three."""
    if len(argv) < 3:
        raise SiteInputError(f"a prologue gets at least job id, user and group, got {argv!r}")
    attributes = {"id": argv[0], "euser": argv[1], "egroup": argv[2]}
    named = dict(zip(("Job_Name", "resources", "queue", "Account_Name"), argv[3:7]))
    for name, value in named.items():
        if name == "resources":
            attributes.update({RESOURCE_LIST + resource: amount for resource, amount
                               in parse_resource_words(value).items()})
        elif value:
            attributes[name] = value
    return attributes


def epilogue_attributes(argv: list[str]) -> dict[str, str]:
    """A classic epilogue's argv (job id, user, group, job name, session, requested
    resources, used resources, queue, account, exit status: Torque and OpenPBS alike)
    -> attributes."""
    if len(argv) < 3:
        raise SiteInputError(f"an epilogue gets at least job id, user and group, got {argv!r}")
    attributes = {"id": argv[0], "euser": argv[1], "egroup": argv[2]}
    if len(argv) > 6:
        attributes.update({RESOURCES_USED + resource: amount for resource, amount
                           in parse_resource_words(argv[6]).items()})
    if len(argv) > 7 and argv[7]:
        attributes["queue"] = argv[7]
    return attributes
