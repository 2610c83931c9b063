"""Values to run a graph with: initial parameters and random inputs, fixed by a seed.

Both read only the graph (each parameter's `init`, each input's shape and dtype), so the
same seed gives the same arrays in a lesson, a test, a benchmark and the grader.
"""

from __future__ import annotations

import numpy as np

from .graph import Graph


def init_params(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Initial values of every parameter of `graph`, from each parameter's `init`."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in graph.leaves("param"):
        init, scale = t.init if t.init is not None else ("normal", None)
        if not isinstance(init, str):
            out[t.name] = np.asarray(init, dtype=t.dtype).copy()
        elif init == "zeros":
            out[t.name] = np.zeros(t.shape, t.dtype)
        elif init == "ones":
            out[t.name] = np.ones(t.shape, t.dtype)
        else:
            fan_in = int(np.prod(t.shape[:-1])) if len(t.shape) > 1 else t.shape[0]
            s = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
            draw = rng.standard_normal(t.shape) if init == "normal" else \
                rng.uniform(-1, 1, t.shape)
            out[t.name] = (draw * s).astype(t.dtype)
    return out


def random_feeds(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Every input and parameter of `graph`: inputs ~ N(0, 1), parameters from `init_params`.

    Integer inputs are labels or indices, so they get valid ones: values below the last
    axis of the activations their readers also take (the logits' classes), else 0 or 1.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for t in graph.leaves("input"):
        if np.dtype(t.dtype).kind in "iu":
            out[t.name] = rng.integers(0, _classes(graph, t.name), t.shape).astype(t.dtype)
        else:
            out[t.name] = rng.standard_normal(t.shape).astype(t.dtype)
    return {**out, **init_params(graph, seed)}


def _classes(graph: Graph, name: str) -> int:
    """The last axis of the activations read next to integer input `name` (default 2)."""
    return max((graph.tensors[c].shape[-1] for n in graph.consumers[name]
                for c in graph.node(n).inputs if graph.tensors[c].kind == "activation"
                and graph.tensors[c].shape), default=2)
