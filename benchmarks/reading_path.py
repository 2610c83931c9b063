"""The reading path: the textbook modules a student opens, in lesson order, with their sizes.

    python benchmarks/reading_path.py            # the table (markdown)
    python benchmarks/reading_path.py --check    # exit 1 unless docs/ARCHITECTURE.md holds
                                                 # this very table and the path keeps its limits

Each lesson names these modules; each is the plain version of one idea (the textbook tier),
and where the engine room has a faster or larger twin the lesson names it too. The limits
keep the path readable: the whole path under 4,000 lines, no file over 300 lines, and none
of the NumPy index tricks the engine room uses (`searchsorted`, `as_strided`, `np.add.at`,
integers packed in arrays...) on it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
MAX_TOTAL, MAX_FILE = 4000, 300

# (lesson, modules in the order the lesson reads them). The one list: the lesson test checks
# that each lesson names its modules, and ARCHITECTURE.md shows the table printed from it.
PATH = [
    ("01 graphs and backward", ["minigraph/tensor.py", "minigraph/graph.py",
                                "minigraph/ops/registry.py", "minigraph/autodiff.py"]),
    ("02 liveness", ["minigraph/memory/liveness.py"]),
    ("03 in-place and refcount", ["minigraph/memory/inplace.py",
                                  "minigraph/memory/planners/basic.py"]),
    ("04 colouring", ["minigraph/memory/coloring.py", "minigraph/memory/safe_sharing.py"]),
    ("05 GE reuse", ["minigraph/memory/planners/ge.py"]),
    ("06 offset planning", ["minigraph/memory/planners/greedy.py",
                            "minigraph/memory/planners/bestfit.py",
                            "minigraph/memory/planners/anneal.py",
                            "minigraph/memory/planners/ilp.py"]),
    ("07 DTR", ["minigraph/runtime/dtr/minimal.py"]),
    ("08 the executor, on a GPU", ["minigraph/runtime/executor.py",
                                   "minigraph/runtime/kernels.py"]),
]

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
    if table() not in ARCHITECTURE.read_text():
        out.append("docs/ARCHITECTURE.md does not hold the current table (paste the output "
                   "of `python benchmarks/reading_path.py`)")
    return out


def main(argv: list[str]) -> int:
    if "--check" in argv:
        bad = problems()
        print("\n".join(bad) if bad else "the reading path holds")
        return 1 if bad else 0
    print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
