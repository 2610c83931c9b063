"""Our DTR against the DTR authors' own simulator (simrd) on the same traces and budgets.

    git clone https://github.com/uwsampl/dtr-prototype /tmp/dtr-prototype
    pip install attrs
    python benchmarks/dtr_reference.py --simrd /tmp/dtr-prototype/simrd

For each target model of `benchmarks/dtr.py` this writes the graph as a DTR trace
(`write_trace`: FLOP costs as TIME) and replays it twice at the benchmark's own budgets
(a ratio of the total peak, so the arena gets ratio x total - external bytes):

* simrd, exactly as its `eval/pareto/run.py` runs a log: `RuntimeV2EagerOptimized` with
  the heuristic object, budget = arena bytes + the trace's constants (simrd keeps every
  constant resident, so both runtimes get the same bytes for everything else), stopped
  when rematerialisation exceeds 10x the base compute (our `thrash_limit`);
* this repository's `DTRRuntime` on the parsed trace, ideal allocator (simrd has no
  addresses), once as it is and once with `dead_first=False`, the one policy where it
  departs from simrd (dead tensors kept after a rematerialisation go first).

`thrash`: stopped at 10x; `OOM`: simrd found nothing left to evict. simrd is not part of
this repository; without it the script says how to get it and exits with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import io
import math
import os
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from dtr import FULL, TARGETS  # noqa: E402

from minigraph.errors import BudgetError, ThrashError  # noqa: E402
from minigraph.models import get_model  # noqa: E402
from minigraph.runtime.dtr import DTRRuntime, program_from_graph  # noqa: E402
from minigraph.runtime.dtr.trace import parse_trace, write_trace  # noqa: E402

RATIOS = (0.8, 0.6, 0.5, 0.4)
PAIRS = [("DTR", "dtr"), ("DTREqClass", "dtr-eqclass")]   # simrd class, our heuristic
LIMIT = 10.0                                              # thrash at 10x extra compute


def load_simrd(path: str | None):
    """simrd's parser, runtimes and heuristics, or None when it cannot be imported."""
    if path:
        sys.path.insert(0, str(Path(path).resolve()))
    try:
        parse = importlib.import_module("simrd.parse.parse")
        runtime = importlib.import_module("simrd.runtime")
        heuristic = importlib.import_module("simrd.heuristic")
    except ImportError as e:
        print(f"simrd not importable ({e}).\n{__doc__}")
        return None
    print(f"simrd imported from {Path(parse.__file__).parents[2]}; every cell: total "
          f"compute / base compute")
    return parse.parse_file, runtime, heuristic


def deep(fn, *args):
    """simrd rematerialises by recursion: run it in a thread with a deep stack."""
    sys.setrecursionlimit(10**6)
    threading.stack_size(512 * 2**20)
    box: dict = {}

    def run():
        try:
            box["r"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 -- handed back to the caller
            box["e"] = e

    th = threading.Thread(target=run)
    th.start()
    th.join()
    if "e" in box:
        raise box["e"]
    return box["r"]


def simrd_run(simrd, text: str, budget: float, heuristic: str | None,
              remat_limit: float = math.inf) -> tuple[float, dict]:
    """simrd's clock and telemetry summary; heuristic None = its unbudgeted baseline."""
    parse_file, rt_mod, h_mod = simrd
    graph = parse_file(io.StringIO(text), start=True)
    if heuristic is None:
        rt = rt_mod.RuntimeV1(math.inf, h_mod.Heuristic(), stats=False, trace=False)
    else:
        rt = rt_mod.RuntimeV2EagerOptimized(budget, getattr(h_mod, heuristic)(),
                                            remat_limit=remat_limit, trace=False,
                                            stats=False)
    deep(graph.get_closure(), rt)
    return rt.clock, rt.telemetry.summary


def simrd_cell(simrd, text: str, budget: float, heuristic: str, base: float) -> str:
    rt_mod = simrd[1]
    try:
        clock, _ = simrd_run(simrd, text, budget, heuristic, base * LIMIT)
    except MemoryError:
        return "OOM"
    except rt_mod.RematExceededError:
        return "thrash"
    return f"{clock / base:.3f}"


def ours_cell(program, budget: int, heuristic: str, **kw) -> str:
    try:
        tr = DTRRuntime(program, budget, heuristic, allocator="ideal", timeline=False,
                        **kw).run()
    except ThrashError:
        return "thrash"
    except BudgetError:
        return "below"
    return f"{tr.overhead:.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--simrd", default=os.environ.get("SIMRD_PATH"),
                    help="the simrd folder of a dtr-prototype checkout (or $SIMRD_PATH)")
    args = ap.parse_args()
    simrd = load_simrd(args.simrd)
    if simrd is None:
        return 2
    targets = {(label, r): limit for label, h, r, limit in TARGETS if h == "dtr"}
    labels = {label for label, _ in targets}
    for label, name, kw in FULL:
        if label not in labels:
            continue
        model = get_model(name, **kw)
        bounds = program_from_graph(model.graph).bounds()
        text = "\n".join(write_trace(model.graph)) + "\n"
        trace_prog = parse_trace(text, 1, name=label)
        _, summary = simrd_run(simrd, text, math.inf, None)
        base, const = summary["model_compute"], summary["model_const_memory"]
        assert abs(base - trace_prog.base_cost) <= 1e-6 * base, (base, trace_prog.base_cost)
        print(f"\n### {label}: {model.graph.name} {kw}\n")
        print(f"base compute {base:,.0f} FLOPs (both runtimes); trace constants {const:,} B; "
              f"benchmark total peak {bounds.total:,} B, external {bounds.external:,} B\n")
        head = ["ratio of total", "arena budget (B)"]
        for sh, oh in PAIRS:
            head += [f"simrd {sh}", f"ours {oh}"]
        head.append("ours dtr, dead_first=False")
        print("| " + " | ".join(head) + " |")
        print("|" + "---:|" * len(head))
        for r in RATIOS:
            arena = bounds.arena_budget(r, "total")
            cells = [f"{r:.1f}", f"{arena:,}"]
            for sh, oh in PAIRS:
                cells += [simrd_cell(simrd, text, arena + const, sh, base),
                          ours_cell(trace_prog, arena, oh)]
            cells.append(ours_cell(trace_prog, arena, "dtr", dead_first=False))
            limit = targets.get((label, r))
            if limit is not None:
                cells[0] += f" (target <= {limit})"
            print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
