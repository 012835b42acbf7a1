"""Code that runs inside the test jobs (as their users), shared by the batch-system tests."""

from __future__ import annotations

from pathlib import Path


def install(directory: Path, scripts: dict[str, str]) -> None:
    """``scripts`` (name: text) in ``directory``, readable by the jobs' users."""
    for name, text in scripts.items():
        (directory / name).write_text(text)
        (directory / name).chmod(0o644)


def dump_script(variables: tuple[str, ...], name: str = "sys.argv[1]",
                argv: str | None = "sys.argv", extra: str = "", after: str = "") -> str:
    """The job snippet that shows what a job sees of MJF (run as ``dump.py NAME ...``):
    it writes to ``out/<name>.json`` beside itself ``out``, holding the environment
    ``variables`` (besides $MACHINEFEATURES and $JOBFEATURES), its ``argv`` (a Python
    expression; None: not shown) and the files of both directories; ``extra`` (code)
    adds to ``out`` before ``name`` (an expression) is taken, ``after`` runs last."""
    shown = ("MACHINEFEATURES", "JOBFEATURES", *variables)
    return (
        "import json, os, sys\n"
        f"out = {{'env': {{k: os.environ.get(k) for k in {shown!r}}}}}\n"
        + (f"out['argv'] = {argv}\n" if argv else "")
        + FEATURES + extra + f"name = {name}\n" + WRITE + after)


FEATURES = r'''
for var in ("MACHINEFEATURES", "JOBFEATURES"):
    d = os.environ.get(var)
    out[var] = {n: open(os.path.join(d, n), "rb").read().decode()
                for n in sorted(os.listdir(d))} if d and os.path.isdir(d) else None
'''
# Written under a temporary name, then renamed: a test polling for the file never
# reads it half-written (CI once read it empty while two jobs wrote theirs).
WRITE = r'''
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out", name + ".json")
with open(path + ".part", "w") as f:
    json.dump(out, f)
os.replace(path + ".part", path)
'''

# A DIRAC job description of 2 processors, written beside dump.py as ``two.jdl`` for
# :func:`readers_snippet`.
READERS_JDL = "[ NumberOfProcessors = 2; CPUTime = 1000; ]\n"


def readers_snippet(mjf: str) -> str:
    """Job code: with ``readers`` among its arguments, what the readers make of the job's
    directory (`mjf check`, `mjf describe`, `mjf match` of ``two.jdl``), run as ``mjf``,
    in ``out["readers"]``."""
    return r'''
if "readers" in sys.argv[2:]:
    import subprocess
    jdl = os.path.join(os.path.dirname(os.path.abspath(__file__)), "two.jdl")
    out["readers"] = {}
    for key, args in (("check", ["check"]), ("describe", ["describe", "--format", "json"]),
                      ("match", ["match", "--jdl", jdl])):
        done = subprocess.run([MJF, *args], capture_output=True, text=True, timeout=120)
        out["readers"][key] = {"rc": done.returncode, "out": done.stdout, "err": done.stderr}
'''.replace("MJF", repr(mjf))


# Appended to a job's dump script: `out["cgroup_limits"]` lists the memory limits the
# kernel enforces on the job, at its cgroup v1 memory level and every ancestor.
MEMORY_LIMITS = r'''
limits = []
for line in open("/proc/self/cgroup"):
    _, controllers, path = line.rstrip("\n").split(":", 2)
    if "memory" in controllers.split(","):
        while True:
            try:
                with open("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes") as f:
                    limits.append(int(f.read()))
            except OSError:
                pass
            if path in ("/", ""):
                break
            path = path.rsplit("/", 1)[0] or "/"
out["cgroup_limits"] = limits
'''


# Appended to a job's dump script on a cgroup v2 host: `out["cgroup"]`, the job's
# /proc/self/cgroup, and `out["cgroup_v2"]`, the limit files at its cgroup and every
# ancestor below the root (deepest first): what the kernel enforces on the job.
CGROUP_V2_LIMITS = r'''
out["cgroup"] = open("/proc/self/cgroup").read()
path = out["cgroup"].splitlines()[0].split(":", 2)[2]
levels = []
while path not in ("/", ""):
    files = {}
    for name in ("memory.max", "memory.swap.max", "cpuset.cpus.effective"):
        try:
            files[name] = open("/sys/fs/cgroup" + path + "/" + name).read().strip()
        except OSError:
            pass
    levels.append([path, files])
    path = path.rsplit("/", 1)[0]
out["cgroup_v2"] = levels
'''


def enforced_v2_limit(view: dict, name: str) -> int | None:
    """The tightest of the job's cgroup v2 limit ``name`` (memory.max, memory.swap.max)
    up its chain, as its dump saw them (``max``: none)."""
    limits = [int(files[name]) for _, files in view["cgroup_v2"]
              if files.get(name, "max") != "max"]
    return min(limits) if limits else None


def enforced_memory_limit(view: dict) -> int | None:
    """The limit the job's dump saw enforced (v1's huge values mean none)."""
    limits = [limit for limit in view["cgroup_limits"] if limit < 2**62]
    return min(limits) if limits else None


# Runs in mjfuser1's job: booby-traps its own job directory, then races the
# keys root rewrites until told to stop.
TRAPS = r'''
import os, sys, time
target, victim, out = sys.argv[1], sys.argv[2], sys.argv[3]
features = os.environ["JOBFEATURES"]
os.chdir(features)
os.unlink("max_rss_bytes")
os.mkfifo("max_rss_bytes")                       # a reader that waits on it hangs
os.symlink(target, "shutdowntime_job")          # root writing through it would hit target
os.symlink(victim, "victim")                     # the other job's directory
state = os.path.join(os.path.dirname(features), "state")
if os.path.isdir(state):                         # the bookkeeping of a pending job
    os.symlink(target, os.path.join(state, "own_shutdowntime_job"))
    os.mkfifo(os.path.join(state, "runner"))
fd = os.open(".", os.O_RDONLY)
for level in range(1500):                        # deeper than any fd or recursion limit
    os.mkdir("d", dir_fd=fd)
    os.symlink(os.path.dirname(target), "up", dir_fd=fd)
    child = os.open("d", os.O_RDONLY, dir_fd=fd)
    if level % 300 == 299:
        os.chmod("/proc/self/fd/%d" % fd, 0)     # locked, for anyone but root
    os.close(fd)
    fd = child
os.close(fd)
open(os.path.join(out, "traps.ready"), "w").close()
races, deadline = 0, time.time() + 90
while not os.path.exists(os.path.join(out, "traps.stop")) and time.time() < deadline:
    races += 1
    temp = "t%d" % races
    try:
        [lambda: os.symlink(target, temp), lambda: os.mkdir(temp),
         lambda: os.mkfifo(temp)][races % 3]()
        if races % 3 == 1:
            for remove in (os.unlink, os.rmdir):
                try:
                    remove("shutdowntime_job")
                except OSError:
                    pass
        os.rename(temp, "shutdowntime_job")
    except OSError:
        for remove in (os.unlink, os.rmdir):
            try:
                remove(temp)
            except OSError:
                pass
open(os.path.join(out, "traps.done"), "w").write(str(races))
'''


# Runs in mjfuser1's job: what its user can make in its own jobfeatures/ in a few seconds -
# 14 levels of 250-character names, then a wide directory - before the job ends.
BURY = r'''
import os, sys, time
out, count = sys.argv[1], int(sys.argv[2])
fd = os.open(os.environ["JOBFEATURES"], os.O_RDONLY)
for _ in range(14):
    os.mkdir("n" * 250, dir_fd=fd)
    child = os.open("n" * 250, os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = child
for index in range(count):
    os.mkdir(str(index), dir_fd=fd)
open(os.path.join(out, "bury.done"), "w").write(str(time.time()))
'''


# Runs in mjfuser1's job: a byte no valid value holds, in the bookkeeping it owns.
GARBLE = r'''
import os, sys, time
out = sys.argv[1]
state = os.path.join(os.path.dirname(os.environ["JOBFEATURES"]), "state")
with open(os.path.join(state, "own_shutdowntime_job"), "wb") as handle:
    handle.write(b"\xff")
open(os.path.join(out, "garble.ready"), "w").close()
time.sleep(120)
'''


# Runs in a job as its user, with the hooks' own Python: a multi-job pilot reporting
# through $JOBSTATUS (draft 0.99). Args: out directory, name, steps, burst seconds. It
# publishes <name>.ready (what it found), waits for <name>.watching (root polls `mjf
# status` meanwhile), then reports steps n = 1, 2, ..., every key of a set derived from
# n: `steps` payload starts a quarter second apart (jobstatus.update, or `mjf status set`
# every fifth), a burst of updates 2 ms apart for `burst` seconds (where a reader that
# did not lock would catch a set half written), and a last step by `mjf status set`.
# Then <name>.done, and it waits for <name>.seen before it ends (its directory goes
# with it).
PILOT = r'''
import json, os, stat, subprocess, sys, time, traceback
out, name, steps, burst = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])


def path(suffix):
    return os.path.join(out, name + "." + suffix)


def publish(suffix, data):
    with open(path(suffix) + ".tmp", "w") as f:
        json.dump(data, f)
    os.rename(path(suffix) + ".tmp", path(suffix))


def wait_for(suffix):
    deadline = time.time() + 90
    while not os.path.exists(path(suffix)) and time.time() < deadline:
        time.sleep(0.05)


try:
    from mjf_hooks import jobstatus
    directory, features = os.environ.get("JOBSTATUS"), os.environ.get("JOBFEATURES")
    info = os.stat(directory) if directory else None
    allocated = int(open(os.path.join(features, "allocated_cpu")).read())
    base = int(time.time()) - 100000  # every job end to come
    # Every payload started in the job (what root's status takes of a pilot's word is
    # bounded by its job: no start before jobstart_secs, no more uncommitted CPU time or
    # end waste than its cores give).
    start = int(open(os.path.join(features, "jobstart_secs")).read())
    publish("ready", {
        "JOBSTATUS": directory, "JOBFEATURES": features, "uid": os.getuid(),
        "is_dir": bool(info and stat.S_ISDIR(info.st_mode)),
        "owner": info and info.st_uid, "listing": os.listdir(directory) if info else None,
        "job_id": open(os.path.join(features, "job_id")).read(),
        "allocated": allocated, "base": base, "start": start})
    wait_for("watching")

    def values(n):
        return {"used_CPU": n % allocated + 1, "last_job_start": start,
                "first_exp_job_end": base + 200000 + n,
                "last_exp_job_end": base + 300000 + n,
                "last_max_job_end": base + 400000 + n, "add_uncom_time": n % 2,
                "add_final_exp_waste": n % 50, "can_postpone_last_job": n % 2 == 1,
                "priority_factor": n}

    mjf = os.path.join(os.path.dirname(sys.executable), "mjf")
    shell_steps = []

    def shell_set(n):
        result = subprocess.run(
            [mjf, "status", "set", *("%s=%s" % item for item in values(n).items())],
            capture_output=True, text=True, timeout=60)
        if result.returncode:
            raise RuntimeError("mjf status set: exit %d: %s" % (result.returncode, result.stderr))
        shell_steps.append(n)

    for n in range(1, steps + 1):
        time.sleep(0.25)  # a payload starts
        if n % 5:
            jobstatus.update(values(n))
        else:
            shell_set(n)
    n, end = steps, time.time() + burst
    while time.time() < end:
        n += 1
        jobstatus.update(values(n))
        time.sleep(0.002)
    shell_set(n + 1)
    own = jobstatus.read()
    publish("done", {"raw": own.raw, "problems": own.problems, "shell_steps": shell_steps,
                     "last": n + 1, "burst": n - steps})
except BaseException:
    publish("done", {"error": traceback.format_exc()})
    raise
wait_for("seen")
'''
