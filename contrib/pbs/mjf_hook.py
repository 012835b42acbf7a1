"""mjf-hooks' PBS hook: execjob_begin, execjob_launch and execjob_end.

PBS runs this file as root in its own embedded Python (pbs_python), which does not
see the install of mjf-hooks, so the hook is only an adapter: it hands the job's
attributes, as ``name=value`` lines, to ``mjf-pbs begin|launch|end``, and puts the
variables begin prints into the job's Variable_List (its environment to be). A launch
runs mjf-pbs only where they are not there.
``contrib/pbs/install-hook BINDIR`` fills in MJF_PBS, MJF_SITE and MJF_PYTHON and
imports this file.

Where this interpreter is the Python that mjf-pbs runs under (MJF_PYTHON, major.minor)
and the directory mjf-pbs imports its package from (MJF_SITE) is root's alone, the hook
runs mjf-pbs's own code right here (``in_process``): no second interpreter starts, which
was most of an event's cost. It sees what the command would: the environment
COMMAND_ENV, its own directory first on the import path; both are restored after it.
Otherwise, or where that import fails in any way, it starts the command
(FALLBACK's ``command``), the attribute lines on its stdin. Either way, what runs is stopped after
TIMEOUT_SECS.

Whatever goes wrong here (a missing or hung command, an exception of ours) is one line
in the mom's log and the event is accepted: an exception or reject() in execjob_begin
makes PBS requeue the job 21 times and then hold it, one in execjob_launch kills the
job. The one rejection is a launch that mjf-pbs failed with status 1, which it gives
only where the site set ``[mjf] on_error = fail``: that job ends without running.
"""

import os
import stat
import sys
import time

import pbs

MJF_PBS = "@MJF_PBS@"
# The directory mjf-pbs imports its package from, and its Python's major.minor, as
# install-hook found them ("" where it found none: the command is always started).
MJF_SITE = "@MJF_SITE@"
MJF_PYTHON = "@MJF_PYTHON@"
MIN_PYTHON = (3, 9)  # the package's own minimum; this file itself runs on 3.6
# Well inside the hook's alarm (install-hook sets 30 s): mjf-pbs itself bounds every
# batch-system command it runs by [mjf] command_timeout_secs.
TIMEOUT_SECS = 15
ROLES = {pbs.EXECJOB_BEGIN: "begin", pbs.EXECJOB_LAUNCH: "launch", pbs.EXECJOB_END: "end"}
JOB_ATTRIBUTES = ("euser", "egroup", "Job_Name", "Account_Name", "exec_vnode")
EXPORTED = ("MACHINEFEATURES", "JOBFEATURES", "JOBSTATUS")
ON_ERROR_FAIL = 1  # mjf-pbs's status for a failure the site wants to fail the job
COMMAND_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
MAX_OUTPUT = 1 << 20  # of each of its stdout and stderr kept; the rest is read and dropped
PIPE_HEAD = 60000  # what a pipe holds unread (Linux: 64 KiB)


def attribute_lines(event):
    """The job's attributes as mjf-pbs reads them (qstat -f's names)."""
    job = event.job
    values = [("id", job.id)]
    values += [(name, getattr(job, name, None)) for name in JOB_ATTRIBUTES]
    queue = getattr(job, "queue", None)  # a queue object in a hook: its name is the attribute
    values.append(("queue", getattr(queue, "name", queue)))
    for prefix in ("Resource_List", "resources_used"):
        resources = getattr(job, prefix, None)
        for name in (resources.keys() if resources is not None else ()):
            values.append((prefix + "." + name, resources[name]))
    vnodes = event.vnode_list.keys()  # PBS's own mapping type: keys() is what it has
    values.append(("vnodes", ",".join(str(name) for name in vnodes)))
    values.append(("node", pbs.get_local_nodename()))
    return "".join(f"{name}={value}".replace("\n", " ").replace("\r", " ") + "\n"
                   for name, value in values if value is not None)


def run(role, text):
    """mjf-pbs ROLE with the attribute lines ``text`` -> (status, stdout, stderr), within
    TIMEOUT_SECS: its code here where it can be, else the command (FALLBACK's)."""
    deadline = time.monotonic() + TIMEOUT_SECS
    found = in_process(role, text, deadline) if runs_here() else None
    if found is not None:
        return found
    fallback = {**globals()}  # FALLBACK's functions see this file's names
    exec(compile(FALLBACK, "mjf_hook.py FALLBACK", "exec"), fallback)  # noqa: S102
    return fallback["command"](role, text, deadline)


def runs_here():
    """Whether mjf-pbs's code may run in this interpreter: the Python install-hook found
    (and at least the package's minimum), MJF_SITE root's alone."""
    version = sys.version_info
    return f"{version[0]}.{version[1]}" == MJF_PYTHON and version >= MIN_PYTHON \
        and root_only(MJF_SITE)


def in_process(role, text, deadline):
    """mjf-pbs's code run here by its own mjf_hooks.hooks.pbs_embedded (imported from
    MJF_SITE, which is first on the import path until it returns): (status, stdout,
    stderr), or None where the import fails in any way or that says it cannot run here.
    The code that bounds it is the package's: compiled once, not on every event."""
    path = sys.path[:]
    sys.path.insert(0, MJF_SITE)
    try:
        try:
            from mjf_hooks.hooks import pbs_embedded
        except Exception:  # noqa: BLE001 - the command is started instead: it says why
            return None
        if not pbs_embedded.__file__.startswith(MJF_SITE + "/"):
            return None
        return pbs_embedded.run(role, text, deadline, COMMAND_ENV, TIMEOUT_SECS)
    finally:
        sys.path[:] = path


def root_only(site):
    """Whether only root (or we) can change what is imported from ``site``: an absolute
    path whose every component is a directory of root's, none a symlink, none in a
    directory others can write unless it is sticky (safefs's rule for a path); ``site``
    itself and every directory of the package in it writable by its owner alone."""
    trusted = (0, os.geteuid())
    if not site.startswith("/"):
        return False
    current = "/"
    try:
        for part in site.split("/")[1:]:
            if part in ("", ".", ".."):
                return False
            entry = os.path.join(current, part)
            info, parent = os.lstat(entry), os.stat(current)
            if info.st_uid not in trusted or not stat.S_ISDIR(info.st_mode) \
                    or (parent.st_mode & 0o022 and not parent.st_mode & stat.S_ISVTX):
                return False
            current = entry
        pending = [site, os.path.join(site, "mjf_hooks")]
        while pending:
            directory = pending.pop()
            info = os.lstat(directory)
            if info.st_uid not in trusted or info.st_mode & 0o022 \
                    or not stat.S_ISDIR(info.st_mode):
                return False
            if directory != site:
                with os.scandir(directory) as entries:
                    pending.extend(entry.path for entry in entries
                                   if entry.is_dir(follow_symlinks=False))
    except OSError:
        return False
    return True


# The fallback: ``mjf-pbs ROLE`` started. Source compiled only where it runs (``run``):
# PBS compiles this file from source on every event, every function in it each time, and
# these are most of it.
FALLBACK = r'''
import select


def command(role, text, deadline):
    """The command ``mjf-pbs ROLE``, ``text`` on its stdin -> (status, stdout, stderr),
    killed at ``deadline``.

    fork, exec and select rather than subprocess: importing subprocess costs pbs_python
    12 ms (locale, re), every event of every job. The command gets a session of its own,
    so a timeout kills it with whatever it started. Python 3.6 suffices (older PBS
    Professional releases bring their own)."""
    stdin_r, stdin_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    # Into the empty pipe before the command exists (a job's attributes are far below its
    # 64 KiB): nothing is written after it may have died, which could raise SIGPIPE.
    pending = text.encode()
    pending = pending[os.write(stdin_w, pending[:PIPE_HEAD]):]
    pid = os.fork()
    if pid == 0:  # the child: only os calls, then exec or _exit
        try:
            os.setsid()
            for fd, target in ((stdin_r, 0), (out_w, 1), (err_w, 2)):
                os.dup2(fd, target)  # the pipes' own ends close on exec
            os.execve(MJF_PBS, [MJF_PBS, role], COMMAND_ENV)
        except BaseException as error:  # noqa: BLE001 - nothing may return into the hook
            os.write(2, f"cannot run {MJF_PBS}: {error}\n".encode(errors="replace"))
        finally:
            os._exit(127)
    for fd in (stdin_r, out_w, err_w):
        os.close(fd)
    data = {out_r: b"", err_r: b""}
    reading = [out_r, err_r]
    try:
        while reading and time.monotonic() < deadline:
            if not pending and stdin_w >= 0:
                os.close(stdin_w)  # the end of its stdin
                stdin_w = -1
            readable, writable, _ = select.select(reading, [stdin_w] if pending else [], [],
                                                  max(0.0, deadline - time.monotonic()))
            if writable:
                try:
                    pending = pending[os.write(stdin_w, pending[:65536]):]
                except BrokenPipeError:  # it ended without reading it all: its status says
                    pending = b""
            for fd in readable:
                chunk = os.read(fd, 65536)
                if not chunk:
                    reading.remove(fd)
                elif len(data[fd]) < MAX_OUTPUT:
                    data[fd] += chunk
        status = _wait(pid, deadline)
    finally:
        for fd in (stdin_w, out_r, err_r):
            if fd >= 0:
                os.close(fd)
    if status is None:
        os.killpg(pid, 9)  # SIGKILL (the signal module would import enum)
        os.waitpid(pid, 0)
        raise RuntimeError(f"{MJF_PBS} {role} did not finish in {TIMEOUT_SECS} s: killed")
    return status, data[out_r].decode("utf-8", "replace"), data[err_r].decode("utf-8", "replace")


def _wait(pid, deadline):
    """The command's exit status, or None if it is still running at ``deadline``."""
    delay = 0.0001  # its pipes are closed: it is exiting, which takes a fraction of a ms
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.01)
'''


def main(event):
    """Run the event's role; return a reason to reject the launch, or None."""
    role = ROLES.get(event.type)
    if role is None or (role == "launch" and set_at_begin(event)):
        return None
    status, out, err = run(role, attribute_lines(event))
    for line in err.splitlines()[:20]:
        pbs.logmsg(pbs.LOG_WARNING, "mjf: " + line)
    if role == "launch" and status == ON_ERROR_FAIL:
        return "mjf-pbs launch failed and [mjf] on_error = fail: the job does not run"
    if role == "end" or status != 0:
        return None
    # begin: into the job's Variable_List, which PBS makes its environment (so a launch
    # need not run mjf-pbs again); launch: into the environment itself.
    variables = event.job.Variable_List if role == "begin" else event.env
    for line in out.splitlines():
        name, equals, value = line.partition("=")
        if equals and name in EXPORTED:
            variables[name] = value
    return None


def set_at_begin(event):
    """Whether execjob_begin set this job's variables: JOBFEATURES is there and names this
    job's directory. A value the job brought along (qsub -V inside another job) names
    another job's: then mjf-pbs launch decides."""
    names = set(event.env.keys())  # PBS's own mapping type: keys() is what it has
    if not {"MACHINEFEATURES", "JOBFEATURES"} <= names:
        return False
    path = str(event.env["JOBFEATURES"])
    return path.endswith(f"/jobs/{event.job.id}/jobfeatures") and os.path.isdir(path)


event = pbs.event()
rejection = None
try:
    rejection = main(event)
except Exception as error:  # noqa: BLE001 - the fail-safe rule: nothing of ours fails a job
    pbs.logmsg(pbs.LOG_WARNING, f"mjf: {type(error).__name__}: {error}")
if rejection:
    event.reject(rejection)
event.accept()
