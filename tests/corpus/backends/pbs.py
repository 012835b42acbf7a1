"""PBS's entry points: the execjob hooks (through the adapter's stdin), the classic
prologue and epilogue (OpenPBS's and Torque's argv) and the profile.d export lines; and
the model of what PBS's input means to them: the job's attributes on stdin or in argv,
what qstat -f prints, which ids are a PBS job's."""

from __future__ import annotations

import grp
import pwd
import random

from mjf_hooks.hooks import pbs as pbs_hook
from tests.conftest import fixture_text
from tests.corpus.entries import COMMON_CONFIG, Entry, prepare
from tests.corpus.mutations import (
    DROPS,
    MAX_JOB_ID,
    OUR_USER,
    PATH,
    SEED,
    SETUP_FAILS,
    Case,
    encoded,
    file_mutations,
    known_user,
    value_mutations,
)

#
# The execjob hooks get the job's attributes as ``name=value`` lines on stdin, what the hook
# adapter (contrib/pbs/mjf_hook.py) hands them (hook-input/*.txt, as recorded); a classic
# prologue gets the job in argv (OpenPBS: id, user, group; Torque 7 words), an epilogue 10
# words; the profile.d lines read PBS_JOBID. The recorded job's user (pbsuser1) need not exist
# here: the one running the tests stands in, as Grid Engine's (a root begin or prologue gives
# the job's directory to that user, and refuses one unknown here).
PBS = "pbs-23.06"
PBS_USER = OUR_USER
PBS_GROUP = grp.getgrgid(pwd.getpwnam(PBS_USER).pw_gid).gr_name
# What a role reads of its stdin at most: a job's few dozen lines, with room to spare
# (mjf-pbs); beyond it the attributes are refused whole.
PBS_MAX_STDIN = 1 << 20
# A Case.argv starting with this gives the words after the role (a prologue's or epilogue's
# job), instead of the entry point's own.
PBS_WORDS = "@WORDS@"


def pbs_hook_input(name: str) -> bytes:
    """A recorded stdin of the hook adapter (hook-input/NAME.txt), the job's user ours."""
    text = fixture_text(f"{PBS}/hook-input/{name}.txt")
    return text.replace("\neuser=pbsuser1\n", f"\neuser={PBS_USER}\n").replace(
        "\negroup=pbsuser1\n", f"\negroup={PBS_GROUP}\n").encode()


def _pbs_qstat_f(job: str, name: str) -> str:
    """``qstat -f JOB`` as OpenPBS prints it (the text form of the recorded ``qstat -f -F json``
    of job a, qstat-f-job-a-running.json, renamed): ``    name = value`` lines, a long one
    continued on lines that start with a tab (80 columns)."""
    import json

    jobs = json.loads(fixture_text(f"{PBS}/qstat-f-job-a-running.json"))["Jobs"]
    (attributes,) = jobs.values()
    lines = [f"Job Id: {job}"]
    for key, value in attributes.items():
        if key == "Job_Name":
            value = name
        if isinstance(value, dict) and key == "Variable_List":
            value = ",".join(f"{k}={v}" for k, v in value.items())
        if isinstance(value, dict):
            lines += [f"    {key}.{k} = {v}" for k, v in value.items()]
            continue
        line = f"    {key} = {value}"
        lines.append(line[:80])
        lines += [f"\t{line[i:i + 79]}" for i in range(80, len(line), 79)]
    return "\n".join(lines).replace("pbsuser1", PBS_USER) + "\n\n"


PBS_QSTAT_F = _pbs_qstat_f("8.vm", "jobp")


def pbs_job_id(text: str) -> bool:
    """A PBS job id (pbs.py's docstring, qsub(1B)): a sequence number, an array index in
    brackets, a server name of letters, digits, ``.``, ``-``, ``_`` after a dot
    (``4.vm``, ``12[3].vm``, ``123``); each number plain ASCII digits, at most 19 (what a
    count may have); 200 characters at most (the spec's job id)."""
    import re

    return len(text) <= MAX_JOB_ID and re.fullmatch(
        r"[0-9]{1,19}(\[[0-9]{1,19}\])?(\.[A-Za-z0-9._-]+)?", text, re.ASCII) is not None


def pbs_attributes(data) -> dict[str, str] | None:
    """The job's attributes as a role reads them from a stdin laid out as ``data`` (bytes;
    None, a directory: an empty one; ("sparse", size)): ``name=value`` lines, bytes that are
    not UTF-8 U+FFFD; None where stdin is larger than PBS_MAX_STDIN."""
    if isinstance(data, tuple) and data[0] == "sparse":
        data = b"\0" * data[1] if data[1] <= PBS_MAX_STDIN else None
        if data is None:
            return None
    if not isinstance(data, bytes):
        data = b""
    if len(data) > PBS_MAX_STDIN:
        return None
    attributes = {}
    # Lines end at \n only (the adapter writes each attribute on one, a \r or \n inside a
    # value made a space: a job's name cannot forge an id= line).
    for line in data.decode("utf-8", "replace").split("\n"):
        name, equals, value = line.partition("=")
        if equals and name:
            attributes[name] = value
    return attributes


def pbs_effect(entry: str, attributes: dict[str, str] | None, job: str) -> dict:
    """Case keywords for what a PBS role does with a job's ``attributes`` (None: refused),
    its recorded job ``job``: set-up fails without a job id, for a begin or prologue (root:
    the directory is the job's user's) without a user known here, for a launch without the
    job's directory (a begin made only ``job``'s). An end or epilogue ends the job named:
    ``job``'s directory goes where it names that one."""
    if attributes is None or not pbs_job_id(attributes.get("id", "")):
        return {"effect": SETUP_FAILS}
    if entry in ("pbs-begin", "pbs-prologue", "pbs-prologue-torque") and not known_user(
            attributes.get("euser", "")):
        return {"effect": SETUP_FAILS}
    if entry == "pbs-launch" and attributes["id"] != job:
        return {"effect": SETUP_FAILS}
    if entry in ("pbs-end", "pbs-epilogue"):
        return {"effect": DROPS, "removes_job": True if attributes["id"] == job else None}
    return {"effect": DROPS}


# Ids that are no PBS job's, some of which would name a path.
PBS_HOSTILE_IDS = [("dotdot-x", "../x"), ("dot", "."), ("dotdot", ".."), ("slash", "a/b"),
                   ("id-slash", "20.vm/../x"), ("digits-300", "2" * 300),
                   ("server-300", "20." + "v" * 297), ("star", "*"), ("space-inside", "20 .vm"),
                   ("array-unclosed", "21[1.vm"), ("array-letters", "21[a].vm")]
# Other ids a job may have: another job's (set-up goes on, for that one).
PBS_OTHER_IDS = [("other-job", "7.vm"), ("array-job", "21[1].vm"), ("no-server", "20"),
                 ("long-server", "20.vm.example.org")]


def pbs_stdin_cases(entry: str, path: str, content: bytes, job: str,
                    names: tuple[str, ...]) -> list[Case]:
    """The job's attributes on a PBS role's stdin (``path`` in the case directory; recorded:
    ``content``) broken as a whole, and each attribute of ``names`` removed, broken,
    duplicated, its line broken (and the id replaced by hostile ids and other jobs')."""
    culprits = ("stdin", "attributes", "id attribute", "job id", "exec_vnode", "Resource_List",
                "resources_used", "euser", "vnodes", "execjob_begin")

    def case(label, data, own=()):
        keywords = pbs_effect(entry, pbs_attributes(data), job)
        more = ("execjob_begin",) if entry == "pbs-launch" else ()
        return Case(entry, f"stdin:{label}", (*own, "stdin", *more) if own else culprits,
                    files={path: data}, **keywords)

    variants = [*file_mutations(content),
                ("bom", b"\xef\xbb\xbf" + content), ("no-final-newline", content.rstrip(b"\n")),
                ("twice", content + content), ("cr-only", content.replace(b"\n", b"\r")),
                ("spaces-around-equals", content.replace(b"=", b" = ")),
                ("at-the-limit", content + b"#" * (PBS_MAX_STDIN - len(content) - 1) + b"\n"),
                ("over-the-limit", content + b"#" * (PBS_MAX_STDIN - len(content)) + b"\n"),
                ("sparse-over-the-limit", ("sparse", PBS_MAX_STDIN + 4096))]
    cases = [case(label, data) for label, data in variants]
    lines = content.decode().splitlines()
    for name in names:
        index = next(i for i, line in enumerate(lines) if line.split("=", 1)[0] == name)
        original = lines[index].split("=", 1)[1]
        own = ("id attribute", "job id") if name == "id" else (name,)
        if name in ("vnodes", "node"):
            own = ("vnodes", "exec_vnode")
        texts = [*value_mutations(original), ("duplicate", f"{original}\n{name}={original}")]
        if name == "id":
            texts += PBS_HOSTILE_IDS + PBS_OTHER_IDS
        if name == "Job_Name":  # a name that would end a line elsewhere: no forged id line
            texts += [(f"forged-id-{label}", f"{original}{separator}id=7.vm")
                      for label, separator in (("cr", "\r"), ("vt", "\v"), ("fs", "\x1c"),
                                               ("ls", "\u2028"), ("nel", "\x85"))]
        else:
            texts.append(("duplicate-garbage", f"{original}\n{name}=\udcff"))
        changed_lines = [(label, f"{name}={text}") for label, text in texts] + [
            ("missing", None), ("no-equals", f"{name} {original}"),
            ("lowercase-name", f"{name.lower()}={original}"),
            ("spaced-name", f" {name}={original}")]
        for label, line in changed_lines:
            if label == "lowercase-name" and name.lower() == name:
                continue
            changed = list(lines)
            if line is None:
                del changed[index]
            else:
                changed[index] = line
            cases.append(case(f"{name}:{label}", encoded("\n".join(changed) + "\n"), own))
    return cases


def pbs_argv_attributes(entry: str, words: list[str]) -> dict[str, str] | None:
    """What a classic prologue's or epilogue's argv names (as the PBS and Torque manuals
    give it: job id, user, group first); None where it has fewer than those three."""
    if len(words) < 3:
        return None
    return {"id": words[0], "euser": words[1], "egroup": words[2]}


def pbs_argv_cases(entry: str, words: list[str], culprits: list[tuple[str, ...]],
                   every_way: tuple[int, ...], job: str, sampled: int = 5) -> list[Case]:
    """A classic prologue's or epilogue's argv (``words``) broken: each word in every way
    (those of ``every_way``; the others a seeded sample of ``sampled`` ways), too few and
    too many words. ``culprits``: what a line about each word may name."""
    def case(label, changed, own):
        return Case(entry, f"argv:{label}", own, argv=(PBS_WORDS, *changed),
                    **pbs_effect(entry, pbs_argv_attributes(entry, changed), job))

    count = ("at least", "job id", "user", "group")
    cases = [case(label, changed, count) for label, changed in [
        ("no-words", []), ("one-word", words[:1]), ("two-words", words[:2]),
        ("three-words", words[:3]), ("extra-word", [*words, "extra"]),
        ("all-empty", [""] * len(words))]]
    rng = random.Random(f"{SEED}:{entry}:argv")
    for position, word in enumerate(words):
        variants = value_mutations(word, nul=False)
        if position not in every_way:
            variants = sorted(rng.sample(variants, min(sampled, len(variants))))
        if position == 0:
            variants += PBS_HOSTILE_IDS + PBS_OTHER_IDS
        for label, text in variants:
            changed = list(words)
            changed[position] = text
            cases.append(case(f"{position + 1}:{label}", changed, culprits[position]))
    return cases


def profile_environment_effect(entry: str, recorded: dict[str, str | None],
                               environ: dict[str, str | None], jobstatus: bool = False) -> str:
    """The profile.d lines print the variables of the job PBS_JOBID names (none: not a PBS
    job, set-up fails)."""
    return DROPS if pbs_job_id(environ.get("PBS_JOBID") or "") else SETUP_FAILS


# -- what the generic model takes from here (backends/__init__.py hands it over) -----------

CONFIG_KEYS = {("pbs", "pbs_exec"): PATH, ("pbs", "qstat"): PATH,
               ("pbs", "query_qstat"): ("yes", "no"), ("pbs", "tmpdir"): PATH,
               ("pbs", "cgroup_prefix"): PATH}
# qstat -f JOB: what a classic prologue asks (its argv names only the job, user, group).
COMMANDS = {"qstat": lambda argv: ("pbs-qstat", PBS_QSTAT_F) if argv[1] == "-f" else None}

# PBS: qstat and PBS_EXEC in the case directory (never the host's /etc/pbs.conf), TMPDIR's
# root the scratch, and a pbs_cgroups prefix no host has (the hooks' cgroup is not faked).
PBS_CONFIG = COMMON_CONFIG + (
    "[pbs]\nqstat = @D@/bin/qstat\npbs_exec = @D@/pbs\ntmpdir = @D@/scratch\n"
    "cgroup_prefix = /mjf-corpus-no-such-cgroup\n")

# PBS (tests/fixtures/pbs-23.06): the hook adapter's stdin of job a (20.vm) for each execjob
# role, and of array job 21[1].vm (another job on the host, which an end leaves alone); the
# classic prologue's argv of job 8 (OpenPBS: id, user, group; and as Torque gives it, with
# the job's name, resource list, queue and account), its epilogue's (recorded).
PBS_JOB, PBS_OTHER_JOB, PBS_CLASSIC_JOB = "20.vm", "21[1].vm", "8.vm"
PBS_STDIN = {"begin": "pbs/begin.txt", "launch": "pbs/launch.txt", "end": "pbs/end.txt",
             "begin-other": "pbs/begin-other.txt"}
PBS_FILES = {PBS_STDIN["begin"]: pbs_hook_input("begin-a"),
             PBS_STDIN["launch"]: pbs_hook_input("launch-a"),
             PBS_STDIN["end"]: pbs_hook_input("end-a"),
             PBS_STDIN["begin-other"]: pbs_hook_input("begin-arr-1"),
             "bin/pbs-qstat.out": PBS_QSTAT_F.encode()}
PBS_PROLOGUE_WORDS = [PBS_CLASSIC_JOB, PBS_USER, PBS_GROUP]
PBS_TORQUE_WORDS = [PBS_CLASSIC_JOB, PBS_USER, PBS_GROUP, "jobp",
                    "mem=300mb,neednodes=1:ppn=2,nodes=1:ppn=2,walltime=00:10:00", "workq",
                    "null"]
PBS_EPILOGUE_WORDS = [PBS_CLASSIC_JOB, PBS_USER, PBS_GROUP, "jobp", "556441",
                      "mem=300mb,ncpus=2,place=free,walltime=00:10:00",
                      "cpupercent=0,cput=00:00:02,mem=1024kb,ncpus=2,vmem=0kb,walltime=00:00:01",
                      "workq", "null", "0"]
PBS_PROFILE_ENV = {"PBS_JOBID": PBS_JOB}


def pbs_words(case: Case, words) -> list[str]:
    """A PBS role's words after the role: the case's (PBS_WORDS), else the entry point's."""
    return list(case.argv[1:]) if case.argv[:1] == (PBS_WORDS,) else list(words)


def pbs(role, words=(), stdin=None):
    """mjf-pbs ROLE [WORDS] (the hook adapter's stdin ``stdin``, where the role reads one),
    /proc/self/mountinfo read from the fake tree (where pbs_cgroups would have put the job)."""
    def call(sandbox, case, environ):
        sandbox.monkeypatch.setattr(pbs_hook, "read_text", sandbox.read_text)
        argv = ["--config", sandbox.path("mjf.conf")]
        if case.via_env_file:
            argv += ["--env-file", sandbox.path("job.env")]
        argv += [role, *pbs_words(case, words)]
        return sandbox.run(lambda: pbs_hook.main(argv), environ, case.outputs, stdin=stdin)
    return call


def prepare_two_pbs_jobs(sandbox):
    """Job a (20.vm) and array job 21[1].vm, each after its execjob_begin."""
    prepare(pbs("begin", stdin=PBS_STDIN["begin"]), {})(sandbox)
    prepare(pbs("begin", stdin=PBS_STDIN["begin-other"]), {})(sandbox)


def prepare_pbs_classic(sandbox):
    """Job 8 after its (OpenPBS) prologue, job a (20.vm) after its execjob_begin."""
    prepare(pbs("prologue", PBS_PROLOGUE_WORDS), {})(sandbox)
    prepare(pbs("begin", stdin=PBS_STDIN["begin"]), {})(sandbox)


# execjob_begin and a classic prologue create the job's directory, execjob_end and an
# epilogue remove it (and write its record); execjob_launch and the profile.d lines only
# print what a begin made.
ENTRIES = [
    Entry("pbs-begin", {}, PBS_CONFIG, pbs("begin", stdin=PBS_STDIN["begin"]),
          command=("mjf-pbs", ["begin"]), stdin=PBS_STDIN["begin"], store_role="creates"),
    Entry("pbs-launch", {}, PBS_CONFIG, pbs("launch", stdin=PBS_STDIN["launch"]),
          prepare=prepare(pbs("begin", stdin=PBS_STDIN["begin"]), {}),
          command=("mjf-pbs", ["launch"]), stdin=PBS_STDIN["launch"], store_role="reads"),
    Entry("pbs-end", {}, PBS_CONFIG, pbs("end", stdin=PBS_STDIN["end"]),
          prepare=prepare_two_pbs_jobs, command=("mjf-pbs", ["end"]), stdin=PBS_STDIN["end"],
          store_role="removes", writes_records=True),
    Entry("pbs-prologue", {}, PBS_CONFIG, pbs("prologue", PBS_PROLOGUE_WORDS),
          command=("mjf-pbs", ["prologue", *PBS_PROLOGUE_WORDS]), store_role="creates"),
    Entry("pbs-prologue-torque", {}, PBS_CONFIG, pbs("prologue", PBS_TORQUE_WORDS),
          command=("mjf-pbs", ["prologue", *PBS_TORQUE_WORDS]), store_role="creates"),
    Entry("pbs-epilogue", {}, PBS_CONFIG, pbs("epilogue", PBS_EPILOGUE_WORDS),
          prepare=prepare_pbs_classic, command=("mjf-pbs", ["epilogue", *PBS_EPILOGUE_WORDS]),
          store_role="removes", writes_records=True),
    Entry("pbs-profile", PBS_PROFILE_ENV, PBS_CONFIG, pbs("profile"),
          prepare=prepare(pbs("begin", stdin=PBS_STDIN["begin"]), {}),
          command=("mjf-pbs", ["profile"]), store_role="reads",
          set_up=profile_environment_effect),
]
