"""The bad-input corpus: a deterministic, seeded list of mutated hook inputs.

Every case starts from what a real job gave a hook (the recorded Slurm 22.05
environments, HTCondor 23.9 ads, the LSF 10.1 environments, a Slurm-like cgroup
tree) and breaks one thing: an environment variable, an ad attribute or the
whole ad file, a cgroup or /proc file, a line of the config or the whole config,
what scontrol/bjobs/condor_status print, the state a previous run left, or an
option. The list depends on nothing but ``SEED``, so the number of cases is
stable from run to run (the corpus's conftest prints it).
"""

from __future__ import annotations

import functools
import os
import random

from tests.conftest import FIXTURES, fixture_text

SEED = 20261122
MIB = 1 << 20
HOST = os.uname().nodename
RNG = random.Random(SEED)


class Case:
    """One mutated run of one entry point.

    ``env``: variables to set (``None`` removes one); ``files``: files of the case
    directory to replace (relative path -> bytes, ``None`` to remove, ``DIRECTORY``
    for an empty directory in its place); ``config``: the config's bytes (None: the
    entry point's default config); ``argv``: extra arguments; ``culprits``: words
    of which a log line about this case must name one.
    """

    __slots__ = ("argv", "config", "culprits", "entry", "env", "files", "label", "on_error_fail",
                 "outputs", "via_env_file")

    def __init__(self, entry: str, label: str, culprits: tuple[str, ...], env=None, files=None,
                 config: bytes | None = None, argv: tuple[str, ...] = (), outputs=None,
                 on_error_fail: bool = False) -> None:
        self.entry = entry
        self.label = label
        self.culprits = culprits
        self.env = env or {}
        self.files = files or {}
        self.config = config
        self.argv = argv
        # What a fake scontrol / bjobs / condor_status prints (a str), or raises (an Exception).
        self.outputs = outputs or {}
        self.on_error_fail = on_error_fail
        # NUL cannot be in a real environment: such values travel in an --env-file.
        self.via_env_file = "job.env" in self.files or any(
            "\0" in (value or "") for value in self.env.values())

    @property
    def id(self) -> str:
        return f"{self.entry}:{self.label}"


DIRECTORY = object()


HUGE_DIGITS = "9" * MIB


@functools.cache
def _huge_text(value: str) -> str:
    return (value or "x") * (MIB // max(1, len(value)))


def value_mutations(value: str, nul: bool = True) -> list[tuple[str, str]]:
    """Bad versions of one text value, labelled; duplicates of each other removed."""
    candidates = [
        ("empty", ""),
        ("truncated", value[: len(value) // 2]),
        ("binary", value + "\udcff\udcfe"),  # bytes that are not UTF-8 (surrogateescape)
        ("huge-digits", HUGE_DIGITS),  # shared: the corpus holds thousands of cases
        ("huge-text", _huge_text(value)),
        ("units-G", "10G"),
        ("units-d-hms", "1:00:00:00:00"),
        ("negative", "-1"),
        ("unicode-digits", "\u0661\u0662"),
        ("fullwidth-digits", "\uff11\uff12"),
        ("newline", value + "\n1"),
        ("spaces", f" {value} "),
        ("fraction", "2.5"),
        ("exponent", "1e3"),
        ("overflow", "9" * 25),
        ("int64-max", str(2**63 - 1)),
        ("zero", "0"),
        ("shell", "$(touch pwned)"),
        ("path", "../../etc"),
        ("control", "\x1b[31m" + value),
    ]
    if nul:
        candidates.append(("nul", value + "\0" + "1"))
    seen, out = set(), []
    for label, text in candidates:
        if text != value and text not in seen:
            seen.add(text)
            out.append((label, text))
    return out


def file_mutations(content: bytes) -> list[tuple[str, object]]:
    """Bad versions of a whole file, labelled (bytes, None for missing, DIRECTORY)."""
    garbage = bytes(RNG.randrange(256) for _ in range(512))
    return [
        ("missing", None),
        ("directory", DIRECTORY),
        ("empty", b""),
        ("truncated-half", content[: len(content) // 2]),
        ("truncated-1-byte", content[:1]),
        ("binary", garbage),
        ("nul-bytes", content.replace(b"\n", b"\0\n", 3)),
        ("all-nul", b"\0" * 256),
        ("not-utf8", content.replace(b"=", b"=\xff\xfe", 3)),
        ("utf16", content.decode("utf-8", "replace").encode("utf-16")),
        ("crlf", content.replace(b"\n", b"\r\n")),
        ("huge", content + b"#" * (2 * MIB) + b"\n"),
        ("huge-line", b"x" * (2 * MIB)),
    ]


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


# -- the recorded inputs ---------------------------------------------------------------------


def recorded_env(relative: str) -> dict[str, str]:
    """A recorded environment (``NAME=value`` lines before any scontrol dump)."""
    text = fixture_text(relative).split("# scontrol show job")[0].replace("@HOST@", HOST)
    return dict(line.split("=", 1) for line in text.splitlines()
                if "=" in line and not line.startswith("#"))


SCONTROL_JOB = fixture_text("slurm-22.05/scontrol-show-job-o.txt").replace("JobId=2 ", "JobId=3 ")
SCONTROL_PARTITION = fixture_text("slurm-22.05/scontrol-show-partition-o.txt")
JOB_AD = (FIXTURES / "htcondor-23.9/job.ad").read_bytes()
MACHINE_AD = (FIXTURES / "htcondor-23.9/machine.ad").read_bytes()
CPUINFO = (FIXTURES / "host/cpuinfo-amd-epyc-2.txt").read_bytes()

# A Slurm job's cgroup v2 tree, as the probes see it (paths below the fake root).
V2_MOUNTINFO = (b"24 1 0:22 / /sys rw - sysfs sysfs rw\n"
                b"35 24 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n")
V2_JOB = "sys/fs/cgroup/system.slice/slurmstepd.scope/job_3"
CGROUP_TREE = {
    "proc/self/cgroup": b"0::/system.slice/slurmstepd.scope/job_3/step_0\n",
    "proc/self/mountinfo": V2_MOUNTINFO,
    "proc/cpuinfo": CPUINFO,
    f"{V2_JOB}/memory.max": b"536870912\n",
    f"{V2_JOB}/memory.swap.max": b"max\n",
    f"{V2_JOB}/step_0/memory.max": b"max\n",
    f"{V2_JOB}/step_0/memory.swap.max": b"0\n",
    f"{V2_JOB}/step_0/cpuset.cpus.effective": b"0-1\n",
}
V1_MOUNTINFO = (FIXTURES / "host/mountinfo-v1-hybrid.txt").read_bytes()
V1_JOB = "sys/fs/cgroup/memory/slurm_vm/uid_1001/job_3"
V1_TREE = {
    "proc/self/cgroup": b"4:memory:/slurm_vm/uid_1001/job_3/step_0\n3:cpuset:/\n0::/\n",
    "proc/self/mountinfo": V1_MOUNTINFO,
    f"{V1_JOB}/memory.limit_in_bytes": b"209715200\n",
    f"{V1_JOB}/memory.memsw.limit_in_bytes": b"314572800\n",
    f"{V1_JOB}/step_0/memory.limit_in_bytes": b"9223372036854771712\n",
}

# -- per source of input ---------------------------------------------------------------------


# What a line about a broken variable may name instead of the variable.
ALSO_NAMED = {"_CONDOR_JOB_AD": ("job ad",), "_CONDOR_MACHINE_AD": ("machine ad",),
              "SLURM_NODELIST": ("SLURM_JOB_CPUS_PER_NODE",), "SLURM_JOBID": ("SLURM_JOB_ID",),
              "SLURM_JOB_ID": ("SLURM_JOBID",), "LSF_BINDIR": ("bjobs",),
              "MJF_CONFIG": ("/etc/mjf/mjf.conf", "the config")}


def env_cases(entry: str, environ: dict[str, str], names: tuple[str, ...]) -> list[Case]:
    """Each variable in ``names`` broken in every way, and removed."""
    cases = []
    for name in names:
        original = environ.get(name, "")
        for label, text in [("unset", None), *value_mutations(original)]:
            # A line may name the variable, or quote its (short) value, e.g. as a job id.
            culprits = (name, *ALSO_NAMED.get(name, ()), *([text] if text and len(text) < 40
                                                          and "\n" not in text else []))
            cases.append(Case(entry, f"env:{name}:{label}", culprits, env={name: text}))
    return cases


def env_file_cases(entry: str, environ: dict[str, str]) -> list[Case]:
    """The --env-file itself broken (the replay path every hook has)."""
    content = _encoded("".join(f"{name}={value}\n" for name, value in environ.items()))
    # A broken file loses variables: the line about it names what is missing.
    culprits = ("env-file", "job.env", "SLURM_", "LSB_", "TMPDIR", "XDG_RUNTIME_DIR")
    return [Case(entry, f"env-file:{label}", culprits, files={"job.env": mutated})
            for label, mutated in file_mutations(content)]


def output_cases(entry: str, command: str, output: str, fields: tuple[str, ...]) -> list[Case]:
    """What a batch-system command prints, field by field and as a whole; and failing.

    ``command`` names the output (``scontrol-partition``: scontrol's second record)."""
    from mjf_hooks.command import CommandError

    program = command.split("-")[0]
    cases = [
        Case(entry, f"{command}:fails", (program,),
             outputs={command: CommandError(f"/usr/bin/{program} exited with status 1")}),
        Case(entry, f"{command}:hangs", (program,),
             outputs={command: CommandError(f"/usr/bin/{program} did not finish within 5 s")}),
    ]
    for label, mutated in file_mutations(_encoded(output)):
        if isinstance(mutated, bytes):
            text = mutated.decode("utf-8", "replace")
            cases.append(Case(entry, f"{command}:{label}", (program,), outputs={command: text}))
    for field in fields:
        original = output.split(f"{field}=", 1)[1].split(" ", 1)[0] if f"{field}=" in output \
            else output.strip()
        for label, text in value_mutations(original):
            if f"{field}=" in output:
                mutated = output.replace(f"{field}={original}", f"{field}={text}", 1)
            else:
                mutated = text
            cases.append(Case(entry, f"{command}:{field}:{label}", (program, field),
                              outputs={command: mutated}))
    return cases


AD_WRONG_TYPES = [
    ("string", '"4"'), ("true", "true"), ("real", "2.5"), ("real-huge", "1e300"),
    ("expression", "10 * 60"), ("list", "{ 1, 2 }"), ("nested-ad", "[ a = 1 ]"),
    ("undefined", "undefined"), ("error", "error"), ("unterminated-string", '"vm#1'),
    ("bad-escape", '"\\q\\777"'),
]


def ad_cases(entry: str, variable: str, name: str, content: bytes,
             attributes: tuple[str, ...]) -> list[Case]:
    """An ad file broken as a whole, and each attribute the wrapper reads broken."""
    culprits = (variable, name, "ad")
    cases = [Case(entry, f"{name}:{label}", culprits, files={f"scratch/{name}": mutated})
             for label, mutated in file_mutations(content)]
    lines = content.decode().splitlines()
    for attribute in attributes:
        index = next(i for i, line in enumerate(lines) if line.split(" = ")[0] == attribute)
        original = lines[index].split(" = ", 1)[1]
        variants = value_mutations(original) + AD_WRONG_TYPES + [
            ("duplicate", f"{original}\n{attribute} = 7"),
            ("duplicate-garbage", f"{original}\n{attribute} = \udcff"),
            ("lowercase-name", None), ("removed", "")]
        for label, text in variants:
            changed = list(lines)
            if label == "lowercase-name":
                changed[index] = f"{attribute.lower()} = {original}"
            elif label == "removed":
                del changed[index]
            else:
                changed[index] = f"{attribute} = {text}"
            data = _encoded("\n".join(changed) + "\n")
            cases.append(Case(entry, f"{name}:{attribute}:{label}", (*culprits, attribute),
                              files={f"scratch/{name}": data}))
    return cases


def cgroup_cases(entry: str) -> list[Case]:
    """The job's cgroup tree and the /proc files that lead to it, broken."""
    cases = []
    limit_files = [f"{V2_JOB}/memory.max", f"{V2_JOB}/memory.swap.max",
                   f"{V2_JOB}/step_0/cpuset.cpus.effective"]
    for path in limit_files:
        name = path.rsplit("/", 1)[1]
        original = CGROUP_TREE[path].decode().strip()
        variants = [(label, _encoded(text + "\n")) for label, text in value_mutations(original)]
        variants += [("max", b"max\n"), ("abc", b"abc\n"), ("missing", None),
                     ("directory", DIRECTORY), ("huge-file", b"1" * (2 * MIB))]
        for label, data in variants:
            cases.append(Case(entry, f"cgroup:{name}:{label}", (name,), files={path: data}))
    for path in ("proc/self/cgroup", "proc/self/mountinfo", "proc/cpuinfo"):
        name = path.replace("/", "-")
        for label, data in file_mutations(CGROUP_TREE[path]):
            cases.append(Case(entry, f"probe:{name}:{label}", (path,), files={path: data}))
    for label, data in [
        ("no-colons", b"garbage\n"), ("escape-root", b"0::/../../../../etc\n"),
        ("relative", b"0::system.slice\n"), ("v1-unknown-controller", b"4:nomemory:/x\n"),
        ("empty-path", b"0::\n"), ("many-lines", b"0::/a\n" * 100000),
    ]:
        cases.append(Case(entry, f"probe:proc-self-cgroup:{label}", ("cgroup",),
                          files={"proc/self/cgroup": data}))
    for label, data in [
        ("no-separator", b"35 24 0:30 / /sys/fs/cgroup rw cgroup2 cgroup2 rw\n"),
        ("short", b"35 24 0:30 / - cgroup2\n"),
        ("bad-escapes", b"35 24 0:30 / /sys/fs/\\777cgroup\\0 rw - cgroup2 cgroup2 rw\n"),
        ("relative-mount", b"35 24 0:30 / sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
        ("root-mount", b"35 24 0:30 / / rw - cgroup2 cgroup2 rw\n"),
    ]:
        cases.append(Case(entry, f"probe:mountinfo:{label}", ("mountinfo",),
                          files={"proc/self/mountinfo": data}))
    v1 = {path: data for path, data in V1_TREE.items()}
    for path in (f"{V1_JOB}/memory.limit_in_bytes", f"{V1_JOB}/memory.memsw.limit_in_bytes"):
        name = path.rsplit("/", 1)[1]
        for label, text in value_mutations(v1[path].decode().strip()):
            cases.append(Case(entry, f"cgroup-v1:{name}:{label}", (name,),
                              files={**v1, path: _encoded(text + "\n")}))
    return cases


def config_cases(entry: str, config: str, sample: int) -> list[Case]:
    """The config broken as a whole (all of these), and ``sample`` of its values broken."""
    data = _encoded(config)
    # A config that parses but points elsewhere: lines name the paths it points at.
    culprits = ("mjf.conf", "/run/mjf", "(set [")
    cases = [Case(entry, f"config:{label}", culprits, config=mutated)
             for label, mutated in file_mutations(data)
             if mutated is not None and mutated is not DIRECTORY]
    structural = [
        ("duplicate-section", config + "[mjf]\n"),
        ("duplicate-key", config.replace("log = stderr\n", "log = stderr\nlog = stderr\n")),
        ("unknown-key", config + "[mjf]\ncolour = blue\n"),
        ("unknown-section", config + "[torque]\nqstat = /usr/bin/qstat\n"),
        ("key-before-section", "base_dir = /x\n" + config),
        ("unclosed-section", config.replace("[mjf]", "[mjf")),
        ("no-equals", config + "just words\n"),
        ("utf8-bom", "\ufeff" + config),
        ("nul-in-value", config.replace("log = stderr", "log = stderr\0")),
        ("nul-in-comment", config + "# \0\n"),
        ("refused-key", config + "[jobfeatures]\njob_id = 7\n"),
        ("wrong-section", config + "[jobfeatures]\ntotal_cpu = 4\n"),
        ("export-url-without-base", config.replace("[mjf]\n", "[mjf]\nexport = url\n")),
    ]
    cases += [Case(entry, f"config:{label}", culprits, config=_encoded(text))
              for label, text in structural]
    lines = config.splitlines()
    valued = [(i, line) for i, line in enumerate(lines) if " = " in line]
    variants = []
    for index, line in valued:
        key, original = line.split(" = ", 1)
        for label, text in value_mutations(original):
            changed = list(lines)
            changed[index] = f"{key} = {text}"
            variants.append((f"config:{key}:{label}", text[:200].strip(),
                             "\n".join(changed) + "\n"))
    for label, value, text in random.Random(f"{SEED}:{entry}").sample(variants, sample):
        value = value.replace("@D@", "")
        cases.append(Case(entry, label, (*culprits, *([value] if value else [])),
                          config=_encoded(text)))
    return cases


def sample(cases: list[Case], count: int) -> list[Case]:
    """A seeded sample of ``count`` cases, in their original order."""
    chosen = set(random.Random(f"{SEED}:{cases[0].entry}").sample(range(len(cases)), count))
    return [case for index, case in enumerate(cases) if index in chosen]


def with_on_error_fail(cases: list[Case], every: int) -> list[Case]:
    """Every ``every``-th case again with ``[mjf] on_error = fail``."""
    return [Case(case.entry, case.label + ":on-error-fail", case.culprits, case.env, case.files,
                 case.config, case.argv, case.outputs, on_error_fail=True)
            for case in cases[::every] if case.config is None]
