"""The reading path: the textbook modules a student opens, in lesson order, with their sizes.

    python benchmarks/reading_path.py            # the table (markdown)
    python benchmarks/reading_path.py --check    # exit 1 unless docs/ARCHITECTURE.md holds
                                                 # this very table and the path keeps its limits

Each lesson names these modules; each is the plain version of one idea (the textbook tier),
and where the engine room has a faster or larger twin the lesson names it too. The limits
keep the path readable: the whole path under 4,500 lines, no file over 300 lines, and none
of the NumPy index tricks the engine room uses (`searchsorted`, `as_strided`, `np.add.at`,
integers packed in arrays...) on it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
MAX_TOTAL, MAX_FILE = 4500, 300

# (lesson, modules in the order the lesson reads them). The one list: the lesson test checks
# that each lesson names its modules (or a module it names imports them), that every
# textbook module a lesson imports is on it, and ARCHITECTURE.md shows the table printed
# from it. A module stands at the first lesson that reads it.
PATH = [
    ("01 graphs and backward", ["minigraph/tensor.py", "minigraph/graph.py",
                                "minigraph/graph_data.py", "minigraph/ops/registry.py",
                                "minigraph/autodiff.py"]),
    ("02 liveness", ["minigraph/memory/liveness.py", "minigraph/memory/buffers.py"]),
    ("03 in-place and refcount", ["minigraph/memory/inplace.py",
                                  "minigraph/memory/planners/basic.py"]),
    ("04 colouring", ["minigraph/memory/coloring.py", "minigraph/memory/safe_sharing.py",
                      "minigraph/memory/plan.py"]),
    ("05 GE reuse", ["minigraph/memory/planners/ge.py"]),
    ("05b topological orders", ["minigraph/memory/topo.py", "minigraph/memory/orders.py"]),
    ("06 offset planning", ["minigraph/memory/planners/__init__.py",
                            "minigraph/memory/planners/greedy.py",
                            "minigraph/memory/planners/bestfit.py",
                            "minigraph/memory/planners/anneal.py",
                            "minigraph/memory/planners/ilp.py"]),
    ("07 DTR", ["minigraph/runtime/dtr/minimal.py", "minigraph/runtime/dtr/program.py"]),
    ("07d memory swap", ["minigraph/memory/swap.py"]),
    ("08 the executor, on a GPU", ["minigraph/runtime/executor.py",
                                   "minigraph/runtime/kernels.py"]),
]

# The engine room: fast or research twins behind the textbook's functions. No module on the
# path imports one of these (tests/test_architecture.py).
ENGINE_ROOM = ("minigraph/memory/planners/engine/", "minigraph/ops/cuda",
               "minigraph/runtime/dtr/runtime.py", "minigraph/runtime/dtr/releases.py",
               "minigraph/runtime/dtr/room.py", "minigraph/runtime/dtr/eviction.py",
               "minigraph/runtime/dtr/hostswap.py", "minigraph/runtime/dtr/allocator.py",
               "minigraph/runtime/dtr/coop_inplace.py", "minigraph/runtime/dtr/modes.py",
               "minigraph/dtr_research/")

# The layers above the textbook (what runs, measures and draws techniques; the lessons'
# own checks; the face): a lesson imports them to show results, not to be read.
ABOVE = ("minigraph/experiments/", "minigraph/viz/", "minigraph/lessons/",
         "minigraph/fromtorch/", "minigraph/tour.py", "minigraph/cli.py")

# Modules of the lower layers that lessons import but that are not on the path, each with
# the reason. Anything else a lesson imports from below `ABOVE` must be on the path.
AROUND = {
    "minigraph/examples.py": "the source articles' example graphs: data, not a technique",
    "minigraph/models.py": "the model zoo: data, not a technique",
    "minigraph/memory/instances.py": "worked examples and test problems: data",
    "minigraph/feeds.py": "random feeds and parameter init, to run a graph",
    "minigraph/backend.py": "NumPy or CuPy: named in lesson 08 beside the executor",
    "minigraph/memory/planners/joint.py": "MODeL's joint order-and-layout program: research, "
                                         "lesson 06 section 6 runs it by name",
    "minigraph/memory/online/": "lessons 09 and 09b's allocator simulators (not yet a path "
                                 "row)",
    "minigraph/errors.py": "the typed errors, each read where it is raised",
    "minigraph/memory/swap_plan.py": "turns swap.py's choice into a plan the one validator "
                                     "proves: plumbing around the idea lesson 07d reads",
    "minigraph/runtime/dtr/__init__.py": "the DTR package's names, gathered",
    "minigraph/runtime/dtr/heuristics.py": "every eviction score, one small function each: "
                                           "lesson 07 reads the ones it names",
    "minigraph/runtime/dtr/options.py": "the one set of DTR options (DTROptions): data",
}

# NumPy index tricks, which the engine room uses for speed and a textbook module must not:
# sorted-array searches, strided views, unbuffered scatter-adds, integers packed in arrays.
TRICKS = re.compile(r"searchsorted|argsort|lexsort|as_strided|np\.add\.at|np\.bitwise_|"
                    r"packbits|np\.cumsum|np\.unique|np\.left_shift")


def lines_of(path: str) -> int:
    return len((ROOT / path).read_text().splitlines())


def table() -> str:
    rows = ["| lesson | module | lines |", "| --- | --- | ---: |"]
    for lesson, modules in PATH:
        for k, m in enumerate(modules):
            rows.append(f"| {lesson if k == 0 else ''} | `{m}` | {lines_of(m)} |")
    total = sum(lines_of(m) for _, ms in PATH for m in ms)
    rows.append(f"| **the whole path** | | **{total}** |")
    return "\n".join(rows)


def problems() -> list[str]:
    """What breaks the path's limits (empty when it holds)."""
    out = []
    modules = [m for _, ms in PATH for m in ms]
    total = sum(lines_of(m) for m in modules)
    if total >= MAX_TOTAL:
        out.append(f"the path has {total} lines, the limit is {MAX_TOTAL}")
    for m in modules:
        if lines_of(m) > MAX_FILE:
            out.append(f"{m} has {lines_of(m)} lines, the limit is {MAX_FILE}")
        for k, text in enumerate((ROOT / m).read_text().splitlines(), 1):
            code = text.split("#", 1)[0]
            if TRICKS.search(code) and not code.lstrip().startswith(('"', "'")):
                out.append(f"{m}:{k}: an engine-room trick on the reading path: "
                           f"{text.strip()}")
    out += [f"{m} is imported by a lesson but is not on the path" for m in unlisted()]
    if table() not in ARCHITECTURE.read_text():
        out.append("docs/ARCHITECTURE.md does not hold the current table (paste the output "
                   "of `python benchmarks/reading_path.py`)")
    return out


def lesson_imports() -> dict[str, set[str]]:
    """The modules each lesson (lessons/src/NN_*.py) imports from minigraph, by file:
    `from minigraph.memory import Buffer` counts as the module that defines `Buffer`."""
    import ast
    import importlib
    import inspect
    sys.path.insert(0, str(ROOT))
    out: dict[str, set[str]] = {}
    for p in sorted((ROOT / "lessons" / "src").glob("[0-9]*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "minigraph")):
                continue
            mod = importlib.import_module(node.module)
            for alias in node.names:
                obj = getattr(mod, alias.name, None)
                if obj is None:                     # a submodule not imported yet
                    obj = importlib.import_module(f"{node.module}.{alias.name}")
                home = obj if inspect.ismodule(obj) else \
                    sys.modules.get(getattr(obj, "__module__", None) or "", mod)
                out.setdefault(p.name, set()).add(
                    Path(home.__file__).resolve().relative_to(ROOT).as_posix())
    return out


def unlisted() -> list[str]:
    """Modules a lesson imports that are neither on the path, nor above the textbook,
    nor in the engine room, nor in `AROUND` with a reason."""
    on_path = {m for _, ms in PATH for m in ms}
    skip = ABOVE + ENGINE_ROOM + tuple(AROUND)
    return sorted(f"{lesson}: {m}" for lesson, mods in lesson_imports().items()
                  for m in mods if m not in on_path and not m.startswith(skip)
                  and m != "minigraph/__init__.py")


def main(argv: list[str]) -> int:
    if "--check" in argv:
        bad = problems()
        print("\n".join(bad) if bad else "the reading path holds")
        return 1 if bad else 0
    print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
