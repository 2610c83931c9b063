"""The model zoo: training graphs of real network shapes, with fixed synthetic batches.

Every builder returns a `Model`: the training graph (forward + explicit backward + SGD
update, built in a fresh `name_scope()` so node names are the same every time), the name
of its loss, a `make_batch(seed)` that makes inputs and labels of the right shapes and
dtypes, and `init_params(seed)`. `minigraph.experiments.training.train(model, steps)`
runs SGD on that one batch (the loss must go down: a quick end-to-end check of ops,
gradients, planner and executor).

Defaults are tiny so that a training step runs in well under a second on NumPy; the
arguments scale them up to the real thing (`resnet(depth=50, image=224, batch=32)` can
be built and planned symbolically, without running it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import graph as _g
from . import ops
from .autodiff import training_graph
from .errors import GraphError
from .feeds import init_params
from .graph import Graph, Tensor, constant, fmt_bytes, name_scope, param

# ---------------------------------------------------------------------------------------
# The Model record
# ---------------------------------------------------------------------------------------


@dataclass
class Model:
    """A training graph with everything needed to run it.

    `graph` has outputs `[loss, *(f"{p}_new" for p in params)]`: running it once is one
    SGD step, and the `_new` outputs are fed back as the next step's parameters.
    """
    name: str
    graph: Graph
    loss: str
    params: tuple[str, ...]
    lr: float
    make_batch: Callable[[int], dict[str, np.ndarray]]
    description: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    rebuild: Callable[[float], Model] | None = field(default=None, repr=False)

    def init_params(self, seed: int = 0) -> dict[str, np.ndarray]:
        """Initial parameter values (each parameter's own `init`, seeded)."""
        return init_params(self.graph, seed)

    def feeds(self, seed: int = 0) -> dict[str, np.ndarray]:
        """Batch and initial parameters: everything `Executor.run` needs for one step."""
        return {**self.make_batch(seed), **self.init_params(seed)}

    def with_lr(self, lr: float) -> Model:
        """The same model, its graph rebuilt with another learning rate (lr is a node attr)."""
        if lr == self.lr or self.rebuild is None:
            return self
        return self.rebuild(lr)

    def summary(self) -> str:
        g = self.graph
        kb = g.bytes_by_kind()
        nparams = sum(int(np.prod(g.tensors[p].shape)) for p in self.params)
        return (f"{self.name}: {self.description}; {len(g)} nodes, {len(g.tensors)} tensors, "
                f"{nparams:,} parameters, activations {fmt_bytes(kb.get('activation', 0))}, "
                f"gradients {fmt_bytes(kb.get('gradient', 0))}, {g.flops():,} FLOPs per step")

    def __repr__(self) -> str:
        return f"<Model {self.name}: {len(self.graph)} nodes, loss {self.loss}>"


def _make_model(name: str, build: Callable[[], tuple[Tensor, list[Tensor]]], lr: float,
                make_batch: Callable[[int], dict], description: str,
                config: dict[str, Any]) -> Model:
    """Build the forward graph in a fresh name scope, then its training graph."""
    def at(lr: float) -> Model:
        with name_scope():
            loss, params = build()
            graph = training_graph(loss, params, lr=lr, name=name)
        return Model(name, graph, loss.name, tuple(p.name for p in params), lr, make_batch,
                     description, {**config, "lr": lr}, at)
    return at(lr)


# ---------------------------------------------------------------------------------------
# Layers (plain functions of tensors; each parameter gets an explicit, stable name)
# ---------------------------------------------------------------------------------------

class _Params(list):
    """The parameters a builder creates, in creation order."""

    def new(self, name: str, shape: Sequence[int], init: Any = "normal",
            scale: float | None = None) -> Tensor:
        p = param(name, shape, init=init, scale=scale)
        self.append(p)
        return p


def linear(P: _Params, x: Tensor, n_in: int, n_out: int, name: str,
           bias: bool = True) -> Tensor:
    """x @ W + b over the last axis (a shared W under any leading batch axes)."""
    y = x @ P.new(f"{name}_w", (n_in, n_out), scale=1.0 / math.sqrt(n_in))
    return y + P.new(f"{name}_b", (n_out,), init="zeros") if bias else y


def conv(P: _Params, x: Tensor, c_out: int, k: int, name: str, stride: int = 1,
         padding: int | None = None, bias: bool = False) -> Tensor:
    """conv2d with He-initialised weights [c_out, c_in, k, k]; 'same' padding by default."""
    c_in = x.shape[1]
    w = P.new(f"{name}_w", (c_out, c_in, k, k), scale=math.sqrt(2.0 / (c_in * k * k)))
    y = ops.conv2d(x, w, stride=stride, padding=k // 2 if padding is None else padding)
    return y + P.new(f"{name}_b", (c_out, 1, 1), init="zeros") if bias else y


def bn(P: _Params, x: Tensor, name: str, eps: float = 1e-5) -> Tensor:
    """Training-mode batch norm over the channel axis 1."""
    c = x.shape[1]
    return ops.batch_norm(x, P.new(f"{name}_gamma", (c,), init="ones"),
                          P.new(f"{name}_beta", (c,), init="zeros"), eps)


def ln(P: _Params, x: Tensor, name: str, eps: float = 1e-5) -> Tensor:
    """Layer norm over the last axis."""
    d = x.shape[-1]
    return ops.layer_norm(x, P.new(f"{name}_gamma", (d,), init="ones"),
                          P.new(f"{name}_beta", (d,), init="zeros"), eps)


def global_avg_pool(x: Tensor) -> Tensor:
    """[N, C, H, W] -> [N, C]: the mean over the spatial axes."""
    return ops.mean(x, axis=(2, 3))


def upsample2(x: Tensor) -> Tensor:
    """Nearest-neighbour x2 upsampling from reshape and broadcast_to (no new op needed):
    [N,C,H,W] -> [N,C,H,1,W,1] -> [N,C,H,2,W,2] -> [N,C,2H,2W]. Its gradient is the
    reverse chain: reshape, sum_to (sums each 2x2 block), reshape."""
    n, c, h, w = x.shape
    y = ops.reshape(x, (n, c, h, 1, w, 1))
    y = ops.broadcast_to(y, (n, c, h, 2, w, 2))
    return ops.reshape(y, (n, c, 2 * h, 2 * w))


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _classes(rng: np.random.Generator, shape: Sequence[int], k: int) -> np.ndarray:
    return rng.integers(0, k, size=tuple(shape)).astype(np.int64)


def _normal(rng: np.random.Generator, shape: Sequence[int]) -> np.ndarray:
    return rng.standard_normal(tuple(shape)).astype(np.float32)


def _image_batch(batch: int, in_channels: int, image: int,
                 classes: int) -> Callable[[int], dict[str, np.ndarray]]:
    """`make_batch` of the image classifiers: x ~ N(0, 1) of [batch, C, image, image] and
    y, `batch` class ids below `classes`; fixed by its seed."""
    def make_batch(seed: int = 0) -> dict[str, np.ndarray]:
        rng = _rng(seed)
        return {"x": _normal(rng, (batch, in_channels, image, image)),
                "y": _classes(rng, (batch,), classes)}
    return make_batch


# ---------------------------------------------------------------------------------------
# MLP and CNN
# ---------------------------------------------------------------------------------------

def named(t: Tensor, name: str) -> Tensor:
    """Give an op's output (and its node) the name a source's figure uses."""
    t.name = name
    t.call.name = name
    return t


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": ops.relu, "tanh": ops.tanh, "sigmoid": ops.sigmoid}
# The losses an MLP ends with; y is the labels input (cross-entropy only). "square" and
# "pow2" are the same number, but h * h and h ** 2 give different backward graphs.
MLP_LOSSES: dict[str, Callable[[Tensor, Tensor | None], Tensor]] = {
    "cross_entropy": lambda h, y: ops.softmax_cross_entropy(h, y),
    "mean": lambda h, y: ops.mean(h),
    "square": lambda h, y: ops.mean(h * h),
    "pow2": lambda h, y: ops.mean(h ** 2),
}


def mlp_layers(sizes: Sequence[int], batch: int, *, bias: bool = True, act: str = "relu",
               act_last: bool = False, loss: str = "cross_entropy", first: int = 1,
               mxnet_names: bool = False) -> tuple[Tensor, list[Tensor]]:
    """The forward pass of a multi-layer perceptron: its loss and its parameters.

    `sizes` = (inputs, hidden..., outputs); layer k (numbered from `first`) is
    h @ W{k} (+ b{k}), then `act` (not after the last layer unless `act_last`).
    `mxnet_names` names tensors as MXNet's memory note does [Chen 2016]: inputs data and
    label, layers fc1, act1, fc2, ..., the loss "loss"; otherwise x, y and automatic names.
    """
    sizes = tuple(int(s) for s in sizes)
    x = _g.input("data" if mxnet_names else "x", (batch, sizes[0]))
    y = _g.input("label" if mxnet_names else "y", (batch,), dtype="int64") \
        if loss == "cross_entropy" else None
    h, params = x, []
    for k, (a, b) in enumerate(zip(sizes, sizes[1:]), start=first):
        params.append(param(f"W{k}", (a, b)))
        h = h @ params[-1]
        if bias:
            params.append(param(f"b{k}", (b,), init="zeros"))
            h = h + params[-1]
        h = named(h, f"fc{k}") if mxnet_names else h
        if act_last or k < first + len(sizes) - 2:
            h = ACTIVATIONS[act](h)
            h = named(h, f"act{k}") if mxnet_names else h
    out = MLP_LOSSES[loss](h, y)
    return (named(out, "loss") if mxnet_names else out), params


def mlp_graph(sizes: Sequence[int], batch: int, *, lr: float = 0.1, name: str = "mlp",
              **layers: Any) -> Graph:
    """An MLP's training graph (forward, backward, SGD update) in a fresh name scope;
    `layers` go to `mlp_layers`. The one MLP builder: lessons, DTR and grading use it."""
    with name_scope():
        loss, params = mlp_layers(sizes, batch, **layers)
        return training_graph(loss, params, lr=lr, name=name)


def mlp(batch: int = 32, sizes: Sequence[int] = (64, 128, 10), lr: float = 0.1) -> Model:
    """Multi-layer perceptron with ReLU, softmax cross-entropy. `sizes` = (inputs,
    hidden..., classes); each layer is x @ W + b."""
    sizes = tuple(int(s) for s in sizes)

    def build():
        return mlp_layers(sizes, batch)

    def make_batch(seed: int = 0) -> dict[str, np.ndarray]:
        rng = _rng(seed)
        return {"x": _normal(rng, (batch, sizes[0])), "y": _classes(rng, (batch,), sizes[-1])}

    return _make_model("mlp", build, lr, make_batch,
                       f"MLP {'-'.join(map(str, sizes))}, batch {batch}",
                       {"batch": batch, "sizes": sizes})


def cnn(batch: int = 8, image: int = 28, channels: Sequence[int] = (6, 16),
        hidden: Sequence[int] = (120, 84), classes: int = 10, in_channels: int = 1,
        lr: float = 0.05) -> Model:
    """LeNet-style CNN with two conv and pooling stages. Each stage is conv 5x5, ReLU,
    max-pool 2 (one per entry of `channels`), then fully connected layers with ReLU and
    softmax cross-entropy."""
    def build():
        P = _Params()
        x = _g.input("x", (batch, in_channels, image, image))
        y = _g.input("y", (batch,), dtype="int64")
        h = x
        for i, c in enumerate(channels, start=1):
            h = ops.relu(conv(P, h, c, 5, f"conv{i}", padding=0, bias=True))
            h = ops.max_pool2d(h, 2)
        n = int(np.prod(h.shape[1:]))
        h = ops.reshape(h, (batch, n))
        for i, d in enumerate(hidden, start=1):
            h = ops.relu(linear(P, h, n, d, f"fc{i}"))
            n = d
        logits = linear(P, h, n, classes, "out")
        return ops.softmax_cross_entropy(logits, y), P

    make_batch = _image_batch(batch, in_channels, image, classes)
    return _make_model("cnn", build, lr, make_batch,
                       f"LeNet-style CNN {image}x{image}, channels {tuple(channels)}, "
                       f"batch {batch}", {"batch": batch, "image": image})


# ---------------------------------------------------------------------------------------
# ResNet
# ---------------------------------------------------------------------------------------

RESNET_BLOCKS = {10: (1, 1, 1, 1), 18: (2, 2, 2, 2), 34: (3, 4, 6, 3), 50: (3, 4, 6, 3),
                 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


def _basic_block(P: _Params, x: Tensor, c_out: int, stride: int, name: str) -> Tensor:
    h = ops.relu(bn(P, conv(P, x, c_out, 3, f"{name}_conv1", stride), f"{name}_bn1"))
    h = bn(P, conv(P, h, c_out, 3, f"{name}_conv2"), f"{name}_bn2")
    return ops.relu(h + _shortcut(P, x, c_out, stride, name))


def _bottleneck_block(P: _Params, x: Tensor, c_mid: int, stride: int, name: str) -> Tensor:
    c_out = 4 * c_mid
    h = ops.relu(bn(P, conv(P, x, c_mid, 1, f"{name}_conv1"), f"{name}_bn1"))
    h = ops.relu(bn(P, conv(P, h, c_mid, 3, f"{name}_conv2", stride), f"{name}_bn2"))
    h = bn(P, conv(P, h, c_out, 1, f"{name}_conv3"), f"{name}_bn3")
    return ops.relu(h + _shortcut(P, x, c_out, stride, name))


def _shortcut(P: _Params, x: Tensor, c_out: int, stride: int, name: str) -> Tensor:
    """Identity, or a 1x1 convolution and batch norm where the shape changes."""
    if stride == 1 and x.shape[1] == c_out:
        return x
    return bn(P, conv(P, x, c_out, 1, f"{name}_down", stride), f"{name}_down_bn")


def resnet(depth: int = 18, image: int = 16, batch: int = 2, width: int = 4,
           classes: int = 10, bottleneck: bool | None = None, in_channels: int = 3,
           lr: float = 0.05) -> Model:
    """ResNet with basic or bottleneck blocks and batch norm, depth 10 to 152. Depths
    10, 18, 34 use basic blocks, 50, 101, 152 bottleneck blocks (unless `bottleneck` says
    otherwise). Stage widths are width x (1, 2, 4, 8)
    (the paper's width is 64). Images of 64 pixels or more get the ImageNet stem (7x7/2
    conv, 3x3/2 max-pool), smaller ones a 3x3 conv (CIFAR style)."""
    if depth not in RESNET_BLOCKS:
        raise ValueError(f"resnet depth must be one of {sorted(RESNET_BLOCKS)}, not {depth}")
    blocks = RESNET_BLOCKS[depth]
    bottleneck = depth >= 50 if bottleneck is None else bottleneck

    def build():
        P = _Params()
        x = _g.input("x", (batch, in_channels, image, image))
        y = _g.input("y", (batch,), dtype="int64")
        if image >= 64:
            h = ops.relu(bn(P, conv(P, x, width, 7, "stem", stride=2, padding=3), "stem_bn"))
            h = ops.max_pool2d(h, 3, stride=2, padding=1)
        else:
            h = ops.relu(bn(P, conv(P, x, width, 3, "stem"), "stem_bn"))
        for s, n in enumerate(blocks):
            c = width * 2 ** s
            for b in range(n):
                stride = 2 if b == 0 and s > 0 else 1
                name = f"s{s + 1}b{b + 1}"
                h = _bottleneck_block(P, h, c, stride, name) if bottleneck else \
                    _basic_block(P, h, c, stride, name)
        h = global_avg_pool(h)
        logits = linear(P, h, h.shape[1], classes, "fc")
        return ops.softmax_cross_entropy(logits, y), P

    make_batch = _image_batch(batch, in_channels, image, classes)
    kind = "bottleneck" if bottleneck else "basic"
    return _make_model(f"resnet{depth}", build, lr, make_batch,
                       f"ResNet-{depth} ({kind} blocks), {image}x{image}, width {width}, "
                       f"batch {batch}",
                       {"depth": depth, "image": image, "batch": batch, "width": width})


# ---------------------------------------------------------------------------------------
# Transformer (GPT-style decoder) and unrolled LSTM
# ---------------------------------------------------------------------------------------

def causal_mask(seq: int) -> np.ndarray:
    """[seq, seq] float32: 0 where position i may attend to j <= i, -1e9 above the
    diagonal (added to the scores before the softmax, so those weights become 0)."""
    return np.triu(np.full((seq, seq), -1e9, dtype=np.float32), k=1)


def attention(P: _Params, x: Tensor, heads: int, mask: Tensor, name: str) -> Tensor:
    """Causal multi-head self-attention of x [B, T, D]."""
    b, t, d = x.shape
    dh = d // heads

    def split(z: Tensor) -> Tensor:            # [B, T, D] -> [B, H, T, dh]
        return ops.transpose(ops.reshape(z, (b, t, heads, dh)), (0, 2, 1, 3))

    q = split(linear(P, x, d, d, f"{name}_q"))
    k = split(linear(P, x, d, d, f"{name}_k"))
    v = split(linear(P, x, d, d, f"{name}_v"))
    scores = ops.matmul(q, k, tb=True) * (1.0 / math.sqrt(dh)) + mask   # [B, H, T, T]
    o = ops.matmul(ops.softmax(scores, axis=-1), v)                      # [B, H, T, dh]
    o = ops.reshape(ops.transpose(o, (0, 2, 1, 3)), (b, t, d))
    return linear(P, o, d, d, f"{name}_o")


def transformer(layers: int = 2, heads: int = 2, seq: int = 16, d_model: int = 32,
                vocab: int = 64, batch: int = 4, mlp_ratio: int = 4,
                lr: float = 0.1) -> Model:
    """GPT-style Transformer decoder with causal attention. Token and position
    embeddings, `layers` pre-norm blocks (causal
    attention with a constant mask, GELU MLP, residuals), a final layer norm, logits over
    the vocabulary, softmax cross-entropy against the next token."""
    if d_model % heads:
        raise ValueError(f"d_model {d_model} is not a multiple of heads {heads}")

    def build():
        P = _Params()
        ids = _g.input("tokens", (batch, seq), dtype="int64")
        labels = _g.input("next_tokens", (batch, seq), dtype="int64")
        mask = constant(causal_mask(seq), name="causal_mask")
        h = ops.embedding(ids, P.new("tok_emb", (vocab, d_model), scale=0.1))
        h = h + P.new("pos_emb", (seq, d_model), scale=0.1)
        for i in range(layers):
            h = h + attention(P, ln(P, h, f"l{i}_ln1"), heads, mask, f"l{i}_attn")
            m = ops.gelu(linear(P, ln(P, h, f"l{i}_ln2"), d_model, mlp_ratio * d_model,
                                f"l{i}_fc1"))
            h = h + linear(P, m, mlp_ratio * d_model, d_model, f"l{i}_fc2")
        logits = linear(P, ln(P, h, "ln_f"), d_model, vocab, "head", bias=False)
        return ops.softmax_cross_entropy(logits, labels), P

    def make_batch(seed: int = 0) -> dict[str, np.ndarray]:
        text = _classes(_rng(seed), (batch, seq + 1), vocab)
        return {"tokens": text[:, :-1].copy(), "next_tokens": text[:, 1:].copy()}

    return _make_model("transformer", build, lr, make_batch,
                       f"GPT-style decoder, {layers} layers, {heads} heads, d_model "
                       f"{d_model}, seq {seq}, vocab {vocab}, batch {batch}",
                       {"layers": layers, "heads": heads, "seq": seq, "d_model": d_model,
                        "vocab": vocab, "batch": batch})


def lstm(T: int = 8, hidden: int = 32, batch: int = 8, input: int = 16,  # noqa: A002,N803
         classes: int = 10, lr: float = 0.5) -> Model:
    """LSTM unrolled over T steps, classifying the sequence from its last state. One set
    of weights read T times: its gradient is one add_n aggregation of T contributions.
    Gates are fused: z = x_t W_x + h W_h + b is [B, 4H], sliced into i, f, g, o."""
    input_size, H = int(input), int(hidden)

    def build():
        P = _Params()
        x = _g.input("x", (T, batch, input_size))
        y = _g.input("y", (batch,), dtype="int64")
        Wx = P.new("Wx", (input_size, 4 * H), scale=1.0 / math.sqrt(input_size))
        Wh = P.new("Wh", (H, 4 * H), scale=1.0 / math.sqrt(H))
        bias = P.new("b", (4 * H,), init="zeros")
        h = c = None
        for t in range(T):
            z = x[t] @ Wx + bias
            if h is not None:
                z = z + h @ Wh
            i = ops.sigmoid(z[:, 0:H])
            f = ops.sigmoid(z[:, H:2 * H])
            g = ops.tanh(z[:, 2 * H:3 * H])
            o = ops.sigmoid(z[:, 3 * H:4 * H])
            c = i * g if c is None else f * c + i * g     # c_0 = 0: no f * c term at t = 0
            h = o * ops.tanh(c)
        logits = linear(P, h, H, classes, "out")
        return ops.softmax_cross_entropy(logits, y), P

    def make_batch(seed: int = 0) -> dict[str, np.ndarray]:
        rng = _rng(seed)
        return {"x": _normal(rng, (T, batch, input_size)),
                "y": _classes(rng, (batch,), classes)}

    return _make_model("lstm", build, lr, make_batch,
                       f"LSTM unrolled over {T} steps, hidden {H}, input {input_size}, "
                       f"batch {batch}",
                       {"T": T, "hidden": H, "batch": batch, "input": input_size})


# ---------------------------------------------------------------------------------------
# U-Net and DenseNet: long skips and concatenations (long-lived tensors)
# ---------------------------------------------------------------------------------------

def unet(batch: int = 2, image: int = 16, channels: int = 1, width: int = 4,
         depth: int = 2, lr: float = 0.05) -> Model:
    """U-Net-like denoiser with long skip connections. A down path of (conv 3x3, ReLU)
    x 2 and max-pool, an up path of nearest-neighbour upsampling, concatenation with the
    skip of the same size, and (conv, ReLU) x 2; a 1x1 conv to `channels`; MSE against
    the clean image. The skips live from the down path to the up path: long intervals a
    planner must work around."""
    if image % 2 ** depth:
        raise ValueError(f"unet: image {image} must be divisible by 2**depth = {2 ** depth}")

    def build():
        P = _Params()
        x = _g.input("noisy", (batch, channels, image, image))
        target = _g.input("clean", (batch, channels, image, image))

        def double_conv(h: Tensor, c: int, name: str) -> Tensor:
            h = ops.relu(conv(P, h, c, 3, f"{name}_a", bias=True))
            return ops.relu(conv(P, h, c, 3, f"{name}_b", bias=True))

        h, skips = x, []
        for d in range(depth):
            h = double_conv(h, width * 2 ** d, f"down{d + 1}")
            skips.append(h)
            h = ops.max_pool2d(h, 2)
        h = double_conv(h, width * 2 ** depth, "bottom")
        for d in reversed(range(depth)):
            h = ops.concat([upsample2(h), skips[d]], axis=1)
            h = double_conv(h, width * 2 ** d, f"up{d + 1}")
        out = conv(P, h, channels, 1, "out", bias=True)
        return ops.mse(out, target), P

    def make_batch(seed: int = 0) -> dict[str, np.ndarray]:
        rng = _rng(seed)
        coarse = _normal(rng, (batch, channels, image // 4, image // 4))
        clean = np.repeat(np.repeat(coarse, 4, axis=2), 4, axis=3)   # blocky images
        noisy = clean + 0.5 * _normal(rng, clean.shape)
        return {"noisy": noisy.astype(np.float32), "clean": clean.astype(np.float32)}

    return _make_model("unet", build, lr, make_batch,
                       f"U-Net-like denoiser {image}x{image}, depth {depth}, width {width}, "
                       f"batch {batch}",
                       {"batch": batch, "image": image, "depth": depth, "width": width})


def densenet(batch: int = 4, image: int = 16, growth: int = 4,
             blocks: Sequence[int] = (3, 3), init_channels: int = 8, classes: int = 10,
             in_channels: int = 3, lr: float = 0.05) -> Model:
    """DenseNet-like classifier where each layer reads all earlier features. Inside a
    dense block every layer (BN, ReLU, conv 3x3 -> `growth`
    channels) reads the concatenation of all earlier features of the block; transitions
    (BN, ReLU, conv 1x1 halving the channels, avg-pool 2) between blocks."""
    def build():
        P = _Params()
        x = _g.input("x", (batch, in_channels, image, image))
        y = _g.input("y", (batch,), dtype="int64")
        h = conv(P, x, init_channels, 3, "stem")
        for bi, n in enumerate(blocks, start=1):
            feats = [h]
            for li in range(1, n + 1):
                inp = feats[0] if len(feats) == 1 else ops.concat(feats, axis=1)
                z = ops.relu(bn(P, inp, f"b{bi}l{li}_bn"))
                feats.append(conv(P, z, growth, 3, f"b{bi}l{li}_conv"))
            h = ops.concat(feats, axis=1)
            if bi < len(blocks):
                z = ops.relu(bn(P, h, f"t{bi}_bn"))
                h = ops.avg_pool2d(conv(P, z, h.shape[1] // 2, 1, f"t{bi}_conv"), 2)
        h = global_avg_pool(ops.relu(bn(P, h, "final_bn")))
        logits = linear(P, h, h.shape[1], classes, "fc")
        return ops.softmax_cross_entropy(logits, y), P

    make_batch = _image_batch(batch, in_channels, image, classes)
    return _make_model("densenet", build, lr, make_batch,
                       f"DenseNet-like, blocks {tuple(blocks)}, growth {growth}, "
                       f"{image}x{image}, batch {batch}",
                       {"batch": batch, "image": image, "growth": growth,
                        "blocks": tuple(blocks)})


# ---------------------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------------------

def resnet50(**kw: Any) -> Model:
    """ResNet-50 at ImageNet size, 224x224, width 64, batch 32, 1000 classes. For
    building and planning symbolically; one step on NumPy would take minutes."""
    return resnet(**{"depth": 50, "image": 224, "batch": 32, "width": 64,
                     "classes": 1000, **kw})


MODELS: dict[str, Callable[..., Model]] = {
    "mlp": mlp,
    "cnn": cnn,
    "resnet": resnet,
    "resnet50": resnet50,
    "transformer": transformer,
    "lstm": lstm,
    "unet": unet,
    "densenet": densenet,
}
DEFAULT_MODEL = "mlp"


def get_model(name: str = DEFAULT_MODEL, batch: int | None = None, **kw: Any) -> Model:
    """Build a zoo model by name; `batch` and any other keyword go to its builder."""
    try:
        builder = MODELS[name]
    except KeyError:
        raise GraphError(f"unknown model {name!r}; the zoo has "
                         f"{', '.join(MODELS)}") from None
    if batch is not None:
        kw["batch"] = batch
    return builder(**kw)
