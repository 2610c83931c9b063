"""The engine room of the planners: what makes the textbook's answers fast, and the
research depth beyond them. A student reads the textbook modules one level up
(greedy.py, bestfit.py, ge.py, anneal.py, ilp.py); nothing here is needed to follow a
lesson, and no textbook module imports anything here. `memory.api` imports this package,
which registers its planners.

Each file names its textbook twin, as minitorch's fast_ops.py says "see tensor_ops.py",
and changes only how, never what (tests/test_planner_tiers.py holds them equal):

- `boxes.py`: greedy.py's `PlacedBoxes`, fast (a table of the boxes by lifetime in NumPy,
  a segment tree of free bytes over the steps; `box_index` picks one).
- `skyline.py`: bestfit.py's `Skyline` and `Unplaced`, fast (a heap, a segment tree).
- `heuristics.py`: the registry's "greedy-size", "bestfit" and "ge": the textbook loops run
  with the indexes above, a deadline, and the start plans the searching planners share.
- `anneal.py`, `ilp.py`: the registry's "anneal" and "ilp": the textbook's loop and
  model with a time limit over the whole call, the fallbacks a tool needs, the solver's
  prints kept off stdout (`quiet.py`).
- `budget.py`: time limits (`Deadline`, `OutOfTime`) and the checks of the options that
  bound a search.
- `search.py`, `search_rules.py`, `search_state.py`: the exact search [Moffitt 2023], a
  branch and bound with no textbook twin (read `search.py` first).
"""

from .. import PLANNERS
from . import anneal, heuristics, ilp, search  # noqa: F401  (importing registers them)

# The order of every menu and table of planners (the widget, the tour, lesson 00); the
# imports register them in another.
for _name in ("greedy-size", "bestfit", "anneal", "none", "refcount", "ge-max", "ge-binary",
              "ge-hybrid", "ge", "ilp", "search"):
    PLANNERS[_name] = PLANNERS.pop(_name)
