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


def test_issue50_variants_parse_and_print() -> None:
    """The persistent grid, Triton's warp specialization and the Gluon forward are configs like the others."""
    got = ta.parse_configs("fwd=m64n64w4s3-p2,dq=m128n64w8s3-ptr-ws")
    assert got["fwd"] == ta.KernelConfig(64, 64, 4, 3, persist=2) and str(got["fwd"]) == "m64n64w4s3-p2"
    assert got["dq"].ws and not got["dq"].tma
    gl = ta.parse_configs("fwd=m64n64w4s4-gl")["fwd"]
    assert gl == ta.KernelConfig(64, 64, 4, 4, gluon=True) and str(gl) == "m64n64w4s4-gl"
    with pytest.raises(ValueError, match=r"\[-gl\]"):
        ta.parse_configs("fwd=m64n64w4s3-gluon")


def test_long_causal_d128_takes_the_tiles_measured_faster_there() -> None:
    """Past 4096 tokens the causal d128 forward defaults to 128x128 tiles and 8 warps (measured +4 % at s8192 on the
    H200); up to 4096, and without the mask, it keeps _TABLE's first config."""
    import torch

    if ta.INTERPRET:
        pytest.skip("the interpreter picks its own small tiles")
    assert ta._seq_bucket(8192) == 8192 and ta._seq_bucket(4096) == 4096
    pick = ta._candidates
    assert pick("fwd", 128, torch.bfloat16, True, 8192)[0] == ta.KernelConfig(128, 128, 8, 3)
    assert pick("fwd", 128, torch.bfloat16, True, 4096)[0] == ta.KernelConfig(64, 64, 4, 3)
    assert pick("fwd", 128, torch.bfloat16, False, 8192)[0] == ta._TABLE[("fwd", 128, False)][0]
    assert pick("dq", 128, torch.bfloat16, True, 8192)[0] == ta._TABLE[("dq", 128, True)][0]
