"""The ops. Importing this package registers every op in `OPS`."""

from .. import tensor as _tensor
from . import _extra  # noqa: F401,E402  (the remaining ops; see _extra.py)
from ._extra import *  # noqa: F401,F403,E402
from .broadcast import broadcast_to, sum_to  # noqa: F401
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
    tanh,
)
from .indexing import getitem
from .linalg import matmul  # noqa: F401
from .opaque import OpaqueOpError, opaque  # noqa: F401
from .registry import OPS, KernelContext, OpDef, apply, apply1, defop, flops_of, get_op  # noqa: F401
from .shape import mean, reshape, sum, transpose  # noqa: F401
from .update import sgd_update  # noqa: F401

# Tensor's operators (`x + y`, `x @ W`, `x.sum()`...) and `Graph.flops()` call these; tensor.py
# cannot import the ops (they import it), so they are handed over here, once.
_tensor.FROM_OPS.update(add=add, sub=sub, mul=mul, div=div, neg=neg, pow=pow, matmul=matmul,
                        getitem=getitem, transpose=transpose, reshape=reshape, sum=sum,
                        mean=mean, flops_of=flops_of)

# Ops beyond the core that the PyTorch import maps (issue 47); importing registers them.
from . import gather as _gather  # noqa: F401,E402
from . import random as _random  # noqa: F401,E402
from . import unary_more as _unary_more  # noqa: F401,E402
