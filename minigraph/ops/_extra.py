"""The op modules beyond the core; importing them registers their ops in `OPS`.

`__all__` lists the public functions, so `mg.softmax`, `mg.conv2d`, ... work through
`from ._extra import *` in `ops/__init__.py`.
"""

from .conv import avg_pool2d, conv2d, max_pool2d
from .indexing import concat, getitem, max, slice  # noqa: A004
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

__all__: list[str] = [
    "avg_pool2d", "batch_norm", "concat", "conv2d", "dropout", "embedding", "getitem",
    "layer_norm", "log_softmax", "max", "max_pool2d", "mse", "slice", "softmax",
    "softmax_cross_entropy",
]
