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


def test_d128_forward_defaults_to_the_warp_specialized_gluon_kernel_with_a_triton_fallback() -> None:
    """The d128 forward's first config is the warp-specialized Gluon kernel (measured past cuDNN on the H200) past
    256 tokens, with the mask or without; where Gluon cannot run, the case's first Triton config does (never Triton's
    own warp specialization, which gave wrong results): 128x128 with 8 warps past 4096 tokens and without the mask,
    64x64 causal up to 4096."""
    import torch

    if ta.INTERPRET:
        pytest.skip("the interpreter picks its own small tiles")
    assert ta._seq_bucket(8192) == 8192 and ta._seq_bucket(4096) == 4096
    pick = ta._candidates
    ws_gl = ta.KernelConfig(128, 128, 4, 3, ws=True, gluon=True)
    for n in (1024, 4096, 8192):
        assert pick("fwd", 128, torch.bfloat16, False, n)[0] == ws_gl, n
    for n in (1024, 4096, 8192):
        assert pick("fwd", 128, torch.bfloat16, True, n)[0] == ws_gl, n
    assert ta.KernelConfig(64, 64, 4, 3) in pick("fwd", 128, torch.bfloat16, True, 4096)  # timed when tuning is on
    assert not pick("fwd", 128, torch.bfloat16, True, 256)[0].gluon  # short: 64-row Triton tiles
    assert not pick("fwd", 64, torch.bfloat16, True, 4096)[0].gluon  # d64: Gluon measured slower causal
    fallback = ta._triton_fallback
    assert fallback(128, torch.bfloat16, True, 8192) == ta.KernelConfig(128, 128, 8, 3)
    assert fallback(128, torch.bfloat16, True, 4096) == ta.KernelConfig(64, 64, 4, 3)
    assert fallback(128, torch.bfloat16, False, 2048) == ta.KernelConfig(128, 128, 8, 3)
    assert not any(fallback(128, torch.bfloat16, c, n).ws for c in (False, True) for n in (512, 4096, 8192))
    assert pick("dq", 128, torch.bfloat16, True, 8192)[0] == ta._TABLE[("dq", 128, True)][0]


def test_fma_pipe_exps_parse_and_print() -> None:
    """KernelConfig.emu: -e1 (every other key's exp by the polynomial) and -e2 (all)."""
    e1 = ta.parse_configs("fwd=m64n128w4s3-e1")["fwd"]
    assert e1 == ta.KernelConfig(64, 128, 4, 3, emu=1) and str(e1) == "m64n128w4s3-e1"
    assert ta.parse_configs("fwd=m128n128w4s3-ws-gl-e2")["fwd"].emu == 2
    with pytest.raises(ValueError, match=r"\[-e<1\|2>\]"):
        ta.parse_configs("fwd=m64n128w4s3-e3")
    # where the kernel has no FMA-pipe exps the config is refused, not run without them
    refused = (("m128n128w8s3-pipe-e1", False), ("m128n128w8s3-lazy-e2", False), ("m128n128w4s3-ws-gl-e1", True))
    for text, fp8 in refused:
        with pytest.raises(ValueError, match="only in the Triton forward's plain key loop"):
            ta.check_config(ta.parse_configs(f"fwd={text}")["fwd"], fp8=fp8)
    ta.check_config(ta.parse_configs("fwd=m128n128w8s3-pipe-e1")["fwd"], fp8=True)  # the FP8 pipelined loop has them


def test_a_register_cap_parses_prints_and_is_refused_where_no_triton_launch_takes_it() -> None:
    """`-r<N>` goes to a Triton launch as ptxas's maxnreg; a Gluon kernel sets its own registers, so there it is
    refused rather than parsed and dropped."""
    cfg = ta.parse_configs("fwd=m64n128w4s2-r168")["fwd"]
    assert cfg.maxnreg == 168 and str(cfg) == "m64n128w4s2-r168"
    assert cfg.options() == {"num_warps": 4, "num_stages": 2, "maxnreg": 168}
    assert "maxnreg" not in ta.parse_configs("fwd=m64n128w4s2")["fwd"].options()
    ta.check_config(cfg, fp8=True)
    for text in ("m64n128w4s3-gl-r168", "m128n128w4s3-ws-gl-r160"):
        with pytest.raises(ValueError, match=r"register cap.*not with -gl"):
            ta.check_config(ta.parse_configs(f"fwd={text}")["fwd"], fp8=False)


def test_pipe_and_lazy_on_a_gluon_kernel_without_them_are_refused_not_dropped() -> None:
    """-pipe with -gl is the one-warpgroup FP8 forward's (the next Q·Kᵀ ahead of the softmax); the bf16 Gluon
    kernels and the warp-specialized FP8 one have neither -pipe nor -lazy, so such a config is refused rather than
    run without it."""
    ta.check_config(ta.parse_configs("fwd=m64n128w4s3-pipe-gl")["fwd"], fp8=True)
    for text, fp8 in (("m64n128w4s3-pipe-gl", False), ("m128n128w4s3-pipe-ws-gl", True),
                      ("m128n128w4s3-lazy-ws-gl", False), ("m64n128w4s3-lazy-gl", True)):
        with pytest.raises(ValueError, match="is not in this Gluon kernel"):
            ta.check_config(ta.parse_configs(f"fwd={text}")["fwd"], fp8=fp8)
