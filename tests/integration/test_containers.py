"""`mjf container-args` with the runtimes Debian has: bubblewrap and charliecloud's ch-run.

A pilot (as root, and as the unprivileged mjfuser1) starts a container whose only view
of MJF is what `mjf container-args` adds: the payload inside reads every key with
`mjf show`, runs `mjf remaining` and `mjf status set`, and sees a drain that root
announces on the host while it waits (bind mounts are live). The same without the
arguments sees nothing; with --url, the same through a real nginx; and inside a real
Slurm job. The container gets the host's /usr and the hooks' venv read-only, never
base_dir except through the printed binds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from mjf_hooks.store import Store
from tests.conftest import ConfigPath, require
from tests.integration.site import HOOKS_BIN, ensure_user
from tests.integration.slurm_cluster import assert_no_job_directories_left, mjf_cluster
from tests.integration.test_http import NGINX, Server

pytestmark = pytest.mark.integration

BWRAP, CH_RUN = "/usr/bin/bwrap", "/usr/bin/ch-run"
VENV = HOOKS_BIN.parent
JOB_ID = "c,1#x"  # apptainer-hostile comma, shell-hostile #: the words must survive them
JOB = {"job_id": "c1", "allocated_cpu": "2", "wall_limit_secs": "7200",
       "max_rss_bytes": str(2**31), "grace_secs_job": "600"}
# What the payload inside does: its view as JSON lines on stdout, then it waits for a
# drain to reach it (a new shutdowntime_job) and says what it saw.
PAYLOAD = r'''
import json, os, subprocess, sys, time
mjf = sys.argv[1]
def run(*argv):
    done = subprocess.run([mjf, *argv], capture_output=True, text=True)
    return {"rc": done.returncode, "out": done.stdout, "err": done.stderr}
view = {"env": {n: os.environ.get(n) for n in ("MACHINEFEATURES", "JOBFEATURES", "JOBSTATUS")},
        "show": run("show", "--json"), "remaining": run("remaining"),
        "status": run("status", "set", "used_CPU=1") if os.environ.get("JOBSTATUS") else None,
        "secret": os.path.exists(sys.argv[2]),
        "before": run("get", "shutdowntime_job")["out"].strip()}
print(json.dumps(view), flush=True)
if sys.argv[3] == "wait":
    deadline = time.monotonic() + 30
    seen = view["before"]
    while seen == view["before"] and time.monotonic() < deadline:
        time.sleep(0.2)
        seen = run("get", "shutdowntime_job")["out"].strip()
    print(json.dumps({"after": seen, "remaining": run("remaining")}), flush=True)
'''
# The pilot: container-args into "$@", then the container with the host's /usr and the
# hooks' venv; $1 the runtime, $2 the image (ch-run), $3 the extra container-args options,
# then the payload's arguments.
PILOT = r'''
set -eu
: "${{PAYLOAD:=$(cat "$(dirname "$0")/payload.py")}}"
runtime=$1 image=$2 options=$3; shift 3
payload_args="$*"
eval "set -- $({mjf} container-args --runtime "$runtime" $options)"
if [ "$runtime" = bubblewrap ]; then
    exec {bwrap} --ro-bind /usr /usr --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
        --symlink usr/bin /bin --proc /proc --dev /dev --tmpfs /tmp \
        --ro-bind {venv} {venv} "$@" -- {python} -c "$PAYLOAD" $payload_args
fi
USER=$(id -un) exec {ch_run} -t -b /usr:/usr -b {venv}:{venv} "$@" "$image" -- \
    {python} -c "$PAYLOAD" $payload_args
'''.format(mjf=HOOKS_BIN / "mjf", bwrap=BWRAP, ch_run=CH_RUN, venv=VENV,
           python=HOOKS_BIN / "python")


def make_image(root: Path, mount_points: list[str]) -> Path:
    """A ch-run directory image: the mount points ch-run needs, /usr and the venv to bind
    the host's, and ``mount_points`` (what container-args binds)."""
    image = root / "image"
    for directory in ("dev", "proc", "sys", "tmp", "home", "usr", "etc", "mnt",
                      str(VENV).lstrip("/"), *(point.lstrip("/") for point in mount_points)):
        (image / directory).mkdir(parents=True, exist_ok=True)
    for name in ("passwd", "group", "hosts", "resolv.conf"):
        (image / "etc" / name).touch()
    for name in ("bin", "lib", "lib64", "sbin"):
        (image / name).symlink_to(f"usr/{name}")
    subprocess.run(["chmod", "-R", "a+rX", str(image)], check=True)
    return image


class Node:
    """A base_dir outside /tmp (ch-run shares the host's /tmp), with machine features, one
    job whose $JOBSTATUS belongs to ``user``, a config naming it, and a secret file beside
    it that no container may see."""

    def __init__(self, user: str, url_base: str | None = None, root: Path | None = None):
        self.user = user
        uid, gid = (0, 0) if user == "root" else ensure_user(user)
        self.root = root or Path(tempfile.mkdtemp(prefix="mjf-containers-", dir="/srv"))
        self.root.chmod(0o755)
        self.base = self.root / "base"
        self.config = ConfigPath(self.root / "mjf.conf")  # replaced atomically
        self.config.write_text(f"[mjf]\nbase_dir = {self.base}\nlog = stderr\njobstatus = yes\n"
                               + (f"url_base = {url_base}\n" if url_base else "")
                               + "[machinefeatures]\ngrace_secs = 600\n")
        store = Store(str(self.base))
        store.machine.write({"total_cpu": "16", "hs06": "160", "grace_secs": "600"},
                            frozenset())
        features = store.create_job(JOB_ID, {**JOB, "jobstart_secs": str(int(time.time()))},
                                    gid=gid, status=True, status_uid=uid)
        self.job = Path(features).parent
        self.secret = self.base / "secret"
        self.secret.write_text("not for containers")
        (self.root / "pilot.sh").write_text(PILOT)
        self.env = {"PATH": "/usr/bin:/bin", "HOME": "/", "PAYLOAD": PAYLOAD,
                    "MJF_CONFIG": str(self.config),
                    "MACHINEFEATURES": str(self.base / "machinefeatures"),
                    "JOBFEATURES": str(self.job / "jobfeatures"),
                    "JOBSTATUS": str(self.job / "jobstatus")}

    def pilot(self, runtime: str, image: Path | None, options: str = "",
              wait: bool = False, env: dict | None = None) -> subprocess.Popen:
        argv = ["sh", str(self.root / "pilot.sh"), runtime, str(image or "-"), options,
                str(HOOKS_BIN / "mjf"), str(self.secret), "wait" if wait else "once"]
        if self.user != "root":
            argv = ["/usr/sbin/runuser", "-u", self.user, "--", *argv]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**self.env, **(env or {})}, cwd="/")

    def admin(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(HOOKS_BIN / "mjf"), *args], capture_output=True, text=True,
                              timeout=60, env={"PATH": "/usr/bin:/bin",
                                               "MJF_CONFIG": str(self.config)})

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def finish(process: subprocess.Popen) -> list[dict]:
    try:
        out, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    assert process.returncode == 0, f"rc {process.returncode}\n{out}\n{err}"
    return [json.loads(line) for line in out.splitlines()]


def requirements(runtime: str) -> None:
    require(os.geteuid() == 0, "needs root to make a site and switch users")
    require((HOOKS_BIN / "mjf").exists(), f"needs the hooks installed in {HOOKS_BIN}")
    command = BWRAP if runtime == "bubblewrap" else CH_RUN
    require(Path(command).exists(), f"needs {command} (tests/setup-system installs "
                                    "bubblewrap and charliecloud-runtime)")


def assert_sees_everything(view: dict, node: Node, inside: str | None = None,
                           urls: str | None = None) -> None:
    shown = json.loads(view["show"]["out"] or "{}")
    assert view["show"]["rc"] == 0, view
    machine = shown["MACHINEFEATURES"]["values"]
    assert (machine["total_cpu"], machine["hs06"], machine["grace_secs"]) == (16, 160, 600), view
    job = shown["JOBFEATURES"]["values"]
    assert {name: str(job[name]) for name in JOB if name != "job_id"} == {
        name: value for name, value in JOB.items() if name != "job_id"}, view
    assert job["job_id"] == "c1", view
    assert view["remaining"]["rc"] == 0 and 7000 < int(view["remaining"]["out"]) <= 7200, view
    assert view["secret"] is False, view  # base_dir itself is not in the container
    if urls:
        assert view["env"]["MACHINEFEATURES"] == f"{urls}/machinefeatures", view
        assert view["env"]["JOBSTATUS"] is None and view["status"] is None, view
        return
    expected = str(node.job / "jobstatus") if inside is None else f"{inside}/jobstatus"
    assert view["env"]["JOBSTATUS"] == expected, view
    assert view["status"]["rc"] == 0, view  # the pilot writes $JOBSTATUS inside
    assert (node.job / "jobstatus" / "used_CPU").read_text() == "1"


def drain_reaches_the_payload(node: Node, process: subprocess.Popen) -> list[dict]:
    assert process.stdout is not None
    first = process.stdout.readline()
    assert first, process.stderr.read() if process.stderr else ""
    view = json.loads(first)
    assert view["before"] == "", view
    drained = node.admin("drain", "--in", "2h")
    assert drained.returncode == 0, drained.stderr
    later = finish(process)
    shutdown = int((node.base / "machinefeatures" / "shutdowntime").read_text())
    assert later[0]["after"] == str(shutdown), later
    assert 7000 < int(later[0]["remaining"]["out"]) <= 7200, later
    return [view, *later]


@pytest.mark.parametrize("user", ["root", "mjfuser1"])
@pytest.mark.parametrize("runtime", ["bubblewrap", "charliecloud"])
def test_the_payload_in_the_container_reads_mjf_and_sees_a_drain(runtime, user):
    requirements(runtime)
    node = Node(user)
    try:
        image = None
        if runtime == "charliecloud":
            image = make_image(node.root, [env for env in (
                node.env["MACHINEFEATURES"], node.env["JOBFEATURES"], node.env["JOBSTATUS"])])
        view, _ = drain_reaches_the_payload(node, node.pilot(runtime, image, wait=True))
        assert_sees_everything(view, node)
        if user != "root" or runtime == "bubblewrap":
            # Read-only binds (ch-run has none: as mjfuser1, the files are root's).
            (node.job / "jobstatus" / "used_CPU").unlink()
            plain = finish(node.pilot(runtime, image, options="--format shell",
                                      env={"PAYLOAD": PAYLOAD.replace(
                                          '"secret"', '"wrote": subprocess.run(["touch", '
                                          'os.environ["JOBFEATURES"] + "/x"]).returncode, '
                                          '"secret"')}))
            assert plain[0]["wrote"] != 0, plain
    finally:
        node.remove()


@pytest.mark.parametrize("runtime", ["bubblewrap", "charliecloud"])
def test_without_the_arguments_the_container_sees_no_mjf(runtime, tmp_path):
    requirements(runtime)
    node = Node("mjfuser1")
    try:
        # The pilot's options given, its binds not: a container-args that prints nothing.
        fake = node.root / "fake"
        fake.mkdir()
        (fake / "mjf").write_text("#!/bin/sh\n")
        (fake / "mjf").chmod(0o755)
        pilot = node.root / "pilot.sh"
        pilot.write_text(PILOT.replace(str(HOOKS_BIN / "mjf") + " container-args",
                                       str(fake / "mjf") + " container-args"))
        image = make_image(node.root, [])
        view = finish(node.pilot(runtime, image))[0]
        assert view["show"]["rc"] != 0 and view["remaining"]["rc"] != 0, view
        assert view["status"]["rc"] != 0, view
        assert view["secret"] is False, view
    finally:
        node.remove()


def test_charliecloud_binds_inside_a_directory_the_image_has():
    requirements("charliecloud")
    node = Node("mjfuser1")
    try:
        image = make_image(node.root, ["/mjf/machinefeatures", "/mjf/jobfeatures",
                                       "/mjf/jobstatus"])
        view = finish(node.pilot("charliecloud", image, options="--inside /mjf"))[0]
        assert view["env"]["JOBFEATURES"] == "/mjf/jobfeatures", view
        assert_sees_everything(view, node, inside="/mjf")
    finally:
        node.remove()


@pytest.mark.parametrize("runtime", ["bubblewrap", "charliecloud"])
def test_with_url_the_payload_reads_through_nginx(runtime):
    requirements(runtime)
    require(Path(NGINX).exists(), "needs Debian's nginx (tests/setup-system)")
    root = Path(tempfile.mkdtemp(prefix="mjf-containers-", dir="/srv"))
    root.chmod(0o755)
    server = Server(root)
    node = Node("mjfuser1", url_base=server.url, root=root)
    try:
        server.start()
        image = make_image(root, [])
        process = node.pilot(runtime, image, options="--url", wait=True)
        view, _ = drain_reaches_the_payload(node, process)
        job_dir = quote(node.job.name, safe=",")
        assert view["env"]["JOBFEATURES"] == f"{server.url}/jobs/{job_dir}/jobfeatures", view
        assert_sees_everything(view, node, urls=server.url)
        assert server.requests_for(f"/jobs/{job_dir}/jobfeatures/shutdowntime_job") >= 2
    finally:
        server.stop()
        node.remove()


# A Slurm job that is a pilot: the same payload in bwrap and in ch-run at once, each
# writing what it saw to out/<runtime>.json; ready/<runtime> once it waits for a drain.
SLURM_PILOT = r'''#!/bin/sh
cd {out}
for runtime in bubblewrap charliecloud; do
    options=""; [ $runtime = charliecloud ] && options="--inside /mjf"
    (sh {root}/pilot.sh $runtime {image} "$options" {mjf} /nonexistent wait \
        > $runtime.lines 2> $runtime.err; echo $? > $runtime.rc) &
done
wait
'''


def test_inside_a_real_slurm_job():
    requirements("bubblewrap")
    requirements("charliecloud")
    with mjf_cluster(cgroups=False, extra_config="[mjf]\njobstatus = yes\n") as slurm:
        root = slurm.job_root
        (root / "pilot.sh").write_text(PILOT)
        (root / "payload.py").write_text(PAYLOAD)
        image = make_image(root / "ch", ["/mjf/machinefeatures", "/mjf/jobfeatures",
                                         "/mjf/jobstatus"])
        out = root / "out"
        script = root / "job.sh"
        script.write_text(SLURM_PILOT.format(out=out, root=root, image=image,
                                             mjf=HOOKS_BIN / "mjf"))
        script.chmod(0o755)
        submitted = slurm.as_user("mjfuser1", [
            "sbatch", "--parsable", "-J", "containers", "-c", "2", "--time=60",
            "-o", str(out / "job.log"), str(script)],
            check=False)
        assert submitted.returncode == 0, submitted.stderr + slurm.log("slurmd")

        def diagnose() -> str:
            texts = [path.name + ": " + path.read_text() for path in sorted(out.iterdir())
                     if path.is_file()]
            return "\n".join(texts) + slurm.log("slurmd")

        deadline = time.monotonic() + 60
        while not all((out / f"{runtime}.lines").exists()
                      and (out / f"{runtime}.lines").read_text()
                      for runtime in ("bubblewrap", "charliecloud")):
            assert time.monotonic() < deadline, diagnose()
            time.sleep(0.2)
        drained = slurm.mjf("drain", "--in", "2h")
        assert drained.returncode == 0, drained.stderr
        slurm.wait_until_no_jobs()
        shutdown = (slurm.mjf_base / "machinefeatures" / "shutdowntime").read_text()
        for runtime in ("bubblewrap", "charliecloud"):
            assert (out / f"{runtime}.rc").read_text().strip() == "0", diagnose()
            view, later = (json.loads(line)
                           for line in (out / f"{runtime}.lines").read_text().splitlines())
            shown = json.loads(view["show"]["out"])
            assert view["show"]["rc"] == 0, diagnose()
            assert shown["JOBFEATURES"]["values"]["allocated_cpu"] == 2, diagnose()
            assert shown["MACHINEFEATURES"]["values"]["grace_secs"] == 600, diagnose()
            assert view["remaining"]["rc"] == 0 and view["status"]["rc"] == 0, diagnose()
            assert later["after"] == shutdown, diagnose()
        slurm.mjf("drain", "--cancel")
        assert_no_job_directories_left(slurm)
