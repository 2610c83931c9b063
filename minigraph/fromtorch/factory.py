"""A user's model from the command line: `package.module:factory`, input shapes, a dtype.

`meta_import(spec, shapes, dtype, inference)` imports `package.module`, calls `factory()`
under PyTorch's `meta` device (so that its weights have shapes and no storage), makes meta
inputs of `shapes` and imports the step with `from_torch`: inference (the forward pass) or
one SGD training step whose loss is the mean of the module's first output (the estimate
needs the backward of everything, not a particular loss). Every mistake (a spec that does
not name a callable, a shape that is not `NxCx...`, a dtype PyTorch or NumPy cannot size,
shapes that do not fit the module) is a one-line `FactoryError` or `TorchImportError`.
"""

from __future__ import annotations

import re
from typing import Any

from .capture import TorchImportError, require_torch

_INTS = ("int64", "int32", "int16", "int8", "uint8", "bool")
_FLOATS = ("float32", "float64", "float16")


class FactoryError(TorchImportError):
    """`package.module:factory`, a shape or a dtype given on the command line is wrong."""


def load_factory(spec: str) -> Any:
    """The callable `spec` (`package.module:factory`) names."""
    mod, sep, attr = spec.partition(":")
    if not sep or not mod or not re.fullmatch(r"[A-Za-z_][\w.]*", attr or "-"):
        raise FactoryError(f"{spec!r} is not package.module:factory (a module path, a colon, "
                           "a function or class that builds the nn.Module)")
    try:
        # The user's module, named on the command line (the package's own modules are
        # imported plainly; tests/test_architecture.py keeps importlib off them).
        top = __import__(mod)
    except ImportError as e:
        raise FactoryError(f"cannot import {mod!r} (from {spec!r}): {e}") from None
    fn: Any = top
    for part in mod.split(".")[1:] + attr.split("."):
        if not hasattr(fn, part):
            raise FactoryError(f"module {mod!r} has no {attr!r} (from {spec!r})")
        fn = getattr(fn, part)
    if not callable(fn):
        raise FactoryError(f"{spec!r} is a {type(fn).__name__}, not a callable that builds "
                           "the model")
    return fn


def parse_shape(text: str, dtype: str) -> tuple[tuple[int, ...], str]:
    """`32x3x224x224` (the dtype's) or `1x512:int64` (its own dtype) -> (shape, dtype)."""
    dims, _, own = text.partition(":")
    if not re.fullmatch(r"[1-9]\d*(x[1-9]\d*)*", dims):
        raise FactoryError(f"shape {text!r} is not sizes joined by x (e.g. 32x3x224x224, "
                           "or 1x512:int64 for token ids)")
    return tuple(int(d) for d in dims.split("x")), check_dtype(own or dtype)


def check_dtype(name: str) -> str:
    if name not in _FLOATS + _INTS:
        raise FactoryError(f"dtype {name!r} cannot be sized here: minigraph holds "
                           f"{', '.join(_FLOATS + _INTS)} (NumPy has no bfloat16)")
    return name


def meta_import(spec: str, shapes: list[str], dtype: str = "float32",
                inference: bool = False) -> Any:
    """The model `spec` builds, on the meta device, imported at `shapes` (see the module)."""
    from . import from_torch  # the package's entry point (this module is one of its parts)

    torch = require_torch()
    fn, dtype = load_factory(spec), check_dtype(dtype)
    if not shapes:
        raise FactoryError("give the input shapes: --shape 32x3x224x224 (once per input)")
    specs = [parse_shape(s, dtype) for s in shapes]
    try:
        with torch.device("meta"):
            module = fn()
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise FactoryError(f"{spec}() failed on PyTorch's meta device "
                           f"({type(e).__name__}: {first})") from None
    if isinstance(module, tuple) and module and isinstance(module[0], torch.nn.Module):
        module = module[0]               # a TorchCase (module, inputs, loss_fn, targets)
    if not isinstance(module, torch.nn.Module):
        raise FactoryError(f"{spec}() returned a {type(module).__name__}, not a "
                           "torch.nn.Module")
    module = module.to("meta")
    if dtype in _FLOATS:
        module = module.to(getattr(torch, dtype))
    inputs = tuple(torch.empty(shape, dtype=getattr(torch, d), device="meta")
                   for shape, d in specs)
    name = spec.rpartition(":")[2].rpartition(".")[2]
    if inference:
        return from_torch(module, inputs, None, name=name)
    return from_torch(module, inputs, _mean_of_first, name=name)


def _mean_of_first(out: Any) -> Any:
    torch = require_torch()
    first = torch.utils._pytree.tree_leaves(out)[0]
    return first.float().mean() if not first.is_floating_point() else first.mean()
