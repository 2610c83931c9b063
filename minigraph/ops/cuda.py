"""The GPU's own kernels: what an op's NumPy code does, done on CuPy without the hidden
temporaries and the many small launches CuPy's generic calls would add.

This is the engine room of the ops (see `tensor_ops.py` beside `fast_ops.py` in minitorch):
the op files say what is computed, in plain `xp` code; a few of them hand the heavy part
to a function here when `xp` is CuPy. Every function has its plain twin named in its
docstring, and `tests/test_gpu.py` holds the two equal on a GPU.

- `matmul_into`: a batched product with transpose flags, one cuBLAS strided-batched GEMM
  [NVIDIA cuBLAS]. CuPy's own `matmul` first copies a transposed or broadcast operand into
  a contiguous temporary, which is workspace no op declared.
- `im2col` / `col2im`: one elementwise kernel each [Chellapilla 2006], instead of one
  strided copy per kernel offset.
- `gelu` / `gelu_grad`: the whole formula in one elementwise kernel each, instead of ten
  and seventeen passes over the tensor (measured: the largest elementwise cost of the
  GPT-style decoder's step, `benchmarks/gpu.py --profile`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backend import on_cupy

# cudaDataType values (library_types.h): the element type of a cuBLAS operand.
_CUDA_TYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1}


def matmul_into(xp: Any, a: Any, b: Any, out: Any, ta: bool = False,
                tb: bool = False) -> None:
    """out = op(a) @ op(b) over the last two axes, op transposing when its flag is set.

    NumPy: `np.matmul` on transposed views (no copy). CuPy: one strided-batched GEMM when
    the operands are contiguous and their batches are equal or absent (a 2-d operand is
    shared by every batch: stride 0); anything else goes to `cupy.matmul`.
    """
    if not on_cupy(xp) or not _gemm_ok(a, b, out):
        xp.matmul(xp.swapaxes(a, -1, -2) if ta else a, xp.swapaxes(b, -1, -2) if tb else b,
                  out=out)
        return
    _gemm_strided_batched(xp, a, b, out, ta, tb)


def _gemm_ok(a: Any, b: Any, out: Any) -> bool:
    if not (a.dtype == b.dtype == out.dtype and a.dtype in _CUDA_TYPES):
        return False
    if a.ndim < 2 or b.ndim < 2 or not all(x.flags.c_contiguous for x in (a, b, out)):
        return False
    batch = out.shape[:-2]
    return all(x.shape[:-2] == batch or x.ndim == 2 for x in (a, b))


def _gemm_strided_batched(xp: Any, a: Any, b: Any, out: Any, ta: bool, tb: bool) -> None:
    """cuBLAS is column-major: a row-major [m, n] result is its column-major transpose, so
    out^T = op(b)^T op(a)^T is asked for. A row-major operand read column-major is already
    transposed, hence each operand's cuBLAS flag is its own transpose flag, and its
    leading dimension is the length of its stored rows."""
    from cupy.cuda import device
    from cupy_backends.cuda.libs import cublas

    m, n = out.shape[-2], out.shape[-1]
    k = a.shape[-2] if ta else a.shape[-1]
    batch = int(np.prod(out.shape[:-2], dtype=np.int64))
    if m == 0 or n == 0 or batch == 0:
        return
    if k == 0:
        out.fill(0)
        return
    kind = _CUDA_TYPES[a.dtype]
    # Plain float32 (or float64) arithmetic: no TF32, as CuPy's own matmul does by default.
    compute = cublas.CUBLAS_COMPUTE_64F if kind else cublas.CUBLAS_COMPUTE_32F
    one, zero = np.ones((), a.dtype), np.zeros((), a.dtype)

    def stride(x):                    # 0: one matrix shared by every batch
        return 0 if x.ndim == 2 else x.shape[-2] * x.shape[-1]

    cublas.gemmStridedBatchedEx(
        device.get_cublas_handle(), int(tb), int(ta), n, m, k, one.ctypes.data,
        b.data.ptr, kind, b.shape[-1], stride(b),
        a.data.ptr, kind, a.shape[-1], stride(a),
        zero.ctypes.data, out.data.ptr, kind, n, m * n,
        batch, compute, cublas.CUBLAS_GEMM_DEFAULT)


# --- im2col and col2im ------------------------------------------------------------------------
# A column entry is indexed (n, c, ki, kj, oh, ow), or (c, ki, kj, n, oh, ow) when the batch
# is inside (`batch_inner`: conv2d_grad_w folds the batch into one GEMM); it holds the input
# at (oh*sh - ph + ki, ow*sw - pw + kj), zero in the padding.

_IM2COL = r"""
long long ow = i % Wo, t = i / Wo;
long long oh = t % Ho; t /= Ho;
long long n, c, ki, kj;
if (batch_inner) { n = t % N; t /= N; }
kj = t % kw; t /= kw;
ki = t % kh; t /= kh;
if (batch_inner) { c = t; } else { c = t % C; n = t / C; }
long long y = oh * sh - ph + ki, xx = ow * sw - pw + kj;
col = (y >= 0 && y < H && xx >= 0 && xx < W) ? x[((n * C + c) * H + y) * W + xx] : (T)0;
"""

# The adjoint, as a gather: each input position sums the column entries that read it, in
# the order (ki, kj) of conv.py's `_col2im`, so both add the same numbers in the same order.
_COL2IM = r"""
long long w = i % W, t = i / W;
long long h = t % H; t /= H;
long long c = t % C, n = t / C;
T val = 0;
for (int ki = 0; ki < kh; ++ki) {
  long long y = h + ph - ki;
  if (y < 0 || y % sh != 0 || y / sh >= Ho) continue;
  for (int kj = 0; kj < kw; ++kj) {
    long long xx = w + pw - kj;
    if (xx < 0 || xx % sw != 0 || xx / sw >= Wo) continue;
    val += col[((((n * C + c) * kh + ki) * kw + kj) * Ho + y / sh) * Wo + xx / sw];
  }
}
img = val;
"""

# The tanh form of GELU [Hendrycks 2016], as GPT-2 uses; the constants are elementwise.py's.
_GELU = r"""
const T c = (T)0.7978845608028654, k = (T)0.044715;
T t = tanh(c * (x + k * x * x * x));
"""
_GELU_FW = _GELU + "y = (T)0.5 * x * ((T)1 + t);"
_GELU_BW = _GELU + ("dx = dy * ((T)0.5 * ((T)1 + t)"
                    " + (T)0.5 * x * ((T)1 - t * t) * c * ((T)1 + (T)3 * k * x * x));")

_PARAMS = ("int32 N, int32 C, int32 H, int32 W, int32 kh, int32 kw, int32 sh, int32 sw, "
           "int32 ph, int32 pw, int32 Ho, int32 Wo")
_KERNELS: dict[str, Any] = {}


def _kernel(name: str) -> Any:
    """The CuPy kernel `name`, compiled on first use (CuPy caches it on disk)."""
    if name not in _KERNELS:
        import cupy
        params, out, body = {
            "im2col": (f"raw T x, {_PARAMS}, bool batch_inner", "T col", _IM2COL),
            "col2im": (f"raw T col, {_PARAMS}", "T img", _COL2IM),
            "gelu": ("T x", "T y", _GELU_FW),
            "gelu_grad": ("T dy, T x", "T dx", _GELU_BW),
        }[name]
        _KERNELS[name] = cupy.ElementwiseKernel(params, out, body, f"minigraph_{name}")
    return _KERNELS[name]


def _geometry(attrs: dict, x_shape: tuple, y_shape: tuple) -> tuple[int, ...]:
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel"], attrs["stride"], attrs["padding"]
    n, c, h, w = x_shape
    return n, c, h, w, kh, kw, sh, sw, ph, pw, y_shape[2], y_shape[3]


def im2col(x: Any, cols: Any, attrs: dict, y_shape: tuple, batch_inner: bool) -> None:
    """cols = every window of x, one kernel launch (twin: conv.py's `_im2col`)."""
    _kernel("im2col")(x, *_geometry(attrs, x.shape, y_shape), batch_inner, cols)


def col2im(dcols: Any, dx: Any, attrs: dict, y_shape: tuple) -> None:
    """dx = the sum of the column entries of each input position (twin: `_col2im`)."""
    _kernel("col2im")(dcols, *_geometry(attrs, dx.shape, y_shape), dx)


def gelu(x: Any, y: Any) -> None:
    """y = gelu(x), one kernel (twin: elementwise.py's `_gelu_fw`)."""
    _kernel("gelu")(x, y)


def gelu_grad(dy: Any, x: Any, dx: Any) -> None:
    """dx = dy * gelu'(x), one kernel (twin: elementwise.py's `_gelu_grad_fw`)."""
    _kernel("gelu_grad")(dy, x, dx)
