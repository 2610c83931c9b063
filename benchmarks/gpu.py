"""The GPU path, measured: minigraph on CuPy (one arena) against PyTorch eager, same step.

    python benchmarks/gpu.py              # on a machine with an NVIDIA GPU, CuPy and torch
    python benchmarks/gpu.py --dry-run    # the same table on NumPy with tiny sizes (no GPU)

For each model (MLP, ResNet at CIFAR size, GPT-style Transformer) and one SGD step:
time per step (median after warm-up, CUDA events), peak device memory of minigraph's plan
for each technique (a CuPy MemoryHook sums the pool's live bytes; compared with the plan's
arena + parameters + inputs + workspace) against `torch.cuda.max_memory_allocated()`, and
a DTR run under a budget below what the model needs (the CuPy pool limited to it).
`--write` puts the table into benchmarks/RESULTS.md with the device and versions.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import minigraph as mg
from minigraph.models import get_model

TECHNIQUES = {
    "no reuse": mg.MemoryOptions(planner="none"),
    "refcount+inplace": mg.MemoryOptions(planner="refcount", inplace=True),
    "ge+inplace": mg.MemoryOptions(planner="ge", inplace=True),
    "greedy-size+inplace": mg.MemoryOptions(planner="greedy-size", inplace=True),
    "bestfit+inplace, order best": mg.MemoryOptions(planner="bestfit", inplace=True,
                                                     order="best"),
}

GPU_SIZES = {
    "mlp": dict(batch=1024, sizes=(4096, 4096, 4096, 4096, 1000)),
    "resnet": dict(depth=18, image=32, batch=128),
    "transformer": dict(layers=6, heads=8, seq=256, d_model=512, vocab=8192, batch=16),
}
DRY_SIZES = {"mlp": {}, "resnet": {}, "transformer": {}}


class PeakHook:
    """Live and peak bytes of the CuPy pool, from its malloc/free callbacks."""

    def __init__(self, cupy):
        base = cupy.cuda.memory_hook.MemoryHook
        outer = self

        class Hook(base):
            name = "minigraph-peak"

            def malloc_postprocess(self, device_id, size, mem_size, mem_ptr, pmem_id):
                outer.live[mem_ptr] = mem_size
                outer.now += mem_size
                outer.peak = max(outer.peak, outer.now)

            def free_postprocess(self, device_id, mem_size, mem_ptr, pmem_id):
                outer.now -= outer.live.pop(mem_ptr, mem_size)

        self.hook = Hook()
        self.live: dict[int, int] = {}
        self.now = self.peak = 0


def _median_ms(fn, repeats: int, warmup: int, sync) -> float:
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def bench_minigraph(model, options, device: str, repeats: int, warmup: int):
    """(ms per step, measured peak bytes, expected bytes) for one plan on `device`."""
    g = model.graph
    report = mg.plan_memory(g, options)
    ex = mg.Executor(g, report.plan, device=device)
    feeds = {**model.make_batch(0), **model.init_params(0)}
    ex.load(feeds)
    if device == "gpu":
        import cupy
        sync = cupy.cuda.Device().synchronize
    else:
        def sync():
            return None
    ms = _median_ms(ex.step, repeats, warmup, sync)
    # Peak: a fresh executor, measured from nothing over one step.
    ex2 = mg.Executor(g, report.plan, device=device)
    ex2.run(feeds, measure=True)
    s = ex2.last_stats
    return ms, s.measured_peak, s.expected_peak, report.arena_bytes


def bench_torch(model, device: str, repeats: int, warmup: int):
    """(ms per step, torch peak bytes) for PyTorch eager, or (None, None) without torch."""
    try:
        import torch

        from minigraph.reference import TorchStep
    except ImportError:
        return None, None
    feeds = {**model.make_batch(0), **model.init_params(0)}
    dev = "cuda" if device == "gpu" else "cpu"
    step = TorchStep(model.graph, feeds, device=dev)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    ms = _median_ms(step.run, repeats, warmup, sync)
    peak = None
    if dev == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step.run()
        sync()
        peak = torch.cuda.max_memory_allocated() - base + sum(
            v.numel() * v.element_size() for v in step.values.values())
    return ms, peak


def bench_dtr(model, device: str, ratio: float):
    """A DTR step at `ratio` of the no-rematerialisation peak: (ok, overhead, ms)."""
    try:
        from minigraph.runtime.dtr import DTRExecutor
    except ImportError:
        return "no DTR runtime", None, None
    feeds = {**model.make_batch(0), **model.init_params(0)}
    try:
        ex = DTRExecutor(model.graph, ratio=ratio, device=device)
        t0 = time.perf_counter()
        ex.run(feeds)
        ms = 1000 * (time.perf_counter() - t0)
        tr = ex.last_trace
        return "ok", getattr(tr, "overhead", None), ms
    except mg.MinigraphError as e:
        return f"{type(e).__name__}", None, None


def environment(device: str) -> str:
    parts = [f"python {platform.python_version()}", f"numpy {np.__version__}"]
    try:
        import torch
        parts.append(f"torch {torch.__version__}")
    except ImportError:
        pass
    if device == "gpu":
        import cupy
        props = cupy.cuda.runtime.getDeviceProperties(0)
        parts.insert(0, props["name"].decode() if isinstance(props["name"], bytes)
                     else str(props["name"]))
        cuda = cupy.cuda.runtime.runtimeGetVersion()
        parts.append(f"cupy {cupy.__version__}, CUDA runtime {cuda}")
    else:
        parts.insert(0, f"CPU ({platform.machine()}), NumPy backend (dry run)")
    return ", ".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="NumPy, tiny models, no GPU")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--dtr-ratio", type=float, default=0.6)
    ap.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = ap.parse_args(argv)
    device = "cpu" if args.dry_run else "gpu"
    if device == "gpu" and not mg.gpu_available():
        print("no GPU visible to CuPy: run with --dry-run", file=sys.stderr)
        return 2
    sizes = DRY_SIZES if args.dry_run else GPU_SIZES
    repeats = 3 if args.dry_run else args.repeats
    lines = [f"device: {environment(device)}", "",
             "| model | technique | ms/step | torch ms/step | time ratio | planned arena | "
             "measured peak | expected peak | torch peak | peak ratio |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, kw in sizes.items():
        model = get_model(name, **kw)
        tms, tpeak = bench_torch(model, device, repeats, args.warmup)
        for tech, opts in TECHNIQUES.items():
            ms, peak, expected, arena = bench_minigraph(model, opts, device, repeats,
                                                        args.warmup)
            ratio = f"{ms / tms:.2f}" if tms else "-"
            pratio = f"{peak / tpeak:.2f}" if tpeak and peak else "-"
            lines.append(f"| {name} | {tech} | {ms:.2f} | {tms or 0:.2f} | {ratio} | {arena} | "
                         f"{peak} | {expected} | {tpeak or '-'} | {pratio} |")
        ok, overhead, dms = bench_dtr(model, device, args.dtr_ratio)
        lines.append(f"| {name} | DTR at {args.dtr_ratio:.0%} of peak | "
                     f"{dms or 0:.2f} | | | | | | | {ok}, overhead "
                     f"{overhead if overhead is None else f'{overhead:.2f}x'} |")
    text = "\n".join(lines)
    print(text)
    if args.write:
        _write_results(text, "GPU (benchmarks/gpu.py)" if not args.dry_run
                       else "GPU script, dry run on NumPy (benchmarks/gpu.py --dry-run)")
    return 0


def _write_results(text: str, title: str) -> None:
    path = Path(__file__).with_name("RESULTS.md")
    old = path.read_text() if path.exists() else "# Benchmark results\n"
    head = f"## {title}"
    sections = old.split("\n## ")
    kept = [s for s in sections[1:] if not ("## " + s).startswith(head)]
    path.write_text(sections[0].rstrip() + "\n\n" + "\n\n".join(["## " + s.rstrip() for s in kept]
                                                                + [f"{head}\n\n{text}"]) + "\n")


if __name__ == "__main__":
    sys.exit(main())
