"""A student's FILE, imported and called only in a child process (`Submission`).

Importing a submission in the grader's own process lets it decide its own grade: it can
replace the grader's checks, `os._exit(0)` before any report, or hang at import. So
`grade()` (and `python -m minigraph.grading`, and the pytest plugin) start a fresh
interpreter (`sys.executable`), as isolated as the platform allows (`isolation`: another
user, bubblewrap's namespaces, a folder of its own, a clean environment, hard limits),
that imports the file and then answers one request per call: the arguments go in
(pickled: parent to child only), the plain result comes back as one line of tagged JSON
(never pickle: unpickling the child's bytes would run its code here). In the child each
call runs in a forked process with the case's time limit, as `run_case` does for any
function; the parent bounds the loading, each answer and the whole session, so an exit,
a crash, a hang or garbage fails the case with the reason. Nothing that comes back is
trusted: the checks judge it in the parent (validator, re-execution, DTR replay). When
the session closes, every process the file started is killed before the grade is final.
"""

from __future__ import annotations

import errno
import json
import math
import os
import pickle
import queue
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import GradingError
from ...graph import Graph
from .. import heuristic_grader, liveness_grader, planner_grader
from ..cases import graph_from_json, graph_to_json
from ..loader import load_function, notebook_source
from ..reference import FUNCTIONS
from ..runner import Garbage, Outcome, Remote, run_case, scaled
from . import imports, isolation
from .tamper import changed_names, snapshot, source_tampering

LOAD_TIME_LIMIT = 60.0       # seconds to start the child and import the file, scaled
ANSWER_SLACK = 10.0          # seconds past a call's own limit before the child is hung, scaled
SESSION_TIME_LIMIT = 900.0   # seconds of one child's whole life, scaled
MEMORY_LIMIT = 4 << 30       # bytes of address space for the child (RLIMIT_AS)
MAX_MESSAGE = 64 << 20       # bytes of one answer; a longer one is garbage
STATUSES = ("ok", "error", "timeout", "crash")
PROCESS_LIMIT_TEXT = (f"your file's processes reached the sandbox's limit of "
                      f"{isolation.PROCESSES} processes and threads (a fork bomb?), so the "
                      "grading process could not start another: killed")
GRADING_MODULES = ("minigraph.grading.heuristic_grader", "minigraph.grading.liveness_grader",
                   "minigraph.grading.planner_grader")   # where a request's target may live


# ---------------------------------------------------------------------------------------
# The wire format: plain data as JSON with tags for what JSON lacks
# ---------------------------------------------------------------------------------------

def to_wire(x: Any, depth: int = 0) -> Any:
    """Plain data (what `runner.plain` makes) as JSON values: a tuple is {"t": [...]}, a
    dict {"d": [[key, value], ...]} (keys need not be strings), a Garbage {"g": [type,
    text]}; other values as they are."""
    if depth > 20:
        return {"g": ["?", "too deeply nested"]}
    if isinstance(x, Garbage):
        return {"g": [x.type_name, x.text]}
    if isinstance(x, tuple):
        return {"t": [to_wire(v, depth + 1) for v in x]}
    if isinstance(x, list):
        return [to_wire(v, depth + 1) for v in x]
    if isinstance(x, dict):
        return {"d": [[to_wire(k, depth + 1), to_wire(v, depth + 1)] for k, v in x.items()]}
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    return {"g": [type(x).__name__, "not plain data"]}


def from_wire(x: Any, depth: int = 0) -> Any:
    """The inverse of `to_wire`, checking every value: anything else raises GradingError."""
    if depth > 20:
        raise GradingError("an answer nested too deeply")
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, list):
        return [from_wire(v, depth + 1) for v in x]
    if isinstance(x, dict) and len(x) == 1:
        (tag, body), = x.items()
        if tag == "t" and isinstance(body, list):
            return tuple(from_wire(v, depth + 1) for v in body)
        if tag == "d" and isinstance(body, list) and all(
                isinstance(kv, list) and len(kv) == 2 for kv in body):
            out = {}
            for k, v in body:
                key = from_wire(k, depth + 1)
                try:
                    hash(key)
                except TypeError:
                    raise GradingError(f"a dict key that is not hashable: {key!r:.60}") \
                        from None
                out[key] = from_wire(v, depth + 1)
            return out
        if tag == "g" and isinstance(body, list) and len(body) == 2 and \
                all(isinstance(s, str) for s in body):
            return Garbage(body[0][:80], body[1][:200])
    raise GradingError(f"not a value of the answer format: {str(x)[:60]!r}")


def outcome_from_wire(d: Any) -> Outcome:
    """An `Outcome` from the child's answer, every field checked."""
    if not isinstance(d, dict) or d.get("status") not in STATUSES:
        raise GradingError(f"not an outcome: {str(d)[:60]!r}")

    def text(key: str, limit: int) -> str:
        v = d.get(key, "")
        return v[-limit:] if isinstance(v, str) else ""

    seconds = d.get("seconds", 0.0)
    ok_number = isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and \
        math.isfinite(seconds)
    return Outcome(d["status"], from_wire(d.get("value")), text("error", 2000),
                   text("error_type", 100), text("traceback", 4000), text("printed", 4000),
                   float(seconds) if ok_number else 0.0)


def _pack(x: Any) -> Any:
    """Arguments for pickling to the child: graphs (not picklable) as their JSON."""
    if isinstance(x, Graph):
        return {"__graph__": graph_to_json(x)}
    if isinstance(x, (list, tuple)):
        return type(x)(_pack(v) for v in x)
    if isinstance(x, dict):
        return {k: _pack(v) for k, v in x.items()}
    return x


def _unpack(x: Any) -> Any:
    if isinstance(x, dict) and set(x) == {"__graph__"}:
        return graph_from_json(x["__graph__"])
    if isinstance(x, (list, tuple)):
        return type(x)(_unpack(v) for v in x)
    if isinstance(x, dict):
        return {k: _unpack(v) for k, v in x.items()}
    return x


# ---------------------------------------------------------------------------------------
# The parent's side
# ---------------------------------------------------------------------------------------

class Submission(Remote):
    """The function `name` of the student's file `path` (.py or .ipynb), living in a child
    process started on the first call, as isolated as the platform allows
    (`isolation.jail()`): `hide` names paths it must not read (the reference solutions,
    the private cases). `problem` says why it cannot be called any more (the file did not
    load, the child exited, hung or sent garbage); each call then returns at once with
    that reason. `isolation` is the report's line when isolation is partial. Use it as a
    context manager, or `close()` it: only then is every process of the file gone."""

    def __init__(self, path: str | os.PathLike, name: str, *,
                 load_time_limit: float | None = None,
                 session_time_limit: float | None = None,
                 memory_limit: int | None = MEMORY_LIMIT,
                 hide: Sequence[str | os.PathLike] = ()):
        self.path = Path(path).resolve()
        if not self.path.is_file():
            raise FileNotFoundError(f"no such solution file: {self.path}")
        self.__name__ = name
        self.load_time_limit = scaled(LOAD_TIME_LIMIT) if load_time_limit is None \
            else load_time_limit
        self.session_time_limit = scaled(SESSION_TIME_LIMIT) if session_time_limit is None \
            else session_time_limit
        self.memory_limit = memory_limit
        self.hide = [str(p) for p in hide]
        self.problem = ""
        self.isolation = ""
        self.calls = 0
        self._proc: subprocess.Popen | None = None
        self._wire: _Wire | None = None
        self._deadline = math.inf
        self._log: Any = None
        self._folder = ""
        self._lock = False
        self._reaper: isolation.Reaper | None = None
        self._watch: list[str] = []
        self._t0_ns = 0

    def __repr__(self) -> str:
        return f"Submission({str(self.path)!r}, {self.__name__!r})"

    def __enter__(self) -> Submission:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # Starting, stopping ----------------------------------------------------------------
    def start(self) -> bool:
        """Start the child and wait until it has imported the file; False (and `problem`
        set) if it could not."""
        if self._proc is not None or self.problem:
            return not self.problem
        cheat = source_tampering(submission_source(self.path))
        if cheat:
            if self.path.suffix == ".ipynb":   # its lines are counted over every cell
                cheat = cheat.split(": ", 1)[1]
            self._fail(f"your file changes minigraph itself ({cheat})")
            return False
        jail = isolation.jail()
        self.isolation = jail.line
        self._lock = isolation.lock(jail)
        self._folder = isolation.make_folder(jail)
        copy = Path(self._folder) / self.path.name
        shutil.copyfile(self.path, copy)
        os.chmod(copy, 0o644)
        if jail.user and not jail.bwrap:
            isolation.hide(self.hide)
        if not jail.user and not jail.bwrap:   # it could change the grader's files
            self._watch = isolation.loaded_files()
        self._log = tempfile.TemporaryFile()
        config = isolation.child_config(jail, self.memory_limit or 0, self.session_time_limit)
        cmd, user = isolation.child_command(jail, f"{__name__}:child_main",
                                            [str(copy), self.__name__, config],
                                            self._folder, self.hide)
        env = isolation.environment(self._folder, jail.user[0] if jail.user else "student")
        self._reaper = isolation.Reaper(jail)
        down, up = os.pipe(), os.pipe()   # (read, write): requests down, answers up
        t0, self._t0_ns = time.monotonic(), time.time_ns()
        self._deadline = t0 + self.session_time_limit
        try:
            self._proc = subprocess.Popen(cmd, stdin=down[0], stdout=up[1], stderr=self._log,
                                          env=env, cwd=self._folder,
                                          start_new_session=os.name == "posix", **user)
        except OSError as e:
            os.close(down[1])
            os.close(up[0])
            self._fail(f"the grading process could not start: {e}")
            return False
        finally:
            os.close(down[0])
            os.close(up[1])
        self._wire = _Wire(down[1], up[0])
        isolation.Reaper.children.add(self._proc.pid)
        msg = self._answer(t0 + self.load_time_limit, "loading your file",
                           self.load_time_limit)
        if msg is None:
            return False
        refused = msg.get("refused")
        if isinstance(refused, str) and refused:
            self._fail(refused[:2000])
            return False
        if msg.get("ready") is True:
            changed = msg.get("changed")
            if isinstance(changed, list) and changed:
                self._fail("your file changes minigraph itself (it replaced "
                           f"{', '.join(map(str, changed[:5]))[:500]})")
                return False
            return True
        why = msg.get("load_error")
        if isinstance(why, str):
            tb = msg.get("traceback")
            self._fail(f"your file could not be loaded: {why[:1000]}" +
                       (f"\n{tb[-2000:]}" if isinstance(tb, str) and tb else ""))
        else:
            self._fail("the grading process sent garbage instead of saying it was ready")
        return False

    def close(self) -> None:
        """Stop the child and every process it started, wherever they went; then (as the
        grader's own user) check that the grader's files did not change meanwhile."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if not self._reaper.sweep(proc):
                self.problem = ("processes of your file could not be stopped: nothing it "
                                "answered counts")
            isolation.Reaper.children.discard(proc.pid)
        if self._reaper is not None:
            self._reaper.close()
            self._reaper = None
        if self._wire is not None:
            self._wire.close()
            self._wire = None
        if self._watch:
            changed = isolation.changed_since(self._watch, self._t0_ns)
            self._watch = []
            if changed:
                self.problem = (f"a file of the grader changed while your file ran "
                                f"({changed}): nothing it answered counts (instructor: "
                                "reinstall minigraph before grading again)")
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._folder:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = ""
        isolation.unlock(self._lock)
        self._lock = False

    def _fail(self, why: str) -> None:
        self.problem = self.problem or why
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()   # its other processes go in close()

    def log_tail(self, limit: int = 1500) -> str:
        """The end of what the child wrote to stdout and stderr (prints, tracebacks)."""
        if self._log is None:
            return ""
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(max(0, size - limit))
        return self._log.read().decode("utf-8", "replace")

    def _answer(self, deadline: float, doing: str, allowed: float = 0.0) -> dict | None:
        """The child's next message (a dict), or None with `problem` set. What the child
        printed is shown only when it ended while loading: later it may have seen cases,
        private ones included."""
        session = deadline >= self._deadline
        deadline = min(deadline, self._deadline)
        try:
            line = self._wire.recv_line(deadline)
        except TimeoutError:
            what = (f"the session's total time limit of {self.session_time_limit:g} s"
                    if session else f"{allowed:g} s")
            self._fail(f"{doing} did not finish within {what}: the grading process was "
                       "killed")
            return None
        if line is None:
            proc = self._proc
            if proc is not None:
                try:
                    proc.wait(timeout=2.0)   # it closed its answers: is it ending?
                except subprocess.TimeoutExpired:
                    pass
            code = proc.returncode if proc is not None else None
            why = (f"exit code {code}" if code is None or code >= 0
                   else f"killed by signal {-code}")
            if _process_limit(self.log_tail(20000)):   # not exiting: a fork bomb
                self._fail(PROCESS_LIMIT_TEXT)
                return None
            tail = self.log_tail(600).strip() if self.calls == 0 else ""
            self._fail(f"the grading process ended while {doing} ({why}; a submission "
                       "must not exit or kill it)" +
                       (f"; it printed:\n{tail}" if tail else ""))
            return None
        if len(line) > MAX_MESSAGE:
            self._fail(f"the grading process sent more than {MAX_MESSAGE} bytes")
            return None
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):
            msg = None
        if not isinstance(msg, dict):
            self._fail(f"the grading process sent garbage while {doing}")
            return None
        return msg

    # Calls -----------------------------------------------------------------------------
    def call(self, target: Callable | None, args: tuple, kwargs: Mapping,
             time_limit: float) -> Outcome:
        if not self.start():
            return Outcome("lost", error=self.problem)
        self.calls += 1
        ident = self.calls
        where = None
        if target is not None:
            where = f"{target.__module__}:{target.__qualname__}"
            if target.__module__ not in GRADING_MODULES or "." in target.__qualname__:
                raise GradingError(f"target {where}: only grading functions run a "
                                   "student's function")
        request = {"id": ident, "target": where, "args": _pack(tuple(args)),
                   "kwargs": _pack(dict(kwargs)), "time_limit": float(time_limit)}
        data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        t0 = time.monotonic()
        slack = scaled(ANSWER_SLACK)
        trouble = self._wire.send(len(data).to_bytes(8, "little") + data,
                                  min(t0 + slack, self._deadline))
        if trouble:
            if trouble != "timeout":   # it is gone: say how (sets `problem`)
                self._answer(time.monotonic() + 1.0, "taking a request")
            self._fail(f"the grading process stopped reading its requests ({trouble}): "
                       "killed")
            return Outcome("lost", error=self.problem, seconds=time.monotonic() - t0)
        msg = self._answer(t0 + time_limit + slack, "running your function",
                           time_limit + slack)
        if msg is None:
            status = "timeout" if "did not finish" in self.problem else "lost"
            return Outcome(status, error=self.problem, seconds=time.monotonic() - t0)
        refused, limit = msg.get("refused"), msg.get("limit")
        for why in (refused, limit):   # the file used what it may not, or forked to the end
            if isinstance(why, str) and why:
                self._fail(why[:2000])
                return Outcome("lost", error=self.problem, seconds=time.monotonic() - t0)
        try:
            if msg.get("id") != ident:
                raise GradingError(f"an answer to call {msg.get('id')!r}, not {ident}")
            return outcome_from_wire(msg.get("outcome"))
        except (GradingError, RecursionError):
            self._fail("the grading process sent garbage instead of an answer")
            return Outcome("lost", error=self.problem, seconds=time.monotonic() - t0)


def _process_limit(printed: str) -> bool:
    """Whether what the child printed says a process or thread could not start (EAGAIN:
    the sandbox's process limit), as a fork bomb makes it."""
    return any(k in printed for k in ("BlockingIOError: [Errno 11]", "can't start new thread",
                                      "Resource temporarily unavailable"))


class _Wire:
    """The child's two pipes seen from the grader: requests written and answer lines read
    with deadlines, never blocking past them (poll on POSIX, a reader thread elsewhere),
    and closed at once, whoever holds their other ends (a grandchild may)."""

    def __init__(self, write_fd: int, read_fd: int):
        self.w, self.r = write_fd, read_fd
        self.buf = bytearray()
        self.eof = False
        self.poll = hasattr(select, "poll")
        if self.poll:
            os.set_blocking(write_fd, False)
            os.set_blocking(read_fd, False)
        else:
            self.chunks: queue.Queue = queue.Queue()
            threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        try:
            while chunk := os.read(self.r, 1 << 16):
                self.chunks.put(chunk)
        except OSError:
            pass
        self.chunks.put(b"")

    @staticmethod
    def _ready(fd: int, event: int, deadline: float) -> bool:
        p = select.poll()
        p.register(fd, event)
        return bool(p.poll(max(0.0, deadline - time.monotonic()) * 1000))

    def recv_line(self, deadline: float) -> bytes | None:
        """The next line (a longer one than MAX_MESSAGE: its first part), None at the end,
        or TimeoutError past `deadline`."""
        while True:
            end = self.buf.find(b"\n")
            if end >= 0 or len(self.buf) > MAX_MESSAGE or (self.eof and self.buf):
                n = end + 1 if end >= 0 else len(self.buf)
                line = bytes(self.buf[:n])
                del self.buf[:n]
                return line
            if self.eof:
                return None
            if self.poll:
                if not self._ready(self.r, select.POLLIN, deadline):
                    raise TimeoutError
                try:
                    chunk = os.read(self.r, 1 << 20)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
            else:
                try:
                    chunk = self.chunks.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    raise TimeoutError from None
            self.eof = not chunk
            self.buf += chunk

    def send(self, data: bytes, deadline: float) -> str:
        """Write all of `data`: "" when done, "timeout" or the error otherwise."""
        if not self.poll:
            done: list[str] = []

            def write() -> None:
                try:
                    os.write(self.w, data)
                    done.append("")
                except OSError as e:
                    done.append(str(e))

            th = threading.Thread(target=write, daemon=True)
            th.start()
            th.join(max(0.0, deadline - time.monotonic()))
            return done[0] if done else "timeout"
        view = memoryview(data)
        while view:
            if not self._ready(self.w, select.POLLOUT, deadline):
                return "timeout"
            try:
                view = view[os.write(self.w, view):]
            except BlockingIOError:
                continue
            except OSError as e:
                return str(e)
        return ""

    def close(self) -> None:
        for fd in (self.w, self.r):
            try:
                os.close(fd)
            except OSError:
                pass


# ---------------------------------------------------------------------------------------
# The child's side
# ---------------------------------------------------------------------------------------

def submission_source(path: Path) -> str:
    """The code a submission runs: a .py file's text, a notebook's graded cells."""
    if path.suffix == ".ipynb":
        try:
            return notebook_source(path)
        except (ValueError, KeyError, TypeError):   # not a notebook: loading will say so
            return ""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _resolve(where: str | None) -> Callable | None:
    """The grading function "module:name" (a module of this package) a request names."""
    if where is None:
        return None
    modules = dict(zip(GRADING_MODULES, (heuristic_grader, liveness_grader, planner_grader)))
    module, _, name = where.partition(":")
    return getattr(modules[module], name)


def child_main() -> None:
    """The child: become the sandbox user, set the limits (`isolation.enter`), import the
    file, then answer requests until stdin closes. Requests are 8 bytes of length + a
    pickle; answers are lines of JSON on the original stdout (the student's prints go to
    stderr)."""
    path, name, config = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    isolation.enter(config)
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(msg: dict) -> None:
        out.write(json.dumps(msg, allow_nan=True) + "\n")
        out.flush()

    assignment = next((k for k, (f, _) in FUNCTIONS.items() if f == name), None)
    if assignment:   # what the file may import of minigraph, and call (`imports`)
        imports.install(assignment, sys._getframe())
    before = snapshot()
    try:
        fn = load_function(path, name)
    except BaseException as e:   # noqa: BLE001  SystemExit at import included
        refused = imports.refusal()
        send({"refused": refused} if refused else
             {"load_error": f"{type(e).__name__}: {e}"[:2000],
              "traceback": traceback.format_exc()[-3000:]})
        return
    refused = imports.refusal()   # refused, though the file caught it
    send({"refused": refused} if refused else
         {"ready": True, "changed": changed_names(before)})
    if refused:
        return
    imports.loaded()
    fn = imports.student(fn) if assignment else fn
    stdin = sys.stdin.buffer
    while True:
        head = stdin.read(8)
        if len(head) < 8:
            return
        req = pickle.loads(stdin.read(int.from_bytes(head, "little")))
        target = _resolve(req["target"])
        args, kwargs = _unpack(req["args"]), _unpack(req["kwargs"])
        try:
            if target is not None:
                o = run_case(target, (fn, *args), kwargs, time_limit=req["time_limit"])
            else:
                o = run_case(fn, args, kwargs, time_limit=req["time_limit"])
        except OSError as e:   # the call's process could not start: the file's took them
            if e.errno != errno.EAGAIN:
                raise
            send({"id": req["id"], "limit": PROCESS_LIMIT_TEXT})
            return
        send({"id": req["id"], "refused": imports.refusal(), "outcome": {
            "status": o.status, "value": to_wire(o.value), "error": o.error,
            "error_type": o.error_type, "traceback": o.traceback, "printed": o.printed,
            "seconds": o.seconds}})
