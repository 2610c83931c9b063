"""The ops. Importing this package registers every op in `OPS`."""

from . import _extra  # noqa: F401,E402  (the remaining ops; see _extra.py)
from ._extra import *  # noqa: F401,F403,E402
from .elementwise import (  # noqa: F401
    add,
    add_n,
    add_scalar,
    div,
    exp,
    gelu,
    log,
    mul,
    mul_scalar,
    neg,
    pow,
    relu,
    sigmoid,
    sqrt,
    sub,
    sum_to,
    tanh,
)
from .linalg import matmul  # noqa: F401
from .opaque import OpaqueOpError, opaque  # noqa: F401
from .registry import OPS, KernelContext, OpDef, apply, apply1, defop, flops_of, get_op  # noqa: F401
from .shape import broadcast_to, mean, reshape, sum, transpose  # noqa: F401
from .update import sgd_update  # noqa: F401
