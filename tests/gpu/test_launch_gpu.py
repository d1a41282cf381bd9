"""Kernels launched again without Triton's binder (workloads/kernels/launch.py) on the GPU: the second call of a kind
takes the kept kernel, and every call -- first, repeated, another sequence length, a misaligned view, fp16 after bf16,
causal after not -- matches float64 attention, so a key that missed something Triton specializes on would show here
as a wrong result or a crash."""

from __future__ import annotations

import math

import pytest
import torch

pytestmark = pytest.mark.gpu


def _reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    s = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        sq, skv = q.shape[2], k.shape[2]
        s = s.masked_fill(torch.ones(sq, skv, device=q.device, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v.double()


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def _inputs(seqlen: int, dtype: torch.dtype, seed: int, offset: int = 0) -> tuple[torch.Tensor, ...]:
    """(q, k, v) of b1 h4 d128; with `offset`, views `offset` elements into a larger buffer (not 16-byte aligned)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    n = 4 * seqlen * 128
    out = []
    for _ in range(3):
        buf = torch.randn(n + offset, device="cuda", dtype=dtype, generator=g)
        out.append(buf[offset:].view(1, 4, seqlen, 128))
    return tuple(out)


@pytest.mark.parametrize("fwd", ["default", "m128n128w4s3-ws-gl"])
def test_repeated_calls_take_the_kept_kernel_and_stay_right(fwd: str) -> None:
    from profctl.workloads.kernels import launch
    from profctl.workloads.kernels import triton_attention as ta

    if ta.INTERPRET or not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU without the interpreter")
    cfgs = {} if fwd == "default" else ta.parse_configs(f"fwd={fwd}")
    launch.clear()
    cases = [(1024, torch.bfloat16, False, 0), (1024, torch.bfloat16, False, 0), (1024, torch.bfloat16, True, 0),
             (1024, torch.bfloat16, True, 0), (512, torch.bfloat16, True, 0), (512, torch.bfloat16, True, 0),
             (1024, torch.float16, True, 0), (1024, torch.float16, True, 0), (1024, torch.bfloat16, True, 1),
             (1024, torch.bfloat16, True, 1), (1024, torch.bfloat16, True, 0)]
    errs = []
    with ta.use_configs(**cfgs), torch.no_grad():
        for i, (s, dtype, causal, off) in enumerate(cases):
            q, k, v = _inputs(s, dtype, seed=i, offset=off)
            o = ta.attention(q, k, v, is_causal=causal)
            errs.append(_rel(o, _reference(q, k, v, causal)))
    assert max(errs) <= 3e-2, errs
    assert launch.COUNTS["direct"] >= 5, launch.COUNTS  # each repeated case found its kernel
    assert launch.kept() >= 5, launch.kept()  # full, causal, s512, fp16, misaligned: each its own kernel


def test_backward_and_fp8_through_the_kept_kernels() -> None:
    """The backward's three kernels and the FP8 forward, twice each: the second time direct, still right."""
    from profctl.workloads import fp8
    from profctl.workloads.kernels import launch
    from profctl.workloads.kernels import triton_attention as ta

    if ta.INTERPRET or not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("needs a CUDA GPU of compute capability >= 8.9 without the interpreter")
    launch.clear()
    for seed in range(2):
        q, k, v = (x.requires_grad_() for x in _inputs(512, torch.bfloat16, seed))
        do = torch.randn_like(q)
        o = ta.attention(q, k, v, is_causal=True)
        grads = torch.autograd.grad(o, (q, k, v), do)
        q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
        ref = _reference(q64, k64, v64, True)
        refs = torch.autograd.grad(ref, (q64, k64, v64), do.double())
        assert _rel(o, ref) <= 3e-2
        assert max(_rel(a, b) for a, b in zip(grads, refs, strict=True)) <= 3e-2
        x = _inputs(1024, torch.bfloat16, seed + 10)
        (q8, qd), (k8, kd), (v8, vd) = (fp8.quantize(t) for t in x)
        deq = (q8.double() * qd.double(), k8.double() * kd.double(), v8.double() * vd.double())
        q8, k8, v8 = ta.prepare(q8, k8, v8)
        o8 = ta.attention(q8, k8, v8, is_causal=True, q_descale=qd, k_descale=kd, v_descale=vd)
        assert _rel(o8, _reference(*deq, True)) <= 5e-2
    assert launch.COUNTS["direct"] >= 5, launch.COUNTS  # fwd, delta, dkdv, dq, fp8 fwd the second time
