"""Swap on a real copy stream (issue 44): the measured host-device link, a swap plan's step
time and device peak against the plan without swapping and against PyTorch's
`torch.autograd.graph.save_on_cpu` on the same training step [PyTorch save_on_cpu], and
how much of the transfer the copy stream hid.

On a GPU: CUDA events time pinned copies (`measure_link`: latency and bandwidth fitted
from a small and a large copy, each way) and resident steps (`experiments.gpu._step_ms`);
CuPy's pool hook measures the peak. Without one (`device="cpu"`, the dry run) the same
code runs on NumPy: host copies stand for the link, the numbers say only that it runs.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from ..errors import SwapError
from ..memory.api import MemoryOptions, plan_memory
from ..memory.swap import Machine
from ..memory.swap_plan import lowest_swap_plan, plan_swap
from ..models import Model
from ..reference import TorchStep
from ..runtime.executor import Executor
from .gpu import _free_pool, _step_ms, median_ms, timer


def measure_link(device: str, small: int = 1 << 16, large: int = 1 << 26,
                 repeats: int = 5) -> dict[str, float]:
    """Latency (s) and bandwidth (B/s) each way, fitted to a `small` and a `large` copy:
    bandwidth = (large - small) / (t_large - t_small), latency = t_small - small / bw."""
    out: dict[str, float] = {}
    for way in ("h2d", "d2h"):
        t = {n: _copy_seconds(device, n, way, repeats) for n in (small, large)}
        bw = (large - small) / max(t[large] - t[small], 1e-12)
        out[f"{way}_bandwidth"] = bw
        out[f"{way}_latency"] = max(0.0, t[small] - small / bw)
    return out


def _copy_seconds(device: str, nbytes: int, way: str, repeats: int) -> float:
    """Median seconds of one copy of `nbytes` (pinned host <-> device on a GPU)."""
    if device == "gpu":
        import cupy
        mem = cupy.cuda.alloc_pinned_memory(nbytes)
        host = np.frombuffer(mem, np.uint8, nbytes)
        dev = cupy.empty(nbytes, cupy.uint8)
        kind, dst, src = (1, dev.data.ptr, host.ctypes.data) if way == "h2d" else \
            (2, host.ctypes.data, dev.data.ptr)
        stream = cupy.cuda.Stream(non_blocking=True)

        def copy() -> None:
            cupy.cuda.runtime.memcpyAsync(dst, src, nbytes, kind, stream.ptr)
            stream.synchronize()
    else:
        a, b = np.ones(nbytes, np.uint8), np.empty(nbytes, np.uint8)

        def copy() -> None:
            np.copyto(b, a)
    ms = median_ms(timer("cpu"), copy, repeats, 1)     # wall time around a synchronised copy
    return ms / 1000


def bench_swap(model: Model, device: str, fraction: float = 0.7, repeats: int = 5,
               warmup: int = 2, machine: Machine | None = None) -> dict[str, Any]:
    """The plan without swapping and a swap plan at `fraction` x its arena (or the lowest
    one swap reaches): step ms, measured peak, arena, host bytes, the copy stream's
    prediction (with `machine`, e.g. the measured link)."""
    g, feeds = model.graph, model.feeds(0)
    opts = MemoryOptions(planner="bestfit", inplace=True)
    plain = plan_memory(g, opts)
    try:
        swap = plan_swap(g, int(fraction * plain.arena_bytes), opts,
                         machine=machine or Machine())
    except SwapError:
        swap = lowest_swap_plan(g, opts, machine=machine or Machine())
    rows: dict[str, Any] = {}
    for name, report in (("no swap", plain), ("swap", swap)):
        ms = _step_ms(Executor(g, report, device=device), feeds, device, repeats, warmup)
        _free_pool(device)
        ex = Executor(g, report, device=device)
        ex.run(feeds, measure=True)
        rows[name] = {"ms": ms, "arena": report.arena_bytes,
                      "peak": ex.last_stats.measured_peak}
        del ex
        _free_pool(device)
    rows["swap"].update(host=swap.host_bytes, swapped=len(swap.swaps),
                        hidden=len(swap.hidden()), predicted=swap.timing.seconds,
                        predicted_baseline=swap.timing.baseline)
    return rows


def bench_save_on_cpu(model: Model, device: str, repeats: int = 5, warmup: int = 2
                      ) -> dict[str, Any] | None:
    """PyTorch eager on the same step, plain and under `save_on_cpu` (pinned on a GPU):
    ms and the CUDA peak (None on the CPU). None without PyTorch."""
    try:
        import torch
    except ImportError:
        return None
    dev = "cuda" if device == "gpu" else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = {}
    for name in ("eager", "save_on_cpu"):
        feeds = {k: v.copy() for k, v in model.feeds(0).items()}
        step = TorchStep(model.graph, feeds, device=dev)

        def run(step: TorchStep = step, name: str = name) -> None:
            ctx = torch.autograd.graph.save_on_cpu(pin_memory=dev == "cuda") \
                if name == "save_on_cpu" else contextlib.nullcontext()
            with ctx:
                step.run()
            if dev == "cuda":
                torch.cuda.synchronize()
        ms = median_ms(timer("cpu"), run, repeats, warmup)
        peak = None
        if dev == "cuda":
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            run()
            peak = torch.cuda.max_memory_allocated() - before + sum(
                v.numel() * v.element_size() for n, v in step.values.items()
                if model.graph.tensors[n].kind in ("input", "param"))
        out[name] = {"ms": ms, "peak": peak}
        del step
    return out


def summary(link: dict[str, float], swap: dict[str, Any], torch_rows: dict | None) -> str:
    """The rows as Markdown, with issue 44's target for the decoder: the swap plan's peak
    at least 30% below the plan without swapping, its step within 1.2x of it."""
    lines = [f"link: host to device {link['h2d_bandwidth'] / 1e9:.1f} GB/s, "
             f"{link['h2d_latency'] * 1e6:.1f} us; device to host "
             f"{link['d2h_bandwidth'] / 1e9:.1f} GB/s, {link['d2h_latency'] * 1e6:.1f} us", "",
             "| run | step ms | peak MiB | arena MiB |", "| --- | --- | --- | --- |"]
    for name, r in swap.items():
        lines.append(f"| minigraph, {name} | {r['ms']:.2f} | {r['peak'] / 2**20:.1f} | "
                     f"{r['arena'] / 2**20:.1f} |")
    for name, r in (torch_rows or {}).items():
        peak = "-" if r["peak"] is None else f"{r['peak'] / 2**20:.1f}"
        lines.append(f"| PyTorch {name} | {r['ms']:.2f} | {peak} | - |")
    s, p = swap["swap"], swap["no swap"]
    cut = 1 - s["peak"] / p["peak"] if p["peak"] else 0.0
    lines += ["", f"swap: {s['swapped']} tensors, {s['host'] / 2**20:.1f} MiB on the host, "
              f"{s['hidden']} copies hidden as predicted; predicted step "
              f"{s['predicted'] * 1e3:.2f} ms against {s['predicted_baseline'] * 1e3:.2f} ms",
              f"target: peak {100 * cut:.1f}% below the plan without swapping (>= 30%), step "
              f"{s['ms'] / p['ms']:.2f}x (<= 1.2x): "
              f"{'met' if cut >= 0.3 and s['ms'] <= 1.2 * p['ms'] else 'not met'}"]
    return "\n".join(lines)
