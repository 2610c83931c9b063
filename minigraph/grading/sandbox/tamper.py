"""Does a submission change minigraph itself? Looked for twice: in its source, and in the
child after it loaded.

The checks run in the grader's process, so a file that replaces, say,
`minigraph.grading.planner_grader.validity_problem` in its own (child) process changes nothing
that is judged. But a file that tries is cheating, and an instructor should hear so
rather than read an honest-looking score: such a file is not graded (it scores 0) and the
report names the line or the name it changed.

- `source_tampering` reads the source (a notebook's graded cells) with `ast` and finds an
  assignment, `del`, `setattr` or `delattr` on something imported from minigraph, or on
  `sys.modules`.
- `snapshot` / `changed_names` compare every attribute of every loaded `minigraph`
  module before and after the child imports the file: what the source hides (`exec`,
  `getattr` tricks) shows up there.
"""

from __future__ import annotations

import ast
import sys
import types

MUTATORS = ("setattr", "delattr")


def source_tampering(source: str) -> str | None:
    """"line N: <code>" for the first statement of `source` that changes an attribute of
    something imported from minigraph (or of `sys.modules`); None if there is none, or if
    the source does not parse (loading it will say why)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    ours = _names_bound_to_minigraph(tree)
    lines = source.splitlines()
    for node in ast.walk(tree):
        for target in _changed_targets(node):
            if _roots_in(target, ours):
                line = lines[node.lineno - 1].strip() if node.lineno <= len(lines) else ""
                return f"line {node.lineno}: {line[:120]}"
    return None


def _names_bound_to_minigraph(tree: ast.AST) -> set[str]:
    """Names the source binds to minigraph or to something imported from it."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "minigraph":
                    names.add(a.asname or "minigraph")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("minigraph"):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Assign) and _imports_minigraph(node.value):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _imports_minigraph(value: ast.AST) -> bool:
    """A call of importlib's `import_module` or of `__import__` on "minigraph..."."""
    return (isinstance(value, ast.Call) and bool(value.args)
            and isinstance(value.args[0], ast.Constant)
            and str(value.args[0].value).startswith("minigraph")
            and _call_name(value) in ("import_module", "__import__"))


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _changed_targets(node: ast.AST) -> list[ast.AST]:
    """What a statement writes into an object: attribute and item targets of assignments
    and `del`, and the object given to setattr/delattr."""
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    elif isinstance(node, ast.Delete):
        targets = node.targets
    elif isinstance(node, ast.Call) and _call_name(node) in MUTATORS and node.args:
        return [node.args[0]]
    else:
        return []
    flat: list[ast.AST] = []
    for t in targets:
        flat.extend(t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])
    return [t for t in flat if isinstance(t, (ast.Attribute, ast.Subscript))]


def _roots_in(target: ast.AST, ours: set[str]) -> bool:
    """Whether `target` (a.b.c, a[k].b, vars(a)[k], or a name itself) reaches back to one
    of `ours`, or goes through `sys.modules`."""
    node = target
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        if isinstance(node, ast.Call):
            unwrap = _call_name(node) in ("vars", "getattr") and node.args
            node = node.args[0] if unwrap else node.func
            continue
        if isinstance(node, ast.Attribute) and node.attr == "modules" and \
                isinstance(node.value, ast.Name) and node.value.id == "sys":
            return True
        node = node.value
    return isinstance(node, ast.Name) and node.id in ours


def snapshot() -> dict[str, int]:
    """id() of every function, class and module held by a loaded minigraph module, by
    "module.name" (data such as the graph builder's name counters may change honestly)."""
    out = {}
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or not (mod_name == "minigraph" or mod_name.startswith("minigraph.")):
            continue
        for key, value in list(vars(mod).items()):
            if callable(value) or isinstance(value, types.ModuleType):
                out[f"{mod_name}.{key}"] = id(value)
    return out


def changed_names(before: dict[str, int], after: dict[str, int] | None = None,
                  limit: int = 5) -> list[str]:
    """The names of `before` that now hold another object or are gone (at most `limit`)."""
    after = snapshot() if after is None else after
    changed = [k for k, v in before.items() if after.get(k) != v]
    return sorted(changed)[:limit]
