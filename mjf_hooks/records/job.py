"""Job records: what MJF promised a job against what it used.

Pure and cheap to import: it runs in end-of-job hooks, so it does no I/O and
imports nothing at run time (no ``re``, no ``xml``: ``xml.sax.saxutils`` alone
costs ~65 ms because it pulls in ``urllib.request``). Callers gather the values,
this module only shapes them:

* :class:`Record`: one job's Requested values (what MJF told the job) and its
  Delivered values, each Delivered value with the source it came from;
* :func:`sss_xml`: one ``<Job>`` document of the SSS Job Object specification
  (docs/records.md says which elements and units);
* :func:`apel`: an APEL individual job message (``APEL-individual-job-message:
  v0.3``; its fields and units are in docs/records.md);
* :func:`record_json`: a typed dict with the sources.

A value that is unknown is None and is left out of every output, never guessed.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

# Benchmark names a Record accepts (case-insensitive) -> the spelling the APEL
# notes give for ServiceLevelType ("si2k", "hepspec", "hepscore23").
_BENCHMARKS = {"hepspec": "hepspec", "hs06": "hepspec", "hepscore23": "hepscore23"}
# The name a record carries, as the config spells it.
_BENCHMARK_NAMES = {"hepspec": "HEPSPEC", "hepscore23": "HEPscore23"}

REQUESTED = ("allocated_cpu", "max_rss_bytes", "wall_limit_secs", "cpu_limit_secs",
             "scratch_limit_bytes", "hs06_job", "start_time")
DELIVERED = ("end_time", "wall_secs", "cpu_secs", "peak_memory_bytes")
_IDENTITY = ("user", "queue", "node", "backend")
# Which share of a job of several nodes a record is: one record per node, each of its
# node's share (docs/records.md); (1, 1) or unknown for a job of one node.
_SHARE = ("node_index", "node_count")
# More nodes than any job spans (Slurm's host lists stop at as many).
MAX_NODES = 100000
_CONSUMPTION_SOURCE = "derived: cpu_secs / (wall_secs * allocated_cpu)"


# The largest number a record holds: a time up to the end of year 9999 (what a UTC date of
# four digits names: beyond it a record's day directory could not be named), anything else
# up to 2**63 - 1 (a key file's largest integer). Within these every figure derived from a
# record - a product, a ratio, a float of an integer, a date - is a finite float, so no
# conversion of a record's number can raise, whoever wrote the record.
MAX_TIME = 253402300799
MAX_NUMBER = 2**63 - 1
_TIMES = ("start_time", "end_time")
_NUMBERS = REQUESTED + DELIVERED
_PLAIN_NUMBERS = (int, float)  # exactly: bool is an int, and a subclass may be anything


def out_of_bounds(name: str, value) -> str | None:
    """Why ``value`` cannot be a record's ``name`` (a Requested or Delivered value): not a
    number, negative, not finite, or beyond what any job reaches; None if it can."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be a number, not {_shown(value)}"
    limit = MAX_TIME if name in _TIMES else MAX_NUMBER
    # A comparison of an int with a float is exact in Python: no conversion that raises.
    if not 0 <= value <= limit:  # NaN fails this too
        return f"must be a number from 0 to {limit}, not {_shown(value)}"
    return None


def _shown(value) -> str:
    """A short, safe text of a value someone else wrote (a 400-digit number included:
    repr of an int of more than 4300 digits raises on Python >= 3.11)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"a number of about {int(value.bit_length() * 0.30103)} digits"
    if isinstance(value, (int, float)):
        return repr(value)
    return f"a {type(value).__name__}"


class Record:
    """One job's record. Every value but ``job_id`` may be None (unknown).

    Numbers are seconds, bytes, UNIX seconds; ``sources`` maps each known
    Delivered value's name to where it came from (e.g. ``"cgroup cpu.stat"``,
    ``"wait4 rusage"``, ``"HTCondor job ad"``); a Delivered value without a
    source is refused. ``requested_source``: where the Requested values came from, said
    only where they are not root's alone (a pending job's, completed by its user), with
    each value bounded (:mod:`user_bounds`).
    """

    __slots__ = ("job_id", *_IDENTITY, *_SHARE, *REQUESTED, *DELIVERED, "sources",
                 "requested_source", "benchmark")

    def __init__(self, job_id: str, *, user: str | None = None, queue: str | None = None,
                 node: str | None = None, backend: str | None = None,
                 node_index: int | None = None, node_count: int | None = None,
                 allocated_cpu: int | None = None, max_rss_bytes: int | None = None,
                 wall_limit_secs: float | None = None, cpu_limit_secs: float | None = None,
                 scratch_limit_bytes: int | None = None, hs06_job: float | None = None,
                 start_time: float | None = None, end_time: float | None = None,
                 wall_secs: float | None = None, cpu_secs: float | None = None,
                 peak_memory_bytes: int | None = None,
                 sources: dict[str, str] | None = None,
                 requested_source: str | None = None,
                 benchmark: str | None = None) -> None:
        if not isinstance(job_id, str) or not job_id:
            raise ValueError("a record needs a non-empty job_id")
        self.job_id = job_id
        self.user, self.queue, self.node, self.backend = user, queue, node, backend
        for name in _IDENTITY:
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} must be text, not {type(value).__name__}")
        self.node_index, self.node_count = node_index, node_count
        if (node_index, node_count) != (None, None) and not (
                all(isinstance(value, int) and not isinstance(value, bool)
                    for value in (node_index, node_count))
                and 1 <= node_index <= node_count <= MAX_NODES):
            raise ValueError(f"node_index and node_count must be whole numbers with 1 <= "
                             f"node_index <= node_count <= {MAX_NODES}, not "
                             f"{_shown(node_index)} and {_shown(node_count)}")
        self.allocated_cpu = allocated_cpu
        self.max_rss_bytes = max_rss_bytes
        self.wall_limit_secs = wall_limit_secs
        self.cpu_limit_secs = cpu_limit_secs
        self.scratch_limit_bytes = scratch_limit_bytes
        self.hs06_job = hs06_job
        self.start_time = start_time
        self.end_time = end_time
        self.wall_secs = wall_secs
        self.cpu_secs = cpu_secs
        self.peak_memory_bytes = peak_memory_bytes
        for name in _NUMBERS:
            value = getattr(self, name)
            # A plain number within bounds passes here, as out_of_bounds would pass it:
            # `mjf records` checks every value of every record kept.
            if value is None or (type(value) in _PLAIN_NUMBERS and 0 <= value <= (
                    MAX_TIME if name in _TIMES else MAX_NUMBER)):
                continue
            problem = out_of_bounds(name, value)
            if problem:
                raise ValueError(f"{name} {problem}")
        sources = dict(sources) if sources else {}
        for name in sources:
            if name not in DELIVERED:
                raise ValueError(f"source given for {name}, which is not a Delivered value")
        for name in DELIVERED:
            if getattr(self, name) is None:
                sources.pop(name, None)
            elif not sources.get(name):
                raise ValueError(f"{name} is given without the source it came from")
        self.sources = sources
        if requested_source is not None and not (isinstance(requested_source, str)
                                                 and requested_source):
            raise ValueError(f"requested_source must be text, not {_shown(requested_source)}")
        self.requested_source = requested_source
        if benchmark is not None:
            key = _BENCHMARKS.get(benchmark.lower()) if isinstance(benchmark, str) else None
            if key is None:
                shown = benchmark[:40] if isinstance(benchmark, str) else _shown(benchmark)
                raise ValueError(f"benchmark must be HEPSPEC or HEPscore23, not {shown!r}")
            benchmark = _BENCHMARK_NAMES[key]
        self.benchmark = benchmark

    @property
    def consumption_rate(self) -> float | None:
        """CPU time / (wall time x allocated CPUs), or None unless all three are known."""
        cpu, wall, alloc = self.cpu_secs, self.wall_secs, self.allocated_cpu
        if cpu is None or not wall or not alloc:
            return None
        return cpu / (wall * alloc)

    def __repr__(self) -> str:
        known = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__
                          if getattr(self, name) not in (None, {}))
        return f"Record({known})"


# --- number formatting ---------------------------------------------------------

def _int(value: float) -> str:
    """Whole seconds / counts: xsd:int for the spec, integers for APEL."""
    return str(round(value))


def _kb(num_bytes: float) -> str:
    """Bytes -> KB (1024), rounded to the nearest."""
    return str(round(num_bytes / 1024))


def _dec(value: float, places: int = 4) -> str:
    """A decimal without exponent or trailing zeros: 0.78, 12.5, 3."""
    text = f"{value:.{places}f}".rstrip("0").rstrip(".")
    return text or "0"


# --- XML -------------------------------------------------------------------------

# XML 1.0 (section 2.2, Char) allows TAB, LF, CR and everything from U+0020 except the
# surrogates, U+FFFE and U+FFFF. A forbidden character is replaced by U+FFFD; TAB, LF
# and CR are written as character references so a parser gives them back unchanged
# (a bare CR would be normalised to LF, and in attributes all three to a space).
_XML_ESCAPES = {i: "\ufffd" for i in range(0x20) if i not in (0x09, 0x0A, 0x0D)}
_XML_ESCAPES.update({0x09: "&#9;", 0x0A: "&#10;", 0x0D: "&#13;", ord("&"): "&amp;",
                     ord("<"): "&lt;", ord(">"): "&gt;", ord('"'): "&quot;",
                     ord("'"): "&apos;"})
_XML_FORBIDDEN = {i: v for i, v in _XML_ESCAPES.items() if v == "\ufffd"}


def xml_clean(text: str) -> str:
    """``text`` with the characters XML 1.0 forbids replaced by U+FFFD (unescaped)."""
    if text and max(text) >= "\ud800":
        text = "".join("\ufffd" if "\ud800" <= c <= "\udfff" or c in "\ufffe\uffff" else c
                       for c in text)
    return text.translate(_XML_FORBIDDEN)


def xml_escape(text: str) -> str:
    """``text`` as XML 1.0 character data or attribute value (either quote)."""
    if text and max(text) >= "\ud800":
        text = xml_clean(text)
    return text.translate(_XML_ESCAPES)


def _element(name: str, text: str, attrs: tuple = ()) -> str:
    attr_text = "".join(f' {key}="{xml_escape(value)}"' for key, value in attrs)
    return f"<{name}{attr_text}>{xml_escape(text)}</{name}>"


def sss_xml(record: Record) -> str:
    """One well-formed SSS Job Object ``<Job>`` document for ``record``.

    Element names, order and attributes follow the specification text's examples
    (lines cited below refer to ``sss-job-object-spec.txt``; the text keeps the
    examples but not the property tables). Values the spec has no element for
    (backend, cpu_limit_secs, scratch_limit_bytes, hs06_job, benchmark, the
    sources, Delivered CPU seconds other than through consumptionRate) are in
    :func:`record_json` and :func:`apel`, not here.
    """
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', "<Job>"]
    # Job properties, in the order of the "moderately complex" example (lines 51-66):
    # <JobId> (l.52), <UserId> (l.55), <MachineName> (l.60; a host name on l.104),
    # <Queue> (l.62), <StartTime>/<EndTime> (l.64-65; DateTime = xsd:int, seconds
    # since the epoch, section 2.2 "Table Column Interpretations").
    for name, value in (("JobId", record.job_id), ("UserId", record.user),
                        ("MachineName", record.node), ("Queue", record.queue)):
        if value is not None:
            lines.append("  " + _element(name, value))
    for name, value in (("StartTime", record.start_time), ("EndTime", record.end_time)):
        if value is not None:
            lines.append("  " + _element(name, _int(value)))
    # <Requested> (l.67-71, 109-113): Processors, Memory (with a units attribute,
    # l.69), WallDuration (Duration = xsd:int seconds, section 2.2).
    requested = []
    if record.allocated_cpu is not None:
        requested.append(_element("Processors", _int(record.allocated_cpu)))
    if record.max_rss_bytes is not None:
        requested.append(_element("Memory", _kb(record.max_rss_bytes), (("units", "KB"),)))
    if record.wall_limit_secs is not None:
        requested.append(_element("WallDuration", _int(record.wall_limit_secs)))
    # <Delivered> (l.72-76, 114-118): Processors carries consumptionRate (l.116),
    # Memory the peak as metric="max" (l.117) with units (l.74).
    delivered = []
    if record.allocated_cpu is not None:
        rate = record.consumption_rate
        attrs = () if rate is None else (("consumptionRate", _dec(rate)),)
        delivered.append(_element("Processors", _int(record.allocated_cpu), attrs))
    if record.peak_memory_bytes is not None:
        delivered.append(_element("Memory", _kb(record.peak_memory_bytes),
                                  (("metric", "max"), ("units", "KB"))))
    if record.wall_secs is not None:
        delivered.append(_element("WallDuration", _int(record.wall_secs)))
    for name, children in (("Requested", requested), ("Delivered", delivered)):
        if children:
            lines.append(f"  <{name}>")
            lines.extend("    " + child for child in children)
            lines.append(f"  </{name}>")
    # A share of a job of several nodes (a record per node): its <TaskGroup> (l.119-130)
    # counts the job's nodes (<NodeCount>, l.158) and holds this node's <Task> (l.122-125).
    if record.node_count is not None and record.node_count > 1:
        lines += ["  <TaskGroup>", "    " + _element("NodeCount", str(record.node_count)),
                  "    <Task>"]
        if record.node is not None:
            lines.append("      " + _element("Node", record.node))
        lines += ["    </Task>", "  </TaskGroup>"]
    lines.append("</Job>")
    return "\n".join(lines) + "\n"


# --- APEL ------------------------------------------------------------------------

APEL_HEADER = "APEL-individual-job-message: v0.3"
APEL_MANDATORY = ("Site", "LocalJobId", "WallDuration", "CpuDuration", "StartTime", "EndTime")


_APEL_CONTROL = {i: "?" for i in range(0x20)}
_APEL_CONTROL[0x7F] = "?"


def _apel_value(text: str) -> str:
    """One line's value: control characters (a newline would start a new field) and
    lone surrogates (not UTF-8) -> '?'."""
    if text and max(text) >= "\ud800":
        text = "".join("?" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text.strip().translate(_APEL_CONTROL)


def _apel_fields(record: Record, site: str) -> list:
    rate_base = None
    if record.hs06_job is not None and record.allocated_cpu:
        rate_base = record.hs06_job / record.allocated_cpu
    fields = [
        ("Site", site),
        ("MachineName", record.node),
        ("Queue", record.queue),
        ("LocalJobId", record.job_id),
        ("LocalUserId", record.user),
        ("WallDuration", None if record.wall_secs is None else _int(record.wall_secs)),
        ("CpuDuration", None if record.cpu_secs is None else _int(record.cpu_secs)),
        ("Processors", None if record.allocated_cpu is None else _int(record.allocated_cpu)),
        ("NodeCount", "1"),  # one record per node: MJF runs on the job's node
        ("StartTime", None if record.start_time is None else _int(record.start_time)),
        ("EndTime", None if record.end_time is None else _int(record.end_time)),
        ("MemoryReal", None if record.peak_memory_bytes is None
         else _kb(record.peak_memory_bytes)),
    ]
    if record.benchmark is not None and rate_base is not None:
        fields.append(("ServiceLevelType", _BENCHMARKS[record.benchmark.lower()]))
        fields.append(("ServiceLevel", _dec(rate_base, 3)))
    out = []
    for name, value in fields:
        value = None if value is None else _apel_value(value)
        if not value:
            if name in APEL_MANDATORY:
                raise ValueError(f"APEL record for job {record.job_id!r} lacks the "
                                 f"mandatory field {name}")
            continue
        out.append(f"{name}: {value}")
    return out


def apel(records: Iterable[Record], site: str) -> str:
    """An APEL individual job message for ``records`` at ``site`` (the GOCDB site name).

    Durations in whole seconds, times in UNIX seconds, MemoryReal in KB (the peak
    memory); ServiceLevelType ``hepspec``/``hepscore23`` and ServiceLevel the
    ``hs06_job`` per allocated core, when both the benchmark and the core count are
    known. Each record ends with a ``%%`` line. Raises ValueError naming the first
    mandatory field a record lacks.
    """
    lines = [APEL_HEADER]
    for record in records:
        lines.extend(_apel_fields(record, site))
        lines.append("%%")
    return "\n".join(lines) + "\n"


# --- JSON ------------------------------------------------------------------------

def record_json(record: Record) -> dict:
    """A JSON-ready dict: numbers stay numbers, unknown values are left out, and each
    Delivered value is ``{"value": ..., "source": ...}``."""
    out: dict = {"job_id": record.job_id}
    for name in (*_IDENTITY, *_SHARE, "benchmark"):
        value = getattr(record, name)
        if value is not None:
            out[name] = value
    requested = {name: getattr(record, name) for name in REQUESTED
                 if getattr(record, name) is not None}
    delivered = {name: {"value": getattr(record, name), "source": record.sources[name]}
                 for name in DELIVERED if getattr(record, name) is not None}
    rate = record.consumption_rate
    if rate is not None:
        delivered["consumption_rate"] = {"value": rate, "source": _CONSUMPTION_SOURCE}
    if requested:
        out["requested"] = requested
        if record.requested_source is not None:
            out["requested_source"] = record.requested_source
    if delivered:
        out["delivered"] = delivered
    return out


def record_from_json(data: dict) -> Record:
    """The Record a :func:`record_json` dict describes (ValueError if it is not one)."""
    if not isinstance(data, dict):
        raise ValueError("a record is a JSON object")
    requested = data.get("requested", {})
    delivered = data.get("delivered", {})
    if not isinstance(requested, dict) or not isinstance(delivered, dict):
        raise ValueError("requested and delivered must be objects")
    values: dict = {name: requested.get(name) for name in REQUESTED}
    sources = {}
    for name in DELIVERED:
        entry = delivered.get(name)
        if entry is None:
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("source"), str):
            raise ValueError(f"delivered {name} must be {{value, source}}")
        values[name] = entry.get("value")
        sources[name] = entry["source"]
    return Record(data.get("job_id"),
                  **{name: data.get(name) for name in (*_IDENTITY, *_SHARE)},
                  **values, sources=sources, requested_source=data.get("requested_source"),
                  benchmark=data.get("benchmark"))


# --- what a record says about the promise ------------------------------------------

def overruns(record: Record) -> list[str]:
    """The promises the job went past: ``wall`` (wall time over wall_limit_secs),
    ``memory`` (peak over max_rss_bytes), ``cpu`` (CPU time over cpu_limit_secs),
    ``cores`` (more CPU than its allocated_cpu could give in its wall time, with 1% and
    one second of wall time to spare: several batch systems give whole seconds)."""
    found = []
    for name, used, promised in (("wall", record.wall_secs, record.wall_limit_secs),
                                 ("memory", record.peak_memory_bytes, record.max_rss_bytes),
                                 ("cpu", record.cpu_secs, record.cpu_limit_secs)):
        if used is not None and promised is not None and used > promised:
            found.append(name)
    # CPU time and wall time come from different clocks, the wall time often in whole
    # seconds: a short job that used its cores fully would otherwise seem to overrun.
    if record.consumption_rate is not None \
            and record.cpu_secs > 1.01 * record.allocated_cpu * (record.wall_secs + 1):
        found.append("cores")
    return found


def _ratio(used: float | None, promised: float | None) -> float | None:
    return None if used is None or not promised else used / promised


def figures(record: Record) -> dict:
    """Per job: CPU efficiency (consumptionRate), and peak memory, wall time and CPU time
    as fractions of their promise; None where either side is unknown."""
    return {
        "cpu_efficiency": record.consumption_rate,
        "memory_used_fraction": _ratio(record.peak_memory_bytes, record.max_rss_bytes),
        "wall_used_fraction": _ratio(record.wall_secs, record.wall_limit_secs),
        "cpu_used_fraction": _ratio(record.cpu_secs, record.cpu_limit_secs),
        "over": overruns(record),
    }


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def summary_row(record: Record) -> list:
    """What :func:`summary` takes of a record: CPU seconds allocated and used (None where
    CPU time, wall time or allocated_cpu is unknown), peak memory and wall time as
    fractions of their promise, the promises it went past. Plain JSON values: the
    records directory keeps each day's rows as that day's digest (records/reading.py)."""
    known = record.consumption_rate is not None
    return [record.wall_secs * record.allocated_cpu if known else None,  # type: ignore[operator]
            record.cpu_secs if known else None,
            _ratio(record.peak_memory_bytes, record.max_rss_bytes),
            _ratio(record.wall_secs, record.wall_limit_secs),
            overruns(record)]


def summary(records: Iterable[Record]) -> dict:
    """Totals over ``records``: see :func:`summary_of`."""
    return summary_of(summary_row(record) for record in records)


def summary_of(rows: Iterable[list]) -> dict:
    """Totals over records' :func:`summary_row`: core-hours allocated and used, overall
    CPU efficiency (CPU time over wall time x allocated CPUs, of the jobs where all three
    are known), the idle core-hours, medians of the used fractions, and how many jobs
    went past each promise."""
    jobs = 0
    allocated = used = 0.0
    efficiency_jobs = 0
    memory, wall = [], []
    over = {"wall": 0, "memory": 0, "cpu": 0, "cores": 0}
    any_over = 0
    for allocated_secs, used_secs, memory_fraction, wall_fraction, went_over in rows:
        jobs += 1
        if allocated_secs is not None:
            efficiency_jobs += 1
            allocated += allocated_secs
            used += used_secs
        if memory_fraction is not None:
            memory.append(memory_fraction)
        if wall_fraction is not None:
            wall.append(wall_fraction)
        any_over += bool(went_over)
        for name in went_over:
            over[name] += 1
    return {
        "jobs": jobs,
        "jobs_with_cpu_figures": efficiency_jobs,
        "allocated_core_hours": allocated / 3600,
        "used_core_hours": used / 3600,
        "idle_core_hours": max(0.0, allocated - used) / 3600,
        "cpu_efficiency": used / allocated if allocated else None,
        "median_memory_used_fraction": _median(memory),
        "median_wall_used_fraction": _median(wall),
        "jobs_over_a_promise": any_over,
        "over": over,
    }


# --- a usage report: what a hook of the job's user measured, for root's record --------

_REPORTED = ("cpu_secs", "peak_memory_bytes")
# A bound no real job reaches (30 years of 10,000 cores; 1 PB): beyond it, a typo or a lie.
_REPORT_BOUND = 1e13 + 1e15


def usage_report(facts: dict) -> str:
    """``name value`` lines of the reported values in ``facts`` (``{name: (value, _)}``)."""
    return "".join(f"{name} {_dec(facts[name][0], 6)}\n" for name in _REPORTED if name in facts)


def parse_usage_report(text: str, source: str) -> dict:
    """The values of a usage report as Delivered facts with ``source``; what is not a
    plain non-negative number below a bound no job reaches is left out."""
    facts = {}
    for line in text.splitlines()[:len(_REPORTED) * 2]:
        name, _, value = line.partition(" ")
        whole, dot, fraction = value.partition(".")
        if name not in _REPORTED or not whole.isdigit() or not whole.isascii() \
                or (dot and not (fraction.isdigit() and fraction.isascii())) or len(value) > 30:
            continue
        number = float(value) if dot else int(value)
        if number < _REPORT_BOUND:
            facts[name] = (number, source)
    return facts
