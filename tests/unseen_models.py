"""Nineteen kinds of PyTorch models written as their users write them, for issue 47's test
(`test_fromtorch_unseen.py`): small sizes, seeded weights and batches. Written for this
test, apart from `minigraph.fromtorch.architectures`, so that the import is tried on code it
was not shaped around. Each entry returns (module, inputs, loss_fn, targets)."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


def _g(seed: int = 1) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


class ViT(nn.Module):
    """Patches, a class token, nn.MultiheadAttention, pre-norm blocks."""

    def __init__(self, d=16, heads=2, patch=4, image=8, classes=5):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, stride=patch)
        n = (image // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
        self.norm1, self.norm2, self.norm = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        x = x + self.mlp(self.norm2(x))
        return self.head(self.norm(x)[:, 0])


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, expand, stride):
        super().__init__()
        mid = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.block = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(inplace=True),
            nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid),
            nn.ReLU6(inplace=True), nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.block(x)
        return x + y if self.use_res else y


class MobileNetV2(nn.Module):
    """Inverted residuals, ReLU6, and a train-mode Dropout before the classifier."""

    def __init__(self, classes=4):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU6(inplace=True))
        self.blocks = nn.Sequential(InvertedResidual(8, 8, 2, 1), InvertedResidual(8, 12, 2, 2))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(12, classes))

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.classifier(F.adaptive_avg_pool2d(x, 1).flatten(1))


class UNet(nn.Module):
    """Two levels, skip connections, upsampling by F.interpolate (bilinear and nearest)."""

    def __init__(self, c=4, classes=3):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(1, c, 3, padding=1), nn.ReLU())
        self.enc2 = nn.Sequential(nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU())
        self.mid = nn.Sequential(nn.Conv2d(2 * c, 2 * c, 3, padding=1), nn.ReLU())
        self.dec2 = nn.Conv2d(4 * c, c, 3, padding=1)
        self.dec1 = nn.Conv2d(2 * c, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = F.relu(self.dec2(torch.cat([F.interpolate(m, scale_factor=2, mode="bilinear",
                                                       align_corners=False), e2], 1)))
        return self.dec1(torch.cat([F.interpolate(d2, scale_factor=2, mode="nearest"), e1], 1))


class MixerBlock(nn.Module):
    def __init__(self, tokens, d):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.tok = nn.Sequential(nn.Linear(tokens, 2 * tokens), nn.GELU(),
                                 nn.Linear(2 * tokens, tokens))
        self.ch = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        x = x + self.tok(self.n1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.ch(self.n2(x))


class Mixer(nn.Module):
    def __init__(self, d=12, classes=4):
        super().__init__()
        self.stem = nn.Conv2d(3, d, 4, 4)
        self.block = MixerBlock(4, d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)
        return self.head(self.block(x).mean(1))


def kl_distillation(student, teacher_logits, labels, t=2.0):
    """Hinton's distillation: KL to the teacher's softened distribution plus cross-entropy."""
    kl = F.kl_div(F.log_softmax(student / t, -1), F.softmax(teacher_logits / t, -1),
                  reduction="batchmean") * t * t
    return 0.5 * kl + 0.5 * F.cross_entropy(student, labels)


class VAE(nn.Module):
    def __init__(self, d=10, h=8, z=3):
        super().__init__()
        self.enc = nn.Linear(d, h)
        self.mu, self.logvar = nn.Linear(h, z), nn.Linear(h, z)
        self.dec = nn.Sequential(nn.Linear(z, h), nn.ReLU(), nn.Linear(h, d))

    def forward(self, x):
        h = F.relu(self.enc(x))
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.dec(z), mu, logvar


def vae_loss(out, x):
    recon, mu, logvar = out
    kld = -0.5 * torch.mean(torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=1))
    return F.mse_loss(recon, x) + kld


class Siamese(nn.Module):
    def __init__(self, d=8, h=12):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, h), nn.ReLU(), nn.Linear(h, h))

    def forward(self, a, b):
        return F.cosine_similarity(self.net(a), self.net(b), dim=1)


def contrastive(sim, same):
    return F.mse_loss(sim, same)


class SimCLR(nn.Module):
    def __init__(self, d=8, h=12, z=6):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(d, h), nn.ReLU(), nn.Linear(h, h))
        self.proj = nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, z))

    def forward(self, x1, x2):
        z = F.normalize(self.proj(self.encoder(torch.cat([x1, x2]))), dim=1)
        return z


def nt_xent(z, temperature=0.5):
    n = z.shape[0] // 2
    sim = z @ z.t() / temperature
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
    labels = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return F.cross_entropy(sim, labels)


class GatherScatter(nn.Module):
    """Per-row gather of chosen features, a cumulative sum over time, scatter_add pooling
    of tokens into segments (a graph net's message sum)."""

    def __init__(self, d=6, segments=3):
        super().__init__()
        self.segments = segments
        self.lin = nn.Linear(d, d)
        self.out = nn.Linear(d, 2)

    def forward(self, x, pick, seg):
        h = torch.tanh(self.lin(x))                       # [T, d]
        h = torch.cumsum(h, dim=0) / torch.arange(1, h.shape[0] + 1).unsqueeze(1)
        chosen = torch.gather(h, 1, pick)                  # [T, 2]
        pooled = torch.zeros(self.segments, h.shape[1]).scatter_add(
            0, seg.unsqueeze(1).expand(-1, h.shape[1]), h)  # [S, d]
        return self.out(pooled).sum() + chosen.pow(2).sum()


def identity_loss(y):
    return y


class ELUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(5, 8), nn.ELU(), nn.Linear(8, 8), nn.ELU(alpha=0.5),
                                 nn.Linear(8, 2))

    def forward(self, x):
        return self.net(x)


class BiLSTMTagger(nn.Module):
    def __init__(self, vocab=20, d=6, h=5, tags=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.lstm = nn.LSTM(d, h, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * h, tags)

    def forward(self, ids):
        h, _ = self.lstm(self.emb(ids))
        return F.log_softmax(self.out(h), dim=-1)


def tagger_loss(logp, tags):
    return F.nll_loss(logp.reshape(-1, logp.shape[-1]), tags.reshape(-1), ignore_index=-100)


class MultiLabel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 10), nn.ReLU(), nn.Linear(10, 4))

    def forward(self, x):
        return self.net(x)


def bce_pos_weight(logits, targets):
    return F.binary_cross_entropy_with_logits(
        logits, targets, pos_weight=torch.tensor([1.0, 2.0, 3.0, 0.5]))


class SEHardSwish(nn.Module):
    """MobileNetV3's pieces: hardswish, a squeeze-excite gate with hardsigmoid."""

    def __init__(self, c=6, classes=3):
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3, padding=1)
        self.se1, self.se2 = nn.Conv2d(c, 2, 1), nn.Conv2d(2, c, 1)
        self.head = nn.Linear(c, classes)

    def forward(self, x):
        h = F.hardswish(self.conv(x))
        s = F.hardsigmoid(self.se2(F.relu(self.se1(F.adaptive_avg_pool2d(h, 1)))))
        return self.head(F.adaptive_max_pool2d(h * s, 1).flatten(1))


class SigmoidBCE(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1), nn.Sigmoid())

    def forward(self, x):
        return self.net(x).squeeze(1)


class FlipRoll(nn.Module):
    """Test-time-style augmentation inside forward: flips and a roll of the image, a
    clamp_min with a tensor bound (a learned floor)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.floor = nn.Parameter(torch.full((1, 4, 1, 1), -0.1))
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        x = x + torch.flip(x, dims=[3]) + torch.roll(x, shifts=1, dims=2)
        h = torch.clamp_min(self.conv(x), self.floor)
        return self.head(h.mean(dim=(2, 3)))


class TopKRouter(nn.Module):
    """A mixture of experts' router: top-2 gates by topk, experts picked by index_select,
    gates softmaxed over the two picked."""

    def __init__(self, d=6, experts=4):
        super().__init__()
        self.gate = nn.Linear(d, experts)
        self.experts = nn.Parameter(torch.randn(experts, d, d) * 0.3)
        self.out = nn.Linear(d, 2)

    def forward(self, x):
        vals, idx = torch.topk(self.gate(x), 2, dim=-1)          # [N, 2]
        w = torch.softmax(vals, dim=-1)
        e = torch.index_select(self.experts, 0, idx.reshape(-1)).reshape(
            x.shape[0], 2, x.shape[1], x.shape[1])
        y = torch.einsum("nd,nkde->nke", x, e)
        return self.out((w.unsqueeze(-1) * y).sum(1))


class GRUClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 5, batch_first=True)
        self.head = nn.Linear(5, 2)

    def forward(self, x):
        out, h = self.gru(x)
        return self.head(out[:, -1])


class SortPool(nn.Module):
    """Sort-based pooling (keep the k largest activations of each channel, sorted) and a
    where() gate."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 6)
        self.head = nn.Linear(6 * 3, 2)

    def forward(self, x):                                  # [N, T, 4]
        h = self.lin(x)
        h = torch.where(h > 0, h, 0.1 * h)
        top = torch.sort(h, dim=1, descending=True)[0][:, :3]
        return self.head(top.flatten(1))


def _tv(name: str):
    import sys
    import types
    try:
        import torchvision
    except Exception:
        # A CUDA build of torchvision beside a CPU torch fails on its C ops' fake
        # registrations; its models need none of them.
        for k in [k for k in sys.modules if k.startswith("torchvision")]:
            del sys.modules[k]
        sys.modules["torchvision._meta_registrations"] = types.ModuleType("stub")
        import torchvision
    return getattr(torchvision.models, name)(num_classes=3)


def _cases():
    g = _g()

    def randn(*s, dtype=torch.float32):
        return torch.randn(*s, generator=g, dtype=dtype)

    def ints(hi, *s):
        return torch.randint(0, hi, s, generator=g)

    tags = ints(4, 2, 5)
    tags[1, 3:] = -100
    return {
        "vit_mha_label_smoothing": lambda: (
            ViT(), (randn(2, 3, 8, 8),),
            lambda o, y: F.cross_entropy(o, y, label_smoothing=0.1), (ints(5, 2),)),
        "mobilenet_v2_dropout": lambda: (MobileNetV2(), (randn(2, 3, 8, 8),),
                                         F.cross_entropy, (ints(4, 2),)),
        "unet_interpolate": lambda: (UNet(), (randn(2, 1, 8, 8),), F.cross_entropy,
                                     (ints(3, 2, 8, 8),)),
        "mixer_kl_distillation": lambda: (Mixer(), (randn(2, 3, 8, 8),), kl_distillation,
                                          (randn(2, 4), ints(4, 2))),
        "vae_randn_like": lambda: (VAE(), (randn(4, 10),), vae_loss, (randn(4, 10),)),
        "siamese_cosine": lambda: (Siamese(), (randn(4, 8), randn(4, 8)), contrastive,
                                   (torch.tensor([1.0, -1.0, 1.0, -1.0]),)),
        "simclr_normalize": lambda: (SimCLR(), (randn(3, 8), randn(3, 8)), nt_xent, ()),
        "gather_scatter_cumsum": lambda: (
            GatherScatter(), (randn(5, 6), ints(6, 5, 2), torch.tensor([0, 1, 1, 2, 0])),
            identity_loss, ()),
        "float64_huber_elu": lambda: (
            ELUNet().double(), (randn(4, 5, dtype=torch.float64),),
            lambda o, t: F.huber_loss(o, t, delta=0.5), (randn(4, 2, dtype=torch.float64),)),
        "bilstm_nll_ignore_index": lambda: (
            BiLSTMTagger(), (torch.tensor([[3, 5, 7, 2, 9], [4, 8, 1, 0, 0]]),), tagger_loss,
            (tags,)),
        "multilabel_bce_pos_weight": lambda: (
            MultiLabel(), (randn(4, 6),), bce_pos_weight,
            ((torch.rand(4, 4, generator=g) > 0.5).float(),)),
        "torchvision_resnet18": lambda: (_tv("resnet18"), (randn(2, 3, 32, 32),),
                                         F.cross_entropy, (ints(3, 2),)),
        "torchvision_mobilenet_v3_small": lambda: (
            _tv("mobilenet_v3_small"), (randn(2, 3, 32, 32),), F.cross_entropy, (ints(3, 2),)),
        "hardswish_se_adaptive_max": lambda: (SEHardSwish(), (randn(2, 3, 6, 6),),
                                              F.cross_entropy, (ints(3, 2),)),
        "sigmoid_bce": lambda: (SigmoidBCE(), (randn(5, 4),), F.binary_cross_entropy,
                                ((torch.rand(5, generator=g) > 0.5).float(),)),
        "flip_roll_clamp_tensor": lambda: (FlipRoll(), (randn(2, 2, 5, 5),), F.cross_entropy,
                                           (ints(3, 2),)),
        "topk_router_index_select": lambda: (TopKRouter(), (randn(5, 6),), F.cross_entropy,
                                             (ints(2, 5),)),
        "gru_classifier": lambda: (GRUClassifier(), (randn(3, 4, 3),), F.cross_entropy,
                                   (ints(2, 3),)),
        "sort_pool_where": lambda: (SortPool(), (randn(2, 5, 4),), F.cross_entropy,
                                    (ints(2, 2),)),
    }


CASES = tuple(_cases())


def case(name: str):
    """(module in train mode, inputs, loss_fn, targets) of the model kind `name`."""
    torch.manual_seed(0)
    module, inputs, loss_fn, targets = _cases()[name]()
    return module.train(), inputs, loss_fn, targets

