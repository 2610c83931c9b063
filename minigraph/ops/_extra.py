"""The op modules beyond the core; importing them registers their ops in `OPS`.

`__all__` lists the public functions, so `mg.softmax`, `mg.conv2d`, ... work through
`from ._extra import *` in `ops/__init__.py`.
"""

from .activations import abs, clamp, gelu_erf, leaky_relu, sign, silu  # noqa: A004
from .conv import avg_pool2d, conv2d, max_pool2d
from .conv_more import conv2d_grouped
from .indexing import concat, getitem, max, slice  # noqa: A004
from .losses import bce_with_logits, smooth_l1
from .masking import compare, logical, logical_not, tril, triu, where
from .nn import (
    batch_norm,
    dropout,
    embedding,
    layer_norm,
    log_softmax,
    mse,
    softmax,
    softmax_cross_entropy,
)
from .normalization import group_norm
from .rounding import cast, div_round

__all__: list[str] = [
    "avg_pool2d", "batch_norm", "concat", "conv2d", "dropout", "embedding", "getitem",
    "layer_norm", "log_softmax", "max", "max_pool2d", "mse", "slice", "softmax",
    "softmax_cross_entropy",
    # activations.py, conv_more.py, losses.py, masking.py, normalization.py, rounding.py
    "abs", "bce_with_logits", "cast", "clamp", "compare", "conv2d_grouped", "div_round",
    "gelu_erf", "group_norm", "leaky_relu", "logical", "logical_not", "sign", "silu",
    "smooth_l1", "tril", "triu", "where",
]
