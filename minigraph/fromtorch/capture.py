"""Capture a PyTorch training step: AOTAutograd's joint forward + backward graph [Ansel 2024].

`aot_export_module(..., trace_joint=True)` traces `loss_fn(module(*inputs), *targets)` with
fake tensors, functionalises it (in-place ops and buffer updates become new values) and
appends the backward pass, all as core-ish ATen ops in one FX graph whose nodes carry
their shapes and dtypes (`meta["val"]`). PyTorch is imported here, inside functions only:
`import minigraph` never imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import MinigraphError


class TorchImportError(MinigraphError, ValueError):
    """The training step cannot be imported as a minigraph graph; names the node and why."""


class TorchMissingError(TorchImportError, ImportError):
    """PyTorch is not installed (it is the optional extra `minigraph[torch]`)."""


def require_torch() -> Any:
    """The `torch` module, or TorchMissingError saying how to install it."""
    try:
        import torch
    except ImportError as e:
        raise TorchMissingError("from_torch needs PyTorch, an optional extra: "
                                "pip install 'minigraph[torch]'") from e
    return torch


@dataclass
class Captured:
    """The joint graph and what its placeholders and outputs are."""
    gm: Any                      # torch.fx.GraphModule
    signature: Any               # AOTAutograd's GraphSignature
    values: dict[str, Any]       # placeholder name -> the real tensor (weights, buffers, batch)
    names: dict[str, str]        # placeholder name -> minigraph tensor name
    kinds: dict[str, str]        # placeholder name -> "param", "buffer" or "input"
    tied: dict[str, str] = field(default_factory=dict)  # placeholder -> the first one
                                                        # holding the same parameter


def as_tuple(x: Any, what: str) -> tuple:
    torch = require_torch()
    if isinstance(x, torch.Tensor):
        return (x,)
    if isinstance(x, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in x):
        return tuple(x)
    raise TorchImportError(f"from_torch: {what} must be a torch.Tensor or a tuple of them, "
                           f"not {type(x).__name__}")


def _input_names(prefix: str, n: int) -> list[str]:
    return [prefix] if n == 1 else [f"{prefix}{k}" for k in range(n)]


def capture(module: Any, inputs: Sequence[Any], loss_fn: Callable[..., Any],
            targets: Sequence[Any]) -> Captured:
    """Trace one training step of `module` into AOTAutograd's joint graph."""
    torch = require_torch()
    from torch._functorch.aot_autograd import aot_export_module
    if not isinstance(module, torch.nn.Module):
        raise TorchImportError(f"from_torch: module must be a torch.nn.Module, not "
                               f"{type(module).__name__}")
    k = len(inputs)

    class _Step(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = module

        def forward(self, *args):
            return (loss_fn(self.m(*args[:k]), *args[k:]),)

    step = _Step()
    args = tuple(inputs) + tuple(targets)
    try:
        gm, sig = aot_export_module(step, args, trace_joint=True, output_loss_index=0)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise TorchImportError(
            f"PyTorch could not capture the training step of {type(module).__name__} "
            f"({type(e).__name__}: {first[:300]}). Check that the step runs in PyTorch; "
            "data-dependent control flow or shapes, a loss that is not a scalar, or an op "
            "PyTorch cannot trace cannot be imported") from e
    if sig.user_inputs_to_mutate or getattr(sig, "parameters_to_mutate", None):
        raise TorchImportError(f"{type(module).__name__} writes in place into its inputs or "
                               "parameters during the step; the import cannot keep that")
    # Tied weights (one tensor under two names) come as one placeholder per name.
    named = {**dict(step.named_parameters(remove_duplicate=False)),
             **dict(step.named_buffers(remove_duplicate=False))}
    values, names, kinds, tied, first = {}, {}, {}, {}, {}
    for ph, full in {**sig.inputs_to_parameters, **sig.inputs_to_buffers}.items():
        if full not in named:
            raise TorchImportError(f"PyTorch's graph reads {full!r}, which {type(module).__name__} "
                                   "does not list among its parameters and buffers")
        tied_to = first.setdefault(id(named[full]), ph)
        if tied_to != ph:
            tied[ph] = tied_to
        values[ph] = named[full].detach()
        names[ph] = full.removeprefix("m.").replace(".", "_")
        kinds[ph] = "param" if ph in sig.inputs_to_parameters else "buffer"
    user = _input_names("x", k) + _input_names("y", len(targets))
    for ph, name, value in zip(sig.user_inputs, user, args):
        values[ph], names[ph], kinds[ph] = value.detach(), name, "input"
    clash = {v for v in names.values() if list(names.values()).count(v) > 1}
    if clash:
        raise TorchImportError(f"two tensors of {type(module).__name__} would both be named "
                               f"{sorted(clash)[0]!r} in minigraph; rename one")
    return Captured(gm, sig, values, names, kinds, tied)
