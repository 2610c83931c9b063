"""`minigraph tour`: one model from end to end, every number computed on the spot.

1. Build the model's training graph (forward + explicit backward + update) and print
   what it holds: nodes by role, tensors, bytes of activations, gradients, parameters.
2. Plan it with refcount + in-place, run one SGD step on NumPy in that arena, and print
   where the step's bytes went: the arena, the unplanned buffers, the largest workspace,
   and the peak measured while it ran.
3. The memory table: the same graph planned with each technique switched on in turn
   (no reuse, in-place alone, refcount, refcount + in-place, colouring, then every other
   planner in `minigraph.memory.PLANNERS`), each against the theoretical minimum that
   applies to it [Chen 2016] [Huawei GE], then what to try next.

`model` is a zoo name or a `Model` (say one that `minigraph.fromtorch.from_torch` imported
from PyTorch). A graph with opaque ops (PyTorch ops that minigraph has no kernel for) is
planned but not run: the tour says so in one line.

The default model is a small U-Net (`TOUR_MODEL`): its long skip connections keep
tensors alive across the network, so the planners differ (GE's blocks, best-fit and
greedy-by-size land at different arenas), and it still runs in about a second.
"""

from __future__ import annotations

import math
import re
import sys
import time
from typing import Any, TextIO

from .backend import resolve_device
from .errors import GraphError
from .experiments.plan_cli import progress_bar
from .experiments.techniques import Row, technique_rows
from .graph import Graph, fmt_bytes
from .memory import MemoryOptions, plan_memory, schedule
from .memory.api import chosen
from .models import Model, get_model
from .ops.registry import workspace_of
from .runtime.executor import Executor
from .runtime.measure import RunStats

MAX_RUN_FLOPS = 5e10   # a step above this is planned but not run (ResNet-50: 786e9)
TOUR_MODEL = "unet"    # the planners differ on it, and it runs in about a second
# The step is run in MemoryOptions() (the one set of defaults, docs/glossary.md) with the two
# techniques the tour shows switched on.
TOUR_OPTIONS = MemoryOptions().replace(planner="refcount", inplace=True)


def _floors(rows: list[Row]) -> tuple[int, int | None]:
    """The theoretical minimum without in-place and, if any row has in-place, with it."""
    plain = next(r.report for r in rows if r.report and not r.options.inplace)
    fused = next((r.report for r in rows if r.report and r.options.inplace), None)
    return plain.theoretical_minimum, None if fused is None else fused.theoretical_minimum


NOTE_WIDTH = 50       # a longer note goes under the table, whole, with its number
_SKIPPED = re.compile(r"skipped: (\d+) buffers > (\d+)")
# How to lift a size limit of technique_rows: the tour's keyword and the CLI's option
LIFTS = {"ilp": ("ilp_max_buffers", "--ilp-max-buffers"),
         "anneal": ("anneal_max_buffers", "--anneal-max-buffers")}


def lift_note(row: Row) -> str:
    """`row`'s note, and for a planner skipped by a size limit, how to lift it."""
    found = _SKIPPED.fullmatch(row.note)
    if not found or row.options.planner not in LIFTS:
        return row.note
    keyword, option = LIFTS[row.options.planner]
    n = found.group(1)
    return (f"{row.note} ({keyword}); to plan it: minigraph tour {option} {n}, or "
            f"tour(..., {keyword}={n}); it then searches for --time-limit seconds")


def memory_table(graph: Graph, rows: list[Row]) -> str:
    """The rows as a text table; the theoretical minima close it, and the footer says which
    minimum each row is measured against and why a row with in-place may sit below the
    minimum without it (in-place merges an output into its input's buffer). A note longer
    than NOTE_WIDTH is numbered in the table and printed whole under it, never cut."""
    no_reuse = rows[0].report.no_reuse_bytes
    out = [f"{'technique':34} {'arena bytes':>13} {'arena':>11} {'saved':>7} "
           f"{'x minimum':>9} {'ms':>8}  note"]
    notes: list[str] = []

    def short(note: str) -> str:
        if len(note) <= NOTE_WIDTH:
            return note
        notes.append(note)
        return f"see [{len(notes)}] below"

    for r in rows:
        rep = r.report
        if rep is None:
            out.append(f"{r.label:34} {'-':>13} {'-':>11} {'-':>7} {'-':>9} {'-':>8}  "
                       f"{short(lift_note(r))}")
            continue
        note = short(r.note or rep.plan.note)
        out.append(f"{r.label:34} {rep.arena_bytes:>13,} {fmt_bytes(rep.arena_bytes):>11} "
                   f"{rep.saved_percent:>6.1f}% {rep.ratio_to_minimum:>9.3f} "
                   f"{rep.seconds * 1000:>8.1f}  {note}".rstrip())
    plain, fused = _floors(rows)

    def saved(m: int) -> str:
        return f"{100 * (1 - m / no_reuse) if no_reuse else 0:>6.1f}%"

    out.append(f"{'theoretical minimum':34} {plain:>13,} {fmt_bytes(plain):>11} {saved(plain)}"
               f"  (largest bytes alive at one step)")
    if fused is not None:
        out.append(f"{'theoretical minimum with in-place':34} {fused:>13,} "
                   f"{fmt_bytes(fused):>11} {saved(fused)}"
                   f"  (the same, with in-place pairs merged into one buffer)")
    out.append("saved: against no reuse. x minimum: arena / the minimum that applies to the "
               "row: with in-place for the rows with in-place, without it for the others.")
    if fused is not None and fused < plain:
        out.append(f"In-place lets an op write its output over its input, so the pair is one "
                   f"buffer and fewer bytes are alive at once: a row with in-place can go "
                   f"below the minimum without it ({plain:,} B), never below its own "
                   f"({fused:,} B).")
    out += [f"[{k}] {note}" for k, note in enumerate(notes, 1)]
    return "\n".join(out)


def graph_summary(graph: Graph) -> str:
    """Nodes by role, tensors by kind, bytes of each kind (exact, not aligned)."""
    roles: dict[str, int] = {}
    for n in graph.nodes:
        roles[n.role] = roles.get(n.role, 0) + 1
    kinds: dict[str, int] = {}
    for t in graph.tensors.values():
        kinds[t.kind] = kinds.get(t.kind, 0) + 1
    kb = graph.bytes_by_kind()
    lines = [
        f"graph: {len(graph)} nodes ({', '.join(f'{v} {k}' for k, v in roles.items())}), "
        f"{len(graph.tensors)} tensors ({', '.join(f'{v} {k}' for k, v in kinds.items())}),"
        f" {graph.flops():,} FLOPs per step",
        f"bytes: activations {fmt_bytes(kb.get('activation', 0))}, gradients "
        f"{fmt_bytes(kb.get('gradient', 0))}, parameters {fmt_bytes(kb.get('param', 0))}, "
        f"inputs {fmt_bytes(kb.get('input', 0))}, constants {fmt_bytes(kb.get('const', 0))}",
    ]
    return "\n".join(lines)


def run_summary(graph: Graph, st: RunStats, device: str) -> str:
    """Where one step's bytes went, each number with what it counts."""
    ws = [(workspace_of(graph, n), n) for n in graph.nodes]
    top_ws, top_node = max(ws, key=lambda w: w[0], default=(0, None))
    who = f"{top_node.name} ({top_node.op})" if top_node is not None and top_ws else "no op"
    how = ("tracemalloc: the most bytes of NumPy arrays held at once during the step"
           if device == "cpu" else "the bytes CuPy's memory pool holds after the step")
    lines = [
        ("arena", st.arena_bytes, "the planned activations and gradients: one buffer, "
                                  "each tensor a view at its offset"),
        ("unplanned", st.unplanned_bytes, "inputs, parameters and outputs, each in its own "
                                          "buffer (not reused)"),
        ("largest workspace", st.workspace_bytes,
         f"scratch one op allocates while it runs and frees when it returns, not planned: "
         f"{who}"),
        ("expected peak", st.expected_peak, "arena + unplanned + the largest op's scratch"),
        ("measured peak", st.measured_peak, how),
    ]
    out = [f"  {name:18} {'n/a' if b is None else fmt_bytes(b):>11}  {what}"
           for name, b, what in lines]
    if st.measured_peak is not None and st.measured_peak > st.expected_peak:
        out.append(f"  the measured peak is above the expected one by "
                   f"{fmt_bytes(st.measured_peak - st.expected_peak)}: temporaries NumPy "
                   f"makes that no op declares")
    return "\n".join(out)


def planner_spread(rows: list[Row]) -> str:
    """One line: the smallest and largest arena among the sharing planners (with in-place)."""
    planned = [r for r in rows if r.report is not None and r.options.inplace
               and r.options.planner != "none" and r.options.colors == 1]
    if not planned:
        return ""
    lo = min(r.report.arena_bytes for r in planned)
    hi = max(r.report.arena_bytes for r in planned)

    def names(b: int) -> str:
        return ", ".join(r.label.removesuffix(" + in-place") for r in planned
                         if r.report.arena_bytes == b)

    if lo == hi:
        return f"every sharing planner with in-place reaches {fmt_bytes(lo)}"
    return (f"the sharing planners with in-place range from {fmt_bytes(lo)} ({names(lo)}) to "
            f"{fmt_bytes(hi)} ({names(hi)}): x{hi / lo:.3f} between the best and the worst")


def working_line(rows: list[Row]) -> str:
    """The table's quantity and the one beside it (`memory/footprint.py`): the arena holds
    the planned tensors; each op's workspace is taken beside it; their sum is the working
    memory that a DTR budget counts, with its own floor."""
    rep = next(r.report for r in rows if r.report is not None and
               r.options.planner == "refcount" and r.options.inplace and r.options.colors == 1)
    return (f"the table counts the arena (the planned tensors) only. Each op's workspace is "
            f"taken beside it while the op runs, at most {fmt_bytes(rep.workspace_bytes)}: "
            f"working memory = arena + workspace ({fmt_bytes(rep.working_bytes)} for "
            f"refcount + in-place), at least {fmt_bytes(rep.working_minimum)} for this "
            f"schedule (the working minimum: bytes alive plus the running op's workspace, "
            f"at the worst step). A DTR budget counts working memory.")


def opaque_nodes(graph: Graph) -> list[str]:
    """The nodes whose op has no kernel in minigraph (imported from PyTorch as opaque ops):
    they plan and simulate, but a run cannot execute them."""
    return [n.name for n in graph.nodes if n.op == "opaque"]


def next_steps(model: str, batch: int | None, imported: bool = False) -> str:
    """What to try after the tour (`batch`: the tour's): commands, each with what it shows.
    `imported`: the tour was of a Model given as an object (not a zoo name)."""
    other = "densenet" if model == TOUR_MODEL else TOUR_MODEL
    batch = batch or 1
    if imported:
        tries = [
            ("mg.memory_widget(model)", "every technique on this model, with pictures"),
            (f"minigraph tour --model {TOUR_MODEL}", "a model of minigraph's own zoo "
                                                    "(all of them: minigraph models)"),
            ("minigraph lab lessons/10_your_model.ipynb",
             "the lesson on importing a PyTorch model"),
        ]
    else:
        tries = [
            (f"minigraph tour --model {other}",
             "another zoo model (all of them: minigraph models)"),
            (f"minigraph tour --model {model} --batch {4 * batch}",
             "a bigger batch: activations and gradients grow, parameters do not"),
            (f"minigraph plan --model {model} --batch {batch} --planner anneal "
             "--time-limit 5", "one planner, searching longer"),
            ("minigraph lab", "the lessons in JupyterLab: this tour with pictures and a "
                              "widget (lesson 00), then one technique per lesson"),
        ]
    width = max(len(c) for c, _ in tries)
    return "\n".join(["what to try next:"] + [f"  {c:{width}}  {w}" for c, w in tries])


def _row_bar() -> tuple[Any, Any]:
    """A progress bar over the table's rows (stderr, on a terminal, after a second) and
    the `progress(i, n, label)` callback that moves it."""
    bar = progress_bar(None, "planning")

    def progress(i: int, n: int, label: str) -> None:
        bar.total = n
        bar.set_description_str(label, refresh=False)
        bar.update(i - bar.n)

    return bar, progress


def tour(model: str | Model | None = None, batch: int | None = None,
         file: TextIO | None = None, time_limit: float = 0.5, device: str = "cpu",
         run: bool | None = None, ilp_max_buffers: int = 60,
         anneal_max_buffers: int = 2000, **model_kw: Any) -> dict[str, Any]:
    """Print the tour of one model: a zoo name (default `TOUR_MODEL`) or a `Model` (such as
    `from_torch`'s `TorchModel`); returns what it printed as data (for tests). `run`: run
    one SGD step (None: only when the step is under MAX_RUN_FLOPS and every op has a
    kernel). The ILP is skipped above `ilp_max_buffers` planned buffers and annealing above
    `anneal_max_buffers` (each skip says so, with how to lift it). A device that is not
    there is refused first (DeviceError)."""
    out = file or sys.stdout

    def say(s: str = "") -> None:
        print(s, file=out, flush=True)

    device = resolve_device(device)
    given = isinstance(model, Model)
    if given and (batch is not None or model_kw):
        raise GraphError(f"tour: {model.name} is a built Model; batch and model options "
                         f"({', '.join(['batch'] * (batch is not None) + list(model_kw))}) "
                         f"apply to zoo names only")
    if not given and model is not None and not isinstance(model, str):
        raise GraphError(f"tour: model must be a zoo name or a Model, not "
                         f"{type(model).__name__}")
    t0 = time.perf_counter()
    m = model if given else get_model(model or TOUR_MODEL, batch=batch, **model_kw)
    name = m.name if given else (model or TOUR_MODEL)
    g = m.graph
    say(f"minigraph tour: {m.name} - {m.description}; run with {chosen(TOUR_OPTIONS)}")
    if not given:
        say(f"built in {time.perf_counter() - t0:.2f} s")
    say(graph_summary(g))
    say(f"parameters: {len(m.params)} tensors, "
        f"{sum(math.prod(g.tensors[p].shape) for p in m.params):,} values; "
        f"loss {m.loss}; schedule of {len(schedule(g))} steps")

    plan = plan_memory(g, TOUR_OPTIONS)
    flops = g.flops()
    loss, st = None, None
    opaque = opaque_nodes(g)
    say()
    if opaque:
        say(f"not run: {len(opaque)} opaque op(s) with no minigraph kernel (first: "
            f"{opaque[0]}; to run it, its ATen op needs a rule in minigraph/fromtorch/aten.py"
            f" mapping it to a minigraph op); the plans below "
            f"need no run")
    elif run is False:
        say("not run: asked not to (run=False, --no-run; --run or run=True runs it); the "
            "plans below need no run")
    elif run is None and flops > MAX_RUN_FLOPS:
        say(f"not run: {flops / 1e9:,.0f} GFLOPs per step is too much for a tour on NumPy "
            f"(limit {MAX_RUN_FLOPS / 1e9:,.0f}; --run or `run=True` forces it); the "
            f"plans below need no run")
    else:
        ex = Executor(g, plan, device=device)
        result = ex.run(m.feeds(0), measure=True)
        st = ex.last_stats
        loss = float(result[m.loss])
        say(f"one SGD step on {ex.device} (lr {m.lr}) in the refcount + in-place arena, "
            f"{st.seconds * 1000:.1f} ms: loss {loss:.6f}")
        say(run_summary(g, st, ex.device))

    bar, progress = _row_bar()
    try:
        rows = technique_rows(g, time_limit=time_limit, progress=progress,
                              ilp_max_buffers=ilp_max_buffers,
                              anneal_max_buffers=anneal_max_buffers)
    finally:
        bar.close()
    say()
    say(f"memory of the planned tensors (activations and gradients), program order, "
        f"{rows[0].options.alignment}-byte alignment:")
    table = memory_table(g, rows)
    say(table)
    spread = planner_spread(rows)
    if spread:
        say(spread)
    say(working_line(rows))
    say()
    say("inputs, parameters, constants and outputs are not reused (bytes rounded up to the "
        "alignment): "
        + ", ".join(f"{k} {fmt_bytes(v)}"
                    for k, v in sorted(rows[0].report.unplanned.items()) if v))
    say()
    say(next_steps(name, m.config.get("batch"), imported=given))
    return {"model": m, "loss": loss, "stats": st, "rows": rows, "table": table,
            "spread": spread}
