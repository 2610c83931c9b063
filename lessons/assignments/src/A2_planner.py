# %% [markdown]
# # Assignment 2 · An offset planner
#
# **Task.** Write `my_planner(buffers)`. It gets a list of `Buffer`s and returns a dict
# `{buffer.id: offset}`: where each buffer starts in one arena of bytes. Two buffers
# alive at the same step must not share a byte. The smaller the arena, the better.
#
# **Background (the sources).**
# * The GE articles [Huawei GE]: intervals and sizes come from liveness (assignment 1); the
#   *theoretical minimum* - the most bytes alive at one step - is a lower bound no plan
#   of that schedule can beat.
# * MXNet [Chen 2016] plans by simulating reference counters with a free pool; it is the
#   library's `refcount` planner, shown beside your arena.
# * Chainer-Opt [Sekiyama 2018] casts the problem as 2D strip packing - the Dynamic Storage
#   Allocation problem (DSA), NP-hard: time on x, bytes on y, each buffer a rectangle
#   fixed in x that you may only slide up or down. Chainer-Opt's best-fit offset heuristic,
#   simulated annealing (DSA-SA) and MIP/ILP solvers (MODeL, ROAM) all attack it.
#
# A `Buffer(id, start, end, size)` is alive from step `start` to step `end`, **both
# inclusive** (so `Buffer("a", 0, 2, ...)` and `Buffer("b", 2, 4, ...)` are both alive at
# step 2 and may not overlap). Offsets are non-negative integers.
#
# **Scoring.** Nothing you return is trusted: the library's validator
# (`minigraph.memory.validate_offsets`) decides whether a plan is safe, and where the
# buffers come from a graph, the graph is *run* in one arena laid out by your offsets and
# its outputs compared bit for bit with a run without reuse. A valid plan is the gate; a
# case then pays for its arena on a scale with three marks, in bytes: nothing for a plan
# that reuses nothing (every buffer stacked above the last), 60% for the arena of what
# the lessons show (the better of greedy by size - the hint below - and lesson 06's best
# fit), all of it for the arena of your instructor's reference planner, in proportion in
# between. The scored cases are those where the reference beats the lessons' planners
# by at least 2%; on the others a valid plan is asked, and a failed one costs a case. So
# the hint, typed in, earns at most the 60% mark of each scored case; the last 40% pay
# for beating it. A
# leaderboard compares your arena with every planner of the library, as a ratio to the
# theoretical minimum.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false}
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parents[1]))
    import minigraph as mg

from minigraph.errors import PlanError
from minigraph.grading import check_planner, load_solution
from minigraph.grading.cases import small_mlp_graph
from minigraph.memory import Buffer, theoretical_minimum, validate_offsets

# %% [markdown]
# ## The buffers of a training step
#
# The liveness of a small MLP's training step, as the list of buffers a planner sees
# (sizes rounded up to 64 bytes):

# %%
g = small_mlp_graph()
buffers = mg.liveness(g, alignment=64).buffers()
for b in sorted(buffers, key=lambda b: b.start):
    print(f"{b.id:16} steps [{b.start:2}, {b.end:2}]  {b.size:4} B")
print("no reuse:", sum(b.size for b in buffers), "B; theoretical minimum:",
      theoretical_minimum(buffers), "B")

# %% [markdown]
# A valid but wasteful plan puts every buffer above the previous one. The validator
# accepts it; it raises `PlanError`, naming both buffers and the step, for a plan that
# overlaps:

# %%
def stack_them_all(buffers):
    offsets, top = {}, 0
    for b in buffers:
        offsets[b.id] = top
        top += b.size
    return offsets


validate_offsets(buffers, stack_them_all(buffers))
print("stacked: valid, arena", sum(b.size for b in buffers), "B")
try:
    validate_offsets(buffers, {b.id: 0 for b in buffers})
except PlanError as e:
    print("everything at offset 0:", e)

# %% [markdown]
# ## Your solution
#
# Fill in `my_planner`. A good start: place the largest buffers first, each at the lowest
# offset where it does not overlap (in bytes) any already placed buffer that is alive at
# some common step. That keeps the one invariant every plan needs - two buffers alive at
# one step never share a byte - and earns up to the 60% mark. It is one *order* decoded
# by one rule: where it leaves holes (the check's report says which cases, and by how
# much), ask what else you could change, and keep whatever gives the smaller arena. Run
# the cell after it too: it lets a grader swap in another file.

# %% tags=["solution"] nbgrader={"grade": false, "grade_id": "my_planner", "locked": false, "schema_version": 3, "solution": true}
def my_planner(buffers):
    """Return {buffer.id: offset} so that no two buffers alive at one step overlap."""
    # YOUR CODE HERE
    raise NotImplementedError


# %% nbgrader={"grade": false, "grade_id": "load_solution", "locked": true, "schema_version": 3, "solution": false}
# Graders: MINIGRAPH_SOLUTION=path/to/file.py (or "reference") replaces the function above.
my_planner = load_solution("my_planner", default=my_planner)

# %% [markdown]
# Try it on the training step:

# %%
try:
    offsets = my_planner(buffers)
    validate_offsets(buffers, offsets)
    arena = max(offsets[b.id] + b.size for b in buffers)
    print("valid; arena", arena, "B, theoretical minimum", theoretical_minimum(buffers), "B")
except NotImplementedError:
    print("my_planner: not implemented yet")
except PlanError as e:
    print("not valid:", e)
except Exception as e:          # yours to fix; the check below says more
    print(f"my_planner raised {type(e).__name__}: {e}")

# %% [markdown]
# ## Check
#
# The cases: the liveness buffers of the public graphs and of models of the zoo (each
# re-executed in your arena), the CANN GE article's worked example [Huawei GE], edge cases (no
# buffers, zero sizes, buffers that touch at one step, integer ids), *hard instances* that tile a
# rectangle exactly (their optimum is known; greedy planners rarely find it), and random
# lists. A failing case is shrunk - buffers dropped while it still fails - to a small
# reproducer.
#
# The number under the report is your score out of 100: what nbgrader counts as this cell's
# points when your instructor grades with it.

# %% tags=["check"] nbgrader={"grade": true, "grade_id": "check_planner", "locked": true, "points": 100, "schema_version": 3, "solution": false}
from minigraph.grading import check_planner   # again: no name defined above stands in for it

report = check_planner(my_planner)
display(report)
report.score          # out of 100: nbgrader takes this number as the points of this cell

# %% [markdown]
# From a terminal: `python -m minigraph.grading a2 path/to/solution.py`, or
# `pytest tests/grading -m a2 --student path/to/solution.py`.
