"""Which GPU a child sees: CUDA_VISIBLE_DEVICES read as CUDA reads it, from this process's environment or from the
environment a child is given (a local cluster's worker threads give each child its GPU; issue 31). NVML's list is
a stand-in: the reading of the variable is what is tested."""

from __future__ import annotations

import pytest

from profctl import nvml

GPUS = [nvml.Gpu(0, "NVIDIA H200", "GPU-aaaa-0", (9, 0)), nvml.Gpu(1, "NVIDIA H200", "GPU-bbbb-1", (9, 0))]


@pytest.fixture(autouse=True)
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml, "gpus", lambda: list(GPUS))
    monkeypatch.setattr(nvml, "driver_version", lambda: "580.159.04")


def test_the_childs_environment_wins_over_this_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert nvml.visible_gpus() == [GPUS[0]]
    assert nvml.visible_gpus({"CUDA_VISIBLE_DEVICES": "GPU-bbbb-1"}) == [GPUS[1]]
    assert nvml.visible_gpus({"CUDA_VISIBLE_DEVICES": None}) == GPUS  # None: unset for the child
    assert nvml.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert nvml.visible_gpus({"OMP_NUM_THREADS": "4"}) == [GPUS[0]]  # other variables: this process's value


def test_here_names_the_gpu_the_child_will_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert nvml.here("cuda")["gpu_index"] == 0
    where = nvml.here("cuda", {"CUDA_VISIBLE_DEVICES": "1,0"})
    assert (where["gpu_index"], where["gpu_uuid"], where["driver"]) == (1, "GPU-bbbb-1", "580.159.04")
    assert "gpu_index" not in nvml.here("cpu", {"CUDA_VISIBLE_DEVICES": "1"})
