"""Issue 47, point 2: the Core ATen opset as the import's target. Every core ATen operator
(`torch.Tag.core`) is either probed (a training step that produces it imports whole, maps
it, and its loss and gradients are PyTorch's in float64) or listed as not supported with
the reason; the slow test probes them all, the quick one the index, integer and random ops."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from minigraph.fromtorch.coverage import UNSUPPORTED, _probes, core_ops, probe  # noqa: E402,I001

QUICK = ["aten.gather.default", "aten.scatter_add.default", "aten.index_select.default",
         "aten.cumsum.default", "aten.sort.default", "aten.topk.default", "aten.where.self",
         "aten.flip.default", "aten.native_dropout.default", "aten.randn.default",
         "aten.index.Tensor", "aten.maximum.default"]


def test_every_core_op_is_probed_or_listed_with_a_reason():
    core = core_ops()
    assert len(core) > 150                          # PyTorch's own list, not ours
    probes = _probes(torch)
    assert not set(probes) & set(UNSUPPORTED)
    missing = [op for op in core if op not in probes and op not in UNSUPPORTED]
    assert missing == []
    assert all(UNSUPPORTED[op].strip() for op in core if op in UNSUPPORTED)


@pytest.mark.parametrize("op", QUICK)
def test_index_integer_and_random_ops_map_and_match_pytorch(op):
    row = probe(op)
    assert row.status == "mapped", row.why


def test_at_least_150_core_ops_are_probed():
    assert len(_probes(torch)) >= 150


# One test per probed op (not one loop): the two workers of the suite share them.
@pytest.mark.slow
@pytest.mark.parametrize("op", sorted(set(_probes(torch)) - set(QUICK)))
def test_every_probed_core_op_maps_with_pytorchs_gradient(op):
    row = probe(op)
    assert row.status == "mapped", row.why
