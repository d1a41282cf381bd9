"""Forcing the Triton kernels' launch configs from the environment (PROFCTL_TRITON_CONFIG), as an experiment under
a profiler needs: parsed, applied, and a bad value refused with a message naming the part."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")
ta = pytest.importorskip("profctl.workloads.kernels.triton_attention")


def test_parse_configs() -> None:
    got = ta.parse_configs("fwd=m64n64w4s3, dq=m128n64w8s3-ptr")
    assert got["fwd"] == ta.KernelConfig(64, 64, 4, 3, tma=True)
    assert got["dq"] == ta.KernelConfig(128, 64, 8, 3, tma=False)
    assert str(got["dq"]) == "m128n64w8s3-ptr"
    with pytest.raises(ValueError, match="'fwd=m64' is not KERNEL="):
        ta.parse_configs("fwd=m64")
    lazy = ta.parse_configs("fwd=m128n128w8s3-lazy")["fwd"]
    assert lazy == ta.KernelConfig(128, 128, 8, 3, lazy=True) and str(lazy) == "m128n128w8s3-lazy"


def test_the_environment_forces_a_config(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setenv(ta.CONFIG_ENV, "fwd=m64n32w4s2")
    picked = ta._pick("fwd", 128, torch.bfloat16, False, 4096, torch.device("cpu"), lambda c: None)
    assert picked == ta.KernelConfig(64, 32, 4, 2)
    with ta.use_configs(fwd=ta.KernelConfig(32, 16)):  # an explicit use_configs wins over the environment
        assert ta._pick("fwd", 128, torch.bfloat16, False, 4096, torch.device("cpu"), lambda c: None).block_m == 32
