"""Our DTR against the DTR authors' own simulator (simrd) on the same traces and budgets.

    git clone https://github.com/uwsampl/dtr-prototype /tmp/dtr-prototype
    pip install attrs
    python benchmarks/dtr_reference.py --simrd /tmp/dtr-prototype/simrd [--quick] [--zoo]

The traces are generated (`minigraph.dtr_research.tracegen`: views, multi-output ops,
MUTATE of gradients and of optimizer constants, constants appearing mid-run, COPY,
COPY_FROM, RELEASE); `--zoo` adds the models of `benchmarks/dtr.py` written with
`write_trace`. Each is replayed as simrd's evaluation (`eval/pareto/run.py`) runs a log:
`RuntimeV2EagerOptimized`, budget = int(ratio x the baseline peak), the peak of its
unbudgeted RuntimeV1 run, constants included; overhead limit 2.0 (rematerialisation
above 1x the base compute stops the run). Ours gets the same bytes (`replay_trace`'s
default budget; its baseline peak is checked equal to simrd's) with the same limit
(`thrash_limit=1.0`): the four columns "simrd X | preset" are simrd's heuristic X and
`SimrdOptions(X)`; the last two are our runtime with its own rules and heuristic dtr:
the default `DTROptions()` (first-fit arena) and with simrd's counter of bytes
(`allocator="ideal"`). Each cell: total compute / base compute (simrd's eval prints
its clock / base compute, and its clock starts at 1: 1/base more). `thrash`: stopped at
the limit; `OOM`: nothing left to evict (simrd) or a budget below what the program needs
(ours). A preset cell that differs from simrd's by more than 0.001 is marked `!=` and the
script exits 1. simrd is not part of this repository; without it the script says how to
get it and exits with status 2.
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

from minigraph.dtr_research import SimrdOptions, parse_trace, replay_trace  # noqa: E402
from minigraph.dtr_research.tracegen import GENERATED, generated_trace  # noqa: E402
from minigraph.errors import BudgetError, ThrashError  # noqa: E402
from minigraph.runtime.dtr import DTROptions  # noqa: E402

RATIOS = (0.9, 0.7, 0.5, 0.4, 0.3, 0.2)
PAIRS = [("DTR", "dtr"), ("DTREqClass", "dtr-eqclass"), ("LRU", "lru"), ("MSPS", "msps")]
OVERHEAD_LIMIT = 2.0                     # simrd's evaluation: stop above 2x the base compute
QUICK = (("chain", 12), ("unet", 2), ("resnet", 3), ("lstm", 6))


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
    print(f"simrd imported from {Path(runtime.__file__).parents[2]}; every cell: total "
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


def simrd_baseline(simrd, text: str) -> tuple[float, int]:
    """(base compute, baseline peak) of simrd's unbudgeted RuntimeV1 run."""
    parse_file, rt_mod, h_mod = simrd
    rt = rt_mod.RuntimeV1(math.inf, h_mod.Heuristic(), stats=False, trace=False)
    deep(parse_file(io.StringIO(text), start=True).get_closure(), rt)
    s = rt.telemetry.summary
    return s["model_compute"], s["max_memory"]


def simrd_cell(simrd, text: str, budget: int, heuristic: str, base: float) -> str | float:
    parse_file, rt_mod, h_mod = simrd
    rt = rt_mod.RuntimeV2EagerOptimized(budget, getattr(h_mod, heuristic)(),
                                        remat_limit=base * (OVERHEAD_LIMIT - 1),
                                        trace=False, stats=False)
    try:
        deep(parse_file(io.StringIO(text), start=True).get_closure(), rt)
    except MemoryError:
        return "OOM"
    except rt_mod.RematExceededError:
        return "thrash"
    return (rt.clock - 1) / base


def ours_cell(program, ratio: float, options: DTROptions) -> str | float:
    try:
        return replay_trace(program, ratio=ratio, options=options,
                            thrash_limit=OVERHEAD_LIMIT - 1).overhead
    except ThrashError:
        return "thrash"
    except BudgetError:
        return "OOM"


def show(x: str | float) -> str:
    return x if isinstance(x, str) else f"{x:.3f}"


def same(a: str | float, b: str | float) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return abs(a - b) <= 1e-3


def table(simrd, label: str, text: str) -> int:
    """Print one trace's table; returns the number of preset cells that differ."""
    program = parse_trace(text, name=label)
    base, peak = simrd_baseline(simrd, text)
    assert abs(base - program.base_cost) <= 1e-9 * base, (base, program.base_cost)
    assert peak == program.baseline_peak, (peak, program.baseline_peak)
    print(f"\n### {label}: {len(program.ops)} ops, base compute {base:,.0f}, baseline peak "
          f"{peak:,} B (both)\n")
    head = ["ratio", "budget (B)"]
    for sh, _ in PAIRS:
        head += [f"simrd {sh}", "preset"]
    head += ["ours default", "ours ideal"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    bad = 0
    for r in RATIOS:
        cells = [f"{r:.1f}", f"{int(r * peak):,}"]
        for sh, oh in PAIRS:
            s = simrd_cell(simrd, text, int(r * peak), sh, base)
            o = ours_cell(program, r, SimrdOptions(oh))
            bad += not same(s, o)
            cells += [show(s), show(o) + ("" if same(s, o) else " !=")]
        cells.append(show(ours_cell(program, r, DTROptions())))
        cells.append(show(ours_cell(program, r, DTROptions(allocator="ideal"))))
        print("| " + " | ".join(cells) + " |", flush=True)
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--simrd", default=os.environ.get("SIMRD_PATH"),
                    help="the simrd folder of a dtr-prototype checkout (or $SIMRD_PATH)")
    ap.add_argument("--quick", action="store_true", help="the four small traces only")
    ap.add_argument("--zoo", action="store_true", help="also the models of benchmarks/dtr.py")
    args = ap.parse_args()
    simrd = load_simrd(args.simrd)
    if simrd is None:
        return 2
    bad = 0
    for family, size in QUICK if args.quick else GENERATED:
        bad += table(simrd, f"{family}-{size}", "\n".join(generated_trace(family, size)) + "\n")
    if args.zoo:
        from dtr import FULL

        from minigraph.dtr_research import write_trace
        from minigraph.models import get_model
        for label, name, kw in FULL:
            bad += table(simrd, label, "\n".join(write_trace(get_model(name, **kw).graph)) + "\n")
    print(f"\n{bad} preset cells differ from simrd by more than 0.001")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
