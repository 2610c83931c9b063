"""The textbook DTR (minigraph/runtime/dtr/minimal.py) and the engine room's `DTRRuntime`
make the same run: the same evictions (same tensors, same order), the same op replays,
the same overhead (bit for bit: the costs are summed in the same order) and the same peak.

The full runtime is configured as `TEXTBOOK` below, its extras switched off:

* `allocator="ideal"`: memory is a counter, no addresses, so no fragmentation and nothing
  to defragment (`defrag` never applies); `partition` and `recomputable_inplace` stay off
  (their defaults), and so does `sample` (every candidate is scored).
* `dead_first=False`: a dead tensor kept for a neighbour's recomputation is scored like
  any other, as minimal.py scores it.
* `protect=False` and `relief=False`: the two options added for this test. By default the
  full runtime offers the inputs that ops waiting below a recomputation still need only
  when nothing else can go (`protect`), and when nothing can go it lets go of the inputs
  those ops have pinned (`relief`). minimal.py has neither: it evicts the lowest score
  among all unpinned resident tensors and raises BudgetError when none is left. Left on,
  `protect` changes the evictions of about a quarter of the runs below and `relief` of
  about an eighth (measured when the options were added), so both had to be switchable.
* `thrash_limit=math.inf`: minimal.py never gives up.
* the release rule is the same in both (MegEngine's fake delete, a dead tensor forgotten
  when nothing computed from it may need it), so nothing needs switching there.

What is not compared: ties. When two candidates score exactly the same, each runtime takes
the first it scans, and they scan in different orders (minimal.py: the tensor resident
longest; the full runtime: a list with O(1) removal). The random programs below give every
tensor its own size and every op a random float cost, so no two scores tie and the
comparison is exact. On the zoo and on generated traces (many equal sizes) the test checks
the runs decision by decision instead (the same candidates, the same scores bit for bit,
the same choice) up to the first choice they make differently, which must be an exact tie.
"""

from __future__ import annotations

import math
import random

import pytest

from minigraph.dtr_research import generated_trace, parse_trace
from minigraph.errors import BudgetError
from minigraph.models import get_model
from minigraph.runtime.dtr import (
    DTROptionError,
    DTROptions,
    DTRRuntime,
    OpSpec,
    Program,
    TensorSpec,
    get_heuristic,
    program_from_graph,
    simulate,
)
from minigraph.runtime.dtr.minimal import MinimalDTR, run_minimal

SCORES = ("dtr", "megengine")      # minimal.py's h_DTR and eval_func; the runtime's names
TEXTBOOK = DTROptions(heuristic="dtr", allocator="ideal", dead_first=False, protect=False,
                      relief=False, thrash_limit=math.inf, timeline=False)


def random_program(seed: int) -> Program:
    """8 to 40 ops reading 1 to 3 earlier tensors (or parameters), 1 or 2 outputs each, a
    few with workspace, one in twenty stateful; every tensor a size of its own, every op a
    random cost; each tensor released after its last reader, as `program_from_graph`
    does."""
    rng = random.Random(seed)
    n_ops = rng.randint(8, 40)
    sizes = rng.sample(range(64, 4096), 3 * n_ops + 10)
    tensors: list[TensorSpec] = []

    def new(size: int, producer: int) -> int:
        tensors.append(TensorSpec(f"t{len(tensors)}", size, size == 0, producer))
        return len(tensors) - 1

    params = [new(0, -1) for _ in range(rng.randint(1, 3))]
    readable, ops = list(params), []
    for k in range(n_ops):
        ins = tuple(rng.sample(readable, min(len(readable), rng.randint(1, 3))))
        outs = tuple(new(sizes.pop(), k) for _ in range(rng.choice((1, 1, 1, 2))))
        ops.append(OpSpec(f"op{k}", ins, outs, rng.uniform(1.0, 100.0),
                          rng.choice((0, 0, 0, sizes.pop())), rng.random() > 0.05))
        readable += outs
        if len(readable) > 8 and rng.random() < 0.5:       # some tensors die early
            readable.pop(rng.randrange(len(params), len(readable)))
    last = {i: k for k, op in enumerate(ops) for i in op.inputs}
    steps: list[tuple[str, int]] = []
    for k in range(n_ops):
        steps.append(("call", k))
        steps += [("release", t) for t, s in enumerate(tensors)
                  if not s.external and last.get(t, s.producer) == k]
    return Program(tensors, ops, steps, f"random-{seed}")


def budgets(program: Program, rng: random.Random) -> list[int]:
    """The smallest budget that could work, and two between it and the no-eviction peak."""
    b = program.bounds()
    return sorted({b.lower, rng.randint(b.lower, max(b.lower, b.live)),
                   (b.lower + b.peak) // 2})


def full_run(program: Program, budget: int, score: str):
    rt = DTRRuntime(program, budget, options=TEXTBOOK.replace(heuristic=score))
    trace = rt.run()
    return trace.evicted, trace.rematerializations, trace.overhead, rt.arena.high_water


def textbook_run(program: Program, budget: int, score: str):
    run = MinimalDTR(program, budget, score).run()
    return run.evicted, run.replays, run.overhead, run.peak


def outcome(run, *args):
    try:
        return run(*args)
    except BudgetError:
        return "BudgetError"


def test_the_textbook_and_the_full_runtime_make_the_same_evictions_on_random_programs():
    stuck = evicting = 0
    for seed in range(200):
        program, rng = random_program(seed), random.Random(seed)
        for budget in budgets(program, rng):
            for score in SCORES:
                full = outcome(full_run, program, budget, score)
                textbook = outcome(textbook_run, program, budget, score)
                assert textbook == full, (seed, budget, score)
                stuck += full == "BudgetError"
                evicting += full != "BudgetError" and len(full[0]) > 0
    # not vacuous: most runs evict and recompute, some cannot find room
    assert evicting > 600 and stuck > 50, (evicting, stuck)


class LoggedMinimal(MinimalDTR):
    """minimal.py, recording each eviction decision in `log`."""
    log: list

    def evict(self, t: int, fake: bool = False) -> None:
        if not fake:
            scores = {self.p.tensors[x].name: self.score(self, x)
                      for x in self.resident if not self.pins[x]}
            self.log.append((scores, self.p.tensors[t].name))
        super().evict(t, fake)


def decisions(program: Program, budget: int, score: str):
    """Each eviction decision of both runtimes, in order: (the score of every candidate
    by name, the one evicted). The full runtime's through its `select` hook, choosing as
    its default does (the lowest score, the first on ties)."""
    full: list = []
    h = get_heuristic(score)

    def select(candidates, need):
        free = [v for v in candidates if not v.pinned]
        scores = {v.name: h.score(v, v.now) for v in free}
        v = min(free, key=lambda v: scores[v.name], default=None)
        if v is not None:
            full.append((scores, v.name))
        return v

    textbook = LoggedMinimal(program, budget, score)
    textbook.log = []
    for run in (DTRRuntime(program, budget, options=TEXTBOOK.replace(heuristic=score,
                                                                     select=select)),
                textbook):
        try:
            run.run()
        except BudgetError:
            pass
    return full, textbook.log


ZOO_AND_TRACES = [("mlp", {}), ("cnn", {}), ("lstm", {"T": 6}),
                  ("transformer", {"layers": 1}), ("trace lstm", 6), ("trace unet", 2)]


@pytest.mark.parametrize("name, arg", ZOO_AND_TRACES)
def test_on_the_zoo_and_on_traces_they_part_only_at_an_exact_tie(name, arg):
    if name.startswith("trace"):
        program = parse_trace(generated_trace(name.split()[1], arg), name=name)
    else:
        program = program_from_graph(get_model(name, **arg).graph)
    b = program.bounds()
    for frac in (0.2, 0.5, 0.8):
        budget = b.lower + int((b.peak - b.lower) * frac)
        for score in SCORES:
            full, textbook = decisions(program, budget, score)
            for (s_full, v_full), (s_text, v_text) in zip(full, textbook):
                assert s_full.keys() == s_text.keys()
                if v_full != v_text:                   # the first decision they differ on
                    assert s_full[v_full] == s_full[v_text] == min(s_full.values())
                    break
                assert s_full == s_text
            else:
                assert len(full) == len(textbook)


def test_run_minimal_reads_a_graph_and_a_ratio_as_simulate_does():
    graph = get_model("lstm", T=6).graph        # no two h_DTR scores tie on it
    for ratio in (0.6, 0.7, 0.8):
        run = run_minimal(graph, ratio=ratio, score="dtr")
        trace = simulate(graph, ratio=ratio, options=TEXTBOOK)
        assert run.budget == trace.budget
        assert (run.evicted, run.replays, run.overhead) == \
            (trace.evicted, trace.rematerializations, trace.overhead)
        assert len(run.evicted) > 100 and run.peak <= run.budget


def test_no_room_is_a_budget_error_in_both():
    program = random_program(3)
    b = program.bounds()
    for run in (lambda: MinimalDTR(program, b.lower - 1).run(),
                lambda: DTRRuntime(program, b.lower - 1, options=TEXTBOOK).run()):
        with pytest.raises(BudgetError) as e:
            run()
        assert e.value.minimum == b.lower          # refused at once, below the largest op
    stuck = next((p, budget) for p in map(random_program, range(50))
                 for budget in budgets(p, random.Random(0))
                 if outcome(textbook_run, p, budget, "dtr") == "BudgetError")
    with pytest.raises(BudgetError, match="nothing left to evict") as e:
        MinimalDTR(*stuck).run()
    assert e.value.minimum == stuck[0].bounds().safe   # where it never gets stuck


def test_an_unknown_score_is_refused_by_name():
    with pytest.raises(DTROptionError, match="'lru'.*dtr, megengine"):
        MinimalDTR(random_program(0), 10**9, "lru")
