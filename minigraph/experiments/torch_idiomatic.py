"""PyTorch as a user writes it: the baseline a GPU engineer would run instead of minigraph.

`benchmarks/gpu.py` used to compare minigraph only with PyTorch replaying minigraph's own graph
op by op (`minigraph.reference.TorchStep`): batch norm became six ops, attention a masked
softmax. Here the same three models are written the way PyTorch users write them, with the
same parameter shapes, so that the same weights give the same loss (a test checks it):

- the MLP: `nn.Linear` and `F.relu`;
- ResNet: torchvision's `BasicBlock` written out (`nn.Conv2d`, `nn.BatchNorm2d` in training
  mode, the CIFAR stem for small images, as `minigraph.models.resnet` builds it);
- the decoder: nanoGPT's block [Karpathy 2022] (one fused q/k/v `nn.Linear`,
  `F.scaled_dot_product_attention(is_causal=True)`, `nn.LayerNorm`, tanh GELU).

Each is stepped three ways [PyTorch optimizer hooks]: `eager` (`loss.backward()`, then
`optimizer.step()` and `zero_grad(set_to_none=True)`: every gradient alive until the update),
`fused update` (the optimizer step inside the backward pass: a
`register_post_accumulate_grad_hook` per parameter applies SGD and frees the gradient as soon
as it is complete, the schedule minigraph's graph has), and `torch.compile` of the eager step
where it compiles. On a GPU `cudnn.benchmark` is on (cuDNN picks its fastest convolutions) and
TF32 is off unless asked for, as minigraph's kernels are plain float32.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from ..models import RESNET_BLOCKS, Model

VARIANTS = ("eager", "fused update", "torch.compile")


def _modules():
    """The torch modules, built on first use (torch is optional for minigraph)."""
    import torch
    from torch import nn
    from torch.nn import functional as F  # noqa: N812

    class MLP(nn.Module):
        def __init__(self, sizes):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))

        def forward(self, x, y):
            for k, layer in enumerate(self.layers):
                x = layer(x)
                if k < len(self.layers) - 1:
                    x = F.relu(x)
            return F.cross_entropy(x, y)

    class BasicBlock(nn.Module):
        """torchvision's ResNet basic block (torchvision/models/resnet.py), written out."""

        def __init__(self, c_in, c_out, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(c_out)
            self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(c_out)
            self.downsample = None
            if stride != 1 or c_in != c_out:
                self.downsample = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                                                nn.BatchNorm2d(c_out))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return F.relu(out + (x if self.downsample is None else self.downsample(x)))

    class ResNet(nn.Module):
        def __init__(self, blocks, width, classes, in_channels, image):
            super().__init__()
            if image >= 64:
                raise ValueError("the idiomatic ResNet has the CIFAR stem only (image < 64)")
            self.conv1 = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            layers, c = [], width
            for s, n in enumerate(blocks):
                for b in range(n):
                    layers.append(BasicBlock(c, width * 2 ** s, 2 if b == 0 and s > 0 else 1))
                    c = width * 2 ** s
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(c, classes)

        def forward(self, x, y):
            h = self.layers(F.relu(self.bn1(self.conv1(x))))
            return F.cross_entropy(self.fc(h.mean(dim=(2, 3))), y)

    class Block(nn.Module):
        """nanoGPT's block: pre-norm causal self-attention and a GELU MLP."""

        def __init__(self, d, heads, ratio):
            super().__init__()
            self.heads = heads
            self.ln_1 = nn.LayerNorm(d)
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            self.ln_2 = nn.LayerNorm(d)
            self.c_fc = nn.Linear(d, ratio * d)
            self.mlp_proj = nn.Linear(ratio * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                       for z in (q, k, v))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(o.transpose(1, 2).contiguous().view(b, t, d))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self, layers, heads, seq, d, vocab, ratio):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.wpe = nn.Embedding(seq, d)
            self.blocks = nn.ModuleList(Block(d, heads, ratio) for _ in range(layers))
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx, targets):
            pos = torch.arange(idx.size(1), device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.blocks:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    return MLP, ResNet, GPT


def idiomatic_module(model: Model) -> Any:
    """The PyTorch module a user would write for `model` (mlp, resnet18/10/34 basic-block
    ResNets with the CIFAR stem, transformer), its parameters minigraph's initial ones."""
    import torch
    MLP, ResNet, GPT = _modules()
    c, feeds = model.config, model.feeds(0)
    if model.name == "mlp":
        sizes = [feeds[p].shape[0] for p in model.params if p.startswith("W")]
        module = MLP(sizes + [feeds[model.params[-1]].shape[-1]])
    elif model.name.startswith("resnet"):
        x = feeds["x"]
        classes = feeds["fc_b"].shape[0]
        module = ResNet(RESNET_BLOCKS[c["depth"]], c["width"], classes, x.shape[1],
                        c["image"])
        if c["depth"] >= 50:
            raise ValueError("the idiomatic ResNet has basic blocks only (depth < 50)")
    elif model.name == "transformer":
        ratio = feeds["l0_fc1_w"].shape[1] // c["d_model"]
        module = GPT(c["layers"], c["heads"], c["seq"], c["d_model"], c["vocab"], ratio)
    else:
        raise ValueError(f"no idiomatic PyTorch module for model {model.name!r}")
    with torch.no_grad():
        layout = minigraph_layout(model, feeds).values()
        for dst, src in zip(module.parameters(), layout, strict=True):
            if tuple(dst.shape) != src.shape:
                raise ValueError(f"{model.name}: parameter shape {tuple(dst.shape)} against "
                                 f"minigraph's {src.shape}")
            dst.copy_(torch.from_numpy(np.ascontiguousarray(src)))
    return module


def minigraph_layout(model: Model, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """minigraph's parameter `values` laid out as the module's `parameters()`, in that
    order: nn.Linear keeps [out, in] where minigraph keeps [in, out]; nanoGPT fuses q, k, v
    into one matrix (named `..._qkv_w`, `..._qkv_b`); every other name is minigraph's."""
    names, out, i = list(model.params), {}, 0
    while i < len(names):
        n, v = names[i], values[names[i]]
        if n.endswith("_q_w"):                       # q, k, v weights and biases, fused
            stem = n[:-4]
            out[f"{stem}_qkv_w"] = np.concatenate(
                [values[names[i + j]] for j in (0, 2, 4)], axis=1).T
            out[f"{stem}_qkv_b"] = np.concatenate([values[names[i + j]] for j in (1, 3, 5)])
            i += 6
            continue
        out[n] = v.T if v.ndim == 2 and (n.startswith("W") or n.endswith("_w")) else v
        i += 1
    return out


def _inputs(model: Model, device: str) -> tuple:
    import torch
    feeds = model.feeds(0)
    names = [n for n in feeds if model.graph.tensors[n].kind == "input"]
    return tuple(torch.from_numpy(np.ascontiguousarray(feeds[n])).to(device) for n in names)


def training_step(module: Any, lr: float, variant: str) -> Any:
    """One SGD step of `module` as `variant` does it: a function of the batch."""
    import torch
    if variant == "fused update":
        def update(p):
            with torch.no_grad():
                p.add_(p.grad, alpha=-lr)
            p.grad = None                            # freed as soon as it is used
        for p in module.parameters():
            p.register_post_accumulate_grad_hook(update)
        return lambda *batch: module(*batch).backward()
    opt = torch.optim.SGD(module.parameters(), lr=lr)

    def step(*batch):
        module(*batch).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    if variant == "torch.compile":
        return torch.compile(step)
    if variant != "eager":
        raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
    return step


def bench_idiomatic(model: Model, device: str, variant: str, repeats: int = 10,
                    warmup: int = 3, tf32: bool = False) -> dict:
    """ms per step (median, CUDA events on a GPU) and peak device bytes of one step with
    parameters and batch counted (as minigraph's measured peak counts them), or the reason
    the variant did not run."""
    import torch
    dev = "cuda" if device == "gpu" else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    module = idiomatic_module(model).to(dev).train()
    batch = _inputs(model, dev)
    try:
        step = training_step(module, model.lr, variant)
        for _ in range(warmup):
            step(*batch)
    except Exception as e:                           # torch.compile may not work there
        return {"status": f"did not run: {type(e).__name__}: {str(e)[:100]}"}
    ms = statistics.median(_time(step, batch, dev) for _ in range(repeats))
    peak = None
    if dev == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        step(*batch)
        torch.cuda.synchronize()
        held = sum(p.numel() * p.element_size() for p in module.parameters()) + \
            sum(b.numel() * b.element_size() for b in batch)
        peak = torch.cuda.max_memory_allocated() - before + held
    del module, step
    if dev == "cuda":
        torch.cuda.empty_cache()
    return {"status": "ok", "ms": ms, "peak": peak}


def _time(step: Any, batch: tuple, dev: str) -> float:
    import torch
    if dev != "cuda":
        t0 = time.perf_counter()
        step(*batch)
        return 1000 * (time.perf_counter() - t0)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    step(*batch)
    b.record()
    b.synchronize()
    return a.elapsed_time(b)


def loss_and_updated(model: Model, variant: str) -> tuple[float, dict[str, np.ndarray]]:
    """On the CPU: the module's loss at minigraph's initial weights, and its parameters after
    one step of `variant` (in minigraph's order and layout) - what a test holds equal to
    minigraph's own step."""
    import torch
    module = idiomatic_module(model)
    batch = _inputs(model, "cpu")
    with torch.no_grad():
        loss = float(module(*batch))
    step = training_step(module, model.lr, variant)
    step(*batch)
    return loss, {n: p.detach().numpy() for n, p in zip(
        minigraph_layout(model, model.feeds(0)), module.parameters(), strict=True)}
