"""What a submission may use of minigraph: an allowlist of imports, and the library's own
answers refused while the student's function runs. Installed in the sandbox's child
(`submission.child_main`) before the file is read, so it holds for every graded path:
`python -m minigraph.grading`, Gradescope, the pytest plugin and nbgrader's re-grading
(course/sandboxed_score.py), which all grade through `sandbox.grade`.

Two layers (issue 50):

- **Imports** (`ALLOWED`): from minigraph a submission may import what its notebook hands
  the student (the check and `load_solution`, the example graph, A2's `Buffer` and
  validator, A3's `simulate`...) and `minigraph.errors`; numpy, math and the rest of the
  standard library are not restricted. `import x`, `from pkg import name`, `__import__`
  and `importlib.import_module` made by the file's own code (its frames, code it `exec`s)
  are checked; the library's imports of its own modules are not. Anything else raises
  `ForbiddenImport`, naming the import and what is allowed.
- **Calls** (`SOLVERS`): the functions that answer an assignment - A1's liveness, A2's
  planners (and `plan_memory`, the online allocators), A3's eviction heuristics - are
  changed in the child (their code object, so every reference to them is: the module's
  name, a registry's entry, `sys.modules[...]`, an attribute walk from an allowed module,
  `gc.get_objects()`, a frame of the grader) to refuse to run while the student's
  function runs or any frame of the file is on the stack: `ForbiddenCall`. The grader's
  own use (A3's demo runs at load time, the runtime) is not refused.

Either refusal, even one the file catches, makes the whole file "not graded" (score 0)
with the one-line reason (`refusal`).

What this does NOT stop, said plainly: it runs in the student's own process, so a file
that digs the library's code objects out of memory (`gc`, the guard's own table) and
rebuilds a function from them, or that switches these checks off through `sys.modules`
(and the tamper check with them: tests/test_grading.py's BYPASS), or that reads the
library's source from disk and `exec`s it, is not refused. Each is no cheaper than
pasting the library's code into the file, which no sandbox can tell from the student's
own work: comparing submissions with the library's code (a plagiarism check) is the
instructor's tool there (docs/teaching.md, "What the sandbox stops").
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import inspect
import mmap
import os
import site
import sys
import sysconfig
import types
from collections.abc import Callable, Iterable
from typing import Any

from ...errors import GradingError

ANY = frozenset({"*"})   # every name of the module

_COMMON: dict[str, frozenset[str]] = {
    "minigraph": frozenset({"Graph", "Node", "Tensor", "TensorInfo", "MinigraphError",
                            "GraphError", "PlanError", "ShapeError", "DTypeError"}),
    "minigraph.errors": ANY,
    "minigraph.graph": frozenset({"Graph", "Node", "Tensor", "TensorInfo"}),
    "minigraph.grading": frozenset({"load_solution"}),
    "minigraph.grading.cases": frozenset({"small_mlp_graph"}),
}
_EXTRA: dict[str, dict[str, frozenset[str]]] = {   # what each notebook imports besides
    "a1": {"minigraph.grading": frozenset({"check_liveness"}),
           "minigraph.ops.registry": frozenset({"get_op"})},    # which pairs an op declares
    "a2": {"minigraph": frozenset({"liveness", "Buffer", "theoretical_minimum"}),
           "minigraph.grading": frozenset({"check_planner"}),
           "minigraph.memory": frozenset({"Buffer", "theoretical_minimum",
                                          "validate_offsets"})},
    "a3": {"minigraph.examples": frozenset({"linear_chain"}),
           "minigraph.grading": frozenset({"HeuristicFault", "check_heuristic",
                                           "run_heuristic"}),
           "minigraph.grading.heuristic_grader": frozenset({"budget_for", "case_program",
                                                            "heuristic_cases"}),
           "minigraph.runtime.dtr": frozenset({"simulate"})},
}
#: assignment -> {module: the names a submission may import from it}
ALLOWED: dict[str, dict[str, frozenset[str]]] = {
    key: {m: _COMMON.get(m, frozenset()) | extra.get(m, frozenset())
          for m in (*_COMMON, *extra)} for key, extra in _EXTRA.items()}

#: assignment -> (what its solvers are called in a message, the modules whose functions
#: are its solvers, or "module:name" for single functions)
SOLVERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "a1": ("liveness and in-place functions", (
        "minigraph.memory.liveness", "minigraph.memory.inplace",
        "minigraph.grading.liveness_grader:handover_refusal")),
    "a2": ("planners", ("minigraph.memory.planners", "minigraph.memory.online",
                        "minigraph.memory.api:plan_memory")),
    "a3": ("eviction heuristics", (
        *(f"minigraph.runtime.dtr.heuristics:{n}" for n in (
            "dtr", "dtr_live", "dtr_eqclass", "dtr_local", "msps", "msps_stale", "lru",
            "size", "megengine", "coop_cost", "auto_choice", "_auto_pick")),
        "minigraph.runtime.dtr.minimal:h_dtr", "minigraph.runtime.dtr.minimal:eval_func")),
}


class ForbiddenImport(GradingError, ImportError):
    """A submission imported (or reached through an allowed module's name) a part of
    minigraph that its assignment does not allow; the message names it and what is."""


class ForbiddenCall(GradingError):
    """A submission's code ran one of the library's own answers to its assignment."""


def allowed_text(assignment: str) -> str:
    """What a submission for `assignment` may import from minigraph, in one line."""
    parts = [f"{m} ({'any name' if names == ANY else ', '.join(sorted(names))})"
             for m, names in sorted(ALLOWED[assignment].items())]
    return (f"a submission for {assignment.upper()} may import from minigraph only "
            f"{'; '.join(parts)}; numpy, math and the standard library are not restricted")


def check_import(assignment: str, module: str, fromlist: Iterable[str] = ()) -> str | None:
    """Why `from module import fromlist` (or `import module`) is refused, or None. A name
    of `fromlist` may be an allowed name of `module` or an allowed submodule."""
    if module != "minigraph" and not module.startswith("minigraph."):
        return None
    allowed = ALLOWED[assignment]
    names = [n for n in fromlist if isinstance(n, str)]
    if not names:
        if module in allowed:
            return None
        return f"your file imports {module}, which it may not: {allowed_text(assignment)}"
    for name in names:
        if f"{module}.{name}" in allowed:
            continue
        given = allowed.get(module, frozenset())
        if name == "*" and given != ANY:
            return (f"your file imports * from {module}, which it may not: "
                    f"{allowed_text(assignment)}")
        if given != ANY and name not in given:
            return (f"your file imports {module}.{name}, which it may not: "
                    f"{allowed_text(assignment)}")
    return None


# ---------------------------------------------------------------------------------------
# Whose code is running: the library's, the standard library's, or the file's
# ---------------------------------------------------------------------------------------

PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def _python_roots() -> list[str]:
    """Where the interpreter's own code lives: the standard library, site-packages."""
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots |= set(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        roots.add(site.getusersitepackages())
    return sorted(os.path.realpath(r) for r in roots if r)


class _State:
    assignment = ""
    inside = 0                       # > 0 while the student's function runs
    calls = False                    # the file has loaded: its calls are guarded
    top: types.FrameType | None = None   # child_main's frame: above it, the interpreter's start
    python: list[str] = []
    board: mmap.mmap | None = None   # the first refusal, shared with forked calls
    original_import: Callable[..., Any] = builtins.__import__
    original_gcd: Callable[..., Any] | None = None
    guarded: list[tuple[types.FunctionType, types.CodeType]] = []


def _kind(frame: types.FrameType) -> str:
    """"minigraph", "python" (the standard library, site-packages, importlib's frozen
    modules) or "file" (the submission's code, and code it exec'd)."""
    name = frame.f_code.co_filename
    if name.startswith("<frozen "):
        return "python"
    if _under(name, (PACKAGE,)) and not name.startswith("<"):
        return "minigraph"
    if name.startswith("<"):   # exec'd: whose globals? (a dataclass's __init__, say)
        mod = sys.modules.get(str(frame.f_globals.get("__name__", "")))
        if mod is not None and getattr(mod, "__dict__", None) is frame.f_globals and \
                _under(str(getattr(mod, "__file__", "") or ""), (PACKAGE, *_State.python)):
            return "minigraph"
        return "file"
    return "python" if _under(name, _State.python) else "file"


def _importer(frame: types.FrameType | None) -> str:
    """Who asks for an import: the first frame above `frame` that is not the standard
    library's (importlib, pkgutil... act for whoever called them)."""
    while frame is not None and frame is not _State.top:
        kind = _kind(frame)
        if kind != "python":
            return kind
        frame = frame.f_back
    return "minigraph"


def _file_on_stack(frame: types.FrameType | None) -> bool:
    while frame is not None and frame is not _State.top:
        if _kind(frame) == "file":
            return True
        frame = frame.f_back
    return False


# ---------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------

def _record(message: str) -> None:
    board = _State.board
    if board is not None and board[:1] == b"\0":
        data = message.encode("utf-8", "replace")[:len(board) - 1]
        board[:len(data)] = data


def refusal() -> str:
    """The first refusal of this child or of a call it forked ("" if none)."""
    board = _State.board
    if board is None:
        return ""
    return bytes(board).split(b"\0", 1)[0].decode("utf-8", "replace")


def _refuse_import(why: str) -> None:
    _record(f"ForbiddenImport: {why}")
    raise ForbiddenImport(why)


def _plain(name: Any, fromlist: Any, level: Any) -> tuple[Any, tuple, Any] | None:
    """The arguments as plain str / tuple / int (a subclass could answer the check one
    way and the import another), or None where they are not of those types (the import
    itself then raises)."""
    if not isinstance(name, str) or not isinstance(level, int):
        return None
    names = tuple(str.__add__("", n) if isinstance(n, str) else n for n in (fromlist or ()))
    return str.__add__("", name), names, int.__add__(0, level)


def _check(name: str, fromlist: tuple, level: int, frame: types.FrameType | None) -> None:
    """Refuse the import if the file's code asks for it and `check_import` says no; a
    relative import from the file is refused too (a file has no package: it could only
    name one of minigraph's through forged globals)."""
    if "minigraph" not in name and not level:
        return
    if _importer(frame) != "file":
        return
    if level:
        _refuse_import(f"your file makes a relative import ({'.' * level}{name}): a "
                       f"submission has no package; {allowed_text(_State.assignment)}")
    why = check_import(_State.assignment, name, fromlist)
    if why:
        _refuse_import(why)


def _guarded_import(name: Any, globals: Any = None, locals: Any = None,
                    fromlist: Any = (), level: Any = 0) -> Any:
    """builtins.__import__, checking the file's imports of minigraph."""
    plain = _plain(name, fromlist, level)
    if plain is None:
        return _State.original_import(name, globals, locals, fromlist, level)
    name, fromlist, level = plain
    _check(name, fromlist, level, sys._getframe(1))
    return _State.original_import(name, globals, locals, fromlist, level)


def _guarded_gcd(name: Any, package: Any = None, level: Any = 0) -> Any:
    """importlib's _gcd_import (what import_module and importlib.__import__ call)."""
    plain = _plain(name, (), level)
    if plain is None:
        return _State.original_gcd(name, package, level)
    name, _, level = plain
    _check(name, (), level, sys._getframe(1))
    return _State.original_gcd(name, package, level)


def student(fn: Callable) -> Callable:
    """`fn` (the student's function) marked as running while it runs: the library's
    solvers refuse to run inside it, whatever `fn` is (a partial of one included)."""
    def call(*args: Any, **kwargs: Any) -> Any:
        _State.inside += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _State.inside -= 1
    call.__name__ = getattr(fn, "__name__", "student")
    call.__qualname__ = call.__name__
    call.__doc__ = getattr(fn, "__doc__", None)
    return call


def guarded_call(index: int, args: tuple, kwargs: dict) -> Any:
    """The body every solver has in the child: refuse, or run its own code."""
    fn, code = _State.guarded[index]
    if _State.calls and (_State.inside or _file_on_stack(sys._getframe(2))):
        what, _ = SOLVERS[_State.assignment]
        why = (f"your file ran {fn.__module__}.{fn.__qualname__}, one of minigraph's "
               f"{what}: a submission for {_State.assignment.upper()} computes its answer "
               f"itself ({allowed_text(_State.assignment)})")
        _record(f"ForbiddenCall: {why}")
        raise ForbiddenCall(why)
    run = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__)
    run.__kwdefaults__ = fn.__kwdefaults__
    run.__qualname__ = fn.__qualname__
    return run(*args, **kwargs)


_KEY = "__minigraph_guard_index__"


def _stub(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202  only its code object is used
    return __import__("minigraph.grading.sandbox.imports", None, None,
                      ("guarded_call",)).guarded_call("__minigraph_guard_index__",
                                                      args, kwargs)


def _guard(fn: Any) -> None:
    """Give `fn` the stub's code (a function with a closure is left as it is)."""
    if not isinstance(fn, types.FunctionType) or fn.__closure__ or \
            any(fn is g for g, _ in _State.guarded):
        return
    index = len(_State.guarded)
    try:
        fn.__signature__ = inspect.signature(fn)   # introspection sees the real one
    except (TypeError, ValueError):
        pass
    _State.guarded.append((fn, fn.__code__))
    stub = _stub.__code__
    fn.__code__ = stub.replace(
        co_consts=tuple(index if c == _KEY else c for c in stub.co_consts),
        co_name=fn.__code__.co_name, co_qualname=fn.__code__.co_qualname)


def _solvers(assignment: str) -> Iterable[Any]:
    """Every function (and method) that answers `assignment`, from the loaded modules."""
    for where in SOLVERS[assignment][1]:
        module, _, name = where.partition(":")
        if name:
            mod = sys.modules.get(module)
            if mod is not None and hasattr(mod, name):
                yield getattr(mod, name)
            continue
        for mod_name, mod in list(sys.modules.items()):
            if mod is None or not (mod_name == module or mod_name.startswith(module + ".")):
                continue
            for value in list(vars(mod).values()):
                if getattr(value, "__module__", None) != mod_name:
                    continue
                if isinstance(value, type):
                    for attr in vars(value).values():
                        yield getattr(attr, "__func__", attr)
                else:
                    yield value


def install(assignment: str, top: types.FrameType | None = None) -> None:
    """In the child, before the file is read: check its imports, guard the solvers of
    `assignment` ("a1", "a2", "a3"). `top` is the frame above which the interpreter's
    own start runs (child_main's)."""
    _State.assignment = assignment
    _State.top = top
    _State.python = _python_roots()
    _State.board = mmap.mmap(-1, 4096)   # anonymous, shared with forked children
    for fn in _solvers(assignment):
        _guard(fn)
    _State.original_import = builtins.__import__
    builtins.__import__ = _guarded_import
    bootstrap = importlib._bootstrap   # type: ignore[attr-defined]
    _State.original_gcd = bootstrap._gcd_import
    bootstrap._gcd_import = _guarded_gcd


def loaded() -> None:
    """The file has loaded: from now on the solvers refuse to run for it."""
    _State.calls = True
