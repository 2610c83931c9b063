"""The Core ATen opset [PyTorch Core ATen] as the import's target: which ops map.

`core_ops()` lists PyTorch's core ATen operators (the overloads tagged `torch.Tag.core`).
`PROBES` holds, for the ops a training step can produce, a one-line step that produces it
(float64, so that a check against PyTorch decides); `coverage()` imports each probe and
checks that the op is in the captured graph, maps, and that the step (loss and gradient)
is PyTorch's. Every other core op is in `UNSUPPORTED` with its reason; an op that is in
neither is reported as such (tests/test_fromtorch_coverage.py keeps that list empty).
`python benchmarks/from_torch.py --coverage` prints the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .capture import require_torch

_NO_OP = "no minigraph op yet: an opaque node (plans and simulates, does not run)"
_3D = "3-d pooling or padding: minigraph's kernels are 1-d and 2-d (an opaque node)"
_SYM = ("a symbolic size or a number read from a tensor: data-dependent, refused (minigraph "
        "needs static shapes)")
UNSUPPORTED: dict[str, str] = {
    **{f"aten.{op}.default": _NO_OP for op in (
        "erf", "_cdist_forward", "_pdist_forward", "_embedding_bag", "col2im", "grid_sampler_2d",
        "masked_scatter", "prod", "diagonal", "atan2")},
    "aten.atan2.out": _NO_OP, "aten.prod.dim_int": _NO_OP,
    "aten.scatter_reduce.two": _NO_OP,
    "aten.pow.Tensor_Tensor": "a tensor exponent: " + _NO_OP,
    "aten.pow.Scalar": "a number raised to a tensor: " + _NO_OP,
    "aten.reflection_pad1d.default": _NO_OP, "aten.reflection_pad2d.default": _NO_OP,
    "aten.replication_pad2d.default": _NO_OP,
    **{f"aten.{op}.default": _3D for op in (
        "_adaptive_avg_pool3d", "avg_pool3d", "max_pool3d_with_indices", "reflection_pad3d",
        "replication_pad3d")},
    "aten._fft_c2r.default": "complex tensors: minigraph holds real dtypes only",
    "aten._fft_r2c.default": "complex tensors: minigraph holds real dtypes only",
    "aten.nonzero.default": "its output's shape depends on the data: refused",
    "aten._local_scalar_dense.default": _SYM, "aten.sym_numel.default": _SYM,
    "aten.sym_size.int": _SYM, "aten.sym_storage_offset.default": _SYM,
    "aten.sym_stride.int": _SYM,
    "aten.as_strided.default": "a view by strides: every minigraph tensor owns a contiguous "
                               "buffer (functionalisation leaves none in a step)",
    "aten.empty_strided.default": "an uninitialised buffer with strides (functionalisation "
                                  "leaves none a step reads)",
    "aten.randperm.default": "an integer random draw: draw it outside the step and pass it "
                             "as an input",
    "aten._native_batch_norm_legit.default": "batch norm with running statistics updated in "
        "place: a step captures its functional form, _native_batch_norm_legit_functional",
    "aten._native_batch_norm_legit.no_stats": "batch norm without running statistics: a step "
        "captures it as _native_batch_norm_legit_functional",
    "aten.sym_is_contiguous.default": _SYM,
    "aten.resize_.default": "an in-place resize: functionalisation leaves none in a step, "
                            "and a step that resizes a tensor has no static shape",
    "aten.empty.memory_format": "an uninitialised buffer: a step that reads one reads no "
                                "defined value",
}


def core_ops() -> list[str]:
    """PyTorch's Core ATen overloads, as "aten.name.overload", sorted."""
    torch = require_torch()
    found = set()
    # every registered operator (torch.ops.aten lists only the packets loaded so far)
    for qualified in torch._C._dispatch_get_all_op_names():
        if not qualified.startswith("aten::"):
            continue
        base, _, overload = qualified.removeprefix("aten::").partition(".")
        try:
            op = getattr(getattr(torch.ops.aten, base), overload or "default")
        except (AttributeError, RuntimeError):        # not resolvable from Python
            continue
        if torch.Tag.core in op.tags:
            found.add(str(op))
    return sorted(found)


def _plain(torch: Any, op: str) -> Callable[..., Any]:
    return lambda h, h4: getattr(torch, op)(h)


def _stepped(torch: Any, op: str) -> Callable[..., Any]:
    return lambda h, h4: h * getattr(torch, op)(3 * h)     # no gradient through op itself


def _probes(torch: Any) -> dict[str, Callable[..., Any]]:
    """Core op -> f(h, h4): a float64 expression of h [3, 4] and h4 [2, 3, 4, 4] (both
    depend on parameters) whose capture holds that op."""
    F, aten = torch.nn.functional, torch.ops.aten
    def i3():            # made inside the step (a closure over a tensor is refused)
        return torch.tensor([[2, 0, 1, 2], [0, 0, 2, 1]])

    def stats():
        return torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    return {
        "aten._adaptive_avg_pool2d.default": lambda h, h4: F.adaptive_avg_pool2d(h4, 2),
        "aten._adaptive_avg_pool2d_backward.default":
            lambda h, h4: F.adaptive_avg_pool2d(h4, 2),
        "aten._log_softmax.default": lambda h, h4: F.log_softmax(h, 1),
        "aten._native_batch_norm_legit_no_training.default":
            lambda h, h4: F.batch_norm(h4, *stats(), training=False),
        "aten._softmax.default": lambda h, h4: F.softmax(h, 0),
        "aten._to_copy.default": lambda h, h4: h.float().double(),
        "aten.abs.default": lambda h, h4: h.abs(),
        "aten.add.Tensor": lambda h, h4: h + h.t().reshape(3, 4),
        "aten.addmm.default": lambda h, h4: torch.addmm(h[:, :3].sum(1, keepdim=True), h, h.t()),
        "aten.alias.default": lambda h, h4: aten.alias(h) * 2,
        "aten.amax.default": lambda h, h4: h.amax(1),
        "aten.any.dim": lambda h, h4: h * (h > 0.5).any(1, keepdim=True),
        "aten.arange.start_step": lambda h, h4: h * torch.arange(1, 5, 1),
        "aten.avg_pool2d.default": lambda h, h4: F.avg_pool2d(h4, 2),
        "aten.avg_pool2d_backward.default": lambda h, h4: F.avg_pool2d(h4, 2, padding=1),
        "aten.bitwise_and.Tensor": lambda h, h4: h * ((h > 0) & (h < 1)),
        "aten.bitwise_or.Tensor": lambda h, h4: h * ((h > 1) | (h < -1)),
        "aten.bitwise_xor.Tensor": lambda h, h4: h * ((h > 0) ^ (h > 1)),
        "aten.bitwise_not.default": lambda h, h4: h * ~(h > 0),
        "aten.bmm.default": lambda h, h4: torch.bmm(h4[0], h4[1]),
        "aten.cat.default": lambda h, h4: torch.cat([h, h * 2], 1),
        "aten.clamp.default": lambda h, h4: h.clamp(-0.5, 0.5),
        "aten.clamp.Tensor": lambda h, h4: torch.clamp(h, min=h[0:1] * 0.5),
        "aten.clone.default": lambda h, h4: h.clone(memory_format=torch.contiguous_format),
        "aten.convolution.default": lambda h, h4: F.conv2d(h4, h4[:2, :, :3, :3], padding=1),
        "aten.convolution_backward.default":
            lambda h, h4: F.conv2d(h4, h4[:2, :, :3, :3], stride=2),
        "aten.cumsum.default": lambda h, h4: h.cumsum(1),
        "aten.div.Tensor": lambda h, h4: h / (h.abs() + 1),
        "aten.div.Tensor_mode": lambda h, h4: h * torch.div(h, 0.3, rounding_mode="floor"),
        "aten.elu.default": lambda h, h4: F.elu(h, 0.7),
        "aten.embedding.default": lambda h, h4: F.embedding(i3(), h),
        "aten.embedding_dense_backward.default": lambda h, h4: F.embedding(i3(), h),
        "aten.eq.Tensor": lambda h, h4: h * (h == h[0]),
        "aten.add.Scalar": lambda h, h4: aten.add.Scalar(h, 2.0) * h,
        "aten.sub.Scalar": lambda h, h4: aten.sub.Scalar(h, 2.0) * h,
        "aten.mul.Scalar": lambda h, h4: aten.mul.Scalar(h, 3.0),
        "aten.div.Scalar": lambda h, h4: aten.div.Scalar(h, 3.0),
        "aten.div.Scalar_mode": lambda h, h4: h * aten.div.Scalar_mode(h, 0.3,
                                                                       rounding_mode="floor"),
        "aten.any.default": lambda h, h4: h * aten.any.default(h > 0.5),
        "aten.any.dims": lambda h, h4: h * aten.any.dims(h > 0.5, [1], True),
        "aten.bitwise_and.Scalar": lambda h, h4: h * aten.bitwise_and.Scalar(h > 0, True),
        "aten.bitwise_or.Scalar": lambda h, h4: h * aten.bitwise_or.Scalar(h > 0, False),
        "aten.bitwise_xor.Scalar": lambda h, h4: h * aten.bitwise_xor.Scalar(h > 0, True),
        "aten.fill.Scalar": lambda h, h4: aten.fill.Scalar(h, 2.0) * h,
        "aten.squeeze.dims": lambda h, h4: aten.squeeze.dims(h[:1], [0]),
        "aten.var.dim": lambda h, h4: aten.var.dim(h, [1], True, True),
        "aten.eq.Scalar": lambda h, h4: h * (torch.arange(4) == 1),
        "aten.exp.default": lambda h, h4: h.exp(),
        "aten.expand.default": lambda h, h4: h[:, :1].expand(3, 4) * h,
        "aten.expm1.default": lambda h, h4: torch.expm1(h),
        "aten.flip.default": lambda h, h4: h.flip(0),
        "aten.full.default": lambda h, h4: h * torch.full((3, 4), 2.0, dtype=torch.float64),
        "aten.full_like.default": lambda h, h4: h * torch.full_like(h, 3.0),
        "aten.gather.default": lambda h, h4: torch.gather(h, 0, i3()),
        "aten.ge.Scalar": lambda h, h4: h * (h >= 0.1),
        "aten.ge.Tensor": lambda h, h4: h * (h >= h[0]),
        "aten.gelu.default": lambda h, h4: F.gelu(h),
        "aten.gt.Scalar": lambda h, h4: h * (h > 0.1),
        "aten.gt.Tensor": lambda h, h4: h * (h > h[0]),
        "aten.hardtanh.default": lambda h, h4: F.hardtanh(h, -0.5, 0.5),
        "aten.index.Tensor": lambda h, h4: h[i3()[0, :3], i3()[1, :3]],
        "aten.index_put.default": lambda h, h4: h[i3()[0, :3], i3()[1, :3]],
        "aten.index_select.default": lambda h, h4: h.index_select(1, i3()[0]),
        "aten.isnan.default": lambda h, h4: h * ~torch.isnan(h),
        "aten.le.Scalar": lambda h, h4: h * (h <= 0.1),
        "aten.le.Tensor": lambda h, h4: h * (h <= h[0]),
        "aten.leaky_relu.default": lambda h, h4: F.leaky_relu(h, 0.2),
        "aten.log.default": lambda h, h4: (h.abs() + 0.5).log(),
        "aten.log1p.default": lambda h, h4: torch.log1p(h.abs()),
        "aten.logical_and.default": lambda h, h4: h * torch.logical_and(h > 0, h < 1),
        "aten.logical_not.default": lambda h, h4: h * torch.logical_not(h > 0),
        "aten.logical_or.default": lambda h, h4: h * torch.logical_or(h > 1, h < -1),
        "aten.logical_xor.default": lambda h, h4: h * torch.logical_xor(h > 0, h > 1),
        "aten.lt.Scalar": lambda h, h4: h * (h < 0.1),
        "aten.lt.Tensor": lambda h, h4: h * (h < h[0]),
        "aten.max_pool2d_with_indices.default": lambda h, h4: F.max_pool2d(h4, 2),
        "aten.max_pool2d_with_indices_backward.default":
            lambda h, h4: F.max_pool2d(h4, 3, 1, 1),
        "aten.maximum.default": lambda h, h4: torch.maximum(h, h[0]),
        "aten.mean.dim": lambda h, h4: h.mean(1),
        "aten.mean.default": lambda h, h4: aten.mean.default(h),
        "aten.minimum.default": lambda h, h4: torch.minimum(h, h[0]),
        "aten.mm.default": lambda h, h4: h @ h.t(),
        "aten.mul.Tensor": lambda h, h4: h * h,
        "aten.native_dropout.default": lambda h, h4: F.dropout(h, 0.5),
        "aten.native_group_norm.default": lambda h, h4: F.group_norm(h4, 3),
        "aten.native_group_norm_backward.default": lambda h, h4: F.group_norm(h4, 1),
        "aten.native_layer_norm.default": lambda h, h4: F.layer_norm(h, (4,)),
        "aten.native_layer_norm_backward.default": lambda h, h4: F.layer_norm(h4, (4,)),
        "aten.ne.Scalar": lambda h, h4: h * (h != 0.1),
        "aten.ne.Tensor": lambda h, h4: h * (h != h[0]),
        "aten.neg.default": lambda h, h4: -h,
        "aten.permute.default": lambda h, h4: h4.permute(0, 2, 3, 1),
        "aten.pow.Tensor_Scalar": lambda h, h4: h ** 3,
        "aten.rand.default": lambda h, h4: h * torch.rand(3, 4, dtype=torch.float64),
        "aten.randn.default": lambda h, h4: h + torch.randn(3, 4, dtype=torch.float64),
        "aten.reciprocal.default": lambda h, h4: (h.abs() + 1).reciprocal(),
        "aten.relu.default": lambda h, h4: F.relu(h),
        "aten.rsqrt.default": lambda h, h4: (h.abs() + 1).rsqrt(),
        "aten.scalar_tensor.default": lambda h, h4: torch.where(h > 0, h, 0.5),
        "aten.scatter.src": lambda h, h4: torch.zeros_like(h).scatter(
            0, torch.tensor([[2, 0, 1, 2]]), h[:1]),
        "aten.scatter.value": lambda h, h4: h * torch.zeros_like(h).scatter(0, i3(), 1.0),
        "aten.scatter_add.default": lambda h, h4: torch.zeros_like(h).scatter_add(0, i3(), h[:2]),
        "aten.select.int": lambda h, h4: h[1],
        "aten.sigmoid.default": lambda h, h4: torch.sigmoid(h),
        "aten.sign.default": lambda h, h4: h * torch.sign(h),
        "aten.slice.Tensor": lambda h, h4: h[1:, ::2],
        "aten.sort.default": lambda h, h4: torch.sort(h, 1, descending=True)[0],
        "aten.split_with_sizes.default": lambda h, h4: torch.split(h, [1, 3], 1)[1],
        "aten.sqrt.default": lambda h, h4: (h.abs() + 0.5).sqrt(),
        "aten.squeeze.dim": lambda h, h4: h[:1].squeeze(0),
        "aten.sub.Tensor": lambda h, h4: h - h[0],
        "aten.sum.dim_IntList": lambda h, h4: h.sum(0),
        "aten.tanh.default": lambda h, h4: torch.tanh(h),
        "aten.topk.default": lambda h, h4: torch.topk(h, 2, 1)[0],
        "aten.unsqueeze.default": lambda h, h4: h.unsqueeze(1) * h.unsqueeze(0)[:, :1],
        "aten.var.correction": lambda h, h4: h.var(1),
        "aten.view.default": lambda h, h4: h.view(4, 3),
        "aten.where.self": lambda h, h4: torch.where(h > 0, h, h * h),
        **{f"aten.{op}.default": _plain(torch, op)
           for op in ("sin", "cos", "sinh", "cosh", "atan", "asinh")},
        "aten.tan.default": lambda h, h4: torch.tan(torch.tanh(h)),
        "aten.asin.default": lambda h, h4: torch.asin(0.9 * torch.tanh(h)),
        "aten.acos.default": lambda h, h4: torch.acos(0.9 * torch.tanh(h)),
        "aten.atanh.default": lambda h, h4: torch.atanh(0.9 * torch.tanh(h)),
        "aten.acosh.default": lambda h, h4: torch.acosh(h.abs() + 1.5),
        "aten.log2.default": lambda h, h4: torch.log2(h.abs() + 0.5),
        "aten.log10.default": lambda h, h4: torch.log10(h.abs() + 0.5),
        **{f"aten.{op}.default": _stepped(torch, op)
           for op in ("floor", "ceil", "trunc", "round")},
        "aten.isinf.default": lambda h, h4: h * ~torch.isinf(h),
        "aten.amin.default": lambda h, h4: h.amin(1),
        "aten.avg_pool1d.default": lambda h, h4: F.avg_pool1d(h4[0], 2),
        "aten.adaptive_avg_pool1d.default": lambda h, h4: F.adaptive_avg_pool1d(h4[0], 2),
        "aten.max.dim": lambda h, h4: h.max(1)[0] * h[0, 0] + h.max(1)[1],
        "aten.min.dim": lambda h, h4: h.min(1, keepdim=True)[0],
        "aten.argmax.default": lambda h, h4: h * torch.argmax(h, 1, keepdim=True),
        "aten.argmin.default": lambda h, h4: h.sum() * torch.argmin(h),
        "aten.constant_pad_nd.default": lambda h, h4: F.pad(h4, (1, 2, -1, 1), value=0.5),
        "aten.repeat.default": lambda h, h4: h.repeat(2, 1, 3),
        "aten.copy.default": lambda h, h4: h * torch.zeros(3, 4, dtype=h.dtype).copy_(h[0]),
        "aten.select_scatter.default": lambda h, h4: torch.select_scatter(h, h[1] * 2, 0, 2),
        "aten.slice_scatter.default": lambda h, h4: torch.slice_scatter(
            h, h[:, ::2] * 2, 1, 0, 4, 2),
        "aten.remainder.Scalar": lambda h, h4: torch.remainder(h, 0.7),
        "aten.remainder.Tensor": lambda h, h4: torch.remainder(h, h[0].abs() + 0.5),
        "aten.fmod.Scalar": lambda h, h4: torch.fmod(h, 0.7),
        "aten.fmod.Tensor": lambda h, h4: torch.fmod(h, h[0].abs() + 0.5),
        "aten.upsample_nearest2d.vec": lambda h, h4: F.interpolate(h4, scale_factor=2),
        "aten.upsample_bilinear2d.vec": lambda h, h4: F.interpolate(
            h4, scale_factor=2, mode="bilinear"),
    }


@dataclass
class Row:
    op: str
    status: str          # "mapped", "unsupported", "failed" or "unlisted"
    why: str = ""


def _probe_step(torch: Any, fn: Callable[..., Any]) -> tuple[Any, tuple, Callable, tuple]:
    class Probe(torch.nn.Module):
        def __init__(self):
            super().__init__()
            g = torch.Generator().manual_seed(0)
            self.w = torch.nn.Parameter(torch.randn(3, 4, generator=g, dtype=torch.float64))
            self.w4 = torch.nn.Parameter(torch.randn(2, 3, 4, 4, generator=g,
                                                     dtype=torch.float64))

        def forward(self, x, x4):
            return fn(x * self.w, x4 * self.w4)

    def loss(out):                  # a fixed weighting of every output element
        r = torch.cos(torch.arange(out.numel(), dtype=torch.float64)).reshape(out.shape)
        return (out * r).sum()
    g = torch.Generator().manual_seed(1)
    inputs = (torch.randn(3, 4, generator=g, dtype=torch.float64),
              torch.randn(2, 3, 4, 4, generator=g, dtype=torch.float64))
    return Probe(), inputs, loss, ()


def probe(op: str) -> Row:
    """Import the probe step of `op`; mapped when the op is in its capture, maps, and the
    step's loss and gradients are PyTorch's (float64)."""
    torch = require_torch()
    from . import from_torch  # the package's entry point (it imports this module)
    from .compare import compare  # (a sibling; imported here with it)
    fn = _probes(torch).get(op)
    if fn is None:
        return Row(op, "unlisted", "no probe")
    module, inputs, loss, targets = _probe_step(torch, fn)
    try:
        model = from_torch(module, inputs, loss, targets=targets)
    except Exception as e:         # a probe the import refuses: a failed row, said why
        return Row(op, "failed", f"{type(e).__name__}: {str(e)[:200]}")
    short = op.split(".")[1]
    if not model.report.runs:
        return Row(op, "failed", "; ".join(f"{a}: {w}" for _, a, w in model.report.opaque))
    decomposed = short not in model.report.mapped
    check = compare(model, module, inputs, loss, targets)
    if not check.ok():
        return Row(op, "failed", str(check).splitlines()[0])
    return Row(op, "mapped", "decomposed by PyTorch's table" if decomposed else "")


def coverage(ops: list[str] | None = None) -> list[Row]:
    """One row per Core ATen op: mapped (its probe checked), or unsupported with the reason."""
    torch = require_torch()
    probes = _probes(torch)
    rows = []
    for op in ops or core_ops():
        if op in probes:
            rows.append(probe(op))
        elif op in UNSUPPORTED:
            rows.append(Row(op, "unsupported", UNSUPPORTED[op]))
        else:
            rows.append(Row(op, "unlisted", "neither probed nor listed"))
    return rows
