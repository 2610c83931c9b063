"""The simrd-compatible option set (`SimrdOptions()`, dtr_research/simrd.py): the DTR authors'
simulator's rules on small hand-written traces, and its totals on generated traces.

simrd itself is not needed: the expected numbers are derived by hand in the comments, or
were recorded from simrd (uwsampl/dtr-prototype, `simrd/`, RuntimeV2EagerOptimized with
no rematerialisation limit) by replaying the same text:

    g = simrd.parse.parse.parse_file(io.StringIO(text), start=True)
    rt = RuntimeV1(math.inf, Heuristic()); g.get_closure()(rt)      # baseline peak
    rt = RuntimeV2EagerOptimized(int(ratio * rt.telemetry.summary["max_memory"]), DTR())
    g.get_closure()(rt); total = rt.clock - 1                        # clock starts at 1

(`benchmarks/dtr_reference.py --simrd PATH` compares the whole table.)
"""

from __future__ import annotations

import json
import math

import pytest

from minigraph.dtr_research import parse_trace, replay_trace
from minigraph.dtr_research.simrd import SimrdOptions, SimrdRuntime
from minigraph.dtr_research.tracegen import generated_trace
from minigraph.errors import BudgetError, GraphError
from minigraph.runtime.dtr import DTROptions, DTRRuntime
from minigraph.runtime.dtr.heuristics import DTROptionError


def L(**kw):
    return json.dumps(kw)


def call(name, args, results, time, alias=None):
    """A CALL with its MEMORY and ALIAS lines; results: (name, bytes) pairs."""
    alias = alias or [-1] * len(results)
    out = [L(INSTRUCTION="CALL", NAME=name, ARGS=args, RESULT=[r for r, _ in results],
             TIME=str(time))]
    for (r, nb), a in zip(results, alias):
        out += [L(INSTRUCTION="MEMORY", NAME=r, MEMORY=str(nb)),
                L(INSTRUCTION="ALIAS", NAME=r, ALIAS=str(a))]
    return out


def release(*names):
    return [L(INSTRUCTION="RELEASE", NAME=n) for n in names]


START = [L(INSTRUCTION="ANNOTATE", ANNOTATION="START")]
NO_LIMIT = {"thrash_limit": math.inf}

# a, viewed by v, is evicted while v lives; d reads v later.
VIEWS = (START + call("f", [], [("a", 100)], 10) + call("view", ["a"], [("v", 0)], 3, [0])
         + release("a") + call("g", [], [("b", 100)], 10) + call("h", ["b"], [("c", 100)], 10)
         + release("b") + call("k", ["v", "c"], [("d", 50)], 10))


def test_a_view_is_re_run_when_its_storage_comes_back():
    # Budget 250. simrd: c needs 100 with a (100) and b (100, locked) resident: a's storage,
    # the only evictable one, goes, and v with it. b's release evicts b. d locks c, then
    # rematerialises v: first a (f, 10; 100 + 100 <= 250), then the view op (3); d fits
    # (250). Extra compute 10 + 3 = 13; base 10 + 3 + 10 + 10 + 10 = 43.
    tr = replay_trace(VIEWS, 250, options=SimrdOptions("dtr", **NO_LIMIT))
    assert (tr.base_cost, tr.extra_cost, tr.rematerializations) == (43, 13, 2)
    assert tr.evicted == ["a"] and tr.fake_deletes == 1          # a by pressure; b released
    # Our runtime: a view is a 0-byte tensor outside the arena whose reads need the base:
    # only f is re-run.
    ours = replay_trace(VIEWS, 250, allocator="ideal", **NO_LIMIT)
    assert ours.extra_cost == 10


# p (200 B) and q (100 B) come from one op; one of them is evicted under pressure while
# the other stays; k reads both.
SPLIT = (START + call("split", [], [("p", 200), ("q", 100)], 20)
         + call("g", ["q"], [("y", 100)], 10)
         + call("h", ["y"], [("z", 100)], 10) + release("y")
         + call("k", ["p", "q"], [("w", 100)], 10) + release("w", "p", "q")
         + call("m", ["z"], [("v", 100)], 10) + release("z", "v"))


def test_a_multi_output_op_needs_room_for_every_output_when_re_run():
    # Budget 400, simrd's LRU. split: 300 (clock 1 -> 21; p, q last access 21). y: 400;
    # g's start sets q's last access to 21 again. The pool (in the order storages became
    # evictable): [q, p] after split; g locks and unlocks q: [p, y, q]; h locks y: [p, q].
    # z needs 100: p and q tie at 21, simrd takes the LAST of equal scores: q goes.
    # y's release evicts y
    # (p 200 + z 100 = 300). k locks p and re-runs split for q, which needs the bytes of
    # BOTH outputs (300): 300 + 300 > 400, z goes, still 500 > 400 and nothing is left:
    # out of memory (recorded from simrd: MemoryError). Our runtime places q alone (100).
    with pytest.raises(BudgetError, match="nothing left to evict"):
        replay_trace(SPLIT, 400, options=SimrdOptions("lru", **NO_LIMIT))
    ours = replay_trace(SPLIT, 400, allocator="ideal", heuristic="lru", **NO_LIMIT)
    assert ours.total_cost == 120
    # simrd's DTR evicts p instead (20 / (200 B x 10) < 20 / (100 B x 10)); recorded from
    # simrd: total 120 (base 60 + extra 60), p evicted twice and z once.
    tr = replay_trace(SPLIT, 400, options=SimrdOptions("dtr", **NO_LIMIT))
    assert (tr.base_cost, tr.total_cost, tr.evicted) == (60, 120, ["p", "z", "p"])


# An optimizer step: w is a constant updated in place (addcdiv_), m appears mid-run.
OPT = (START + [L(INSTRUCTION="CONSTANT", NAME="w"), L(INSTRUCTION="MEMORY", NAME="w",
                                                        MEMORY="100")]
       + call("f", ["w"], [("a", 100)], 10)
       + [L(INSTRUCTION="CONSTANT", NAME="m"), L(INSTRUCTION="MEMORY", NAME="m", MEMORY="100")]
       + [L(INSTRUCTION="MUTATE", NAME="addcdiv_", ARGS=["w", "m", "a"], MUTATE=[0],
            TIME="5")]
       + release("a"))


def test_constants_and_a_mutated_constant_count_inside_the_budget():
    p = parse_trace(OPT)
    # baseline peak, by hand: w 100, a 200, m 300, w's new version 400, a released 300
    assert p.baseline_peak == 400
    w2 = p.index["w$"]
    assert p.arena[w2] and p.tensors[w2].size == 100 and p.replayable[w2]
    m = p.index["m"]
    assert p.tensors[m].kind == "constant" and not p.replayable[m]
    # addcdiv_ holds w, m, a (300) and writes 100: 400 bytes, nothing can go before
    assert p.bounds().lower == 400
    for options in (SimrdOptions("dtr"), DTROptions()):
        assert replay_trace(OPT, 400, options=options).overhead == 1.0
        with pytest.raises(BudgetError):
            replay_trace(OPT, 399, options=options)
    # the old reading: constants are 0 bytes outside the arena, the new w too
    old = parse_trace(OPT, constants="outside")
    assert old.tensors[old.index["w$"]].size == 0 and old.bounds().lower == 100


# simrd's total compute (base + rematerialisation) at int(ratio x baseline peak), no limit;
# "OOM": simrd found nothing left to evict. Recorded from simrd as in the module docstring.
RECORDED = {
    ("chain", 12, 0.7): {"dtr": 473577, "dtr-eqclass": 473577, "lru": 522280, "msps": 473503},
    ("chain", 12, 0.4): {"dtr": 549591, "dtr-eqclass": 549591, "lru": "OOM", "msps": 550847},
    ("lstm", 6, 0.7): {"dtr": 255182, "dtr-eqclass": 255182, "lru": 253474, "msps": 234559},
    ("lstm", 6, 0.5): {"dtr": "OOM", "dtr-eqclass": 584499, "lru": "OOM", "msps": 324872},
    ("unet", 2, 0.7): {"dtr": 429684, "dtr-eqclass": 429684, "lru": 493463, "msps": 424561},
}


@pytest.mark.parametrize("key", list(RECORDED))
def test_the_preset_reproduces_simrds_totals_on_generated_traces(key):
    family, size, ratio = key
    program = parse_trace(generated_trace(family, size))
    for h, want in RECORDED[key].items():
        opts = SimrdOptions(h, **NO_LIMIT)
        if want == "OOM":
            with pytest.raises(BudgetError):
                replay_trace(program, ratio=ratio, options=opts)
        else:
            assert replay_trace(program, ratio=ratio, options=opts).total_cost == want, h


def test_the_generated_traces_use_every_instruction():
    seen: dict[str, set[str]] = {}
    for family, size in (("chain", 4), ("unet", 1), ("resnet", 2), ("lstm", 2)):
        lines = [json.loads(x) for x in generated_trace(family, size)]
        seen[family] = {j["INSTRUCTION"] for j in lines}
        p = parse_trace(lines)
        assert any(len(op.outputs) > 1 for op in p.ops)                  # multi-output
        consts = [t for t in p.tensors if t.kind == "constant"]
        assert any(t.name + "$" in p.index for t in consts)              # a mutated constant
        first_call = next(k for k, j in enumerate(lines) if j["INSTRUCTION"] == "CALL")
        assert any(j["INSTRUCTION"] == "CONSTANT" for j in lines[first_call:])   # mid-run
        assert generated_trace(family, size) == generated_trace(family, size)  # seeded
    assert set.union(*seen.values()) >= {"CONSTANT", "MEMORY", "CALL", "ALIAS", "MUTATE",
                                          "COPY", "COPY_FROM", "RELEASE", "ANNOTATE"}
    assert any(p.storage[t] != t for t in range(len(p.tensors)))           # views (lstm)
    with pytest.raises(GraphError, match="unknown trace family"):
        generated_trace("vgg", 2)


def test_the_preset_refuses_what_it_cannot_run():
    with pytest.raises(DTROptionError, match="simrd's heuristics"):
        replay_trace(VIEWS, 250, options=SimrdOptions("megengine"))
    with pytest.raises(DTROptionError, match="unknown DTR option 'rules'"):
        DTROptions().replace(rules="simrd")     # not the runtime's: the wing's SimrdOptions
    with pytest.raises(DTROptionError, match="must be a DTROptions, not SimrdOptions"):
        DTRRuntime(parse_trace(VIEWS), 250, options=SimrdOptions())
    from minigraph.examples import mlp_training
    from minigraph.runtime.dtr import program_from_graph
    with pytest.raises(DTROptionError, match="trace"):
        SimrdRuntime(program_from_graph(mlp_training(depth=2, width=4, batch=2)), 10**6,
                     SimrdOptions())
