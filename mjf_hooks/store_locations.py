"""Where job stores live: the site's (``base_dir``), a private per-user directory for a
job whose user cannot write there, and every store outside ``base_dir`` root finds
jobs kept in (an HTCondor job's scratch, users' private directories)."""

from __future__ import annotations

import os
import stat

from .config import Config
from .errors import StoreError
from .log import Log
from .store import Store

# Type names only: importing collections.abc at run time costs every job start ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def store_for(config: Config, base_dir: str | None = None,
              given_dir: str | None = None) -> Store:
    """The store at the configured (or a given) base dir, with the configured modes;
    ``given_dir``: the batch system's directory for the job that holds it."""
    return Store(base_dir or config.base_dir, config.dir_mode, config.file_mode,
                 given_dir=given_dir)


def user_job_store(config: Config, environ: Mapping[str, str], log: Log,
                   dry_run: bool = False) -> Store:
    """Where a job run by its own user keeps its directory: base_dir if the user may
    write there (or is root), else a private per-user directory (said in the log)."""
    if dry_run or os.geteuid() == 0 or _writable(config.base_dir):
        return store_for(config)
    store = store_for(config, private_base_dir(environ))
    log.warning(f"{config.base_dir} is not writable by uid {os.geteuid()}: "
                f"using {store.base_dir} for this job")
    return store


def _writable(base_dir: str) -> bool:
    """Whether we can create our directories in base_dir (or create base_dir itself)."""
    path = base_dir
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent
    if path == base_dir:
        jobs = os.path.join(base_dir, "jobs")
        if os.path.isdir(jobs):
            return os.access(jobs, os.W_OK | os.X_OK)
    return os.access(path, os.W_OK | os.X_OK)


def private_base_dir(environ: Mapping[str, str], create: bool = True) -> str:
    """A per-user base dir for jobs whose user cannot write base_dir, owned by that user alone."""
    runtime = environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.stat(runtime).st_uid == os.geteuid():
        path = os.path.join(runtime, "mjf")
    else:
        path = os.path.join(PRIVATE_PARENTS[0], f"mjf-{os.geteuid()}")
    if not create:
        return path
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not os.path.isdir(path) or os.path.islink(path) or info.st_uid != os.geteuid():
        raise StoreError(f"{path} exists but is not a directory of uid {os.geteuid()}: "
                         "set [mjf] base_dir to a directory you own")
    return path


# Where the per-user directories of private_base_dir live, for a root drain to find them.
PRIVATE_PARENTS = ("/tmp", "/run/user")


def job_stores_elsewhere(config: Config) -> list[Store]:
    """Every store outside base_dir that jobs are kept in, as root finds them: those each
    batch module names (``job_store_dirs``: an HTCondor job's scratch), and each user's
    private directory (``/tmp/mjf-<uid>``, ``/run/user/<uid>/mjf``: an LSF job or ``mjf
    run`` of a user who cannot write base_dir). Each belongs to its user and is opened
    as such: only a real directory of that user is taken, never through a symlink."""
    return [store for store, _ in kept_job_stores(config)]


# Who made a store found by kept_job_stores: a user's private directory, or the batch
# module's name (the scratch that batch system gave a job).
PRIVATE = "private"


def kept_job_stores(config: Config) -> list[tuple[Store, str]]:
    """:func:`job_stores_elsewhere`, each with who made it: :data:`PRIVATE` (its user,
    who can make as many job directories there as it likes) or the batch module that
    names it (a scratch directory the batch system made for one job)."""
    from . import batch

    candidates: list[tuple[str, str | None, str]] = []
    for name in batch.NAMES:
        for parent, subpath in batch.backend(name).job_store_dirs(config.backend[name]):
            candidates += [(os.path.join(parent, entry, subpath), None, name)
                           for entry in _listing(parent)]
    tmp, runtime = PRIVATE_PARENTS
    candidates += [(os.path.join(tmp, entry), entry[len("mjf-"):], PRIVATE)
                   for entry in _listing(tmp) if entry.startswith("mjf-")]
    candidates += [(os.path.join(runtime, entry, "mjf"), entry, PRIVATE)
                   for entry in _listing(runtime)]
    stores = []
    for path, uid, maker in candidates:
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and (uid is None or uid == str(info.st_uid)):
            stores.append((Store(path, config.dir_mode, config.file_mode, owner=info.st_uid),
                           maker))
    return stores


def private_job_stores(config: Config) -> list[Store]:
    """The users' private directories of :func:`kept_job_stores`."""
    return [store for store, maker in kept_job_stores(config) if maker == PRIVATE]


def _listing(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []
