"""minigraph on a GPU against PyTorch eager, the same training step: time per step, peak
device memory of each technique, and DTR under a budget [Kirisame 2021].

`run(device, sizes)` measures; `tables(results)` and `targets(results)` say what was
measured; `committed()` gives the rows of the last run on a real GPU (kept in
`gpu_results.json` beside this file, written by `benchmarks/gpu.py --json`), which lesson 08
shows where no GPU is present.

- time per step: the median of `repeats` steps after `warmup`, timed with CUDA events
  (CuPy's for minigraph, torch's for PyTorch), the storage loaded once (`Executor.load`,
  `step`); both sides in plain float32 (TF32 off in PyTorch, as in minigraph's cuBLAS calls);
- peak device memory of each technique: a memory hook on CuPy's pool, sampled per op
  (`Executor.run(measure=True)`), beside the bytes the plan declares (arena + inputs,
  parameters and outputs + the largest op workspace) and PyTorch's
  `torch.cuda.max_memory_allocated()` over the same step [PyTorch CUDA] (its parameters and
  batch counted; what was allocated before the step, such as cuBLAS's workspace, not);
- DTR on the GPU under a budget below the no-rematerialisation peak: the bytes the pool
  measured, the compute overhead (cost model and measured kernel time) and the largest
  difference of its outputs from the planned run's;
- PyTorch as a user writes it (`torch_idiomatic.py`: nn.BatchNorm2d, scaled dot-product
  attention, cudnn.benchmark on): eager, the update fused into the backward pass, and
  torch.compile, with TF32 off, then eager with TF32 on; the replay of minigraph's graph above
  stays, labelled as such. The like-for-like peak is against the fused update, which frees
  each gradient as soon as it is used, as minigraph's graph does.
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..backend import PoolMeter
from ..errors import MinigraphError
from ..graph import fmt_bytes
from ..memory.api import MemoryOptions, plan_memory
from ..models import Model, get_model
from ..reference import TorchStep
from ..runtime.dtr import DTRExecutor
from ..runtime.executor import Executor
from .torch_idiomatic import VARIANTS, bench_idiomatic

COMMITTED = Path(__file__).with_name("gpu_results.json")

TECHNIQUES = {
    "no reuse": MemoryOptions(planner="none"),
    "refcount+inplace": MemoryOptions(planner="refcount", inplace=True),
    "ge+inplace": MemoryOptions(planner="ge", inplace=True),
    "greedy-size+inplace": MemoryOptions(planner="greedy-size", inplace=True),
    "bestfit+inplace, order best": MemoryOptions(planner="bestfit", inplace=True,
                                                     order="best"),
}
PLANNED = "bestfit+inplace, order best"     # the row set against PyTorch's time and peak

GPU_SIZES = {
    "mlp": dict(batch=8192, sizes=(4096, 4096, 4096, 4096, 4096, 1000)),
    "resnet": dict(depth=18, image=32, batch=512, width=64),
    "transformer": dict(layers=8, heads=8, seq=512, d_model=512, vocab=8192, batch=32),
}
# A lesson's live run on a GPU: under a minute, a few hundred MB.
LESSON_SIZES = {
    "mlp": dict(batch=1024, sizes=(1024, 1024, 1024, 10)),
    "resnet": dict(depth=18, image=32, batch=64, width=16),
    "transformer": dict(layers=2, heads=4, seq=128, d_model=128, vocab=1024, batch=8),
}
DRY_SIZES: dict[str, dict] = {"mlp": {}, "resnet": {}, "transformer": {}}


def timer(device: str) -> Any:
    """(start, stop) -> milliseconds between them, on the device's own clock."""
    if device == "gpu":
        import cupy
        a, b = cupy.cuda.Event(), cupy.cuda.Event()

        def measure(fn) -> float:
            a.record()
            fn()
            b.record()
            b.synchronize()
            return cupy.cuda.get_elapsed_time(a, b)
        return measure

    def wall(fn) -> float:
        t0 = time.perf_counter()
        fn()
        return 1000 * (time.perf_counter() - t0)
    return wall


def median_ms(measure: Any, fn: Any, repeats: int, warmup: int) -> float:
    for _ in range(warmup):
        measure(fn)
    return statistics.median(measure(fn) for _ in range(repeats))


def bench_minigraph(model: Model, options: MemoryOptions, device: str, repeats: int,
                    warmup: int, feeds: dict | None = None) -> dict:
    """One technique: plan, step time, measured and declared peak."""
    g = model.graph
    report = plan_memory(g, options)
    feeds = feeds if feeds is not None else model.feeds(0)
    ms = _step_ms(Executor(g, report.plan, device=device), feeds, device, repeats, warmup)
    _free_pool(device)
    ex = Executor(g, report.plan, device=device)     # the peak, from nothing, one step
    ex.run(feeds, measure=True)
    s = ex.last_stats
    declared = s.arena_bytes + s.unplanned_bytes + s.workspace_bytes
    del ex
    _free_pool(device)
    return {"ms": ms, "arena": report.arena_bytes, "unplanned": s.unplanned_bytes,
            "workspace": s.workspace_bytes, "declared": declared,
            "measured": s.measured_peak, "pool": s.pool_peak,
            "undeclared": sum(s.undeclared.values()), "plan_seconds": report.seconds}


def _step_ms(ex: Executor, feeds: dict, device: str, repeats: int, warmup: int) -> float:
    """Median ms of a resident training step (storage loaded once, as a training loop)."""
    ex.load(feeds)
    k = iter(range(10**9))
    return median_ms(timer(device), lambda: ex.step(step=next(k)), repeats, warmup)


def bench_torch(model: Model, device: str, repeats: int, warmup: int,
                feeds: dict | None = None) -> dict | None:
    """PyTorch eager on the same graph (`minigraph.reference.TorchStep`): ms and peak."""
    try:
        import torch
    except ImportError:
        return None
    dev = "cuda" if device == "gpu" else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False      # the same float32 arithmetic
    torch.backends.cudnn.allow_tf32 = False
    feeds = feeds if feeds is not None else model.feeds(0)
    # Copies: on the CPU torch.from_numpy shares memory, and the SGD step updates in place.
    step = TorchStep(model.graph, {k: v.copy() for k, v in feeds.items()}, device=dev)
    if dev == "cuda":
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def measure(fn) -> float:
            a.record()
            fn()
            b.record()
            b.synchronize()
            return a.elapsed_time(b)
    else:
        measure = timer("cpu")
    ms = median_ms(measure, step.run, repeats, warmup)
    peak = None
    if dev == "cuda":
        for v in step.values.values():
            v.grad = None
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        step.run()
        torch.cuda.synchronize()
        held = sum(v.numel() * v.element_size() for n, v in step.values.items()
                   if model.graph.tensors[n].kind in ("input", "param"))
        peak = torch.cuda.max_memory_allocated() - before + held
    del step
    if dev == "cuda":
        torch.cuda.empty_cache()
    return {"ms": ms, "peak": peak}


def bench_dtr(model: Model, device: str, ratio: float, planned_out: dict | None,
              feeds: dict | None = None) -> dict:
    """A DTR run at `ratio` of the total no-rematerialisation peak [Kirisame 2021]."""
    feeds = feeds if feeds is not None else model.feeds(0)
    try:
        ex = DTRExecutor(model.graph, ratio=ratio, device=device)
    except MinigraphError as e:
        return {"status": f"{type(e).__name__}: {e}"[:120]}
    meter = None
    if device == "gpu":
        meter = PoolMeter()
    t0 = time.perf_counter()
    try:
        if meter is not None:
            with meter:
                out = ex.run(feeds)
        else:
            out = ex.run(feeds)
    except MinigraphError as e:
        return {"status": f"{type(e).__name__}: {e}"[:120], "budget": ex.budget}
    ms = 1000 * (time.perf_counter() - t0)
    tr = ex.last_trace
    diff = None
    if planned_out is not None:
        diff = max(float(np.max(np.abs(out[k] - planned_out[k]))) for k in out)
    _free_pool(device)
    return {"status": "ok", "budget": tr.budget, "external": tr.external,
            "no_remat_total": tr.peak + tr.external, "total_ratio": tr.total_ratio,
            "measured": meter.peak_requested if meter else None, "ms": ms,
            "overhead": tr.overhead, "measured_overhead": tr.measured_overhead,
            "remats": tr.rematerializations, "max_abs_diff": diff}


def op_profile(model: Model, device: str, feeds: dict, steps: int = 3) -> list[tuple]:
    """Where the planned step's time goes: per op kind, (op, kernels, ms per step, share),
    each kernel timed on the device's clock (`Executor.profile`), the median of `steps`."""
    report = plan_memory(model.graph, TECHNIQUES[PLANNED])
    ex = Executor(model.graph, report.plan, device=device)
    ex.load(feeds)
    ex.step()                                   # warm-up (kernels compiled)
    runs = [ex.profile(step=k) for k in range(steps)]
    per_op: dict[str, list[float]] = {}
    count: dict[str, int] = {}
    for _, op, _ in runs[0]:
        count[op] = count.get(op, 0) + 1
    for run in runs:
        totals: dict[str, float] = {}
        for _, op, ms in run:
            totals[op] = totals.get(op, 0.0) + ms
        for op, ms in totals.items():
            per_op.setdefault(op, []).append(ms)
    del ex
    _free_pool(device)
    med = {op: statistics.median(v) for op, v in per_op.items()}
    total = sum(med.values()) or 1.0
    return sorted(((op, count[op], ms, ms / total) for op, ms in med.items()),
                  key=lambda r: -r[2])


def planned_outputs(model: Model, device: str, feeds: dict) -> dict[str, Any]:
    report = plan_memory(model.graph, TECHNIQUES[PLANNED])
    out = Executor(model.graph, report.plan, device=device).run(feeds)
    _free_pool(device)
    return out


def _free_pool(device: str) -> None:
    if device == "gpu":
        import cupy
        cupy.get_default_memory_pool().free_all_blocks()


def environment(device: str) -> dict:
    env = {"python": platform.python_version(), "numpy": np.__version__}
    try:
        import torch
        env["torch"] = torch.__version__
    except ImportError:
        pass
    if device == "gpu":
        import cupy
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        env["device"] = name.decode() if isinstance(name, bytes) else str(name)
        env["device_memory"] = int(cupy.cuda.Device().mem_info[1])
        env["cupy"] = cupy.__version__
        v = cupy.cuda.runtime.runtimeGetVersion()
        env["cuda_runtime"] = f"{v // 1000}.{v % 1000 // 10}"
        d = cupy.cuda.runtime.driverGetVersion()
        env["cuda_driver"] = f"{d // 1000}.{d % 1000 // 10}"
    else:
        env["device"] = f"CPU ({platform.machine()}), NumPy backend (dry run)"
    return env


def idiomatic_rows(model: Model, device: str, repeats: int, warmup: int,
                   compile_: bool = True) -> dict | None:
    """PyTorch as written (`torch_idiomatic.py`), each variant with TF32 off, then eager
    with TF32 on (on a GPU only: the CPU has no TF32); None without torch."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    rows = {v: bench_idiomatic(model, device, v, repeats, warmup)
            for v in VARIANTS if compile_ or v != "torch.compile"}
    if device == "gpu":
        rows["eager, TF32"] = bench_idiomatic(model, device, "eager", repeats, warmup,
                                              tf32=True)
    return rows


def run(device: str, sizes: dict, repeats: int = 10, warmup: int = 3, dtr_ratio: float = 0.8,
        models: list[str] | None = None, progress: bool = True, compile_: bool = True
        ) -> dict:
    """Measure every model of `sizes` (or of `models`): PyTorch (the replay of minigraph's
    graph, and as a user writes it; `compile_=False` leaves torch.compile out), each
    technique, DTR."""
    results = {"environment": environment(device), "repeats": repeats, "warmup": warmup,
               "dtr_ratio": dtr_ratio, "models": {}}
    say = (lambda m: print(m, file=sys.stderr, flush=True)) if progress else (lambda m: None)
    for name in models or list(sizes):
        model = get_model(name, **sizes[name])
        say(f"[{name}] {model.summary()}")
        feeds = model.feeds(0)
        row = {"config": {k: list(v) if isinstance(v, tuple) else v
                          for k, v in sizes[name].items()},
               "nodes": len(model.graph), "flops": model.graph.flops(),
               "torch": bench_torch(model, device, repeats, warmup, feeds), "techniques": {}}
        for tech, opts in TECHNIQUES.items():
            row["techniques"][tech] = bench_minigraph(model, opts, device, repeats, warmup,
                                                      feeds)
            say(f"[{name}] {tech}: {row['techniques'][tech]}")
        row["dtr"] = bench_dtr(model, device, dtr_ratio,
                               planned_outputs(model, device, feeds), feeds)
        say(f"[{name}] DTR: {row['dtr']}")
        row["idiomatic"] = idiomatic_rows(model, device, repeats, warmup, compile_)
        say(f"[{name}] PyTorch as written: {row['idiomatic']}")
        results["models"][name] = row
    return results


def tables(results: dict) -> str:
    """The markdown the script prints (and --write commits)."""
    env = results["environment"]
    head = ", ".join(f"{k} {v}" for k, v in env.items() if k not in ("device", "device_memory"))
    mem = f" ({fmt_bytes(env['device_memory'])})" if "device_memory" in env else ""
    lines = [f"device: {env['device']}{mem}; {head}",
             f"median of {results['repeats']} steps after {results['warmup']} warm-up; "
             "float32 on both sides (TF32 off)", "",
             "| model | technique | ms/step | torch ms/step | time ratio | planned arena | "
             "declared peak | measured peak | pool reserved | torch peak | peak ratio |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, row in results["models"].items():
        t = row["torch"] or {}
        for tech, r in row["techniques"].items():
            ratio = f"{r['ms'] / t['ms']:.2f}" if t.get("ms") else "-"
            pr = f"{r['measured'] / t['peak']:.2f}" if t.get("peak") and r["measured"] else "-"
            lines.append(
                f"| {name} | {tech} | {r['ms']:.2f} | {t.get('ms', 0):.2f} | {ratio} | "
                f"{fmt_bytes(r['arena'])} | {fmt_bytes(r['declared'])} | "
                f"{fmt_bytes(r['measured'])} | "
                f"{fmt_bytes(r['pool']) if r['pool'] else '-'} | "
                f"{fmt_bytes(t['peak']) if t.get('peak') else '-'} | {pr} |")
    lines += ["", "measured peak: the most bytes of device arrays alive at once, read per op by "
              "a hook on CuPy's pool (NumPy: tracemalloc); declared: arena + inputs, "
              "parameters and outputs + the largest declared op workspace; pool reserved: the "
              "same arrays as the pool holds them, each block rounded up to 512 bytes. "
              "torch peak: max_memory_allocated() over one eager step, parameters and batch "
              "included.", "",
              "| model | DTR budget (arena) | of the no-remat total | measured peak | "
              "compute overhead (model) | kernel time overhead | op replays | ms (one run) | "
              "max abs diff vs planned |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, row in results["models"].items():
        d = row["dtr"]
        if d.get("status") != "ok":
            lines.append(f"| {name} | {d.get('status')} | | | | | | | |")
            continue
        mo = d["measured_overhead"]
        lines.append(
            f"| {name} | {fmt_bytes(d['budget'])} | {d['total_ratio']:.2f} x "
            f"{fmt_bytes(d['no_remat_total'])} | "
            f"{fmt_bytes(d['measured']) if d['measured'] else '-'} | x{d['overhead']:.3f} | "
            f"{'-' if mo is None else f'x{mo:.2f}'} | {d['remats']} | {d['ms']:.0f} | "
            f"{d['max_abs_diff']:.2e} |")
    return "\n".join(lines + idiomatic_table(results))


def idiomatic_table(results: dict) -> list[str]:
    """PyTorch as written beside minigraph's planned step, and the peak gap split into
    what the schedule (gradients held until the update) and what the plan explains."""
    if not any(row.get("idiomatic") for row in results["models"].values()):
        return []
    lines = ["", "PyTorch as a user writes it (torch_idiomatic.py: nn.BatchNorm2d, "
             "scaled_dot_product_attention, cudnn.benchmark on; TF32 off unless named), "
             f"against minigraph's {PLANNED!r}; the replay of minigraph's graph op by op is "
             "its own row", "",
             "| model | PyTorch | ms/step | peak | minigraph ms / this | minigraph peak / this |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for name, row in results["models"].items():
        ours = row["techniques"][PLANNED]
        rep = row["torch"] or {}
        variants = {"replay of minigraph's graph": {"status": "ok", **rep}} if rep else {}
        variants.update(row.get("idiomatic") or {})
        for label, r in variants.items():
            if r.get("status") != "ok":
                lines.append(f"| {name} | {label} | {r.get('status')} | | | |")
                continue
            pr = f"{ours['measured'] / r['peak']:.2f}" if r.get("peak") else "-"
            lines.append(f"| {name} | {label} | {r['ms']:.2f} | "
                         f"{fmt_bytes(r['peak']) if r.get('peak') else '-'} | "
                         f"{ours['ms'] / r['ms']:.2f} | {pr} |")
    for name, row in results["models"].items():
        split = peak_split(row)
        if split:
            lines.append(f"- {name}: {split}")
    return lines


def peak_split(row: dict) -> str | None:
    """How much of PyTorch eager's peak above minigraph's is the schedule (eager holds every
    gradient until `optimizer.step()`; the fused update frees each at once, as minigraph's
    graph does) and how much the plan (the rest: PyTorch fused against minigraph)."""
    idi = row.get("idiomatic") or {}
    eager, fused = idi.get("eager", {}).get("peak"), idi.get("fused update", {}).get("peak")
    ours = row["techniques"][PLANNED]["measured"]
    if not (eager and fused and ours):
        return None
    gap = eager - ours
    return (f"PyTorch eager {fmt_bytes(eager)} - minigraph {fmt_bytes(ours)} = "
            f"{fmt_bytes(gap)}: the schedule (eager - fused update) "
            f"{fmt_bytes(eager - fused)}, the plan (fused update - minigraph) "
            f"{fmt_bytes(fused - ours)}")


def targets(results: dict) -> list[str]:
    """The issue's targets, one line each: met or not, with the numbers."""
    out = []
    for name, row in results["models"].items():
        t, r = row["torch"] or {}, row["techniques"][PLANNED]
        if t.get("peak"):
            ok = r["measured"] < t["peak"]
            out.append(f"{name}: planned peak {fmt_bytes(r['measured'])} "
                       f"{'<' if ok else '>='} the replay in torch {fmt_bytes(t['peak'])}: "
                       f"{'met' if ok else 'NOT met'}")
        if t.get("ms"):
            q = r["ms"] / t["ms"]
            out.append(f"{name}: step {r['ms']:.2f} ms = {q:.2f} x the replay of minigraph's "
                       f"graph in torch {t['ms']:.2f} ms (target <= 1.5): "
                       f"{'met' if q <= 1.5 else 'NOT met'}")
        idi = row.get("idiomatic") or {}
        fused, eager = idi.get("fused update", {}), idi.get("eager", {})
        if fused.get("peak"):
            ok = r["measured"] < fused["peak"]
            out.append(f"{name}: planned peak {fmt_bytes(r['measured'])} "
                       f"{'<' if ok else '>='} PyTorch eager with the fused update "
                       f"{fmt_bytes(fused['peak'])}: {'met' if ok else 'NOT met'}")
        if eager.get("status") == "ok" and device_run(results):
            q = r["ms"] / eager["ms"]
            out.append(f"{name}: step {r['ms']:.2f} ms = {q:.2f} x idiomatic PyTorch eager "
                       f"{eager['ms']:.2f} ms (cuDNN benchmarked; target <= 1.25): "
                       f"{'met' if q <= 1.25 else 'NOT met'}")
        for tech, x in row["techniques"].items():
            off = abs(x["measured"] - x["declared"]) / x["declared"]
            if off > 0.01:
                out.append(f"{name}/{tech}: measured {x['measured']:,} B is {off:.2%} off the "
                           f"declared {x['declared']:,} B (target 1%)")
    return out




def device_run(results: dict) -> bool:
    """Whether `results` were measured on a GPU (a dry run's times say nothing of one)."""
    return "device_memory" in results["environment"]


def committed() -> dict | None:
    """The rows of the last run on a real GPU, or None if none was committed."""
    return json.loads(COMMITTED.read_text()) if COMMITTED.exists() else None
