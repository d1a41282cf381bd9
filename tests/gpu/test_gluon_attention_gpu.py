"""profctl's Gluon forward (workloads/kernels/gluon_attention.py) on a Hopper GPU: output and log-sum-exp against
float64 attention at every shape and mask it takes (GQA, bottom-right causal, fp16, d64), the gradients through the
Triton backward that reads its log-sum-exp, and a clean fall-back to the Triton kernel where it cannot run."""

from __future__ import annotations

import math

import pytest
import torch

pytestmark = pytest.mark.gpu


def _hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


def _reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, off: int) -> torch.Tensor:
    group = q.shape[1] // k.shape[1]
    k64 = k.double().repeat_interleave(group, 1)
    v64 = v.double().repeat_interleave(group, 1)
    s = (q.double() @ k64.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        sq, skv = q.shape[2], k.shape[2]
        hidden = torch.arange(skv, device=q.device)[None, :] > torch.arange(sq, device=q.device)[:, None] + off
        s = s.masked_fill(hidden, float("-inf"))
    return torch.softmax(s, -1) @ v64


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


SHAPES = {  # name: (batch, heads, kv heads, seqlen q, seqlen kv, head dim, dtype, causal, bottom-right)
    "d128-full": (2, 8, 8, 1024, 1024, 128, torch.bfloat16, False, False),
    "d128-causal": (2, 8, 8, 1024, 1024, 128, torch.bfloat16, True, False),
    "d64-full": (1, 8, 8, 2048, 2048, 64, torch.bfloat16, False, False),
    "d64-causal": (1, 8, 8, 2048, 2048, 64, torch.bfloat16, True, False),
    "d128-causal-gqa": (2, 8, 2, 512, 512, 128, torch.bfloat16, True, False),
    "d128-causal-bottom-right": (1, 4, 4, 512, 1024, 128, torch.bfloat16, True, True),
    "d128-full-sq-skv": (1, 4, 4, 256, 768, 128, torch.bfloat16, False, False),
    "d128-fp16-causal": (1, 8, 8, 1024, 1024, 128, torch.float16, True, False),
}


#: two warpgroups a block, one (two blocks an SM), the warp-specialized kernel (a producer warp, two consumer
#: warpgroups taking turns), and the same on a persistent grid
TILES = {"m128n128w8": (128, 128, 8, False), "m64n64w4": (64, 64, 4, False), "ws-n128": (128, 128, 4, True),
         "ws-n64": (128, 64, 4, True), "ws-persistent": (128, 128, 4, "persistent")}


@pytest.mark.parametrize("tiles", list(TILES))
@pytest.mark.parametrize("name", list(SHAPES))
def test_gluon_forward_matches_float64(name: str, tiles: str) -> None:
    if not _hopper():
        pytest.skip("the Gluon forward needs a Hopper GPU")
    from profctl.workloads.kernels import gluon_attention as ga
    from profctl.workloads.kernels import gluon_ws_persistent as gp
    from profctl.workloads.kernels import triton_attention as ta

    b, h, hk, sq, skv, d, dt, causal, br = SHAPES[name]
    g = torch.Generator(device="cuda").manual_seed(3)
    q = torch.randn(b, h, sq, d, device="cuda", dtype=dt, generator=g)
    k, v = (torch.randn(b, hk, skv, d, device="cuda", dtype=dt, generator=g) for _ in range(2))
    off = skv - sq if br else 0
    bm, bn, warps, ws = TILES[tiles]
    assert ga.unsupported(q, k, v, causal, off, 1 / math.sqrt(d), 0, bm, bn) is None  # it runs the Gluon kernel
    fn = ta.attention_bottom_right if br else ta.attention
    stages = 3
    persist = int(ws == "persistent")
    with ta.use_configs(fwd=ta.KernelConfig(bm, bn, warps, stages, ws=bool(ws), gluon=True, persist=persist)):
        o = fn(q, k, v, is_causal=causal, enable_gqa=hk != h)
    ref = _reference(q, k, v, causal, off)
    assert bool(torch.isfinite(o).all())
    assert _rel(o, ref) < 5e-3, _rel(o, ref)
    # the log-sum-exp the backward reads, against the Triton kernel's
    if persist:
        # a grid of 7 blocks: every block takes several tiles (the call above took one an SM)
        _, lse = gp.forward_wsp(q, k, v, causal, off, LOG2 / math.sqrt(d), bn, stages, sms=7)
    elif ws:
        _, lse = ga.forward_ws(q, k, v, causal, off, LOG2 / math.sqrt(d), bn, stages)
    else:
        _, lse = ga.forward(q, k, v, causal, off, LOG2 / math.sqrt(d), bm, bn, warps, 3)
    with ta.use_configs(fwd=ta.KernelConfig(128, 64, 8, 3)):
        _, lse_ref = ta._forward(q, k, v, causal, off, 1 / math.sqrt(d))
    assert torch.allclose(lse, lse_ref, atol=1e-3, rtol=1e-4)


LOG2 = 1.4426950408889634


def test_gluon_forward_then_triton_backward() -> None:
    """Gradients through autograd with the Gluon forward: its O and log-sum-exp are what the backward reads."""
    if not _hopper():
        pytest.skip("the Gluon forward needs a Hopper GPU")
    from profctl.workloads.kernels import triton_attention as ta

    g = torch.Generator(device="cuda").manual_seed(5)
    q, k, v, do = (torch.randn(1, 4, 512, 128, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
    for x in (q, k, v):
        x.requires_grad_()
    with ta.use_configs(fwd=ta.KernelConfig(128, 128, 8, 3, gluon=True)):
        o = ta.attention(q, k, v, is_causal=True)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    ref = _reference(q64, k64, v64, True, 0)
    rq, rk, rv = torch.autograd.grad(ref, (q64, k64, v64), do.double())
    errs = [_rel(dq, rq), _rel(dk, rk), _rel(dv, rv)]
    assert max(errs) < 3e-2, errs


def test_gluon_config_falls_back_where_it_cannot_run() -> None:
    """Sequence lengths off the 128-row tile, a sliding window, fp32: the Triton kernel runs, with the same result."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from profctl.workloads.kernels import gluon_attention as ga
    from profctl.workloads.kernels import triton_attention as ta

    q, k, v = (torch.randn(1, 4, 1000, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    assert ga.unsupported(q, k, v, True, 0, 1 / math.sqrt(128)) is not None
    with ta.use_configs(fwd=ta.KernelConfig(128, 128, 8, 3, gluon=True)):
        o = ta.attention(q, k, v, is_causal=True)
    assert _rel(o, _reference(q, k, v, True, 0)) < 5e-3
