"""A student's FILE, imported and called only in a child process (`Submission`).

Importing a submission in the grader's own process lets it decide its own grade: it can
replace the grader's checks, `os._exit(0)` before any report, or hang at import. So
`grade()` (and `python -m minigraph.grading`, and the pytest plugin) start a fresh
interpreter (`sys.executable`) under a memory limit (RLIMIT_AS, where the OS has it)
that imports the file and then answers one request per call: the arguments go in
(pickled: parent to child only), the plain result comes back as one line of tagged JSON
(never pickle: unpickling the child's bytes would run its code here). In the child each
call runs in a forked process with the case's time limit, as `run_case` does for any
function; the parent bounds the loading, each answer and the whole session, so an exit,
a crash, a hang or garbage fails the case with the reason. Nothing that comes back is
trusted: the checks judge it in the parent (validator, re-execution, DTR replay).
"""

from __future__ import annotations

import json
import math
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import GradingError
from ..graph import Graph
from . import heuristic_grader, liveness_grader, planner_grader
from .cases import PRIVATE_ENV, PRIVATE_SEED_ENV, graph_from_json, graph_to_json
from .runner import Garbage, Outcome, Remote, run_case, scaled
from .tamper import changed_names, snapshot, source_tampering

LOAD_TIME_LIMIT = 60.0       # seconds to start the child and import the file, scaled
ANSWER_SLACK = 10.0          # seconds past a call's own limit before the child is hung, scaled
SESSION_TIME_LIMIT = 900.0   # seconds of one child's whole life, scaled
MEMORY_LIMIT = 4 << 30       # bytes of address space for the child (RLIMIT_AS)
MAX_MESSAGE = 64 << 20       # bytes of one answer; a longer one is garbage
SOLUTION_ENV = "MINIGRAPH_SOLUTION"
STATUSES = ("ok", "error", "timeout", "crash")
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
    process started on the first call. `problem` says why it cannot be called any more
    (the file did not load, the child exited, hung or sent garbage); each call then
    returns at once with that reason. Use it as a context manager, or `close()` it."""

    def __init__(self, path: str | os.PathLike, name: str, *,
                 load_time_limit: float | None = None,
                 session_time_limit: float | None = None,
                 memory_limit: int | None = MEMORY_LIMIT):
        self.path = Path(path).resolve()
        if not self.path.is_file():
            raise FileNotFoundError(f"no such solution file: {self.path}")
        self.__name__ = name
        self.load_time_limit = scaled(LOAD_TIME_LIMIT) if load_time_limit is None \
            else load_time_limit
        self.session_time_limit = scaled(SESSION_TIME_LIMIT) if session_time_limit is None \
            else session_time_limit
        self.memory_limit = memory_limit
        self.problem = ""
        self.calls = 0
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue = queue.Queue()
        self._deadline = math.inf
        self._log: Any = None

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
        import tempfile
        self._log = tempfile.TemporaryFile()
        env = {k: v for k, v in os.environ.items()
               if k not in (SOLUTION_ENV, PRIVATE_ENV, PRIVATE_SEED_ENV)}
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                   PYTHONUNBUFFERED="1")
        code = "from minigraph.grading.sandbox import child_main; child_main()"
        cmd = [sys.executable, "-c", code, str(self.path), self.__name__,
               str(self.memory_limit or 0)]
        t0 = time.monotonic()
        self._deadline = t0 + self.session_time_limit
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._log, env=env,
                                      start_new_session=os.name == "posix")
        threading.Thread(target=_read_lines, args=(self._proc.stdout, self._lines),
                         daemon=True).start()
        msg = self._answer(t0 + self.load_time_limit, "loading your file",
                           self.load_time_limit)
        if msg is None:
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
        """Stop the child (and whatever it forked)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            _kill(proc)
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
        if self._log is not None:
            self._log.close()
            self._log = None

    def _fail(self, why: str) -> None:
        self.problem = self.problem or why
        proc = self._proc
        if proc is not None:
            _kill(proc)

    def log_tail(self, limit: int = 1500) -> str:
        """The end of what the child wrote to stdout and stderr (prints, tracebacks)."""
        if self._log is None:
            return ""
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(max(0, size - limit))
        return self._log.read().decode("utf-8", "replace")

    def _answer(self, deadline: float, doing: str, allowed: float = 0.0) -> dict | None:
        """The child's next message (a dict), or None with `problem` set."""
        session = deadline >= self._deadline
        deadline = min(deadline, self._deadline)
        try:
            line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            what = (f"the session's total time limit of {self.session_time_limit:g} s"
                    if session else f"{allowed:g} s")
            self._fail(f"{doing} did not finish within {what}: the grading process was "
                       "killed")
            return None
        if line is None:
            proc = self._proc
            if proc is not None:
                _kill(proc, grace=2.0)   # it closed its answers: whatever is left goes
            code = proc.returncode if proc is not None else None
            why = (f"exit code {code}" if code is None or code >= 0
                   else f"killed by signal {-code}")
            tail = self.log_tail(600).strip()
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
            self._fail(f"the grading process sent garbage while {doing}: {line[:60]!r}")
            return None
        if not isinstance(msg, dict):
            self._fail(f"the grading process sent garbage while {doing}: {line[:60]!r}")
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
        t0 = time.monotonic()
        if not self._send(pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL),
                          t0 + scaled(ANSWER_SLACK)):
            return Outcome("lost", error=self.problem, seconds=time.monotonic() - t0)
        slack = scaled(ANSWER_SLACK)
        msg = self._answer(t0 + time_limit + slack, "running your function",
                           time_limit + slack)
        if msg is None:
            status = "timeout" if "did not finish" in self.problem else "lost"
            return Outcome(status, error=self.problem, seconds=time.monotonic() - t0)
        try:
            if msg.get("id") != ident:
                raise GradingError(f"an answer to call {msg.get('id')!r}, not {ident}")
            return outcome_from_wire(msg.get("outcome"))
        except (GradingError, RecursionError) as e:
            self._fail(f"the grading process sent garbage: {e}")
            return Outcome("lost", error=self.problem, seconds=time.monotonic() - t0)

    def _send(self, data: bytes, deadline: float) -> bool:
        """Write one request; a child that does not read it in time is hung."""
        proc = self._proc
        done: list[BaseException | None] = []

        def write() -> None:
            try:
                proc.stdin.write(len(data).to_bytes(8, "little") + data)
                proc.stdin.flush()
                done.append(None)
            except BaseException as e:   # noqa: BLE001  reported below
                done.append(e)

        th = threading.Thread(target=write, daemon=True)
        th.start()
        th.join(max(0.0, min(deadline, self._deadline) - time.monotonic()))
        if not done:
            self._fail("the grading process stopped reading its requests: killed")
            return False
        if done[0] is not None:
            self._answer(time.monotonic() + 1.0, "taking a request")   # sets `problem`
            self._fail(f"the grading process stopped reading its requests ({done[0]})")
            return False
        return True


def _read_lines(stream: Any, lines: queue.Queue) -> None:
    try:
        while True:
            line = stream.readline(MAX_MESSAGE + 1)
            if not line:
                break
            lines.put(line)
            if len(line) > MAX_MESSAGE:
                break
    except (OSError, ValueError):
        pass
    lines.put(None)


def _kill(proc: subprocess.Popen, grace: float = 0.0) -> None:
    """Kill the child and its process group (the processes it forked per call), then reap
    it; `grace` seconds to end on its own first (its exit code is then its own). The
    group is signalled only while the child is not yet reaped: until then its pid, the
    group's id, cannot belong to anyone else."""
    if proc.returncode is None:
        end = time.monotonic() + grace
        while hasattr(os, "waitid") and time.monotonic() < end:
            try:      # exited? (WNOWAIT: without reaping it)
                if os.waitid(os.P_PID, proc.pid,
                             os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    break
            except ChildProcessError:
                break
            time.sleep(0.02)
        try:
            if os.name == "posix":
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except OSError:
            pass
    try:
        proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        pass


# ---------------------------------------------------------------------------------------
# The child's side
# ---------------------------------------------------------------------------------------

def submission_source(path: Path) -> str:
    """The code a submission runs: a .py file's text, a notebook's graded cells."""
    if path.suffix == ".ipynb":
        from . import notebook_source  # grading/__init__ imports this module: not at the top
        try:
            return notebook_source(path)
        except (ValueError, KeyError, TypeError):   # not a notebook: loading will say so
            return ""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _limit_memory(nbytes: int) -> None:
    if nbytes <= 0:
        return
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = nbytes if hard == resource.RLIM_INFINITY else min(nbytes, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ImportError, ValueError, OSError):   # no such limit on this OS
        pass


def _resolve(where: str | None) -> Callable | None:
    """The grading function "module:name" (a module of this package) a request names."""
    if where is None:
        return None
    modules = dict(zip(GRADING_MODULES, (heuristic_grader, liveness_grader, planner_grader)))
    module, _, name = where.partition(":")
    return getattr(modules[module], name)


def child_main() -> None:
    """The child: import the file, then answer requests until stdin closes. Requests are
    8 bytes of length + a pickle; answers are lines of JSON on the original stdout (the
    student's prints go to stderr)."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    path, name, memory = sys.argv[1], sys.argv[2], int(sys.argv[3])
    _limit_memory(memory)

    def send(msg: dict) -> None:
        out.write(json.dumps(msg, allow_nan=True) + "\n")
        out.flush()

    from . import load_function  # grading/__init__ imports this module: not at the top
    before = snapshot()
    try:
        fn = load_function(path, name)
    except BaseException as e:   # noqa: BLE001  SystemExit at import included
        send({"load_error": f"{type(e).__name__}: {e}"[:2000],
              "traceback": traceback.format_exc()[-3000:]})
        return
    send({"ready": True, "changed": changed_names(before)})
    stdin = sys.stdin.buffer
    while True:
        head = stdin.read(8)
        if len(head) < 8:
            return
        req = pickle.loads(stdin.read(int.from_bytes(head, "little")))
        target = _resolve(req["target"])
        args, kwargs = _unpack(req["args"]), _unpack(req["kwargs"])
        if target is not None:
            o = run_case(target, (fn, *args), kwargs, time_limit=req["time_limit"])
        else:
            o = run_case(fn, args, kwargs, time_limit=req["time_limit"])
        send({"id": req["id"], "outcome": {
            "status": o.status, "value": to_wire(o.value), "error": o.error,
            "error_type": o.error_type, "traceback": o.traceback, "printed": o.printed,
            "seconds": o.seconds}})
