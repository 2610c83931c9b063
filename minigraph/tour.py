"""`minigraph tour`: one model from end to end, every number computed on the spot.

1. Build the model's training graph (forward + explicit backward + update) and print
   what it holds: nodes by role, tensors, bytes of activations, gradients, parameters.
2. Plan it with refcount + in-place, run one SGD step on NumPy in that arena, print the
   loss and the bytes the run used.
3. The memory table: the same graph planned with each technique switched on in turn
   (no reuse, in-place alone, refcount, refcount + in-place, colouring, then every other
   planner in `minigraph.memory.PLANNERS`), against the theoretical minimum.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

from .experiments.techniques import Row, technique_rows
from .graph import Graph, fmt_bytes
from .memory import MemoryOptions, plan_memory, schedule
from .models import DEFAULT_MODEL, get_model
from .runtime.executor import Executor

MAX_RUN_FLOPS = 5e10   # a step above this is planned but not run (ResNet-50: 786e9)


def memory_table(graph: Graph, rows: list[Row]) -> str:
    """The rows as a text table; the two theoretical minima (program order) close it."""
    no_reuse = rows[0].report.no_reuse_bytes
    out = [f"{'technique':34} {'arena bytes':>13} {'arena':>11} {'saved':>7} "
           f"{'x minimum':>9} {'ms':>8}  note"]
    for r in rows:
        rep = r.report
        if rep is None:
            out.append(f"{r.label:34} {'-':>13} {'-':>11} {'-':>7} {'-':>9} {'-':>8}  {r.note}")
            continue
        note = r.note or rep.plan.note
        note = note if len(note) <= 50 else note[:47] + "..."
        out.append(f"{r.label:34} {rep.arena_bytes:>13,} {fmt_bytes(rep.arena_bytes):>11} "
                   f"{rep.saved_percent:>6.1f}% {rep.ratio_to_minimum:>9.3f} "
                   f"{rep.seconds * 1000:>8.1f}  {note}".rstrip())
    plain = next(r.report for r in rows if not r.options.inplace)
    fused = next((r.report for r in rows if r.options.inplace and r.report), None)
    out.append(f"{'theoretical minimum':34} {plain.theoretical_minimum:>13,} "
               f"{fmt_bytes(plain.theoretical_minimum):>11} "
               f"{100 * (1 - plain.theoretical_minimum / no_reuse) if no_reuse else 0:>6.1f}%"
               f"  (largest bytes alive at one step)")
    if fused is not None:
        m = fused.theoretical_minimum
        out.append(f"{'theoretical minimum with in-place':34} {m:>13,} {fmt_bytes(m):>11} "
                   f"{100 * (1 - m / no_reuse) if no_reuse else 0:>6.1f}%"
                   f"  (in-place pairs fused into one buffer)")
    out.append("saved: against no reuse; x minimum: arena / the theoretical minimum of the "
               "same buffers (in-place pairs fused where in-place is on)")
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


def tour(model: str | None = None, batch: int | None = None, file: TextIO | None = None,
         time_limit: float = 0.5, device: str = "cpu", run: bool | None = None,
         **model_kw: Any) -> dict[str, Any]:
    """Print the tour of one zoo model; returns what it printed as data (for tests).

    `run`: run one SGD step (None: only when the step is under MAX_RUN_FLOPS)."""
    out = file or sys.stdout

    def say(s: str = "") -> None:
        print(s, file=out, flush=True)

    name = model or DEFAULT_MODEL
    t0 = time.perf_counter()
    m = get_model(name, batch=batch, **model_kw)
    g = m.graph
    say(f"minigraph tour: {m.name} - {m.description}")
    say(f"built in {time.perf_counter() - t0:.2f} s")
    say(graph_summary(g))
    say(f"parameters: {len(m.params)} tensors, "
        f"{sum(math.prod(g.tensors[p].shape) for p in m.params):,} values; "
        f"loss {m.loss}; schedule of {len(schedule(g))} steps")

    plan = plan_memory(g, MemoryOptions(planner="refcount", inplace=True))
    flops = g.flops()
    loss, st = None, None
    say()
    if run is False or (run is None and flops > MAX_RUN_FLOPS):
        say(f"not run: {flops / 1e9:,.0f} GFLOPs per step is too much for a tour on NumPy "
            f"(limit {MAX_RUN_FLOPS / 1e9:,.0f}; `run=True` forces it); the plans below "
            f"need no run")
    else:
        ex = Executor(g, plan, device=device)
        result = ex.run(m.feeds(0), measure=True)
        st = ex.last_stats
        loss = float(result[m.loss])
        say(f"one SGD step on {ex.device} (lr {m.lr}) in the refcount + in-place arena: "
            f"loss {loss:.6f}")
        peak = "n/a" if st.measured_peak is None else fmt_bytes(st.measured_peak)
        say(f"  arena {fmt_bytes(st.arena_bytes)}, unplanned (inputs, parameters, outputs) "
            f"{fmt_bytes(st.unplanned_bytes)}, largest workspace "
            f"{fmt_bytes(st.workspace_bytes)}, measured peak {peak}, "
            f"{st.seconds * 1000:.1f} ms")

    rows = technique_rows(g, time_limit=time_limit)
    say()
    say(f"memory of the planned tensors (activations and gradients), program order, "
        f"{rows[0].options.alignment}-byte alignment:")
    table = memory_table(g, rows)
    say(table)
    say()
    say("inputs, parameters, constants and outputs are not reused: "
        + ", ".join(f"{k} {fmt_bytes(v)}"
                    for k, v in sorted(rows[0].report.unplanned.items()) if v))
    return {"model": m, "loss": loss, "stats": st, "rows": rows, "table": table}
