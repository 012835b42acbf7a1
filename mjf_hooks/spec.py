"""The key registry: every MJF key, its scope, type, unit and legacy names.

HSF-TN-2016-02 is normative. Draft 0.99 (2014) names are kept as *legacy
aliases*: some deployed readers still look for them, so a site may opt in to
writing them beside the 2016 names (``[mjf] legacy_keys = yes``).

This module is imported by every hook: it must stay cheap (no ``re``, no
``dataclasses``, no ``typing`` at run time).
"""

from __future__ import annotations

MACHINE = "machine"
JOB = "job"

INTEGER = "integer"
DECIMAL = "decimal"  # only hs06 / hs06_job may carry a fraction
STRING = "string"

# Larger values would overflow the signed 64-bit integers many readers use.
MAX_INTEGER = 2**63 - 1
MAX_JOB_ID_LENGTH = 200
# UNIX times outside 2000..2100 are unit mistakes (milliseconds, a duration given as a
# time): `mjf check` calls them errors, and `mjf drain` refuses them.
EARLIEST_TIME, LATEST_TIME = 946684800, 4102444800


class Key:
    """One MJF key: what it means and how its value is written."""

    __slots__ = ("configurable", "doc", "dynamic", "is_limit", "kind", "name", "scope", "unit")

    def __init__(
        self,
        name: str,
        scope: str,
        kind: str,
        unit: str,
        doc: str,
        *,
        dynamic: bool = False,
        configurable: bool = True,
        is_limit: bool = False,
    ) -> None:
        self.name = name
        self.scope = scope
        self.kind = kind
        self.unit = unit
        self.doc = doc
        # Dynamic keys may change while jobs run (drain); writers replace them atomically.
        self.dynamic = dynamic
        # Whether the site config may give a static value for it.
        self.configurable = configurable
        # For limits, the smallest of the values that apply is the one a job must respect.
        self.is_limit = is_limit

    def __repr__(self) -> str:
        return f"Key({self.name!r})"


_KEYS = (
    Key("total_cpu", MACHINE, INTEGER, "processors", "processors that may be allocated to jobs"),
    Key("hs06", MACHINE, DECIMAL, "HS06", "HS06 rating of the whole machine"),
    Key("shutdowntime", MACHINE, INTEGER, "UNIX seconds", "planned shutdown of the machine",
        dynamic=True, configurable=False),
    Key("grace_secs", MACHINE, INTEGER, "seconds", "minimum notice before a shutdowntime"),
    Key("allocated_cpu", JOB, INTEGER, "processors", "processors allocated to this job",
        configurable=False),
    Key("hs06_job", JOB, DECIMAL, "HS06", "HS06 rating of the processors allocated to this job"),
    Key("shutdowntime_job", JOB, INTEGER, "UNIX seconds", "when the job must have finished",
        dynamic=True, configurable=False),
    Key("grace_secs_job", JOB, INTEGER, "seconds", "minimum notice before a shutdowntime_job"),
    Key("jobstart_secs", JOB, INTEGER, "UNIX seconds", "when the job started on this node",
        configurable=False),
    Key("job_id", JOB, STRING, "", "the site's identifier of the job", configurable=False),
    Key("wall_limit_secs", JOB, INTEGER, "seconds", "elapsed time limit from jobstart_secs",
        is_limit=True),
    Key("cpu_limit_secs", JOB, INTEGER, "seconds", "CPU time limit, summed over all processes",
        is_limit=True),
    Key("max_rss_bytes", JOB, INTEGER, "bytes", "resident memory limit of the whole job",
        is_limit=True),
    Key("max_swap_bytes", JOB, INTEGER, "bytes", "swap limit of the whole job", is_limit=True),
    Key("scratch_limit_bytes", JOB, INTEGER, "bytes", "scratch space limit", is_limit=True),
)

KEYS: dict[str, Key] = {key.name: key for key in _KEYS}
MACHINE_KEYS = tuple(key.name for key in _KEYS if key.scope == MACHINE)
JOB_KEYS = tuple(key.name for key in _KEYS if key.scope == JOB)


class LegacyKey:
    """A draft-0.99 name, written from a 2016 key's value when legacy keys are on."""

    __slots__ = ("divisor", "doc", "name", "scope", "source")

    def __init__(self, name: str, scope: str, source: str, divisor: int, doc: str) -> None:
        self.name = name
        self.scope = scope
        self.source = source  # the 2016 key (or derived fact) it is computed from
        self.divisor = divisor  # draft 0.99 counts MB and GB in powers of 1000
        self.doc = doc


LEGACY_KEYS = (
    LegacyKey("allocated_CPU", JOB, "allocated_cpu", 1, "= allocated_cpu"),
    LegacyKey("mem_limit_MB", JOB, "max_rss_bytes", 1000**2, "= max_rss_bytes / 1000^2"),
    LegacyKey("disk_limit_GB", JOB, "scratch_limit_bytes", 1000**3,
              "= scratch_limit_bytes / 1000^3"),
    LegacyKey("wall_limit_secs_lrms", JOB, "wall_limit_secs", 1,
              "= wall_limit_secs (cpufactor_lrms is 1: limits are not normalised)"),
    LegacyKey("cpu_limit_secs_lrms", JOB, "cpu_limit_secs", 1,
              "= cpu_limit_secs (cpufactor_lrms is 1)"),
    LegacyKey("cpufactor_lrms", JOB, "cpufactor_lrms", 1, "1: the limits written are real time"),
    LegacyKey("log_cores", MACHINE, "total_cpu", 1, "= total_cpu (logical processors)"),
    LegacyKey("jobslots", MACHINE, "total_cpu", 1, "= total_cpu"),
    LegacyKey("phys_cores", MACHINE, "phys_cores", 1, "physical cores in /proc/cpuinfo"),
)
LEGACY_NAMES = frozenset(legacy.name for legacy in LEGACY_KEYS)

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


def typed_like(name: str) -> str:
    """The registry key whose type a file's value has: itself, or for a legacy name
    (integers, but cpufactor_lrms, a decimal) a key of that type."""
    if name in KEYS:
        return name
    return "hs06" if name == "cpufactor_lrms" else "total_cpu"


def classad_name(name: str) -> str:
    """The ClassAd attribute of a key, as glideinWMS publishes MJF in a pool (and CMS
    monitoring reads it): ``MJF_MACHINE_<KEY>`` for a machine key, ``MJF_JOB_<KEY>`` for a
    job key, and ``MJF_JOB_ID`` for ``job_id``."""
    if name == "job_id":
        return "MJF_JOB_ID"
    prefix = "MJF_MACHINE_" if KEYS[name].scope == MACHINE else "MJF_JOB_"
    return prefix + name.upper()


def is_valid_key_name(name: str) -> bool:
    """True for names the 2016 spec allows: lowercase letters, digits and underscores."""
    return bool(name) and all(char in _NAME_CHARS for char in name)


def is_valid_job_id(job_id: str) -> bool:
    """True for a non-empty string of printable non-whitespace ASCII (HSF-TN-2016-02)."""
    return (
        0 < len(job_id) <= MAX_JOB_ID_LENGTH
        and all("!" <= char <= "~" for char in job_id)
    )


def _is_plain_digits(text: str) -> bool:
    return bool(text) and text.isascii() and text.isdigit()


# No count, size or time here needs more digits than the largest value a file may hold.
_MAX_DIGITS = len(str(MAX_INTEGER))


def digits_value(text: str) -> int | None:
    """Plain ASCII digits as an int; None for anything else, or for more than 19 digits.

    Not int() alone: it accepts signs, spaces, underscores and non-ASCII digits
    (``١٢``), and raises its own ValueError on thousands of digits (Python >= 3.11).
    """
    return int(text) if len(text) <= _MAX_DIGITS and _is_plain_digits(text) else None


def parse_value(name: str, text: str) -> int | float | str:
    """Parse a value as written in a file or the config; raise ValueError saying why."""
    kind = KEYS[name].kind
    if kind == STRING:
        if not is_valid_job_id(text):
            raise ValueError(
                f"must be 1 to {MAX_JOB_ID_LENGTH} printable ASCII characters without spaces"
            )
        return text
    whole, dot, fraction = text.partition(".")
    if kind == INTEGER or not dot:
        if dot or not _is_plain_digits(text):
            raise ValueError("must be a non-negative whole number (plain digits)")
        if len(text) > _MAX_DIGITS:
            raise ValueError(f"is larger than {MAX_INTEGER}")
        value = int(text)
        if value > MAX_INTEGER:
            raise ValueError(f"is larger than {MAX_INTEGER}")
        return value
    if not (_is_plain_digits(whole) and _is_plain_digits(fraction)):
        raise ValueError("must be a non-negative number such as 2400 or 2400.5")
    return float(text)


def format_value(name: str, value: int | float | str) -> str:
    """The exact text of a key's file: bare value, no whitespace, no newline.

    Integers are plain digits; decimals (hs06, hs06_job) carry at most two
    fraction digits and never an exponent, so strict readers parse them.
    """
    kind = KEYS[name].kind
    if kind == STRING:
        if not isinstance(value, str) or not is_valid_job_id(value):
            raise ValueError(f"{name}: {value!r} is not printable non-whitespace ASCII")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name}: {value!r} is not a number")
    if kind == INTEGER or float(value).is_integer():
        if kind == INTEGER and not isinstance(value, int):
            raise ValueError(f"{name}: {value!r} is not a whole number")
        number = int(value)
        if not 0 <= number <= MAX_INTEGER:
            raise ValueError(f"{name}: {number} is outside 0..{MAX_INTEGER}")
        return str(number)
    if not 0 <= value < MAX_INTEGER:
        raise ValueError(f"{name}: {value!r} is outside 0..{MAX_INTEGER}")
    return (f"{value:.2f}").rstrip("0").rstrip(".")


def key_for_config(section: str, name: str) -> Key:
    """The registry key a config entry names; ValueError saying why it cannot be set."""
    key = KEYS.get(name)
    if key is None:
        raise ValueError("is not an MJF key (see docs/keys.md)")
    if key.scope != section:
        other = "jobfeatures" if key.scope == JOB else "machinefeatures"
        raise ValueError(f"is a {key.scope} key: put it in [{other}]")
    if not key.configurable:
        raise ValueError("is set per job or by `mjf drain`, not by the config")
    return key

