"""Run `minigraph/ops/cuda_rows.py`'s CUDA kernels on the CPU, to test their logic where
there is no GPU (CI has none).

The kernels' very source text is compiled by g++ after a small header that stands in for
CUDA's built-ins: the threads of a block are `std::thread`s that meet at `std::barrier`s
(`__syncthreads`, and a warp's barrier for each register shuffle), blocks run one after
another (so a `static` array serves as the block's shared memory). Slow, and blind to
what only hardware shows (speed, races between blocks, which these kernels avoid by
design), but every index, chunk boundary and reduction order is the GPU's own.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
import types
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from minigraph.ops import cuda_rows

HEADER = r"""
#include <algorithm>
#include <barrier>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>
struct dim3 { unsigned x = 1, y = 1, z = 1; };
thread_local dim3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
using std::exp;
using std::sqrt;
template <class A> A max(A a, A b) { return std::fmax(a, b); }
static std::unique_ptr<std::barrier<>> block_bar;
static std::vector<std::unique_ptr<std::barrier<>>> warp_bar;
static double lanes[1024];
static inline void __syncthreads() { block_bar->arrive_and_wait(); }
template <class V> V __shfl_xor_sync(unsigned, V v, int o) {
  int t = threadIdx.x + threadIdx.y * blockDim.x, w = t / 32;
  lanes[t] = (double)v;
  warp_bar[w]->arrive_and_wait();
  V r = (V)lanes[t ^ o];
  warp_bar[w]->arrive_and_wait();
  return r;
}
template <class... A, class... B>
void launch(void (*k)(A...), unsigned gx, unsigned gy, unsigned bx, unsigned by, B... args) {
  gridDim = {gx, gy, 1};
  blockDim = {bx, by, 1};
  unsigned n = bx * by;
  for (unsigned y = 0; y < gy; ++y)
    for (unsigned x = 0; x < gx; ++x) {
      block_bar = std::make_unique<std::barrier<>>(n);
      warp_bar.clear();
      for (unsigned w = 0; w < (n + 31) / 32; ++w)
        warp_bar.push_back(std::make_unique<std::barrier<>>(std::min(32u, n - 32 * w)));
      std::vector<std::thread> ts;
      for (unsigned t = 0; t < n; ++t)
        ts.emplace_back([=] { blockIdx = {x, y, 1}; threadIdx = {t % bx, t / bx, 1};
                              k(args...); });
      for (auto& t : ts) t.join();
    }
}
"""

_CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def kernel_names() -> list[str]:
    return re.findall(r'extern "C" __global__ void (\w+)\(', cuda_rows.SOURCE)


def build(folder: Path) -> dict[np.dtype, Any]:
    """The kernels compiled for the CPU, one library per element type; each kernel `k` is
    `run_k(gx, gy, bx, by, its arguments...)`. Raises RuntimeError if g++ cannot."""
    if shutil.which("g++") is None:
        raise RuntimeError("no g++")
    libs = {}
    for dtype, ctype in _CTYPES.items():
        src = HEADER + f"typedef {ctype} T;\n" + cuda_rows.SOURCE
        for name in kernel_names():
            params = re.search(rf"void {name}\(([^)]*)\)", cuda_rows.SOURCE).group(1)
            params = [p.strip() for p in params.split(",")]
            args = ", ".join(p.split()[-1].lstrip("*") for p in params)
            src += (f'extern "C" void run_{name}(unsigned gx, unsigned gy, unsigned bx, '
                    f'unsigned by, {", ".join(params)}) {{ launch({name}, gx, gy, bx, by, '
                    f"{args}); }}\n")
        cpp, lib = folder / f"rows_{ctype}.cpp", folder / f"rows_{ctype}.so"
        cpp.write_text(src)
        done = subprocess.run(["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread",
                               "-o", str(lib), str(cpp)], capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"g++ failed: {done.stderr[:2000]}")
        libs[dtype] = ctypes.CDLL(str(lib))
    return libs


def _arg(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        return ctypes.c_void_p(a.ctypes.data)
    for kind, c in ((np.int64, ctypes.c_longlong), (np.int32, ctypes.c_int),
                    (np.float32, ctypes.c_float), (np.float64, ctypes.c_double)):
        if isinstance(a, kind):
            return c(a.item())
    raise TypeError(f"a kernel argument of type {type(a).__name__}: pass a NumPy scalar")


@contextmanager
def emulated(libs: dict[np.dtype, Any]):
    """Within: `cuda_rows` launches its kernels on the emulation, and the module returned
    (NumPy under the name "cupy") sends the op files to their GPU forms."""
    def fn(dtype: Any, name: str):
        run = getattr(libs[np.dtype(dtype)], "run_" + name)

        def launch(grid, block, args):
            (gx, gy), (bx, by) = (tuple(grid) + (1,))[:2], (tuple(block) + (1,))[:2]
            run(*(ctypes.c_uint(v) for v in (gx, gy, bx, by)), *(_arg(a) for a in args))
        return launch

    fake = types.ModuleType("cupy")
    fake.__dict__.update({k: getattr(np, k) for k in dir(np) if not k.startswith("_")})
    fake.__name__ = "cupy"
    real, cuda_rows._fn = cuda_rows._fn, fn
    try:
        yield fake
    finally:
        cuda_rows._fn = real
