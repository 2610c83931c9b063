"""Running a student's function on one case: in a forked process, with a time limit.

(A student's FILE is never even imported in the grader's process: the sandbox wing's
`Submission` imports it in a child interpreter, which runs each call as below and sends
back plain data; `run_case` hands such a `Remote` function its calls.) A student's function is
never run in the grader's own process when the platform can fork:
each call gets a fresh child (a few milliseconds), so a hang is killed at the time limit,
a crash (even `os._exit`) is reported, global state a solution changes does not leak
into the next case, and whatever the function prints is captured for the report. The
child sends back only plain data (`plain()`); every judgement is made in the parent.
Where there is no fork (Windows), calls run in a daemon thread: a hang is still reported
on time, but the thread cannot be killed.

Time limits only guard against hangs. The default ones are scaled by `MINIGRAPH_TIME_SCALE`
(`time_scale()`) for a machine slower or busier than the one they were set on; a limit
given explicitly is taken as it is.
"""

from __future__ import annotations

import contextlib
import gc
import io
import math
import multiprocessing
import os
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

import numpy as np

from ..errors import GradingError

DEFAULT_TIME_LIMIT = 10.0   # seconds per case, times `time_scale()`
SHRINK_SECONDS = 20.0       # budget of a reproducer's shrinking, times `time_scale()`
TIME_SCALE_ENV = "MINIGRAPH_TIME_SCALE"


def time_scale() -> float:
    """The factor on the default time limits: `MINIGRAPH_TIME_SCALE` (default 1). A grading
    server under load raises it, and so does the test suite, which grades only reference
    solutions: a busy CI machine must not turn a slow correct run into a time-out."""
    text = os.environ.get(TIME_SCALE_ENV, "").strip()
    if not text:
        return 1.0
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise GradingError(f"{TIME_SCALE_ENV}={text!r}: expected a positive number, the "
                           "factor on the default time limits (e.g. 2)")
    return value


def scaled(seconds: float) -> float:
    """A default time limit on this machine: `seconds` x `time_scale()`."""
    return seconds * time_scale()


def _openblas_libraries() -> Iterator[Any]:
    """The OpenBLAS libraries loaded in this process (NumPy's, SciPy's), found in
    /proc/self/maps, as `ctypes.CDLL`s; none where that file does not exist (not Linux)."""
    import ctypes  # only when a check runs: importing the checks loads no foreign-call layer
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return
    for path in sorted(p for p in paths if p.startswith("/")):
        try:
            yield ctypes.CDLL(path)
        except OSError:
            continue


# (set, get) thread-count functions under the names OpenBLAS builds export.
_OPENBLAS_THREADS = [(f"{prefix}openblas_set_num_threads{suffix}",
                      f"{prefix}openblas_get_num_threads{suffix}")
                     for prefix in ("scipy_", "") for suffix in ("64_", "_64_", "")]


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the enclosed code with OpenBLAS on one thread, then restore its thread count.

    The graded models multiply small matrices, where threads do not pay; on a busy
    machine OpenBLAS's spinning threads made a grading run 5x slower (measured: 16 s
    instead of 1 s for ResNet-50 at 80%). Forked children inherit the setting, and the
    plain reference run is made under it too, so outputs are compared like with like.
    Where no OpenBLAS is found (another BLAS, not Linux) nothing changes."""
    import ctypes  # only when a check runs: importing the checks loads no foreign-call layer
    restore: list[tuple[Callable, int]] = []
    for lib in _openblas_libraries():
        for set_name, get_name in _OPENBLAS_THREADS:
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                set_fn, get_fn = getattr(lib, set_name), getattr(lib, get_name)
                get_fn.restype = ctypes.c_int
                restore.append((set_fn, get_fn()))
                set_fn(ctypes.c_int(1))
                break
    try:
        yield
    finally:
        for set_fn, n in restore:
            set_fn(ctypes.c_int(n))


@dataclass(frozen=True)
class Garbage:
    """Stands for a value that is not plain data (a generator, a lambda, an object...)."""
    type_name: str
    text: str

    def __repr__(self) -> str:
        return f"<{self.type_name}: {self.text}>"


@dataclass
class Outcome:
    """What came back from one call: a plain value, or why there is none."""
    status: str                 # "ok", "error", "timeout", "crash", "lost"
    value: Any = None
    error: str = ""             # exception type and message, or what went wrong
    error_type: str = ""        # e.g. "NotImplementedError"
    traceback: str = ""         # the student's part of the traceback
    printed: str = ""           # what the function printed
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def describe(self) -> str:
        if self.status == "error":
            return f"raised {self.error}"
        if self.status == "timeout":
            return f"did not finish within the time limit of {self.error}"
        if self.status == "crash":
            return f"crashed the worker process ({self.error})"
        if self.status == "lost":
            return f"could not be run: {self.error}"
        return "returned normally"


class Remote:
    """A function that lives in another process (the sandbox wing's `Submission`):
    `run_case` hands it the call instead of running anything here."""

    __name__ = "remote"

    def call(self, target: Callable | None, args: tuple, kwargs: Mapping,
             time_limit: float) -> Outcome:
        """`fn(*args)`, or `target(fn, *args)` with `target` a grading function, run
        over there; what came back, as an `Outcome` of plain data."""
        raise NotImplementedError


def plain(x: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    """`x` as plain data (int, float, str, bool, None, list, tuple, dict of those).

    Numbers from NumPy become Python numbers; a dataclass or an object with `offsets`
    (a `Placement`) or with `start`/`end`/`bytes` (an `Interval`) becomes a dict of its
    fields; anything else becomes a `Garbage` that names its type. Big or deep values
    are cut off, so a runaway result cannot stall the grader.
    """
    budget = budget if budget is not None else [200_000]
    budget[0] -= 1
    if budget[0] < 0 or depth > 8:
        return Garbage(type(x).__name__, "too large or too deeply nested")
    if x is None or isinstance(x, (bool, str)):
        return x if not isinstance(x, str) else x[:10_000]
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x)
    if isinstance(x, np.ndarray) and x.ndim <= 1 and x.size <= 100_000:
        return [plain(v, depth + 1, budget) for v in x.tolist()]
    if isinstance(x, (list, tuple)):
        out = [plain(v, depth + 1, budget) for v in x]
        return out if isinstance(x, list) else tuple(out)
    if isinstance(x, Mapping):
        return {_key(k): plain(v, depth + 1, budget) for k, v in x.items()}
    if is_dataclass(x) and not isinstance(x, type):
        return {"__type__": type(x).__name__,
                **{f.name: plain(getattr(x, f.name), depth + 1, budget) for f in fields(x)
                   if f.name not in ("value", "init")}}
    for attrs in (("offsets",), ("start", "end", "bytes")):
        if all(hasattr(x, a) for a in attrs):
            return {"__type__": type(x).__name__,
                    **{a: plain(getattr(x, a), depth + 1, budget) for a in attrs}}
    try:
        text = repr(x)[:80]
    except Exception:   # a broken __repr__ is the student's, not ours
        text = "?"
    return Garbage(type(x).__name__, text)


def _key(k: Any) -> Any:
    if isinstance(k, (str, int, np.integer)) and not isinstance(k, bool):
        return int(k) if isinstance(k, np.integer) else k
    if isinstance(k, tuple):
        return tuple(_key(v) for v in k)
    return Garbage(type(k).__name__, repr(k)[:40])


def _student_traceback(tb_text: str) -> str:
    """The traceback without the grader's own frames (those of this module)."""
    lines = tb_text.splitlines()
    keep, skipping = [], False
    for line in lines:
        if line.startswith('  File "'):
            skipping = __file__ in line
        if not skipping:
            keep.append(line)
    return "\n".join(keep[-30:])


def _call(fn: Callable, args: tuple, kwargs: dict, post: Callable | None,
          capture: bool = True) -> dict:
    """Run fn, capture prints and errors, return a picklable dict (runs in the child).

    `capture=False` leaves sys.stdout alone: redirecting it is process-wide, and a thread
    that outlives its time limit would keep everyone's prints until it ends."""
    out = io.StringIO()
    t0 = time.perf_counter()
    quiet = (contextlib.redirect_stdout(out), contextlib.redirect_stderr(out)) if capture \
        else (contextlib.nullcontext(), contextlib.nullcontext())
    try:
        with quiet[0], quiet[1], warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = fn(*args, **kwargs)
            if post is not None:
                value = post(value)
        return {"status": "ok", "value": plain(value), "printed": out.getvalue()[-4000:],
                "seconds": time.perf_counter() - t0}
    except BaseException as e:   # noqa: BLE001  SystemExit and KeyboardInterrupt included
        try:
            msg = str(e)
        except Exception:
            msg = "?"
        return {"status": "error", "error": f"{type(e).__name__}: {msg}"[:2000],
                "error_type": type(e).__name__,
                "traceback": _student_traceback(traceback.format_exc()),
                "printed": out.getvalue()[-4000:], "seconds": time.perf_counter() - t0}


def _child(conn, fn, args, kwargs, post) -> None:
    result = _call(fn, args, kwargs, post)
    try:
        conn.send(result)
    except Exception as e:   # an unpicklable value slipped through plain(): say so
        conn.send({"status": "error", "error": f"the result could not be sent back: {e}",
                   "error_type": "TypeError", "seconds": result.get("seconds", 0.0)})
    conn.close()


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def run_case(fn: Callable, args: tuple = (), kwargs: Mapping | None = None,
             time_limit: float | None = None, mode: str = "auto",
             post: Callable | None = None) -> Outcome:
    """Call `fn(*args, **kwargs)` (then `post` on its result, in the same place) with a
    time limit (default `DEFAULT_TIME_LIMIT`, scaled). `mode`: "process" (a forked child),
    "thread", "inline" (no limit: for debugging), or "auto" (process where the platform
    can fork). A `Remote` function (a student's file in its own process) is called there."""
    kwargs = dict(kwargs or {})
    if time_limit is None:
        time_limit = scaled(DEFAULT_TIME_LIMIT)
    if isinstance(fn, Remote):
        return fn.call(None, args, kwargs, time_limit)
    if mode == "auto":
        mode = "process" if can_fork() else "thread"
    t0 = time.perf_counter()
    if mode == "inline":
        return _outcome(_call(fn, args, kwargs, post))
    if mode == "thread":
        box: list[dict] = []
        th = threading.Thread(target=lambda: box.append(_call(fn, args, kwargs, post,
                                                              capture=False)),
                              daemon=True)
        th.start()
        th.join(time_limit)
        if not box:
            return Outcome("timeout", error=f"{time_limit:g} s (the thread keeps running)",
                           seconds=time.perf_counter() - t0)
        return _outcome(box[0])
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    with warnings.catch_warnings():   # Python >= 3.12 warns about fork in threaded kernels
        warnings.simplefilter("ignore", DeprecationWarning)
        proc = ctx.Process(target=_child, args=(send, fn, args, kwargs, post), daemon=True)
        gc.freeze()   # the child's garbage collector leaves the parent's objects alone,
        try:          # so it does not copy every page of the heap on write
            proc.start()
        finally:
            gc.unfreeze()
    send.close()
    result = None
    try:
        if recv.poll(time_limit):
            try:
                result = recv.recv()
            except (EOFError, OSError):
                result = None
        else:
            proc.kill()
            proc.join()
            return Outcome("timeout", error=f"{time_limit:g} s",
                           seconds=time.perf_counter() - t0)
    finally:
        recv.close()
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()
    if result is None:
        code = proc.exitcode
        why = f"exit code {code}" if code is None or code >= 0 else \
            f"killed by signal {-code}"
        return Outcome("crash", error=why, seconds=time.perf_counter() - t0)
    return _outcome(result)


def _outcome(d: dict) -> Outcome:
    return Outcome(d["status"], d.get("value"), d.get("error", ""), d.get("error_type", ""),
                   d.get("traceback", ""), d.get("printed", ""), d.get("seconds", 0.0))


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def ddmin(items: list, fails: Callable[[list], bool], max_tries: int = 200,
          seconds: float | None = None) -> list:
    """Shrink `items` to a smaller list on which `fails` still holds (delta debugging:
    drop halves, then quarters, ... then single items), within a budget of calls and of
    `seconds` (default `SHRINK_SECONDS`, scaled)."""
    deadline = time.perf_counter() + (scaled(SHRINK_SECONDS) if seconds is None else seconds)
    tries = 0
    n = 2
    while len(items) >= 2 and tries < max_tries and time.perf_counter() < deadline:
        chunk = -(-len(items) // n)
        reduced = False
        for k in range(0, len(items), chunk):
            rest = items[:k] + items[k + chunk:]
            tries += 1
            if fails(rest):
                items, n, reduced = rest, max(n - 1, 2), True
                break
            if tries >= max_tries or time.perf_counter() >= deadline:
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(2 * n, len(items))
    if len(items) == 1 and tries < max_tries and fails([]):
        return []
    return items
