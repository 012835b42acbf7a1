"""This job slot as a resource description: ClassAd (glideinWMS + GLUE 1.3), DIRAC, GLUE 2.

Pure functions: the inputs are the raw texts already read (machine and job features as
``{key: text}``, ``/proc/cpuinfo``, ``/etc/os-release``), the configured ``[describe]``
options, the machine's architecture and the time; nothing here reads a file.

Units, each converted once, here and nowhere else (docs/matchmaking.md's ``mjf describe`` table
says the same):

* MB is **2^20 bytes** (MiB), rounded down. GLUE 1.3 and 2 say "MB" without more; the
  information providers and DIRAC's pilot (``MemTotal`` kB / 1024) divide by 1024, so
  a slot described here compares with them. Rounding down never promises more memory
  than the slot's limit.
* GLUE 1.3 ``GlueCEPolicyMaxWallClockTime`` / ``GlueCEPolicyMaxCPUTime`` are **minutes**,
  rounded down; GLUE 2 ``MaxWallTime`` / ``MaxCPUTime`` are seconds, as MJF.
* The per-core power is ``hs06_job / allocated_cpu`` for a job (else ``hs06 /
  total_cpu``). ``GlueHostBenchmarkSI00`` is SpecInt2000 of one processor (the gLite
  example publishes 400 for an SMP-2 PIII host), converted as DIRAC does: SI00 = HS06 x
  250, rounded down. The GLUE 2 benchmark is the same per-core value, of the type
  ``[machinefeatures] benchmark`` names: ``hep-spec06`` (HEPSPEC, the default) or
  ``HEPscore23``, which WLCG put on HS06's scale, so the keys and conversions stay.
* DIRAC ``CPUTime`` is work in HS06·s, as DIRAC counts it: the seconds the slot still
  has (the earliest of ``jobstart_secs + wall_limit_secs``, ``shutdowntime_job`` and
  ``shutdowntime``, minus now; ``wall_limit_secs`` itself when there is no start time)
  x the per-core power (DIRAC's ``CPUNormalizationFactor``), rounded down.
* Clock speed: ``cpu MHz`` of ``/proc/cpuinfo``'s first processor, rounded down.

An attribute whose input is missing (or malformed) is left out, never guessed.
"""

from __future__ import annotations

from . import spec

MIB = 1 << 20
SI00_PER_HS06 = 250  # DIRAC: HS06 = SI00 / 250
FORMATS = ("classad", "dirac", "glue2", "json")

# uname -m -> GLUE 2 Platform (the Debian architecture names GLUE 2 uses: amd64, i386).
_PLATFORMS = {"x86_64": "amd64", "amd64": "amd64", "i386": "i386", "i486": "i386",
              "i586": "i386", "i686": "i386", "aarch64": "arm64", "arm64": "arm64",
              "ppc64le": "ppc64el", "s390x": "s390x", "riscv64": "riscv64"}
# [machinefeatures] benchmark -> GLUE 2 Benchmark Type.
BENCHMARK_TYPES = {"HEPSPEC": "hep-spec06", "HEPscore23": "HEPscore23"}


class Options:
    """The ``[describe]`` section: who this slot is, for DIRAC; and ``[machinefeatures]
    benchmark``, what the HS06 numbers were measured with."""

    def __init__(self, site: str | None = None, gridce: str | None = None,
                 tags: tuple[str, ...] = (), platform: str | None = None,
                 benchmark: str = "HEPSPEC") -> None:
        self.site = site
        self.gridce = gridce
        self.tags = tuple(tags)
        self.platform = platform
        self.benchmark = benchmark


def typed(raw: dict[str, str], scope: str) -> tuple[dict, list[str]]:
    """The registry keys of one scope, typed (hs06 and hs06_job always floats); and a line
    per malformed value (left out)."""
    values: dict[str, int | float | str] = {}
    problems = []
    for name in sorted(raw):
        key = spec.KEYS.get(name)
        if key is None or key.scope != scope:
            continue  # legacy aliases and foreign files: not described
        try:
            value = spec.parse_value(name, raw[name])
            values[name] = float(value) if key.kind == spec.DECIMAL else value
        except ValueError as error:
            problems.append(f"{name} = {raw[name]!r}: {error}: left out")
    return values, problems


def parse_cpuinfo(text: str) -> dict[str, str]:
    """``model name``, ``vendor_id`` and ``cpu MHz`` of the first processor."""
    found: dict[str, str] = {}
    for line in text.split("\n"):
        if not line.strip():
            if found:
                break  # the end of the first processor's block
            continue
        name, colon, value = line.partition(":")
        name = name.strip()
        if colon and name in ("model name", "vendor_id", "cpu MHz") and name not in found \
                and value.strip():
            found[name] = value.strip()
    return found


def parse_os_release(text: str) -> dict[str, str]:
    """os-release(5): ``KEY=value`` lines, the value optionally quoted (shell style)."""
    found = {}
    for line in text.split("\n"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, equals, value = line.partition("=")
        if not equals or not name.isidentifier():
            continue
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            quote, value = value[0], value[1:-1]
            if quote == '"':
                chars, index = [], 0
                while index < len(value):
                    if value[index] == "\\" and index + 1 < len(value) \
                            and value[index + 1] in '"\\$`':
                        index += 1
                    chars.append(value[index])
                    index += 1
                value = "".join(chars)
        if value:
            found[name] = value
    return found


class Slot:
    """What is known of the slot, typed: the basis of every format."""

    def __init__(self, machine: dict, job: dict, cpuinfo: dict[str, str],
                 os_release: dict[str, str], now: float) -> None:
        self.machine = machine
        self.job = job
        self.cpuinfo = cpuinfo
        self.os_release = os_release
        self.now = now

    @property
    def cpus(self) -> int | None:
        """The slot's processors: the job's allocation, else the whole machine."""
        return self.job.get("allocated_cpu") if self.job else self.machine.get("total_cpu")

    def hs06_per_core(self) -> float | None:
        if self.job:
            power, cpus = self.job.get("hs06_job"), self.job.get("allocated_cpu")
        else:
            power, cpus = self.machine.get("hs06"), self.machine.get("total_cpu")
        if power is None or not cpus:
            return None
        return power / cpus

    def memory_mb(self) -> int | None:
        rss = self.job.get("max_rss_bytes")
        return None if rss is None else rss // MIB

    def virtual_memory_mb(self) -> int | None:
        rss, swap = self.job.get("max_rss_bytes"), self.job.get("max_swap_bytes")
        return None if rss is None or swap is None else (rss + swap) // MIB

    def seconds_left(self) -> int | None:
        """Wall seconds the slot still has (never below 0); without a start time, the
        wall limit; None when nothing bounds it."""
        from .reader import job_end  # the rule `mjf remaining` follows

        wall = self.job.get("wall_limit_secs")
        end = job_end(self.job.get("jobstart_secs"), wall, self.job.get("shutdowntime_job"),
                      self.machine.get("shutdowntime"))
        return wall if end is None else max(0, int(end - self.now))

    def clock_mhz(self) -> int | None:
        text = self.cpuinfo.get("cpu MHz")
        try:
            return int(float(text)) if text is not None else None
        except ValueError:
            return None


def slot(machine_raw: dict[str, str], job_raw: dict[str, str] | None, cpuinfo: str = "",
         os_release: str = "", now: float = 0.0) -> tuple[Slot, list[str]]:
    """The slot from raw texts, and a line per malformed value that was left out."""
    machine, problems = typed(machine_raw or {}, spec.MACHINE)
    job, job_problems = typed(job_raw or {}, spec.JOB)
    return (Slot(machine, job, parse_cpuinfo(cpuinfo), parse_os_release(os_release), now),
            problems + job_problems)


def _put(target: dict, name: str, value) -> None:
    if value is not None:
        target[name] = value


def classad(slot: Slot) -> dict:
    """glideinWMS's ``MJF_*`` attributes and the GLUE 1.3 attributes of the slot."""
    attributes: dict[str, int | float | str] = {}
    for values in (slot.machine, slot.job):
        for name, value in values.items():
            attributes[spec.classad_name(name)] = value
    _put(attributes, "GlueHostArchitectureSMPSize", slot.cpus)
    _put(attributes, "GlueHostMainMemoryRAMSize", slot.memory_mb())
    _put(attributes, "GlueHostMainMemoryVirtualSize", slot.virtual_memory_mb())
    per_core = slot.hs06_per_core()
    if per_core is not None:
        attributes["GlueHostBenchmarkSI00"] = int(per_core * SI00_PER_HS06)
    for glue, key in (("GlueCEPolicyMaxWallClockTime", "wall_limit_secs"),
                      ("GlueCEPolicyMaxCPUTime", "cpu_limit_secs")):
        if slot.job.get(key) is not None:
            attributes[glue] = slot.job[key] // 60
    _put(attributes, "GlueHostProcessorModel", slot.cpuinfo.get("model name"))
    _put(attributes, "GlueHostProcessorVendor", slot.cpuinfo.get("vendor_id"))
    _put(attributes, "GlueHostProcessorClockSpeed", slot.clock_mhz())
    _put(attributes, "GlueHostOperatingSystemName", slot.os_release.get("NAME"))
    _put(attributes, "GlueHostOperatingSystemRelease", slot.os_release.get("VERSION_ID"))
    _put(attributes, "GlueHostOperatingSystemVersion", slot.os_release.get("VERSION"))
    return attributes


def dirac(slot: Slot, options: Options) -> dict:
    """The keys of a DIRAC 9.1 pilot's resource description, from MJF and the config.

    Only the keys: the Matcher itself derives ``1Processors`` … ``<N>Processors`` and
    ``MultiProcessor`` from ``NumberOfProcessors``, and the tag ``WholeNode`` from the
    key's presence; ``Tag`` holds the configured tags alone.
    """
    description: dict[str, object] = {}
    cpus = slot.job.get("allocated_cpu")
    _put(description, "NumberOfProcessors", cpus)
    _put(description, "MaxRAM", slot.memory_mb())
    per_core, seconds = slot.hs06_per_core(), slot.seconds_left()
    if slot.job and per_core is not None and seconds is not None:
        description["CPUTime"] = int(seconds * per_core)
    if cpus is not None and cpus == slot.machine.get("total_cpu"):
        description["WholeNode"] = True  # the Matcher looks at presence only
    _put(description, "Site", options.site)
    _put(description, "GridCE", options.gridce)
    if options.tags:
        description["Tag"] = list(options.tags)
    _put(description, "Platform", options.platform)
    return description


def glue2(slot: Slot, machine_arch: str | None = None, benchmark: str = "HEPSPEC") -> dict:
    """GLUE 2 ExecutionEnvironment attributes, its benchmark (``benchmark``: the configured
    one, a key of BENCHMARK_TYPES) and ComputingShare limits."""
    environment: dict[str, object] = {}
    _put(environment, "LogicalCPUs", slot.cpus)
    _put(environment, "MainMemorySize", slot.memory_mb())
    _put(environment, "VirtualMemorySize", slot.virtual_memory_mb())
    _put(environment, "CPUVendor", slot.cpuinfo.get("vendor_id"))
    _put(environment, "CPUModel", slot.cpuinfo.get("model name"))
    _put(environment, "CPUClockSpeed", slot.clock_mhz())
    environment["OSFamily"] = "linux"
    _put(environment, "OSName", slot.os_release.get("ID"))
    _put(environment, "OSVersion", slot.os_release.get("VERSION_ID"))
    _put(environment, "Platform", _PLATFORMS.get(machine_arch or ""))
    per_core = slot.hs06_per_core()
    benchmarks = [] if per_core is None else [{"Type": BENCHMARK_TYPES[benchmark],
                                               "Value": round(per_core, 2)}]
    share: dict[str, object] = {}
    _put(share, "MaxWallTime", slot.job.get("wall_limit_secs"))
    _put(share, "MaxCPUTime", slot.job.get("cpu_limit_secs"))
    _put(share, "MaxMainMemory", slot.memory_mb())
    _put(share, "MaxVirtualMemory", slot.virtual_memory_mb())
    _put(share, "MaxSlotsPerJob", slot.job.get("allocated_cpu"))
    return {"ExecutionEnvironment": environment, "Benchmark": benchmarks,
            "ComputingShare": share}


def everything(slot: Slot, options: Options, machine_arch: str | None = None) -> dict:
    """The MJF values (and the benchmark hs06/hs06_job come from) and every format, typed."""
    return {"machinefeatures": dict(slot.machine), "jobfeatures": dict(slot.job),
            "benchmark": options.benchmark,
            "classad": classad(slot), "dirac": dirac(slot, options),
            "glue2": glue2(slot, machine_arch, options.benchmark)}


def classad_text(attributes: dict) -> str:
    """New-ClassAd text: ``[``, one ``Name = value;`` per line, ``]``.

    New syntax, brackets included, because only its parser reads string escapes: the
    old (bracketless) one keeps a backslash as it is, so a string holding one would not
    read back the same. HTCondor's ``classad`` library parses it (``parseOne``).
    """
    lines = "".join(f"  {name} = {classad_literal(value)};\n"
                    for name, value in attributes.items())
    return f"[\n{lines}]\n"


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b",
            "\f": "\\f"}


def classad_literal(value) -> str:
    """A ClassAd literal: booleans, integers plain, reals with a point, quoted strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text if any(char in text for char in ".en") else text + ".0"
    if isinstance(value, (list, tuple)):
        return "{ " + ", ".join(classad_literal(item) for item in value) + " }"
    text = "".join(_ESCAPES.get(char, f"\\{ord(char):03o}") if char < " " or char == "\x7f"
                   else _ESCAPES.get(char, char) for char in str(value))
    return f'"{text}"'
