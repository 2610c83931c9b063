"""The GPU's kernels for ops that reduce: softmax, layer norm, batch norm, `sum_to`, and
sum and mean over the last axes.

Engine room beside `cuda.py`: the op files (nn.py, broadcast.py) say what is computed in
plain `xp` code, and hand it here when `xp` is CuPy. CuPy's generic calls take five to
fourteen passes over the tensor for these ops, and a reduction over a strided axis (a
column sum, a batch-norm channel) reads memory one element per 128-byte line; measured:
these ops were a third of the GPT-style decoder's step and a quarter of ResNet's
(`benchmarks/gpu.py --profile`). Two shapes of kernel do all of it:

- **a row per warp**: a row of contiguous elements (softmax's or layer norm's last axis)
  is read by the 32 threads of one warp side by side, and its sums are combined by
  register shuffles [NVIDIA CUDA Guide]; every lane ends with the same total.
- **column and channel sums in two stages**: blocks sum fixed chunks of the rows into a
  small `parts` array, then one thread per column adds its chunks in order. No atomics,
  so a run gives the same bits every time; `parts` is the op's declared GPU workspace
  (`parts_bytes`), which is why the op files declare `workspace_gpu`.

Every function names its plain twin; `tests/test_gpu.py` holds each equal to it on a GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

ROW_WARPS = 8            # rows per block of the row-per-warp kernels (8 warps, 256 threads)
PLANE_THREADS = 256      # threads of a channel-sum block
ROWS_PER_CHUNK = 64      # rows a column-sum block reads (fewer chunks for fewer rows)
PER_CHUNK = 4096         # elements a channel-sum block reads
MAX_CHUNKS = 256

# One source per element type; `T` is float or double. Kept plain C so that the tests'
# CPU emulation (tests/cuda_emulator.py) compiles the very same text with g++.
SOURCE = r"""
__device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;                     /* a butterfly: every lane holds the same total */
}

__device__ __forceinline__ T warp_max(T v) {
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* A row per warp: the row this thread's warp reads, and the thread's lane in that warp. */
__device__ __forceinline__ long long warp_row() {
  return (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
}

__device__ __forceinline__ int warp_lane() { return threadIdx.x % 32; }

/* y = softmax(x) over rows of L contiguous elements; y may be x (three passes per row). */
extern "C" __global__ void mg_softmax(const T* x, T* y, long long rows, int L) {
  long long row = warp_row();
  int lane = warp_lane();
  if (row >= rows) return;                       /* a whole warp leaves together */
  const T* xr = x + row * L;
  T* yr = y + row * L;
  T m = xr[0];
  for (int j = lane; j < L; j += 32) m = max(m, xr[j]);
  m = warp_max(m);
  T s = 0;
  for (int j = lane; j < L; j += 32) { T e = exp(xr[j] - m); yr[j] = e; s += e; }
  s = warp_sum(s);
  for (int j = lane; j < L; j += 32) yr[j] = yr[j] / s;
}

/* out[row] = (the sum of a row of L contiguous elements) / div: sum and mean over the
   last axes. */
extern "C" __global__ void mg_row_sums(const T* x, T* out, long long rows, long long L,
                                       T div) {
  long long row = warp_row();
  int lane = warp_lane();
  if (row >= rows) return;
  const T* xr = x + row * L;
  T s = 0;
  for (long long j = lane; j < L; j += 32) s += xr[j];
  s = warp_sum(s);
  if (lane == 0) out[row] = s / div;
}

/* dx = y * (dy - sum(dy * y)) over rows of L elements. */
extern "C" __global__ void mg_softmax_grad(const T* dy, const T* y, T* dx, long long rows,
                                           int L) {
  long long row = warp_row();
  int lane = warp_lane();
  if (row >= rows) return;
  const T* dyr = dy + row * L;
  const T* yr = y + row * L;
  T* dxr = dx + row * L;
  T s = 0;
  for (int j = lane; j < L; j += 32) s += dyr[j] * yr[j];
  s = warp_sum(s);
  for (int j = lane; j < L; j += 32) dxr[j] = (dyr[j] - s) * yr[j];
}

/* Layer norm of rows of D elements: two passes for the statistics (mean, then the
   squared deviations, as the NumPy twin), one to write y. */
extern "C" __global__ void mg_layer_norm(const T* x, const T* gamma, const T* beta, T* y,
                                         T* mean, T* rstd, long long rows, int D, T eps) {
  long long row = warp_row();
  int lane = warp_lane();
  if (row >= rows) return;
  const T* xr = x + row * D;
  T* yr = y + row * D;
  T s = 0;
  for (int j = lane; j < D; j += 32) s += xr[j];
  T mu = warp_sum(s) / (T)D;
  T v = 0;
  for (int j = lane; j < D; j += 32) { T d = xr[j] - mu; v += d * d; }
  T rs = (T)1 / sqrt(warp_sum(v) / (T)D + eps);
  for (int j = lane; j < D; j += 32) yr[j] = (xr[j] - mu) * rs * gamma[j] + beta[j];
  if (lane == 0) { mean[row] = mu; rstd[row] = rs; }
}

/* Layer norm's dx, a row per warp: dx = rstd (gy - mean(gy) - xh mean(gy xh)), with
   gy = dy gamma and xh = (x - mean) rstd. dx may be x: each lane reads an element before
   it writes the same element. */
extern "C" __global__ void mg_layer_norm_grad_x(const T* dy, const T* x, const T* gamma,
                                                const T* mean, const T* rstd, T* dx,
                                                long long rows, int D) {
  long long row = warp_row();
  int lane = warp_lane();
  if (row >= rows) return;
  const T* dyr = dy + row * D;
  const T* xr = x + row * D;
  T* dxr = dx + row * D;
  T mu = mean[row], rs = rstd[row], a = 0, b = 0;
  for (int j = lane; j < D; j += 32) {
    T gy = dyr[j] * gamma[j];
    a += gy;
    b += gy * (xr[j] - mu) * rs;
  }
  a = warp_sum(a) / (T)D;
  b = warp_sum(b) / (T)D;
  for (int j = lane; j < D; j += 32)
    dxr[j] = rs * (dyr[j] * gamma[j] - a - (xr[j] - mu) * rs * b);
}

/* Stage one of column sums of a [R, C] matrix a: block (bx, by) sums columns
   32 bx .. 32 bx + 31 over rows chunk*by .. chunk*(by+1) - 1 into parts[by, c].
   With two = 1 (layer norm's gradient), also sum a (x - mean[r]) rstd[r] into
   parts[P + by, c]. Block: 32 x 8 threads; the 8 rows of a column add up in order. */
extern "C" __global__ void mg_column_parts(const T* a, const T* x, const T* mean,
                                           const T* rstd, T* parts, long long R, int C,
                                           long long chunk, int two) {
  __shared__ T sh[2][8][32];
  int c = blockIdx.x * 32 + threadIdx.x;
  long long r0 = blockIdx.y * chunk, r1 = r0 + chunk < R ? r0 + chunk : R;
  T s0 = 0, s1 = 0;
  if (c < C) {
    for (long long r = r0 + threadIdx.y; r < r1; r += 8) {
      T v = a[r * C + c];
      s0 += v;
      if (two) s1 += v * (x[r * C + c] - mean[r]) * rstd[r];
    }
  }
  sh[0][threadIdx.y][threadIdx.x] = s0;
  sh[1][threadIdx.y][threadIdx.x] = s1;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    T t0 = 0, t1 = 0;
    for (int k = 0; k < 8; ++k) { t0 += sh[0][k][threadIdx.x]; t1 += sh[1][k][threadIdx.x]; }
    long long P = gridDim.y;
    parts[blockIdx.y * (long long)C + c] = t0;
    if (two) parts[(P + blockIdx.y) * (long long)C + c] = t1;
  }
}

/* Stage one of channel sums of a [N, C, I] tensor (batch norm's N, C, H*W): block
   (c, by) sums channel c's elements chunk*by .. chunk*(by+1) - 1 (element m is
   n = m / I, i = m % I) into parts[by, c]. mode 0: a; mode 1: (a - mean[c])^2;
   mode 2: a, and a (x - mean[c]) rstd[c] into parts[P + by, c]. A tree in shared
   memory adds the block's 256 partial sums, always in the same order. */
extern "C" __global__ void mg_channel_parts(const T* a, const T* x, const T* mean,
                                            const T* rstd, T* parts, long long N, int C,
                                            long long I, long long chunk, int mode) {
  __shared__ T sh[2][256];
  int c = blockIdx.x, t = threadIdx.x;
  long long M = N * I, m0 = blockIdx.y * chunk, m1 = m0 + chunk < M ? m0 + chunk : M;
  T mu = mode ? mean[c] : (T)0, rs = mode == 2 ? rstd[c] : (T)0, s0 = 0, s1 = 0;
  for (long long m = m0 + t; m < m1; m += 256) {
    long long at = ((m / I) * C + c) * I + m % I;
    T v = a[at];
    if (mode == 1) { v -= mu; v *= v; }
    s0 += v;
    if (mode == 2) s1 += v * (x[at] - mu) * rs;
  }
  sh[0][t] = s0;
  sh[1][t] = s1;
  __syncthreads();
  for (int half = 128; half > 0; half >>= 1) {
    if (t < half) { sh[0][t] += sh[0][t + half]; sh[1][t] += sh[1][t + half]; }
    __syncthreads();
  }
  if (t == 0) {
    long long P = gridDim.y;
    parts[blockIdx.y * (long long)C + c] = sh[0][0];
    if (mode == 2) parts[(P + blockIdx.y) * (long long)C + c] = sh[1][0];
  }
}

/* Stage two: out[c] = (sum over p of parts[p, c]) / div, in the order of p; with
   finish = 1, out[c] = 1 / sqrt(that + eps) (a variance made into 1/std). */
extern "C" __global__ void mg_add_parts(const T* parts, T* out, int P, int C, T div,
                                        int finish, T eps) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  T s = 0;
  for (int p = 0; p < P; ++p) s += parts[(long long)p * C + c];
  s = s / div;
  out[c] = finish ? (T)1 / sqrt(s + eps) : s;
}

/* Batch norm's y = (x - mean[c]) rstd[c] gamma[c] + beta[c] over [N, C, I]. */
extern "C" __global__ void mg_batch_norm_apply(const T* x, const T* mean, const T* rstd,
                                               const T* gamma, const T* beta, T* y,
                                               long long total, int C, long long I) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    int c = (int)((i / I) % C);
    y[i] = (x[i] - mean[c]) * rstd[c] * gamma[c] + beta[c];
  }
}

/* Batch norm's dx = gamma rstd (dy - dbeta / m - xh dgamma / m), xh = (x - mean) rstd. */
extern "C" __global__ void mg_batch_norm_grad_x(const T* dy, const T* x, const T* gamma,
                                                const T* mean, const T* rstd,
                                                const T* dgamma, const T* dbeta, T* dx,
                                                long long total, int C, long long I, T m) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    int c = (int)((i / I) % C);
    T xh = (x[i] - mean[c]) * rstd[c];
    dx[i] = gamma[c] * rstd[c] * (dy[i] - dbeta[c] / m - xh * dgamma[c] / m);
  }
}
"""

_CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_MODULES: dict[Any, Any] = {}


def takes(dtype: Any) -> bool:
    """Whether the kernels here have a form for this element type (float32, float64)."""
    return np.dtype(dtype) in _CTYPES


def supported(*arrays: Any) -> bool:
    """Whether these arrays can take the kernels here: one float dtype, C-contiguous."""
    return all(a.dtype == arrays[0].dtype and a.dtype in _CTYPES and a.flags.c_contiguous
               for a in arrays)


def _fn(dtype: Any, name: str) -> Any:
    """Kernel `name` for `dtype`, compiled on first use (CuPy caches it on disk)."""
    dtype = np.dtype(dtype)
    if dtype not in _MODULES:
        import cupy
        _MODULES[dtype] = cupy.RawModule(code=f"typedef {_CTYPES[dtype]} T;\n" + SOURCE)
    return _MODULES[dtype].get_function(name)


def _rows_launch(rows: int) -> tuple[tuple[int], tuple[int]]:
    return (-(-rows // ROW_WARPS),), (32 * ROW_WARPS,)


def _elementwise_launch(total: int) -> tuple[tuple[int], tuple[int]]:
    return (min(-(-total // 256), 65536),), (256,)


# --- how the two-stage sums split their work (the op files declare parts_bytes) -------------

def column_chunks(rows: int) -> int:
    """Chunks of rows a column sum splits into (stage one's grid height)."""
    return max(1, min(MAX_CHUNKS, -(-rows // ROWS_PER_CHUNK)))


def channel_chunks(per_channel: int) -> int:
    """Chunks of a channel's elements a channel sum splits into."""
    return max(1, min(MAX_CHUNKS, -(-per_channel // PER_CHUNK)))


def column_parts(rows: int, cols: int, sums: int) -> tuple[int, int, int]:
    """The shape of a column sum's `parts` over [rows, cols]: `sums` x chunks x cols."""
    return (sums, column_chunks(rows), cols)


def channel_parts(shape: tuple, sums: int) -> tuple[int, int, int]:
    """The shape of a channel sum's `parts` over a [N, C, ...] tensor: `sums` x chunks x C."""
    c = shape[1]
    return (sums, channel_chunks(int(np.prod(shape, dtype=np.int64)) // c), c)


def parts_bytes(shape: tuple[int, int, int], itemsize: int) -> int:
    """The GPU workspace of a two-stage sum: its `parts` array, of this shape."""
    return int(np.prod(shape, dtype=np.int64)) * itemsize


# --- softmax (twins: nn.py's `_softmax_fw`, `_softmax_grad_fw`) --------------------------------

def softmax(x: Any, y: Any) -> None:
    """y = softmax over the last axis, a row per warp (twin: `_softmax_fw`)."""
    rows, L = x.size // max(x.shape[-1], 1), x.shape[-1]
    if rows and L:
        _fn(x.dtype, "mg_softmax")(*_rows_launch(rows), (x, y, np.int64(rows), np.int32(L)))


def softmax_grad(dy: Any, y: Any, dx: Any) -> None:
    """dx = y * (dy - sum(dy * y)) over the last axis (twin: `_softmax_grad_fw`)."""
    rows, L = y.size // max(y.shape[-1], 1), y.shape[-1]
    if rows and L:
        _fn(y.dtype, "mg_softmax_grad")(*_rows_launch(rows),
                                        (dy, y, dx, np.int64(rows), np.int32(L)))


# --- sum and mean over the last axes (twin: shape.py's `_reduce_fw`) ----------------------

def trailing_split(shape: tuple, axes: tuple) -> tuple[int, int] | None:
    """(rows, L) when `axes` are the last axes of `shape` (each row's L elements are then
    contiguous), else None."""
    k = len(axes)
    if k == 0 or tuple(sorted(a % len(shape) for a in axes)) != tuple(
            range(len(shape) - k, len(shape))):
        return None
    L = int(np.prod(shape[len(shape) - k:], dtype=np.int64))
    rows = int(np.prod(shape[:len(shape) - k], dtype=np.int64))
    return (rows, L) if L > 0 else None


def row_sums(x: Any, out: Any, rows: int, L: int, mean: bool) -> None:
    """out = the sum (or mean) of each row of x read as [rows, L], a row per warp. CuPy's
    own sum over several axes takes a temporary the size of its output (measured: 1 MiB
    that no op declared, at ResNet-18's average pool)."""
    if rows:
        _fn(x.dtype, "mg_row_sums")(*_rows_launch(rows), (
            x, out, np.int64(rows), np.int64(L), x.dtype.type(L if mean else 1)))


# --- layer norm (twins: nn.py's `_ln_fw`, `_ln_grad_fw`) ---------------------------------------

def layer_norm(x: Any, gamma: Any, beta: Any, y: Any, mean: Any, rstd: Any,
               eps: float) -> None:
    """y, mean, rstd of layer norm over the last axis, a row per warp (twin: `_ln_fw`)."""
    D = x.shape[-1]
    rows = x.size // D
    if rows:
        _fn(x.dtype, "mg_layer_norm")(*_rows_launch(rows), (
            x, gamma, beta, y, mean, rstd, np.int64(rows), np.int32(D), x.dtype.type(eps)))


def layer_norm_grad(ctx: Any, dy: Any, x: Any, gamma: Any, mean: Any, rstd: Any, dx: Any,
                    dgamma: Any, dbeta: Any) -> None:
    """dx, dgamma, dbeta of layer norm (twin: `_ln_grad_fw`). The column sums read x, so
    they run first: dx may be x."""
    D = x.shape[-1]
    rows = x.size // D
    if rows == 0:
        dgamma.fill(0)
        dbeta.fill(0)
        return
    column_sums(ctx, dy, dbeta, rows, D, x=x, mean=mean, rstd=rstd, second=dgamma)
    _fn(x.dtype, "mg_layer_norm_grad_x")(*_rows_launch(rows), (
        dy, x, gamma, mean, rstd, dx, np.int64(rows), np.int32(D)))


# --- sums over leading axes (twin: broadcast.py's `_sum_to_forward`) --------------------------

def leading_split(g_shape: tuple, out_shape: tuple) -> tuple[int, int] | None:
    """(R, C) when reducing g to `out_shape` sums g's first axes only (g read as [R, C],
    the result its C column sums), else None. Axes of size 1 may sit anywhere."""
    lead = len(g_shape) - len(out_shape)
    reduced = [p for p, s in enumerate(g_shape)
               if p < lead or (out_shape[p - lead] == 1 and s != 1)]
    if not reduced:
        return None
    k = max(reduced) + 1
    if any(g_shape[p] != 1 and p not in reduced for p in range(k)):
        return None                       # a kept axis before a reduced one
    rows = int(np.prod(g_shape[:k], dtype=np.int64))
    cols = int(np.prod(g_shape[k:], dtype=np.int64))
    return (rows, cols) if rows > 1 and cols > 0 else None


def column_sums(ctx: Any, a: Any, out: Any, rows: int, cols: int, x: Any = None,
                mean: Any = None, rstd: Any = None, second: Any = None) -> None:
    """out = column sums of a [rows, cols] (`sum_to` over leading axes; twin:
    `_sum_to_forward`); with x, also second = the column sums of a * (x - mean[r]) *
    rstd[r] (layer norm's dgamma). Two stages, no atomics."""
    two = x is not None
    parts = ctx.scratch(column_parts(rows, cols, 1 + two), a.dtype)
    P = parts.shape[1]
    chunk = np.int64(-(-rows // P))
    if not two:                       # the kernel reads x, mean, rstd only when two
        x = mean = rstd = a
    _fn(a.dtype, "mg_column_parts")((-(-cols // 32), P), (32, 8), (
        a, x, mean, rstd, parts, np.int64(rows), np.int32(cols), chunk, np.int32(two)))
    _add_parts(parts[0], out, P, cols)
    if two:
        _add_parts(parts[1], second, P, cols)


def _add_parts(parts: Any, out: Any, P: int, C: int, div: float = 1.0, finish: int = 0,
               eps: float = 0.0) -> None:
    t = parts.dtype.type
    _fn(parts.dtype, "mg_add_parts")((-(-C // 256),), (256,), (
        parts, out, np.int32(P), np.int32(C), t(div), np.int32(finish), t(eps)))


# --- batch norm over [N, C, H, W] or [N, C] (twins: nn.py's `_bn_fw`, `_bn_grad_fw`) ----------

def _nci(x: Any) -> tuple[int, int, int]:
    n, c = x.shape[:2]
    return n, c, x.size // max(n * c, 1)


def _channel_parts(mode: int, a: Any, x: Any, mean: Any, rstd: Any, parts: Any) -> int:
    """Stage one of the channel sums of a, into parts [sums, P, C]; returns P."""
    n, c, i = _nci(a)
    P = parts.shape[1]
    chunk = np.int64(-(-(n * i) // P))
    # The kernel reads x, mean and rstd only in the modes that need them.
    x, mean, rstd = (a if v is None else v for v in (x, mean, rstd))
    _fn(a.dtype, "mg_channel_parts")((c, P), (PLANE_THREADS,), (
        a, x, mean, rstd, parts, np.int64(n), np.int32(c), np.int64(i), chunk,
        np.int32(mode)))
    return P


def batch_norm(ctx: Any, x: Any, gamma: Any, beta: Any, y: Any, mean: Any, rstd: Any,
               eps: float) -> None:
    """Training-mode batch norm: the channel mean, then the mean squared deviation (two
    passes, as the twin), then y (twin: `_bn_fw`)."""
    n, c, i = _nci(x)
    parts = ctx.scratch(channel_parts(x.shape, 1), x.dtype)
    P = _channel_parts(0, x, None, None, None, parts)
    _add_parts(parts[0], mean, P, c, div=n * i)
    _channel_parts(1, x, None, mean, None, parts)
    _add_parts(parts[0], rstd, P, c, div=n * i, finish=1, eps=eps)
    _fn(x.dtype, "mg_batch_norm_apply")(*_elementwise_launch(x.size), (
        x, mean, rstd, gamma, beta, y, np.int64(x.size), np.int32(c), np.int64(i)))


def batch_norm_grad(ctx: Any, dy: Any, x: Any, gamma: Any, mean: Any, rstd: Any, dx: Any,
                    dgamma: Any, dbeta: Any) -> None:
    """dx, dgamma, dbeta of training-mode batch norm (twin: `_bn_grad_fw`)."""
    n, c, i = _nci(x)
    parts = ctx.scratch(channel_parts(x.shape, 2), x.dtype)
    P = _channel_parts(2, dy, x, mean, rstd, parts)
    _add_parts(parts[0], dbeta, P, c)
    _add_parts(parts[1], dgamma, P, c)
    _fn(x.dtype, "mg_batch_norm_grad_x")(*_elementwise_launch(x.size), (
        dy, x, gamma, mean, rstd, dgamma, dbeta, dx, np.int64(x.size), np.int32(c),
        np.int64(i), x.dtype.type(n * i)))
