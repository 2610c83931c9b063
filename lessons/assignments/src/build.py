"""Build the assignment notebooks: `python lessons/assignments/src/build.py [NAMES...]`.

A thin wrapper over the one notebook builder, lessons/src/build.py (same as
`python lessons/src/build.py --assignments [NAMES...]`); see it for the source format,
including the `# %% tags=["solution"]` / `tags=["check"]` cells.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "minigraph_lessons_build", Path(__file__).resolve().parents[2] / "src" / "build.py")
_builder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_builder)

cells_of = _builder.cells_of
COLLECTION = _builder.ASSIGNMENTS


def build(src: Path) -> Path:
    return _builder.build(src, COLLECTION)


def main(names: list[str]) -> None:
    _builder.build_all(names, COLLECTION)


if __name__ == "__main__":
    main(sys.argv[1:])
