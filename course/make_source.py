"""Write the nbgrader source notebooks: source/<a1|a2|a3>/<notebook>.ipynb, in this folder.

    cd course && python make_source.py

Each is the notebook the students have (lessons/assignments/AN_name.ipynb, built from
lessons/assignments/src/ with jupytext) with the stub of its solution cell replaced by the
reference solution of lessons/assignments/solutions/aN.py, between nbgrader's
`### BEGIN SOLUTION` and `### END SOLUTION`. `nbgrader generate_assignment aN` then turns the
region back into the stub (nbgrader_config.py gives it our stub's text), so the release is the
students' notebook again: nothing is copied by hand, and nothing can drift. The nbgrader
metadata (solution cell, locked cells, the check cell worth 100 points) is in the jupytext
sources; docs/teaching.md walks through a course round.
"""

from __future__ import annotations

import ast
import json
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]          # the repository (symlinks resolved)
ASSIGNMENTS = ROOT / "lessons" / "assignments"

#: assignment -> (notebook name, the function the student writes)
NOTEBOOKS = {"a1": ("A1_liveness", "my_liveness"),
             "a2": ("A2_planner", "my_planner"),
             "a3": ("A3_eviction", "my_heuristic")}

STUB = "# YOUR CODE HERE\nraise NotImplementedError"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


def solution_cell(nb: dict) -> dict:
    """The one cell of a notebook that nbgrader marks as the student's solution."""
    cells = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    if len(cells) != 1:
        raise ValueError(f"expected one nbgrader solution cell, found {len(cells)}")
    return cells[0]


def _source(cell: dict) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def solution_body(solution_file: Path, function: str) -> tuple[str, str]:
    """(def line, body) of `function` in a reference solution file. The body holds the file's
    other top-level code (imports, helpers) first, so that it fits inside the function."""
    text = solution_file.read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    fns = [s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == function]
    if len(fns) != 1:
        raise ValueError(f"{solution_file} defines no function {function}()")
    fn = fns[0]
    first = fn.body[0]
    has_doc = isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None),
                                                         ast.Constant) and isinstance(
                                                             first.value.value, str)
    start = (first.end_lineno if has_doc else fn.body[0].lineno - 1)   # 0-based first line
    body = textwrap.dedent("\n".join(lines[start:fn.end_lineno])).strip("\n")
    skip = set(range(fn.lineno - 1 - len(fn.decorator_list), fn.end_lineno))
    doc = tree.body[0] if (tree.body and isinstance(tree.body[0], ast.Expr)
                          and isinstance(tree.body[0].value, ast.Constant)) else None
    if doc is not None:
        skip |= set(range(doc.lineno - 1, doc.end_lineno))
    rest = "\n".join(ln for k, ln in enumerate(lines) if k not in skip).strip("\n")
    while "\n\n\n\n" in rest:
        rest = rest.replace("\n\n\n\n", "\n\n\n")
    def_line = lines[fn.lineno - 1]
    return def_line, (rest + "\n\n" + body if rest else body)


def fill_in(cell_source: str, solution_file: Path, function: str, markers: bool = True) -> str:
    """The solution cell's source with its stub replaced by the body of `function` from
    `solution_file` (between nbgrader's solution markers unless `markers` is False)."""
    def_line, body = solution_body(solution_file, function)
    stub_def = next(ln for ln in cell_source.splitlines() if ln.startswith(f"def {function}("))
    if ast.dump(ast.parse(def_line + " pass").body[0].args) != ast.dump(
            ast.parse(stub_def + " pass").body[0].args):
        raise ValueError(f"{solution_file}: `{def_line}` does not match the stub `{stub_def}`")
    indent = "    "
    stub = textwrap.indent(STUB, indent)
    if cell_source.count(stub) != 1:
        raise ValueError(f"the solution cell of {function} has no stub `{STUB!r}` to replace")
    region = ([BEGIN] if markers else []) + body.splitlines() + ([END] if markers else [])
    return cell_source.replace(stub, "\n".join(indent + ln if ln else ln for ln in region))


def source_notebook(assignment: str, solution_file: Path | None = None) -> dict:
    """The nbgrader source notebook of `assignment` ("a1", "a2", "a3") as JSON data."""
    name, function = NOTEBOOKS[assignment]
    nb = json.loads((ASSIGNMENTS / f"{name}.ipynb").read_text(encoding="utf-8"))
    cell = solution_cell(nb)
    cell["source"] = fill_in(_source(cell), solution_file
                             or ASSIGNMENTS / "solutions" / f"{assignment}.py", function)
    return nb


def main(args: list[str]) -> int:
    unknown = set(args) - set(NOTEBOOKS)
    if unknown:
        sys.exit(f"unknown assignment {sorted(unknown)[0]!r}: use {', '.join(NOTEBOOKS)}\n"
                 + __doc__)
    for assignment in args or NOTEBOOKS:
        name, _ = NOTEBOOKS[assignment]
        out = Path("source") / assignment / f"{name}.ipynb"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(source_notebook(assignment), indent=1, ensure_ascii=False)
                       + "\n", encoding="utf-8")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
