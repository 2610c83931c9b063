"""Four real models at their real sizes, built on PyTorch's `meta` device: shapes, no weights.

ResNet-50 [He 2016], BERT-base [Devlin 2019], ViT-Large [Dosovitskiy 2021] and a
LLaMA-7B-shaped decoder [Touvron 2023] (RMSNorm, rotary position embeddings, SwiGLU
feed-forward, causal attention), each written in plain PyTorch (no download, no
torchvision). `real_model(name, **sizes)` builds one on the meta device with its example
inputs and a loss: `from_torch` imports it from shapes alone (nothing allocated, no
kernel run), so a 7-billion-parameter model plans on a laptop. Every size is a keyword,
so tests build the same code at a fraction of the size (`REDUCED`).
"""

from __future__ import annotations

from functools import cache
from types import SimpleNamespace
from typing import Any

from .zoo import TorchCase, TorchModelError, _torch

# The real sizes (each builder's defaults) and the reduced ones a test uses (same code:
# one layer or block per stage holds every op the full model has; the import's time grows
# with the layers, not with the sizes).
REAL = {"resnet50": {"batch": 32}, "bert_base": {"seq": 512}, "vit_large": {"image": 224},
        "llama_7b": {"seq": 2048}}
REDUCED = {"resnet50": {"batch": 2, "image": 32, "width": 8, "blocks": (1, 1, 1, 1)},
           "bert_base": {"seq": 16, "d_model": 32, "heads": 2, "layers": 1, "vocab": 50},
           "vit_large": {"image": 32, "patch": 16, "d_model": 32, "heads": 2, "layers": 1},
           "llama_7b": {"seq": 16, "d_model": 32, "heads": 2, "layers": 1, "vocab": 50,
                        "hidden": 48}}


@cache
def _classes() -> SimpleNamespace:
    torch = _torch()
    nn, F = torch.nn, torch.nn.functional

    class Bottleneck(nn.Module):
        """1x1, 3x3 (stride), 1x1 convolutions with batch norm; a projection when needed."""

        def __init__(self, c_in: int, width: int, stride: int) -> None:
            super().__init__()
            c_out = 4 * width
            self.c1, self.b1 = nn.Conv2d(c_in, width, 1, bias=False), nn.BatchNorm2d(width)
            self.c2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
            self.b2 = nn.BatchNorm2d(width)
            self.c3, self.b3 = nn.Conv2d(width, c_out, 1, bias=False), nn.BatchNorm2d(c_out)
            self.down = None if stride == 1 and c_in == c_out else nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

        def forward(self, x):
            h = F.relu(self.b1(self.c1(x)))
            h = F.relu(self.b2(self.c2(h)))
            h = self.b3(self.c3(h))
            return F.relu(h + (x if self.down is None else self.down(x)))

    class ResNet50(nn.Module):
        """He et al.'s ResNet-50: a 7x7 stem, max pool, 3-4-6-3 bottleneck stages."""

        def __init__(self, width: int, blocks: tuple, classes: int) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False),
                                      nn.BatchNorm2d(width), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
            layers, c = [], width
            for k, n in enumerate(blocks):
                w = width * 2 ** k
                for j in range(n):
                    layers.append(Bottleneck(c, w, 2 if j == 0 and k > 0 else 1))
                    c = 4 * w
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(c, classes)

        def forward(self, x):
            h = self.layers(self.stem(x))
            return self.fc(h.mean(dim=(2, 3)))

    class Attention(nn.Module):
        """Multi-head attention: q, k, v and output projections, softmax(q k^T / sqrt(d))."""

        def __init__(self, d: int, heads: int, bias: bool = True) -> None:
            super().__init__()
            self.h = heads
            self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=bias) for _ in range(4))

        def forward(self, x, rope=None, causal=False):
            b, t, d = x.shape
            q, k, v = (p(x).view(b, t, self.h, d // self.h).transpose(1, 2)
                       for p in (self.q, self.k, self.v))
            if rope is not None:
                q, k = rope(q), rope(k)
            s = q @ k.transpose(-2, -1) / (d // self.h) ** 0.5
            if causal:
                s = s.masked_fill(torch.ones_like(s[0, 0], dtype=torch.bool).triu(1),
                                  float("-inf"))
            y = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
            return self.o(y)

    class EncoderLayer(nn.Module):
        """A transformer encoder layer: post-norm (BERT) or pre-norm (ViT), GELU MLP."""

        def __init__(self, d: int, heads: int, pre: bool) -> None:
            super().__init__()
            self.pre, self.att = pre, Attention(d, heads)
            self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            if self.pre:
                x = x + self.att(self.n1(x))
                return x + self.mlp(self.n2(x))
            x = self.n1(x + self.att(x))
            return self.n2(x + self.mlp(x))

    class Bert(nn.Module):
        """BERT-base: token, position and segment embeddings, 12 post-norm layers, an MLM head
        tied to the token embedding."""

        def __init__(self, vocab: int, seq: int, d: int, heads: int, layers: int) -> None:
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
            self.seg, self.norm = nn.Embedding(2, d), nn.LayerNorm(d)
            self.layers = nn.ModuleList(EncoderLayer(d, heads, False) for _ in range(layers))
            self.register_buffer("positions", torch.arange(seq), persistent=False)

        def forward(self, ids):
            x = self.norm(self.tok(ids) + self.pos(self.positions) + self.seg(ids * 0))
            for layer in self.layers:
                x = layer(x)
            return x @ self.tok.weight.t()

    class ViT(nn.Module):
        """ViT-Large/16: patch embedding, class token, 24 pre-norm layers, a linear head."""

        def __init__(self, image: int, patch: int, d: int, heads: int, layers: int,
                     classes: int) -> None:
            super().__init__()
            self.embed = nn.Conv2d(3, d, patch, patch)
            self.cls = nn.Parameter(torch.zeros(1, 1, d))
            self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, d))
            self.layers = nn.Sequential(*(EncoderLayer(d, heads, True) for _ in range(layers)))
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

        def forward(self, x):
            h = self.embed(x).flatten(2).transpose(1, 2)
            h = torch.cat([self.cls.expand(h.shape[0], -1, -1), h], 1) + self.pos
            return self.head(self.norm(self.layers(h))[:, 0])

    class RMSNorm(nn.Module):
        def __init__(self, d: int) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight

    class Rotary(nn.Module):
        """Rotary position embeddings [Su 2021]: each pair of channels rotated by its angle."""

        def __init__(self, seq: int, dh: int) -> None:
            super().__init__()
            inv = 1.0 / 10000 ** (torch.arange(0, dh, 2).float() / dh)
            ang = torch.outer(torch.arange(seq).float(), inv)
            self.register_buffer("cos", torch.cat([ang, ang], -1).cos(), persistent=False)
            self.register_buffer("sin", torch.cat([ang, ang], -1).sin(), persistent=False)

        def forward(self, x):
            half = x.shape[-1] // 2
            turned = torch.cat([-x[..., half:], x[..., :half]], -1)
            return x * self.cos + turned * self.sin

    class DecoderLayer(nn.Module):
        def __init__(self, d: int, heads: int, hidden: int) -> None:
            super().__init__()
            self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
            self.att = Attention(d, heads, bias=False)
            self.gate, self.up = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
            self.down = nn.Linear(hidden, d, bias=False)

        def forward(self, x, rope):
            x = x + self.att(self.n1(x), rope, causal=True)
            h = self.n2(x)
            return x + self.down(F.silu(self.gate(h)) * self.up(h))

    class Llama(nn.Module):
        """A LLaMA-7B-shaped decoder: 32 layers, d_model 4096, 32 heads, SwiGLU (hidden
        11008), RMSNorm, rotary embeddings, an untied output layer."""

        def __init__(self, vocab: int, seq: int, d: int, heads: int, layers: int,
                     hidden: int) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.rope = Rotary(seq, d // heads)
            self.layers = nn.ModuleList(DecoderLayer(d, heads, hidden) for _ in range(layers))
            self.norm, self.out = RMSNorm(d), nn.Linear(d, vocab, bias=False)

        def forward(self, ids):
            x = self.tok(ids)
            for layer in self.layers:
                x = layer(x, self.rope)
            return self.out(self.norm(x))

    return SimpleNamespace(ResNet50=ResNet50, Bert=Bert, ViT=ViT, Llama=Llama)


def _lm_loss(logits, targets):
    return _torch().nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


def _ce(logits, targets):
    return _torch().nn.functional.cross_entropy(logits, targets)


def resnet50(batch: int = 32, image: int = 224, width: int = 64,
             blocks: tuple = (3, 4, 6, 3), classes: int = 1000) -> TorchCase:
    torch = _torch()
    with torch.device("meta"):
        m = _classes().ResNet50(width, tuple(blocks), classes)
        x, y = torch.empty(batch, 3, image, image), torch.empty(batch, dtype=torch.long)
    return TorchCase(m, (x,), _ce, (y,))


def bert_base(batch: int = 1, seq: int = 512, d_model: int = 768, heads: int = 12,
              layers: int = 12, vocab: int = 30522) -> TorchCase:
    torch = _torch()
    with torch.device("meta"):
        m = _classes().Bert(vocab, seq, d_model, heads, layers)
        ids = torch.empty(batch, seq, dtype=torch.long)
        y = torch.empty(batch, seq, dtype=torch.long)
    return TorchCase(m, (ids,), _lm_loss, (y,))


def vit_large(batch: int = 1, image: int = 224, patch: int = 16, d_model: int = 1024,
              heads: int = 16, layers: int = 24, classes: int = 1000) -> TorchCase:
    torch = _torch()
    with torch.device("meta"):
        m = _classes().ViT(image, patch, d_model, heads, layers, classes)
        x, y = torch.empty(batch, 3, image, image), torch.empty(batch, dtype=torch.long)
    return TorchCase(m, (x,), _ce, (y,))


def llama_7b(batch: int = 1, seq: int = 2048, d_model: int = 4096, heads: int = 32,
             layers: int = 32, hidden: int = 11008, vocab: int = 32000) -> TorchCase:
    torch = _torch()
    with torch.device("meta"):
        m = _classes().Llama(vocab, seq, d_model, heads, layers, hidden)
        ids = torch.empty(batch, seq, dtype=torch.long)
        y = torch.empty(batch, seq, dtype=torch.long)
    return TorchCase(m, (ids,), _lm_loss, (y,))


REAL_MODELS = {"resnet50": resnet50, "bert_base": bert_base, "vit_large": vit_large,
               "llama_7b": llama_7b}


def real_model(name: str, **sizes: Any) -> TorchCase:
    """The `TorchCase` of `name` (`REAL_MODELS`) on the meta device, at `sizes` (each
    builder's keywords; its defaults are the real sizes)."""
    if name not in REAL_MODELS:
        raise TorchModelError(f"unknown real-size model {name!r}; known: "
                              f"{', '.join(REAL_MODELS)}")
    return REAL_MODELS[name](**sizes)
