"""Models written in plain PyTorch, to import with `from_torch`: an MLP, a small CNN,
ResNet-18 [He 2016] and a GPT-2-small-sized transformer block [Radford 2019].

Each builder returns a `TorchCase` `(module, example_inputs, loss_fn, targets)`: the
`nn.Module` (train mode, seeded weights), the example inputs `(x,)`, the loss
`loss_fn(output, *targets) -> scalar` and the targets `(labels,)`, so that one training
step is `loss_fn(module(*example_inputs), *targets)`, the convention of `from_torch`.
`torch_model(name, **config)` picks one by name (`TORCH_MODELS`); `imported(name,
**config)` imports it as a minigraph `Model`. No downloads and no torchvision: every
layer is written out here.

PyTorch is optional: it is imported inside the functions that need it, so importing
this module (or minigraph) never imports torch. Defaults are small (a laptop or Binder
with 1-2 GB); the keywords scale them up to the real sizes (`resnet18(image=224,
width=64)`, `gpt_block(d_model=768, heads=12, seq=1024)`).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from functools import cache
from types import SimpleNamespace
from typing import Any, NamedTuple

from ..errors import MinigraphError
from .capture import require_torch


class TorchCase(NamedTuple):
    """One PyTorch training step: `loss_fn(module(*example_inputs), *targets)`."""
    module: Any
    example_inputs: tuple[Any, ...]
    loss_fn: Callable[..., Any]
    targets: tuple[Any, ...]


class TorchModelError(MinigraphError):
    """A PyTorch zoo model that does not exist, or a configuration it cannot take."""


def _torch() -> Any:
    """torch, or TorchMissingError saying `pip install 'minigraph[torch]'`."""
    return require_torch()


@cache
def _classes() -> SimpleNamespace:
    """The nn.Module classes, defined once torch is imported (they subclass nn.Module)."""
    torch = _torch()
    nn, F = torch.nn, torch.nn.functional

    class MLP(nn.Module):
        """Linear, ReLU, ..., Linear: logits for cross-entropy."""

        def __init__(self, sizes: tuple[int, ...]):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))

        def forward(self, x):
            for k, layer in enumerate(self.layers):
                x = layer(x)
                if k < len(self.layers) - 1:
                    x = F.relu(x)
            return x

    class SmallCNN(nn.Module):
        """conv3x3, ReLU, 2x2 max-pool, twice, then a linear classifier (LeNet's shape)."""

        def __init__(self, in_ch: int, channels: tuple[int, int], image: int, classes: int):
            super().__init__()
            c1, c2 = channels
            self.conv1 = nn.Conv2d(in_ch, c1, 3, padding=1)
            self.conv2 = nn.Conv2d(c1, c2, 3, padding=1)
            self.fc = nn.Linear(c2 * (image // 4) ** 2, classes)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            return self.fc(torch.flatten(x, 1))

    class BasicBlock(nn.Module):
        """ResNet's basic block [He 2016]: two 3x3 conv + batch norm, a residual add; a 1x1
        conv + batch norm on the shortcut where the shape changes."""

        def __init__(self, c_in: int, c_out: int, stride: int):
            super().__init__()
            self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(c_out)
            self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(c_out)
            self.down = None
            if stride != 1 or c_in != c_out:
                self.down = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                                          nn.BatchNorm2d(c_out))

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return F.relu(y + (x if self.down is None else self.down(x)))

    class ResNet18(nn.Module):
        """ResNet-18: a stem, four stages of two basic blocks (width, 2w, 4w, 8w channels),
        adaptive average pooling, a linear classifier. Images under 64 pixels get the
        CIFAR stem (3x3 conv, no max-pool), larger ones ImageNet's (7x7/2 conv, 3x3/2 pool)."""

        def __init__(self, width: int, classes: int, image: int):
            super().__init__()
            self.small = image < 64
            if self.small:
                self.conv1 = nn.Conv2d(3, width, 3, 1, 1, bias=False)
            else:
                self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            blocks, c = [], width
            for stage, c_out in enumerate((width, 2 * width, 4 * width, 8 * width)):
                for k in range(2):
                    blocks.append(BasicBlock(c, c_out, 2 if stage > 0 and k == 0 else 1))
                    c = c_out
            self.blocks = nn.Sequential(*blocks)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(c, classes)

        def forward(self, x):
            x = F.relu(self.bn1(self.conv1(x)))
            if not self.small:
                x = F.max_pool2d(x, 3, 2, 1)
            x = self.pool(self.blocks(x))
            return self.fc(torch.flatten(x, 1))

    class GPTBlock(nn.Module):
        """One GPT-2 block [Radford 2019]: x + attn(ln1(x)), then x + mlp(ln2(x)); causal
        self-attention written out (q k^T / sqrt(d_head) plus a -1e9 mask above the
        diagonal, softmax, times v) and a 4x MLP with GELU (tanh form, as GPT-2)."""

        def __init__(self, d_model: int, heads: int, seq: int):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.proj = nn.Linear(d_model, d_model)
            self.ln2 = nn.LayerNorm(d_model)
            self.fc1 = nn.Linear(d_model, 4 * d_model)
            self.fc2 = nn.Linear(4 * d_model, d_model)
            mask = torch.triu(torch.full((seq, seq), -1e9), diagonal=1)
            self.register_buffer("mask", mask, persistent=False)

        def attention(self, x):
            b, t, d = x.shape
            h = self.heads
            q, k, v = self.qkv(x).split(d, dim=-1)
            q, k, v = (z.reshape(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // h)) + self.mask[:t, :t]
            y = torch.softmax(att, dim=-1) @ v
            return self.proj(y.transpose(1, 2).reshape(b, t, d))

        def forward(self, x):
            x = x + self.attention(self.ln1(x))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    return SimpleNamespace(MLP=MLP, SmallCNN=SmallCNN, BasicBlock=BasicBlock,
                           ResNet18=ResNet18, GPTBlock=GPTBlock)


def _positive(name: str, **values: int) -> None:
    for key, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise TorchModelError(f"{name}: {key} must be a positive int, not {v!r}")


def _cross_entropy(output: Any, target: Any) -> Any:
    return _torch().nn.functional.cross_entropy(output, target)


def _mse(output: Any, target: Any) -> Any:
    return _torch().nn.functional.mse_loss(output, target)


def _labels(torch: Any, gen: Any, batch: int, classes: int) -> Any:
    return torch.randint(0, classes, (batch,), generator=gen, dtype=torch.int64)


def mlp(batch: int = 8, sizes: tuple[int, ...] = (32, 64, 10), seed: int = 0) -> TorchCase:
    """An MLP with ReLU between its linear layers; cross-entropy on `sizes[-1]` classes."""
    _positive("mlp", batch=batch, **{f"sizes[{k}]": s for k, s in enumerate(sizes)})
    if len(sizes) < 2:
        raise TorchModelError(f"mlp: sizes needs at least two entries, not {sizes!r}")
    torch = _torch()
    torch.manual_seed(seed)
    module = _classes().MLP(tuple(sizes)).train()
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, sizes[0], generator=gen)
    return TorchCase(module, (x,), _cross_entropy, (_labels(torch, gen, batch, sizes[-1]),))


def cnn(batch: int = 4, image: int = 16, in_channels: int = 3,
        channels: tuple[int, int] = (8, 16), classes: int = 10, seed: int = 0) -> TorchCase:
    """Two conv3x3 + ReLU + 2x2 max-pool stages and a linear classifier; cross-entropy."""
    _positive("cnn", batch=batch, image=image, in_channels=in_channels, classes=classes)
    if image % 4:
        raise TorchModelError(f"cnn: image must be a multiple of 4 (two 2x2 pools), "
                              f"not {image}")
    torch = _torch()
    torch.manual_seed(seed)
    module = _classes().SmallCNN(in_channels, tuple(channels), image, classes).train()
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, in_channels, image, image, generator=gen)
    return TorchCase(module, (x,), _cross_entropy, (_labels(torch, gen, batch, classes),))


def resnet18(batch: int = 2, image: int = 32, width: int = 16, classes: int = 10,
             seed: int = 0) -> TorchCase:
    """ResNet-18 [He 2016] (width 64 and image 224 are the paper's); batch norm in training
    mode (its running statistics are buffers); cross-entropy on `classes`."""
    _positive("resnet18", batch=batch, image=image, width=width, classes=classes)
    if image < 8:
        raise TorchModelError(f"resnet18: image must be at least 8 pixels (three stride-2 "
                              f"stages), not {image}")
    torch = _torch()
    torch.manual_seed(seed)
    module = _classes().ResNet18(width, classes, image).train()
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, 3, image, image, generator=gen)
    return TorchCase(module, (x,), _cross_entropy, (_labels(torch, gen, batch, classes),))


def gpt_block(batch: int = 1, seq: int = 8, d_model: int = 32, heads: int = 2,
              seed: int = 0) -> TorchCase:
    """One GPT-2 block [Radford 2019] on `[batch, seq, d_model]` activations; mean squared
    error against a random target. GPT-2 small is `d_model=768, heads=12` (`GPT2_SMALL`)."""
    _positive("gpt_block", batch=batch, seq=seq, d_model=d_model, heads=heads)
    if d_model % heads:
        raise TorchModelError(f"gpt_block: d_model {d_model} is not a multiple of heads "
                              f"{heads}")
    torch = _torch()
    torch.manual_seed(seed)
    module = _classes().GPTBlock(d_model, heads, seq).train()
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, seq, d_model, generator=gen)
    target = torch.randn(batch, seq, d_model, generator=gen)
    return TorchCase(module, (x,), _mse, (target,))


#: GPT-2 small's block sizes [Radford 2019] (a sequence of 128 tokens, batch 1).
GPT2_SMALL: dict[str, int] = {"d_model": 768, "heads": 12, "seq": 128, "batch": 1}

#: name -> builder; each returns a TorchCase (module, example_inputs, loss_fn, targets).
TORCH_MODELS: dict[str, Callable[..., TorchCase]] = {
    "mlp": mlp, "cnn": cnn, "resnet18": resnet18, "gpt_block": gpt_block,
}


def torch_model(name: str, **config: Any) -> TorchCase:
    """The `TorchCase` `(module, example_inputs, loss_fn, targets)` of the PyTorch zoo model
    `name` (`TORCH_MODELS`), built with `config` (each builder's keywords)."""
    if name not in TORCH_MODELS:
        raise TorchModelError(f"unknown PyTorch zoo model {name!r}; known: "
                              f"{', '.join(TORCH_MODELS)}")
    build = TORCH_MODELS[name]
    known = list(inspect.signature(build).parameters)
    unknown = sorted(k for k in config if k not in known)
    if unknown:
        raise TorchModelError(f"{name} has no option {', '.join(map(repr, unknown))}; its "
                              f"options are {', '.join(known)}")
    return build(**config)


def imported(name: str, lr: float = 0.1, **config: Any) -> Any:
    """The PyTorch zoo model `name` imported with `from_torch`: a minigraph `Model` whose
    feeds are the module's own weights and the example batch."""
    from . import from_torch  # the importer (this module may be imported before it)

    case = torch_model(name, **config)
    return from_torch(case.module, case.example_inputs, case.loss_fn, targets=case.targets,
                      lr=lr, name=f"torch_{name}")
