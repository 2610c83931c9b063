"""The GPU's reduction kernels (`minigraph/ops/cuda_rows.py`), run on the CPU under an
emulation of CUDA's threads (`tests/cuda_emulator.py`), against their NumPy twins: the
kernels' logic is checked on every machine, not only where a GPU is lent."""

import pytest
from cuda_emulator import build, emulated
from row_kernel_cases import check_all


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    try:
        return build(tmp_path_factory.mktemp("cuda_emulator"))
    except RuntimeError as e:            # no g++, or one without C++20's <barrier>
        pytest.skip(f"cannot build the CPU emulation: {e}")


def test_row_kernels_equal_their_numpy_twins_under_emulation(libs):
    with emulated(libs) as fake_cupy:
        failures = check_all(fake_cupy, lambda a: a, lambda a: a)
    assert not failures, "\n".join(failures)


def test_emulation_catches_a_wrong_kernel(libs, monkeypatch):
    # The check can fail: a softmax that forgets to divide by the row sum is caught.
    from minigraph.ops import cuda_rows
    real = cuda_rows.softmax

    def unnormalised(x, y):
        real(x, y)
        y *= 2
    monkeypatch.setattr(cuda_rows, "softmax", unnormalised)
    with emulated(libs) as fake_cupy:
        failures = check_all(fake_cupy, lambda a: a, lambda a: a)
    assert any(f.startswith("softmax (") for f in failures)
