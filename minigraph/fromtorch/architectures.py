"""Twelve common architectures written the way their users write them, to import with
`from_torch`: what people bring, beside the zoo's four (zoo.py).

LeNet [LeCun 1998], a MobileNetV2 block with batch norm in training mode [Sandler 2018], a
ViT with a class token and erf GELU [Dosovitskiy 2021], a nanoGPT model with a `tril`
causal mask and tied weights [Karpathy 2022], a BERT layer with an attention mask
[Devlin 2019], a U-Net with `ConvTranspose2d` [Ronneberger 2015], an MLP-Mixer
[Tolstikhin 2021], a CNN with GroupNorm [Wu 2018], SiLU and LeakyReLU, a text classifier
with `padding_idx`, `nn.LSTM` [Hochreiter 1997], `nn.TransformerEncoderLayer`
[Vaswani 2017] and a Conv1d network. Each is plain PyTorch, tiny (a step imports in about a
second), and every one imports whole: no opaque node (tests/test_fromtorch_zoo_users.py).

`architecture(name, dtype)` gives its `TorchCase` `(module, example_inputs, loss_fn,
targets)`, seeded, in train mode; `ARCHITECTURES` lists the names. PyTorch is imported
inside the functions (importing this module never imports torch).
"""

from __future__ import annotations

import math
from functools import cache
from types import SimpleNamespace
from typing import Any

from .zoo import TorchCase, TorchModelError, _torch


@cache
def _classes() -> SimpleNamespace:
    """The nn.Module classes, defined once torch is imported (they subclass nn.Module)."""
    torch = _torch()
    nn, F = torch.nn, torch.nn.functional

    class LeNet(nn.Module):
        """LeNet-5 [LeCun 1998] on 28x28 digits (ReLU and max-pooling, as it is written today)."""

        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1, self.fc2, self.fc3 = nn.Linear(16 * 5 * 5, 32), nn.Linear(32, 16), \
                nn.Linear(16, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = torch.flatten(x, 1)
            return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))

    class InvertedResidual(nn.Module):
        """MobileNetV2's block [Sandler 2018]: 1x1 expand, 3x3 depthwise, 1x1 project, ReLU6,
        batch norm in training mode, a residual add."""

        def __init__(self, c, expand=4):
            super().__init__()
            h = c * expand
            self.block = nn.Sequential(
                nn.Conv2d(c, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU6(inplace=True),
                nn.Conv2d(h, h, 3, padding=1, groups=h, bias=False), nn.BatchNorm2d(h),
                nn.ReLU6(inplace=True), nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c))

        def forward(self, x):
            return x + self.block(x)

    class MobileNetV2Tiny(nn.Module):
        def __init__(self, classes=5):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False),
                                      nn.BatchNorm2d(8), nn.ReLU6(inplace=True))
            self.block = InvertedResidual(8)
            self.head = nn.Linear(8, classes)

        def forward(self, x):
            x = self.block(self.stem(x))
            return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))

    class ViT(nn.Module):
        """A vision transformer [Dosovitskiy 2021]: patches, a class token, position
        embeddings, pre-norm blocks with timm-style `qkv[0]` attention and erf GELU."""

        def __init__(self, image=8, patch=4, d=16, heads=2, classes=3):
            super().__init__()
            self.heads = heads
            self.patch = nn.Conv2d(3, d, patch, stride=patch)
            n = (image // patch) ** 2
            self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
            self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
            self.ln1, self.ln2, self.ln = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
            self.head = nn.Linear(d, classes)

        def attention(self, x):
            b, n, d = x.shape
            qkv = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            att = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
            return self.proj((att.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, n, d))

        def forward(self, x):
            x = self.patch(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            x = x + self.attention(self.ln1(x))
            x = x + self.mlp(self.ln2(x))
            return self.head(self.ln(x)[:, 0])

    class NanoGPT(nn.Module):
        """nanoGPT's model with one block: token and position embeddings (`arange`), a causal
        mask from a `tril` buffer and `masked_fill`, erf GELU, the output layer tied to the
        token embedding."""

        def __init__(self, vocab=13, block=6, d=16, heads=2):
            super().__init__()
            self.heads = heads
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
            self.ln_1, self.ln_2, self.ln_f = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.register_buffer("bias", torch.tril(torch.ones(block, block))
                                 .view(1, 1, block, block))
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.wte.weight = self.lm_head.weight

        def attn(self, x):
            b, t, c = x.size()
            q, k, v = self.c_attn(x).split(c, dim=2)
            q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))

        def forward(self, idx):
            t = idx.size(1)
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            x = x + self.attn(self.ln_1(x))
            x = x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))
            return self.lm_head(self.ln_f(x))

    class BertLayer(nn.Module):
        """A BERT encoder layer [Devlin 2019] with its embeddings: the padding mask of the
        batch becomes an additive mask `(1 - mask) * -10000`; post-norm; [CLS] classifier."""

        def __init__(self, vocab=17, seq=6, d=16, heads=2, classes=2):
            super().__init__()
            self.heads = heads
            self.word, self.position = nn.Embedding(vocab, d), nn.Embedding(seq, d)
            self.emb_norm = nn.LayerNorm(d, eps=1e-12)
            self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
            self.attn_out, self.attn_norm = nn.Linear(d, d), nn.LayerNorm(d, eps=1e-12)
            self.intermediate, self.output = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.out_norm = nn.LayerNorm(d, eps=1e-12)
            self.classifier = nn.Linear(d, classes)
            self.register_buffer("position_ids", torch.arange(seq).expand((1, -1)))

        def heads_of(self, x):
            b, t, d = x.shape
            return x.view(b, t, self.heads, d // self.heads).permute(0, 2, 1, 3)

        def forward(self, ids, mask):
            x = self.emb_norm(self.word(ids) + self.position(self.position_ids[:, :ids.size(1)]))
            ext = (1.0 - mask[:, None, None, :].to(x.dtype)) * -10000.0
            q, k, v = (self.heads_of(f(x)) for f in (self.query, self.key, self.value))
            scores = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1)) + ext
            ctx = (scores.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(x.shape)
            x = self.attn_norm(x + self.attn_out(ctx))
            x = self.out_norm(x + self.output(F.gelu(self.intermediate(x))))
            return self.classifier(x[:, 0])

    class UNet(nn.Module):
        """A two-level U-Net [Ronneberger 2015]: conv blocks, max-pooling, a `ConvTranspose2d`
        up, the skip concatenated, per-pixel classes (`nll_loss2d`)."""

        def __init__(self, c=4, classes=3):
            super().__init__()

            def block(i, o):
                return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.ReLU(),
                                     nn.Conv2d(o, o, 3, padding=1), nn.ReLU())
            self.down, self.bottom = block(1, c), block(c, 2 * c)
            self.up = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
            self.dec = block(2 * c, c)
            self.out = nn.Conv2d(c, classes, 1)

        def forward(self, x):
            skip = self.down(x)
            y = self.up(self.bottom(F.max_pool2d(skip, 2)))
            return self.out(self.dec(torch.cat([skip, y], dim=1)))

    class MixerBlock(nn.Module):
        def __init__(self, tokens, d):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.token_mlp = nn.Sequential(nn.Linear(tokens, 2 * tokens), nn.GELU(),
                                           nn.Linear(2 * tokens, tokens))
            self.channel_mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

        def forward(self, x):
            x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
            return x + self.channel_mlp(self.norm2(x))

    class MLPMixer(nn.Module):
        """MLP-Mixer [Tolstikhin 2021]: patches, token-mixing and channel-mixing MLPs, global
        average pooling."""

        def __init__(self, image=8, patch=2, d=8, classes=4):
            super().__init__()
            self.stem = nn.Conv2d(3, d, patch, stride=patch)
            self.blocks = nn.Sequential(MixerBlock((image // patch) ** 2, d))
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

        def forward(self, x):
            x = self.blocks(self.stem(x).flatten(2).transpose(1, 2))
            return self.head(self.norm(x).mean(dim=1))

    class GroupNormCNN(nn.Module):
        """Convolutions with GroupNorm [Wu 2018], SiLU and LeakyReLU; a smooth-L1 regression
        head (box offsets, say)."""

        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.SiLU(),
                nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.GroupNorm(4, 8), nn.LeakyReLU(0.1))
            self.head = nn.Linear(8, 4)

        def forward(self, x):
            return self.head(self.body(x).mean(dim=(2, 3)))

    class TextClassifier(nn.Module):
        """Embedding with `padding_idx=0`, a masked mean over the tokens, a linear layer;
        binary cross-entropy on logits (multi-label)."""

        def __init__(self, vocab=20, d=8, labels=3):
            super().__init__()
            self.emb = nn.Embedding(vocab, d, padding_idx=0)
            self.fc = nn.Linear(d, labels)

        def forward(self, ids):
            keep = (ids != 0).unsqueeze(-1).to(self.emb.weight.dtype)
            h = (self.emb(ids) * keep).sum(1) / keep.sum(1).clamp(min=1)
            return self.fc(h)

    class LSTMTagger(nn.Module):
        """`nn.LSTM` over a sequence, the last step's output classified."""

        def __init__(self, d_in=3, hidden=5, classes=3):
            super().__init__()
            self.lstm = nn.LSTM(d_in, hidden, batch_first=True)
            self.fc = nn.Linear(hidden, classes)

        def forward(self, x):
            out, _ = self.lstm(x)
            return self.fc(out[:, -1])

    class Conv1dNet(nn.Module):
        """A 1-d convolutional network over signals: batch norm, a dilated and a grouped
        convolution, global average pooling."""

        def __init__(self, c=4, classes=3):
            super().__init__()
            self.net = nn.Sequential(nn.Conv1d(2, c, 3, padding=1), nn.BatchNorm1d(c), nn.ReLU(),
                                     nn.Conv1d(c, c, 3, padding=2, dilation=2, groups=2),
                                     nn.ReLU())
            self.fc = nn.Linear(c, classes)

        def forward(self, x):
            return self.fc(self.net(x).mean(-1))

    def gpt_loss(logits, targets):
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    return SimpleNamespace(
        LeNet=LeNet, MobileNetV2Tiny=MobileNetV2Tiny, ViT=ViT, NanoGPT=NanoGPT,
        BertLayer=BertLayer, UNet=UNet, MLPMixer=MLPMixer, GroupNormCNN=GroupNormCNN,
        TextClassifier=TextClassifier, LSTMTagger=LSTMTagger, Conv1dNet=Conv1dNet,
        gpt_loss=gpt_loss)


#: The architectures, in the order the benchmark and the tests list them.
ARCHITECTURES: tuple[str, ...] = (
    "lenet", "mobilenet_v2_block", "vit", "nanogpt", "bert_layer", "unet", "mlp_mixer",
    "groupnorm_cnn", "text_classifier", "lstm", "transformer_encoder_layer", "conv1d")


def architecture(name: str, dtype: str = "float32", seed: int = 0) -> TorchCase:
    """The `TorchCase` of architecture `name` (`ARCHITECTURES`) in `dtype` ("float32" or
    "float64"): the module in train mode with seeded weights, a small example batch, its
    loss and targets (cross-entropy on labels unless the architecture says otherwise)."""
    if name not in ARCHITECTURES:
        raise TorchModelError(f"unknown architecture {name!r}; known: "
                              f"{', '.join(ARCHITECTURES)}")
    if dtype not in ("float32", "float64"):
        raise TorchModelError(f"architecture {name}: dtype must be 'float32' or 'float64', "
                              f"not {dtype!r}")
    torch = _torch()
    nn, F = torch.nn, torch.nn.functional
    k = _classes()
    dt = getattr(torch, dtype)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed + 1)

    def randn(*shape: int) -> Any:
        return torch.randn(*shape, generator=gen, dtype=dt)

    def ints(hi: int, *shape: int) -> Any:
        return torch.randint(0, hi, shape, generator=gen)

    ce = F.cross_entropy
    cases = {
        "lenet": lambda: (k.LeNet(), (randn(2, 1, 28, 28),), ce, (ints(10, 2),)),
        "mobilenet_v2_block": lambda: (k.MobileNetV2Tiny(), (randn(2, 3, 8, 8),), ce,
                                       (ints(5, 2),)),
        "vit": lambda: (k.ViT(), (randn(2, 3, 8, 8),), ce, (ints(3, 2),)),
        "nanogpt": lambda: (k.NanoGPT(), (ints(13, 2, 6),), k.gpt_loss, (ints(13, 2, 6),)),
        "bert_layer": lambda: (k.BertLayer(), (ints(17, 2, 6), torch.tensor(
            [[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])), ce, (ints(2, 2),)),
        "unet": lambda: (k.UNet(), (randn(2, 1, 8, 8),), ce, (ints(3, 2, 8, 8),)),
        "mlp_mixer": lambda: (k.MLPMixer(), (randn(2, 3, 8, 8),), ce, (ints(4, 2),)),
        "groupnorm_cnn": lambda: (k.GroupNormCNN(), (randn(2, 3, 8, 8),), F.smooth_l1_loss,
                                  (randn(2, 4),)),
        "text_classifier": lambda: (k.TextClassifier(), (torch.tensor(
            [[3, 5, 7, 0, 0], [2, 9, 11, 19, 4]]),), F.binary_cross_entropy_with_logits,
            (torch.rand(2, 3, generator=gen, dtype=dt),)),
        "lstm": lambda: (k.LSTMTagger(), (randn(2, 4, 3),), ce, (ints(3, 2),)),
        "transformer_encoder_layer": lambda: (
            nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
            (randn(2, 5, 8),), F.mse_loss, (randn(2, 5, 8),)),
        "conv1d": lambda: (k.Conv1dNet(), (randn(2, 2, 12),), ce, (ints(3, 2),)),
    }
    module, inputs, loss_fn, targets = cases[name]()
    return TorchCase(module.to(dt).train(), inputs, loss_fn, targets)
