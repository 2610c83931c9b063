"""The cases a grader runs: public graphs, generated graphs and buffer lists, private sets.

Everything here is reproducible: a case is built from a name and a seed with Python's
own `random.Random(seed)`, never from global randomness, so two runs of the grader (on
a student's laptop and in GitHub Classroom) see the same cases. An instructor adds cases
students do not see with a directory (`MINIGRAPH_PRIVATE_CASES`, or `private=` of the
checks): `a1/*.json` graph cases, `a2/*.csv` or `a2/*.json` buffer lists, `a3/*.json`
model cases, and a file `seed` holding an integer for extra generated cases (or
`MINIGRAPH_PRIVATE_SEED`). `write_graph_case` and `write_buffer_case` write those files.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import models, ops
from ..autodiff import training_graph
from ..feeds import random_feeds
from ..files import atomic_open, write_text
from ..graph import Graph, Node, TensorInfo, constant, input, name_scope, param
from ..memory.buffers import Buffer
from ..memory.inplace import declared_pairs, operand_refusal
from ..memory.instances import ge_worked_example, hard_instance, random_buffers
from ..memory.liveness import liveness
from ..memory.plan import offset_alignment
from ..ops.registry import get_op

PRIVATE_ENV = "MINIGRAPH_PRIVATE_CASES"
PRIVATE_SEED_ENV = "MINIGRAPH_PRIVATE_SEED"


@dataclass
class GraphCase:
    """A graph, a schedule of its nodes and an alignment (assignment 1; assignment 2 plans
    its liveness buffers and re-executes the graph in the student's arena)."""
    name: str
    graph: Graph
    schedule: tuple[str, ...]
    alignment: int = 512
    source: str = "public"
    feeds: Callable[[], dict] | None = field(default=None, repr=False)
    inplace: bool = False     # A1 part B: the hand-overs too (`liveness_grader`)


@dataclass
class BufferCase:
    """A buffer list to plan (assignment 2). `graph`/`schedule` are set when the buffers
    are a graph's liveness: then the plan is also run, in an arena, against no reuse."""
    name: str
    buffers: list[Buffer]
    alignment: int = 1
    source: str = "public"
    graph: Graph | None = field(default=None, repr=False)
    schedule: tuple[str, ...] | None = field(default=None, repr=False)
    known_optimum: int | None = None
    feeds: Callable[[], dict] | None = field(default=None, repr=False)


# ---------------------------------------------------------------------------------------
# Graphs
# ---------------------------------------------------------------------------------------

def small_mlp_graph(batch: int = 4, sizes: Sequence[int] = (8, 16, 3)) -> Graph:
    """The assignments' small MLP training step (forward, backward, SGD update): ReLU
    layers without biases, loss mean(h ** 2); `models.mlp_graph` builds it."""
    return models.mlp_graph(sizes, batch, bias=False, loss="pow2", lr=0.1, name="mlp")


def residual_graph(batch: int = 3, width: int = 8, blocks: int = 3) -> Graph:
    """Residual blocks `h + tanh(h @ W)`: every block input is read twice (long lives)."""
    with name_scope():
        x = input("x", (batch, width))
        h, params = x, []
        for k in range(blocks):
            W = param(f"W{k}", (width, width))
            params.append(W)
            h = h + ops.tanh(h @ W)
        loss = ops.mean(h * h)
        return training_graph(loss, params, lr=0.05, name="residual")


def chain_graph(length: int = 10, width: int = 16) -> Graph:
    """A forward-only chain of elementwise ops with a constant: the simplest lifetimes."""
    with name_scope():
        x = input("x", (2, width))
        h = x
        acts = (ops.relu, ops.tanh, ops.sigmoid, ops.neg)
        for k in range(length):
            h = acts[k % len(acts)](h)
            if k == length // 2:
                h = h * constant(np.full((2, width), 0.5, np.float32), name="half")
        return Graph([h], name="chain")


def random_graph(seed: int, nodes: int = 10, backward: bool = True,
                 dead_ends: bool = True) -> Graph:
    """A random network of elementwise ops and matmuls (seeded), optionally with its
    backward and update nodes, and optionally with dead ends (tensors nobody reads)."""
    rng = random.Random(seed)
    with name_scope():
        batch = rng.choice((1, 2, 3, 4))
        widths = (1, 3, 5, 8, 16, 33)
        pool: list = []
        params: list = []
        for k in range(rng.randint(1, 2)):
            pool.append(input(f"x{k}", (batch, rng.choice(widths))))
        for _ in range(nodes):
            x = pool[-1] if rng.random() < 0.4 else rng.choice(pool)
            same = [t for t in pool if t.shape == x.shape and t is not x]
            r = rng.random()
            if r < 0.3:
                W = param(f"W{len(params)}", (x.shape[1], rng.choice(widths)))
                params.append(W)
                y = x @ W
            elif r < 0.6:
                y = rng.choice((ops.relu, ops.tanh, ops.sigmoid, ops.neg))(x)
            elif r < 0.85 or len(same) < 2:
                other = rng.choice(same) if same else x
                y = rng.choice((ops.add, ops.mul, ops.sub))(x, other)
            else:
                y = ops.add_n(x, *rng.sample(same, 2))
            pool.append(y)
        made = [t for t in pool if t.call is not None]
        last = made[-1] if made else pool[-1]
        reach, stack = set(), [last]
        while stack:
            t = stack.pop()
            if id(t) not in reach:
                reach.add(id(t))
                stack.extend(t.call.inputs if t.call is not None else ())
        params = [W for W in params if id(W) in reach]
        if backward and params:
            loss = ops.mean(last * last)
            g = training_graph(loss, params, lr=0.1, name=f"random{seed}")
        else:
            g = Graph([last], name=f"random{seed}")
        if not dead_ends:
            return g
        # Keep every node built (some outputs are then read by nobody) and declare one
        # more tensor a graph output: both are rules of liveness a solution must know.
        sinks = [t for t in made if t.name not in g.tensors]
        if not sinks:
            return g
        extra = Graph([*sinks], name="extra")
        tensors = dict(g.tensors)
        for name, t in extra.tensors.items():
            tensors.setdefault(name, t)
        nodes_ = list(g.nodes) + [n for n in extra.nodes if n.name not in g.node_index]
        outputs = list(g.outputs)
        middle = [n.outputs[0] for n in g.nodes if n.role == "forward"
                  and n.outputs[0] not in outputs]
        if middle and rng.random() < 0.5:
            outputs.append(rng.choice(middle))
        return Graph.from_nodes(nodes_, tensors, outputs, g.name)


def random_schedule(graph: Graph, seed: int) -> tuple[str, ...]:
    """A random topological order (Kahn's algorithm with seeded tie-breaking)."""
    rng = random.Random(seed)
    preds: dict[str, set[str]] = {}
    for n in graph.nodes:
        ps = {graph.tensors[i].producer for i in n.inputs} - {None}
        preds[n.name] = ps | set(n.deps)
    succs: dict[str, list[str]] = {n: [] for n in preds}
    for n, ps in preds.items():
        for p in ps:
            succs[p].append(n)
    indeg = {n: len(ps) for n, ps in preds.items()}
    ready = sorted(n for n, d in indeg.items() if d == 0)
    out = []
    while ready:
        n = ready.pop(rng.randrange(len(ready)))
        out.append(n)
        for s in sorted(succs[n]):
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return tuple(out)


def recompute_schedule(graph: Graph, seed: int, schedule: Sequence[str] | None = None,
                       share: float = 0.3) -> tuple[str, ...]:
    """`schedule` (default: a random topological order) with about `share` of the forward
    nodes run again - each once more, just before one of its later readers, chosen at
    random - as checkpointing does [Chen 2016]: a forward output dropped after the forward
    pass and recomputed when a later node needs it. Only forward nodes of stateless ops
    run again (an update never does); the result is a valid schedule with recomputation:
    every run comes after a run of each producer of its inputs."""
    rng = random.Random(seed)
    order = list(schedule) if schedule is not None else list(random_schedule(graph, seed))
    pos = {n: k for k, n in enumerate(order)}
    candidates = []
    for n in graph.nodes:
        if n.role != "forward" or get_op(n.op).stateful:
            continue
        later = sorted({pos[c] for o in n.outputs for c in graph.consumers[o]
                        if pos[c] > pos[n.name]})
        if later:
            candidates.append((n.name, later))
    chosen = rng.sample(candidates, max(1, round(share * len(candidates)))) \
        if candidates else []
    before: dict[int, list[str]] = {}
    for name, later in chosen:
        before.setdefault(rng.choice(later), []).append(name)
    out: list[str] = []
    for k, name in enumerate(order):
        out += sorted(before.get(k, ()), key=pos.__getitem__)   # in their first order
        out.append(name)
    return tuple(out)


@dataclass
class PublicGraph:
    name: str
    graph: Graph
    feeds: Callable[[], dict]


MODEL_NAMES = ("mlp", "cnn", "transformer", "lstm")


def _model_graphs(names: Sequence[str] = MODEL_NAMES) -> list[PublicGraph]:
    """Training graphs of the model zoo (`minigraph.models`), at their default tiny size."""
    out = []
    for name in names:
        try:
            m = models.get_model(name)
        except Exception:   # noqa: BLE001  a model that cannot be built is not a case
            continue
        out.append(PublicGraph(f"model-{name}", m.graph, lambda m=m: m.feeds(0)))
    return out


def _own(name: str, g: Graph) -> PublicGraph:
    return PublicGraph(name, g, lambda: random_feeds(g))


@functools.cache
def _public_graphs() -> tuple[PublicGraph, ...]:
    return (_own("mlp", small_mlp_graph()), _own("residual", residual_graph()),
            _own("chain", chain_graph()), *_model_graphs())


def public_graphs() -> list[PublicGraph]:
    """The fixed, public graphs every assignment-1 and -2 grading starts with (built once
    per process: graphs are immutable, and the graders cache results per graph)."""
    return list(_public_graphs())


def liveness_cases(seed: int = 0, generated: int = 24) -> list[GraphCase]:
    """Assignment 1. Part A: each public graph in program order (lesson 02's rules, no
    recomputation), then in program and random orders with recomputations
    (`recompute_schedule`), at three alignments; then `generated` random graphs with
    recomputations (seeded by `seed`). Part B: the same public graphs and schedules with
    in-place hand-overs (`inplace`), then `generated` other random graphs."""
    cases = []
    for inplace in (False, True):
        tag = "+inplace" if inplace else ""
        for p in public_graphs():
            g, name = p.graph, p.name
            prog = tuple(n.name for n in g.nodes)
            cases.append(GraphCase(f"{name}/program{tag}/align512", g, prog, 512,
                                   inplace=inplace))
            cases.append(GraphCase(f"{name}/recompute{tag}/align1", g,
                                   recompute_schedule(g, seed, prog), 1, inplace=inplace))
            cases.append(GraphCase(f"{name}/random-order+recompute{tag}/align64", g,
                                   recompute_schedule(g, seed + 1), 64, inplace=inplace))
    for inplace in (False, True):
        rng = random.Random(seed if not inplace else f"{seed}/inplace")
        made = 0
        while made < generated:
            s = rng.randrange(2 ** 31)
            g = random_graph(s, nodes=rng.randint(1, 14), backward=rng.random() < 0.7)
            align = rng.choice((1, 4, 64, 512))
            if inplace and not may_hand_over(g):
                continue              # part B: only graphs where a hand-over can be
            cases.append(GraphCase(f"random-graph/seed{s}{'+inplace' if inplace else ''}",
                                   g, recompute_schedule(g, s), align, "generated",
                                   inplace=inplace))
            made += 1
    return cases


def may_hand_over(graph: Graph) -> bool:
    """Whether some node may write an output over an input whatever the schedule (an op's
    declared pair of two planned tensors of one dtype and size, read through one operand:
    `memory.inplace`'s clauses that do not depend on the order)."""
    def planned(n: str) -> bool:
        return graph.tensors[n].kind in ("activation", "gradient") and n not in graph.outputs
    return any(planned(x) and planned(y) and not operand_refusal(graph, node, x, y)
               for node in graph.nodes for x, y in declared_pairs(node))


def liveness_case(name: str, seed: int = 0) -> GraphCase:
    """The public or generated A1 case called `name` (as a report names it)."""
    for case in liveness_cases(seed):
        if case.name == name:
            return case
    raise KeyError(f"no A1 case {name!r} (seed {seed})")


# ---------------------------------------------------------------------------------------
# Buffer lists
# ---------------------------------------------------------------------------------------

def graph_buffer_case(name: str, graph: Graph, schedule: Sequence[str], alignment: int,
                      source: str, feeds: Callable[[], dict]) -> BufferCase:
    """Assignment 2's case of a graph: its liveness buffers at `offset_alignment(graph,
    alignment)` - `alignment` raised to a multiple of every planned tensor's itemsize, as
    `plan_memory` places offsets - so that the sizes are multiples of it, and a planner
    that packs buffers end to end (it sees no dtypes) gives offsets the executor can view
    as each tensor's dtype: a plan the validator accepts is never refused for that."""
    at = offset_alignment(graph, alignment)
    return BufferCase(name, liveness(graph, schedule, at).buffers(), at, source, graph,
                      tuple(schedule), feeds=feeds)


def planner_cases(seed: int = 0, generated: int = 18) -> list[BufferCase]:
    """Assignment 2: the liveness buffers of the public graphs (also re-executed),
    hand-made edge cases, hard instances with a known optimum, random lists."""
    cases = []
    for p in public_graphs():
        g = p.graph
        for order, sched in (("program", tuple(n.name for n in g.nodes)),
                             ("random-order", random_schedule(g, seed))):
            cases.append(graph_buffer_case(f"{p.name}/{order}", g, sched, 64, "public",
                                           p.feeds))
    rng = random.Random(seed + 2)
    for _ in range(4):
        s = rng.randrange(2 ** 31)
        g = random_graph(s, nodes=rng.randint(4, 16))
        cases.append(graph_buffer_case(f"random-graph/seed{s}", g, random_schedule(g, s), 64,
                                       "generated", lambda g=g, s=s: random_feeds(g, s)))
    cases.append(BufferCase("ge-worked-example", ge_worked_example(), 1))
    cases += [
        BufferCase("edge/empty", []),
        BufferCase("edge/one", [Buffer("a", 0, 0, 100)]),
        BufferCase("edge/zero-size", [Buffer("a", 0, 3, 0), Buffer("b", 0, 3, 8),
                                      Buffer("c", 2, 5, 0)]),
        BufferCase("edge/touching", [Buffer("a", 0, 2, 64), Buffer("b", 2, 4, 64),
                                     Buffer("c", 3, 5, 64)]),
        BufferCase("edge/integer-ids", [Buffer(k, k, k + 2, 16 * (k + 1)) for k in range(6)]),
        BufferCase("edge/all-alive", [Buffer(f"t{k}", 0, 9, 100 + k) for k in range(8)]),
    ]
    rng = random.Random(seed + 1)
    for n, cap in ((8, 1024), (16, 4096), (32, 4096), (48, 8192)):
        s = rng.randrange(2 ** 31)
        bufs = hard_instance(n, cap, 2 * n, s)
        cases.append(BufferCase(f"hard/n{n}/seed{s}", bufs, 1, "generated",
                                known_optimum=cap))
    shapes = ("mixed", "nested", "short", "equal")
    for k in range(generated):
        s = rng.randrange(2 ** 31)
        shape = shapes[k % len(shapes)]
        n, steps = rng.randint(2, 60), rng.randint(4, 40)
        bufs = random_buffers(n, s, steps, family=shape)
        cases.append(BufferCase(f"random-{shape}/seed{s}", bufs, 1, "generated"))
    return cases


# ---------------------------------------------------------------------------------------
# Private cases: files an instructor keeps out of the students' repository
# ---------------------------------------------------------------------------------------

def graph_to_json(graph: Graph) -> dict:
    """Plain JSON for a graph (what `a1/*.json` private cases hold)."""
    return {"name": graph.name,
            "nodes": [{"name": n.name, "op": n.op, "attrs": _jsonable(n.attr),
                       "inputs": list(n.inputs), "outputs": list(n.outputs),
                       "role": n.role, "deps": list(n.deps)} for n in graph.nodes],
            "tensors": {t.name: {"shape": list(t.shape), "dtype": t.dtype, "kind": t.kind,
                                 "producer": t.producer, "index": t.index,
                                 "alias_of": t.alias_of,
                                 **({"value": np.asarray(t.value).tolist()}
                                    if t.value is not None else {})}
                        for t in graph.tensors.values()},
            "outputs": list(graph.outputs)}


def _jsonable(v):
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    return v


def _retuple(v):
    if isinstance(v, list):
        return tuple(_retuple(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _retuple(x)) for k, x in v.items()))
    return v


def graph_from_json(d: dict) -> Graph:
    nodes = [Node(n["name"], n["op"], _retuple(n.get("attrs", {})), tuple(n["inputs"]),
                  tuple(n["outputs"]), n.get("role", "forward"), tuple(n.get("deps", ())))
             for n in d["nodes"]]
    tensors = {}
    for name, t in d["tensors"].items():
        value = np.asarray(t["value"], dtype=t["dtype"]) if "value" in t else None
        tensors[name] = TensorInfo(name, tuple(t["shape"]), t["dtype"], t["kind"],
                                   t.get("producer"), t.get("index", 0), value,
                                   alias_of=t.get("alias_of"))
    return Graph.from_nodes(nodes, tensors, d["outputs"], d.get("name", "graph"))


def write_graph_case(path: str | os.PathLike, graph: Graph,
                     schedule: Sequence[str] | None = None, alignment: int = 512,
                     inplace: bool = False) -> None:
    """Save a graph case (for `a1/` or `a2/` of a private case directory); `inplace`:
    an A1 part B case (the hand-overs too)."""
    d = {"graph": graph_to_json(graph), "alignment": alignment,
         "schedule": list(schedule) if schedule is not None else None}
    if inplace:
        d["inplace"] = True
    write_text(path, json.dumps(d, indent=1))


def write_buffer_case(path: str | os.PathLike, buffers: Sequence[Buffer]) -> None:
    """Save a buffer list as CSV `id,start,end,size` (end inclusive), for `a2/`."""
    with atomic_open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "start", "end", "size"])
        for b in buffers:
            w.writerow([b.id, b.start, b.end, b.size])


def read_buffer_csv(path: str | os.PathLike) -> list[Buffer]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [Buffer(_id(r["id"]), int(r["start"]), int(r["end"]), int(r["size"])) for r in rows]


def _id(s: str) -> Hashable:
    return int(s) if s.lstrip("-").isdigit() else s


def _read_graph_case(path: Path) -> GraphCase:
    d = json.loads(path.read_text())
    g = graph_from_json(d["graph"] if "graph" in d else d)
    sched = tuple(d.get("schedule") or (n.name for n in g.nodes))
    return GraphCase(f"private/{path.stem}", g, sched, int(d.get("alignment", 512)), "private",
                     inplace=bool(d.get("inplace", False)))


def private_dir(private: str | os.PathLike | int | None = None) -> tuple[Path | None,
                                                                        int | None]:
    """Where private cases live and the private seed, from the argument or environment."""
    if isinstance(private, int) and not isinstance(private, bool):
        return None, private
    root = Path(private) if private else (Path(os.environ[PRIVATE_ENV])
                                          if os.environ.get(PRIVATE_ENV) else None)
    seed = None
    if os.environ.get(PRIVATE_SEED_ENV):
        seed = int(os.environ[PRIVATE_SEED_ENV])
    if root is not None:
        if not root.is_dir():
            raise FileNotFoundError(f"private case directory {root} does not exist")
        for fname in ("seed", "seed.txt"):
            if (root / fname).exists():
                seed = int((root / fname).read_text().strip())
    return root, seed


def private_liveness_cases(private=None) -> list[GraphCase]:
    root, seed = private_dir(private)
    cases = []
    if root is not None and (root / "a1").is_dir():
        cases += [_read_graph_case(p) for p in sorted((root / "a1").glob("*.json"))]
    if seed is not None:
        for c in [c for c in liveness_cases(seed, generated=6) if c.source == "generated"]:
            c.name, c.source = f"private/{c.name}", "private"
            cases.append(c)
    return cases


def private_planner_cases(private=None) -> list[BufferCase]:
    root, seed = private_dir(private)
    cases = []
    if root is not None and (root / "a2").is_dir():
        for p in sorted((root / "a2").iterdir()):
            if p.suffix == ".csv":
                cases.append(BufferCase(f"private/{p.stem}", read_buffer_csv(p), 1, "private"))
            elif p.suffix == ".json":
                d = json.loads(p.read_text())
                if "buffers" in d:
                    bufs = [Buffer(_id(str(b[0])), *map(int, b[1:4])) for b in d["buffers"]]
                    cases.append(BufferCase(f"private/{p.stem}", bufs,
                                            int(d.get("alignment", 1)), "private"))
                else:
                    gc = _read_graph_case(p)
                    cases.append(graph_buffer_case(gc.name, gc.graph, gc.schedule,
                                                   gc.alignment, "private",
                                                   lambda g=gc.graph: random_feeds(g)))
    if seed is not None:
        rng = random.Random(seed)
        for k in range(8):
            s = rng.randrange(2 ** 31)
            n = rng.randint(8, 48)
            if k % 2:
                cases.append(BufferCase(f"private/hard{k}", hard_instance(n, 4096, 2 * n, s),
                                        1, "private", known_optimum=4096))
            else:
                cases.append(BufferCase(f"private/random{k}",
                                        random_buffers(n, s, 20, family="mixed"), 1, "private"))
    return cases


def select(cases: list, only: Callable | None) -> list:
    return [c for c in cases if only is None or only(c)]
