"""Plans from shapes alone (issue 49): a module on PyTorch's `meta` device imports with
`from_torch` without a weight allocated or a kernel run; its graph plans to exactly the bytes
the real-tensor import of the same module plans to (every static planner, DTR's simulation,
swap's plan), and running it raises MetaModelError."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import minigraph as mg  # noqa: E402
from minigraph.fromtorch import MetaModelError, TorchImportError, from_torch  # noqa: E402
from minigraph.fromtorch.real_sizes import REAL_MODELS, REDUCED, real_model  # noqa: E402
from minigraph.fromtorch.zoo import torch_model  # noqa: E402
from minigraph.memory.planners import PLANNERS, options_for  # noqa: E402
from minigraph.memory.swap_plan import plan_swap  # noqa: E402
from minigraph.runtime.dtr import simulate  # noqa: E402

SMALL = {"mlp": {}, "cnn": {}, "resnet18": {"batch": 2, "image": 16, "width": 4},
         "gpt_block": {"batch": 1, "seq": 8, "d_model": 32, "heads": 2}}


def _meta(t):
    return t.to("meta")


def both(name: str):
    """The zoo model `name` imported from its real tensors and from meta tensors."""
    case = torch_model(name, **SMALL[name])
    real = from_torch(case.module, case.example_inputs, case.loss_fn, targets=case.targets)
    module = torch_model(name, **SMALL[name]).module.to("meta")
    meta = from_torch(module, tuple(map(_meta, case.example_inputs)), case.loss_fn,
                      targets=tuple(map(_meta, case.targets)))
    return real, meta


@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_meta_import_plans_to_the_bytes_of_the_real_import(name):
    real, meta = both(name)
    g, h = real.graph, meta.graph
    assert len(g.nodes) == len(h.nodes)
    assert [(t.name, t.shape, str(t.dtype), t.kind) for t in g.tensors.values()] == \
        [(t.name, t.shape, str(t.dtype), t.kind) for t in h.tensors.values()]
    for planner in ("none", "refcount", "greedy-size", "bestfit", "ge", "ge-hybrid"):
        assert planner in PLANNERS
        for inplace in (False, True):
            opts = mg.MemoryOptions(planner=planner, inplace=inplace,
                                    planner_args=options_for(planner, {"seed": 0}))
            a, b = mg.plan_memory(g, opts), mg.plan_memory(h, opts)
            b.plan.validate(h)
            assert (a.arena_bytes, a.theoretical_minimum, a.no_reuse_bytes) == \
                (b.arena_bytes, b.theoretical_minimum, b.no_reuse_bytes), (planner, inplace)
            assert a.plan.offsets == b.plan.offsets


@pytest.mark.parametrize("name", ["resnet18", "gpt_block"])
def test_dtr_and_swap_plan_a_meta_import_as_the_real_one(name):
    real, meta = both(name)
    full = simulate(real.graph, ratio=1.0)
    assert simulate(meta.graph, ratio=1.0).budget == full.budget
    a = simulate(real.graph, ratio=0.7, heuristic="dtr")
    b = simulate(meta.graph, ratio=0.7, heuristic="dtr")
    assert (a.budget, a.evictions, a.overhead) == (b.budget, b.evictions, b.overhead)
    budget = mg.plan_memory(real.graph).arena_bytes * 3 // 4
    assert plan_swap(real.graph, budget).plan.arena_bytes == \
        plan_swap(meta.graph, budget).plan.arena_bytes


def test_a_meta_import_allocates_no_weight_and_does_not_run():
    _, meta = both("resnet18")
    with pytest.raises(MetaModelError, match="meta device"):
        meta.feeds(0)
    with pytest.raises(MetaModelError, match="no values"):
        meta.init_params(0)
    with pytest.raises(MetaModelError, match="no values"):
        mg.Executor(meta.graph, mg.plan_memory(meta.graph).plan).run(meta.init_params(0))


class _Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.register_buffer("scale", torch.ones(3))

    def forward(self, x):
        return self.lin(x) * self.scale


def test_a_buffer_of_a_meta_module_is_a_constant_without_a_value():
    model = from_torch(_Scaled().to("meta"), torch.empty(2, 4, device="meta"),
                       lambda out: out.sum())
    scale = model.graph.tensors["scale"]
    assert scale.kind == "const" and scale.shape == (3,)
    with pytest.raises(MetaModelError, match="scale comes from a model on PyTorch's meta"):
        mg.Executor(model.graph)


class _Picky(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        h = self.lin(x)
        return h[h > 0]                  # a shape that depends on the values


def _one_line(e: pytest.ExceptionInfo) -> str:
    text = str(e.value)
    assert "\n" not in text
    return text


def test_bad_meta_input_is_one_typed_line_naming_the_cause():
    x = torch.empty(2, 4, device="meta")
    with pytest.raises(TorchImportError) as e:        # cannot trace from shapes alone
        from_torch(_Picky().to("meta"), x, lambda out: out.sum())
    assert "_Picky" in _one_line(e)
    with pytest.raises(TorchImportError) as e:        # a dtype NumPy cannot size
        from_torch(_Scaled().to("meta", torch.bfloat16), x.to(torch.bfloat16),
                   lambda out: out.sum())
    assert "bfloat16" in _one_line(e)
    with pytest.raises(TorchImportError) as e:        # shapes that do not fit the module
        from_torch(_Scaled().to("meta"), torch.empty(2, 5, device="meta"),
                   lambda out: out.sum())
    assert "_Scaled" in _one_line(e) and "2x5" in _one_line(e)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_an_inference_import_is_the_forward_pass_alone(name):
    case = torch_model(name, **SMALL[name])
    case.module.train()
    model = from_torch(case.module, case.example_inputs, None)
    assert case.module.training                       # the module's mode is restored
    g = model.graph
    assert {t.kind for t in g.tensors.values()} <= {"input", "param", "const", "activation"}
    assert model.params == () and g.outputs == (model.loss,)
    with torch.no_grad():
        case.module.eval()
        ref = case.module(*case.example_inputs).numpy()
    rep = mg.plan_memory(g, mg.MemoryOptions(planner="greedy-size", inplace=True))
    out = mg.Executor(g, rep.plan).run(model.feeds(0))[model.loss]
    assert out.shape == ref.shape and float(abs(out - ref).max()) < 1e-4
    meta = from_torch(torch_model(name, **SMALL[name]).module.to("meta"),
                      tuple(map(_meta, case.example_inputs)), None)
    for planner in ("greedy-size", "bestfit", "ge"):
        opts = mg.MemoryOptions(planner=planner, planner_args=options_for(planner, {}))
        assert mg.plan_memory(meta.graph, opts).arena_bytes == \
            mg.plan_memory(g, opts).arena_bytes
    train = from_torch(case.module, case.example_inputs, case.loss_fn, targets=case.targets)
    assert mg.plan_memory(g).arena_bytes < mg.plan_memory(train.graph).arena_bytes
    with pytest.raises(TorchImportError, match="targets"):
        from_torch(case.module, case.example_inputs, None, targets=case.targets)


def test_the_real_models_have_their_published_parameter_counts():
    # Counted on the meta device: nothing allocated. ResNet-50 [He 2016]: 25,557,032;
    # LLaMA-7B [Touvron 2023]: 6,738,415,616; BERT-base ~110 M; ViT-Large ~304 M.
    counts = {name: sum(p.numel() for p in real_model(name).module.parameters())
              for name in REAL_MODELS}
    assert counts["resnet50"] == 25_557_032
    assert counts["llama_7b"] == 6_738_415_616
    assert 108e6 < counts["bert_base"] < 111e6
    assert 303e6 < counts["vit_large"] < 305e6


@pytest.mark.parametrize("name", sorted(REDUCED))
def test_the_real_models_import_and_plan_from_shapes_at_reduced_size(name):
    case = real_model(name, **REDUCED[name])
    assert all(p.is_meta for p in case.module.parameters())
    for model in (from_torch(case.module, case.example_inputs, None),
                  from_torch(case.module, case.example_inputs, case.loss_fn,
                             targets=case.targets)):
        g = model.graph
        assert model.report.runs, model.report.opaque[:2]      # every op maps
        for planner in ("greedy-size", "ge", "bestfit"):
            rep = mg.plan_memory(g, mg.MemoryOptions(planner=planner, inplace=True,
                                                     planner_args=options_for(planner, {})))
            rep.plan.validate(g)
            assert rep.theoretical_minimum <= rep.arena_bytes <= rep.no_reuse_bytes
