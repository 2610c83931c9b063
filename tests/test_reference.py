"""Whole zoo models against PyTorch eager: the same step gives the same loss and update."""

import numpy as np
import pytest

import minigraph as mg
from minigraph.models import get_model

torch = pytest.importorskip("torch")
from minigraph.reference import TorchStep  # noqa: E402

MODELS = ["mlp", "cnn", "resnet", "transformer", "lstm", "unet", "densenet"]


@pytest.mark.parametrize("name", MODELS)
def test_training_step_matches_pytorch(name):
    m = get_model(name)
    g = m.graph
    feeds = {**m.make_batch(0), **m.init_params(0)}
    ours = mg.Executor(g, device="cpu").run(feeds)
    ref = TorchStep(g, feeds)
    loss = ref.run(update=True)
    assert np.allclose(ours[m.loss], loss.detach().numpy(), rtol=1e-4, atol=1e-5)
    for p in g.params:
        new = ref.values[p].detach().numpy()
        np.testing.assert_allclose(ours[f"{p}_new"], new, rtol=1e-3, atol=1e-5,
                                   err_msg=f"{name}: updated {p} differs from PyTorch")
