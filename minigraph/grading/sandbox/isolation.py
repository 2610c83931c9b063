"""How far a submission's process is kept from the grader: what `submission.Submission`
asks of the platform before it starts one, and how it makes sure none is left afterwards.

A student's file must not be able to change its grade by any other way than its answers.
The grader does not build a jail of its own; it uses what the platform gives:

- **A user of its own** (as root, how Gradescope and containers run a grader): the child
  runs as `minigraph-sandbox` (created with `useradd` if missing; `nobody` where that
  fails), with no supplementary groups. It cannot write the root-owned package or the
  results, read the grader's `/proc/<pid>/environ` or signal it, and its process limit
  counts only its own processes.
- **bubblewrap** (`bwrap`, where installed and the kernel allows its namespaces): the child
  sees a read-only view of what it needs to run - the system's libraries, the interpreter,
  site-packages, the minigraph package - and its own folder; nothing else of the machine
  (reference solutions, private cases, results, other students' files), no other process,
  no network. When its first process ends, the kernel ends every process inside.
- **Every setting**: a clean environment (no private seed, no token), a fresh folder of
  its own as working directory and home, limits with hard = soft (memory, processes, file
  size, CPU time, core files, open files), a session of its own. At the end every process
  it left is killed - on Linux the grader is a "child subreaper", so one that detached
  itself comes back to the grader and is killed too; as root, every process of the
  sandbox user - before any report is written.

`jail()` finds the strongest setting that works here (it tries it once), and says in one
line what is missing when isolation is only partial: docs/teaching.md lists what holds
in each setting.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

SANDBOX_USER = "minigraph-sandbox"
LOCK_FILE = "/run/minigraph-sandbox.lock"   # one grading at a time per sandbox user
PROCESSES = 64                # tasks (processes and threads) the child may add
FILE_SIZE = 64 << 20          # bytes of one file the child writes
OPEN_FILES = 1024
ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
       "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/localtime")
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
PACKAGE = Path(__file__).resolve().parents[2]        # the minigraph package
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 36, 38   # prctl(2)


@dataclass(frozen=True)
class Jail:
    """Where a submission runs: as `user` (name, uid, gid; None: as the grader's own
    user), inside bubblewrap at `bwrap` (None: without), and `partial`, the one line that
    says what is missing ("" when isolation is full)."""
    user: tuple[str, int, int] | None
    bwrap: str | None
    partial: str = ""

    @property
    def line(self) -> str:
        return f"partial isolation: {self.partial}" if self.partial else ""


def linux() -> bool:
    return sys.platform.startswith("linux")


@functools.cache
def jail() -> Jail:
    """The strongest setting that works on this machine, tried once per process."""
    if not linux():
        return Jail(None, None, "not Linux: the submission runs as your own user, with its "
                    "time and memory limits; its processes are stopped by process group "
                    "only, and it can read and change what you can")
    bwrap = shutil.which("bwrap")
    if os.geteuid() == 0:
        user = sandbox_user()
        broken = probe(Jail(user, bwrap)) if bwrap else "not installed"
        if not broken:
            return Jail(user, bwrap)
        why = probe(Jail(user, None))
        if not why:
            return Jail(user, None)
        return Jail(None, None, f"root, but bubblewrap is {_unusable(broken)} and the user "
                    f"{user[0]} cannot run {sys.executable} ({why}): the submission runs as "
                    "root, with its limits only (it can read the reference solutions and "
                    "change the grader)")
    broken = probe(Jail(None, bwrap)) if bwrap else "not installed"
    if not broken:
        return Jail(None, bwrap, "not root, so the submission runs as your own user, inside "
                    "bubblewrap (it sees no file but the library's and its own, and no other "
                    "process); its process limit counts your processes too")
    return Jail(None, None, f"not root, and bubblewrap is {_unusable(broken)}: the "
                "submission runs as your own user and can read and change what you can (the "
                "reference solutions, the library, these results) and signal the grader; "
                "its limits, the cleanup of its processes and the check of the library's "
                "files hold")


def _unusable(why: str) -> str:
    return why if why == "not installed" else f"not usable here ({why})"


def sandbox_user() -> tuple[str, int, int]:
    """(name, uid, gid) of `SANDBOX_USER`, created (a system user, no home, no login)
    if missing; `nobody` where it cannot be."""
    import pwd  # POSIX only: this module is imported on Windows too
    for attempt in range(2):
        try:
            pw = pwd.getpwnam(SANDBOX_USER)
            return pw.pw_name, pw.pw_uid, pw.pw_gid
        except KeyError:
            if attempt == 0:
                try:
                    subprocess.run(["useradd", "--system", "--user-group", "--no-create-home",
                                    "--home-dir", "/nonexistent", "--shell",
                                    "/usr/sbin/nologin", SANDBOX_USER],
                                   capture_output=True, timeout=60)
                except (OSError, subprocess.SubprocessError):
                    break
    pw = pwd.getpwnam("nobody")
    return pw.pw_name, pw.pw_uid, pw.pw_gid


# ---------------------------------------------------------------------------------------
# Starting the child
# ---------------------------------------------------------------------------------------

def limits(memory: int, cpu_seconds: float, jail: Jail) -> dict[str, int]:
    """RLIMIT_<name> -> value, set in the child with hard = soft (it cannot raise them).
    The process limit is per user: as the grader's own user it comes on top of the
    user's current count."""
    tasks = PROCESSES + (0 if jail.user or not linux() else _tasks_of(os.getuid()))
    out = {"NPROC": tasks, "FSIZE": FILE_SIZE, "CPU": int(cpu_seconds) + 1, "CORE": 0,
           "NOFILE": OPEN_FILES}
    if memory > 0:
        out["AS"] = memory
    return out


def environment(home: str, user: str) -> dict[str, str]:
    """The child's whole environment: nothing of the grader's (no private seed, no
    token) but the time scale."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home,
           "USER": user, "LOGNAME": user, "LANG": "C.UTF-8", "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    scale = os.environ.get("MINIGRAPH_TIME_SCALE")
    if scale:
        env["MINIGRAPH_TIME_SCALE"] = scale
    return env


def python_command(entry: str, args: Sequence[str]) -> list[str]:
    """This interpreter, isolated from the environment (-I), running `entry` ("module:
    function") with `args`: the site directories and the package's parent are named
    explicitly, since -I drops the working directory and PYTHONPATH."""
    module, _, function = entry.partition(":")
    code = (f"import site, sys; [site.addsitedir(d) for d in {site_dirs()!r}]; "
            f"sys.path.append({str(PACKAGE.parent)!r}); "
            f"from {module} import {function}; {function}()")
    return [sys.executable, "-I", "-B", "-u", "-c", code, *args]


def site_dirs() -> list[str]:
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dirs if os.path.isdir(d)]


def bwrap_command(jail: Jail, folder: str, hide: Iterable[str | os.PathLike] = ()
                  ) -> list[str]:
    """bubblewrap's arguments: new namespaces (processes, IPC, network, host name; a new
    user namespace when not root), a session of its own, the end of the child when the
    grader ends; read-only binds of the system and of what Python needs, `folder`
    writable, and a fresh /proc, /dev and /tmp. Paths of `hide` that fall inside a bind
    are covered by an empty tmpfs. /tmp and /dev/shm (POSIX semaphores: multiprocessing)
    are the child's alone, and empty."""
    assert jail.bwrap is not None
    args = [jail.bwrap, "--die-with-parent", "--new-session", "--unshare-pid",
            "--unshare-ipc", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if jail.user is None:
        args.append("--unshare-user")
    for top in SYSTEM:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    # /tmp first, then what is bound inside it: a package or interpreter under /tmp (a
    # virtual environment made there) stays visible; the rest of /tmp is empty.
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/dev/shm",
             "--perms", "1777", "--tmpfs", "/tmp"]
    made, binds = {"/", "/tmp"}, [*SYSTEM]
    for path in [p for p in ETC if os.path.exists(p)] + _python_dirs():
        args += _parents(path, made, binds) + ["--ro-bind", path, path]
        binds.append(path)
    for path in map(os.path.realpath, hide):
        if os.path.isdir(path) and any(_inside(path, b) for b in binds[len(SYSTEM):]):
            args += ["--tmpfs", path]
    args += _parents(folder, made, binds) + ["--bind", folder, folder, "--chdir", folder]
    return args


def _python_dirs() -> list[str]:
    """The interpreter's prefixes, the site directories and the package: what the child
    must see to run, each once (none inside another, nothing under /usr twice)."""
    want = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                          sys.base_exec_prefix, *site_dirs(), PACKAGE)}
    want |= {p for p in (sys.prefix, sys.base_prefix) if os.path.isdir(p)}   # as named
    want.add(os.path.dirname(sys.executable))
    out: list[str] = []
    for p in sorted(want, key=len):
        if os.path.isdir(p) and not any(_inside(p, q) for q in (*out, *SYSTEM)):
            out.append(p)
    return sorted(out)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _parents(path: str, made: set[str], binds: list[str]) -> list[str]:
    """--dir for each ancestor of `path` that is neither made yet nor inside a bind,
    world-traversable (0755)."""
    out = []
    for parent in reversed(Path(path).parents):
        p = str(parent)
        if p not in made and not any(_inside(p, b) for b in binds):
            out += ["--perms", "0755", "--dir", p]
            made.add(p)
    return out


def child_command(jail: Jail, entry: str, args: Sequence[str], folder: str,
                  hide: Iterable[str | os.PathLike] = ()) -> tuple[list[str], dict]:
    """The command that starts `entry` in `jail`, and Popen's keywords for the user."""
    cmd = python_command(entry, args)
    if jail.bwrap:
        return bwrap_command(jail, folder, hide) + cmd, {}
    if jail.user:
        _, uid, gid = jail.user
        return cmd, {"user": uid, "group": gid, "extra_groups": []}
    return cmd, {}


def child_config(jail: Jail, memory: int, cpu_seconds: float) -> str:
    """What the child applies to itself first (`enter`), as one JSON argument: the user
    to become (root inside bubblewrap drops to it there), and the limits."""
    drop = list(jail.user[1:]) if jail.user and jail.bwrap else None
    return json.dumps({"drop": drop, "limits": limits(memory, cpu_seconds, jail)})


def probe(jail: Jail) -> str:
    """Why `jail` does not work here ("" when a child started in it imports minigraph
    and NumPy, as the sandbox user when there is one)."""
    held = lock(jail)   # a grading elsewhere kills every process of the sandbox user
    folder = make_folder(jail)
    try:
        cmd, kw = child_command(jail, f"{__name__}:probe_main",
                                [child_config(jail, 0, 60)], folder)
        user = jail.user[0] if jail.user else "grader"
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=folder,
                           env=environment(folder, user), start_new_session=True, **kw)
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        return f"{type(e).__name__}: {e}"[:200]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        unlock(held)
    want = jail.user[1] if jail.user else os.getuid()
    if r.returncode == 0 and r.stdout.split() == ["ok", str(want)]:
        return ""
    return (r.stderr.strip().splitlines() or [f"exit code {r.returncode}"])[-1][:200]


def probe_main() -> None:
    enter(json.loads(sys.argv[1]))
    import numpy  # noqa: F401  the probe: can the child import what grading needs?
    print("ok", os.getuid())


def make_folder(jail: Jail) -> str:
    """A fresh folder for the child (its working directory and home), its user's."""
    folder = tempfile.mkdtemp(prefix="minigraph-sandbox-")
    os.chmod(folder, 0o700)
    if jail.user:
        os.chown(folder, jail.user[1], jail.user[2])
    return folder


# ---------------------------------------------------------------------------------------
# In the child, before the submission is read
# ---------------------------------------------------------------------------------------

def enter(config: dict) -> None:
    """Become the sandbox user (root inside bubblewrap), forbid gaining privileges
    (set-user-ID programs), and set the limits with hard = soft."""
    if os.name != "posix":   # no users, no limits to set
        return
    import resource  # POSIX only: this module is imported on Windows too
    drop = config.get("drop")
    if drop:
        uid, gid = drop
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    if linux():
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    for name, value in config["limits"].items():
        which = getattr(resource, f"RLIMIT_{name}", None)
        if which is None:
            continue
        _, hard = resource.getrlimit(which)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (cap, cap))


# ---------------------------------------------------------------------------------------
# Secrets, and one grading at a time per sandbox user
# ---------------------------------------------------------------------------------------

def hide(paths: Iterable[str | os.PathLike]) -> None:
    """As root without bubblewrap: take group and other permissions off `paths` (the
    reference solutions, the private cases...), so the sandbox user cannot read them."""
    for p in paths:
        try:
            st = os.stat(p)
            if st.st_mode & 0o077:
                os.chmod(p, st.st_mode & ~0o077)
        except OSError:
            continue


_held = {"fd": -1, "count": 0}   # this process's hold on the lock, and by how many


def lock(jail: Jail) -> bool:
    """Wait for, then hold, the sandbox user's lock (False when there is no user): its
    process limit and the final kill of all its processes assume one grading at a time.
    Submissions of one process share the hold. Where another grading holds it, say so on
    stderr ("waiting for another grading ...") before waiting: a grader that seems to hang
    is queued."""
    if jail.user is None:
        return False
    if _held["count"] == 0:
        import fcntl  # POSIX only; a sandbox user means POSIX
        path = lock_path()
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another grading to finish: one grading at a time runs as "
                  f"the sandbox user {jail.user[0]} (lock {path}) ...", file=sys.stderr,
                  flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        _held["fd"] = fd
    _held["count"] += 1
    return True


def lock_path() -> str:
    """`LOCK_FILE`, or one in /var/lock (else /tmp) where /run is not writable."""
    if os.access(os.path.dirname(LOCK_FILE), os.W_OK):
        return LOCK_FILE
    return os.path.join("/var/lock" if os.path.isdir("/var/lock") else "/tmp",
                        "minigraph-sandbox.lock")


def unlock(held: bool) -> None:
    if held:
        _held["count"] -= 1
        if _held["count"] == 0:
            os.close(_held["fd"])


# ---------------------------------------------------------------------------------------
# Leaving nothing behind
# ---------------------------------------------------------------------------------------

class Reaper:
    """Makes sure that no process of the submission outlives it. On Linux the grader is a
    child subreaper from `__init__` to `close`: a process the child forks that detaches
    itself (a new session, a double fork) is re-parented to the grader when its parent
    dies, where `sweep` finds it."""

    active = 0              # Reapers alive in this process (the subreaper flag is per process)
    children: set[int] = set()   # their submissions' own processes: not strays of another

    def __init__(self, jail: Jail):
        self.jail = jail
        self.linux = linux()
        if self.linux:
            if Reaper.active == 0:
                _prctl(PR_SET_CHILD_SUBREAPER, 1)
            Reaper.active += 1
            self.before = _children()
        self.closed = False

    def sweep(self, proc: subprocess.Popen, limit: float = 10.0) -> bool:
        """Kill the child, its process group, every process re-parented to the grader
        since, and (as root) every process of the sandbox user; reap them. True when none
        is left (a zombie aside) within `limit` seconds."""
        deadline = time.monotonic() + limit
        while True:
            if proc.poll() is None and os.name == "posix":
                try:
                    os.killpg(proc.pid, signal.SIGKILL)   # not reaped: still its group's id
                except OSError:
                    pass
            if proc.poll() is None:
                proc.kill()
            strays = (_children() - self.before - Reaper.children) if self.linux else set()
            for pid in strays:
                try:
                    os.kill(pid, signal.SIGKILL)   # our child, not reaped: still that process
                except OSError:
                    pass
            for pid in strays:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
            left: list[int] = []
            if self.jail.user is not None and self.linux and _held["count"] <= 1:
                _kill_user(*self.jail.user[1:])   # no other submission of ours runs as it
                left = _processes_of(self.jail.user[1])
            try:
                proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                pass
            if proc.returncode is not None and not strays and not left:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)

    def close(self) -> None:
        if self.linux and not self.closed:
            Reaper.active -= 1
            if Reaper.active == 0:
                _prctl(PR_SET_CHILD_SUBREAPER, 0)
        self.closed = True


def _prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _proc_stats() -> Iterable[tuple[int, bytes]]:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    yield int(entry.name), f.read()
            except OSError:
                continue


def _children() -> set[int]:
    """The pids whose parent is this process (from /proc/<pid>/stat)."""
    me = os.getpid()
    return {pid for pid, stat in _proc_stats() if int(stat.rsplit(b")", 1)[1].split()[1]) == me}


def _processes_of(uid: int) -> list[int]:
    """Processes (zombies aside) whose real user is `uid` (from /proc/<pid>/status)."""
    out = []
    for pid, stat in _proc_stats():
        if stat.rsplit(b")", 1)[1].split()[0] == b"Z":
            continue
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                fields = dict(line.split(b":", 1) for line in f.read().splitlines()
                              if b":" in line)
        except OSError:
            continue
        if int(fields.get(b"Uid", b"-1 ").split()[0]) == uid:
            out.append(pid)
    return out


def _tasks_of(uid: int) -> int:
    """Tasks (threads) of the processes of `uid`: what RLIMIT_NPROC counts."""
    n = 0
    for pid in _processes_of(uid):
        try:
            n += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return n


def _kill_user(uid: int, gid: int) -> None:
    """SIGKILL every process of the user `uid` (as root): a forked helper becomes that
    user and calls kill(-1), which reaches exactly the processes it may signal."""
    pid = os.fork()
    if pid == 0:   # the helper: system calls only, then _exit
        code = 0
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:   # none left
            pass
        except BaseException:   # noqa: BLE001  nothing may escape a forked helper
            code = 1
        os._exit(code)
    os.waitpid(pid, 0)


# ---------------------------------------------------------------------------------------
# As the grader's own user: did the submission change the grader's files?
# ---------------------------------------------------------------------------------------

def loaded_files() -> list[str]:
    """The files of every module loaded here, their folders, and the folders of
    sys.path: what a submission running as the grader's user could change to run its code
    in a later grading (a module edited, a module or .pth file added). Folders anyone may
    write (/tmp) are left out: they change all the time, and anyone could."""
    files = {getattr(m, "__file__", None) for m in list(sys.modules.values())}
    files = {f for f in files if isinstance(f, str) and os.path.isabs(f)}
    dirs = {os.path.dirname(f) for f in files} | {p for p in sys.path if os.path.isdir(p)}
    return sorted(files | {d for d in dirs if not _anyones(d)})


def _anyones(folder: str) -> bool:
    try:
        return bool(os.stat(folder).st_mode & 0o002)
    except OSError:
        return True


def changed_since(paths: Iterable[str], t0_ns: int) -> str | None:
    """The first of `paths` whose status changed at or after `t0_ns` (time.time_ns());
    ctime, which no process can set back."""
    for p in paths:
        try:
            if os.lstat(p).st_ctime_ns >= t0_ns:
                return p
        except OSError:
            return p
    return None
