"""Correctness of profctl's Triton FlashAttention-2 (workloads/kernels/triton_attention.py).

On CPU the kernels run in Triton's interpreter. TRITON_INTERPRET must be set before Triton builds the kernels
(at the module's first import), and this test suite may run in one process with other tests or on a GPU
machine, so the interpreter checks run in worker subprocesses with TRITON_INTERPRET=1; their relative errors
against a float64 reference come back as JSON and each case is its own test. Small tiles (16-32) make the
tiny shapes span several blocks, so the causal diagonal, the key/query tails and the unmasked blocks all run.
16-bit cases load through TMA tensor descriptors (which the interpreter emulates) unless a case forces pointer
loads; fp32 and padded head dims always take the pointer path.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
TOL = {"bf16": 3e-2, "fp16": 4e-3, "fp32": 1e-4}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _case(b: int, h: int, hk: int, sq: int, skv: int, d: int, dtype: str, causal: bool, **kw: Any) -> dict[str, Any]:
    return {"b": b, "h": h, "hk": hk, "sq": sq, "skv": skv, "d": d, "dtype": dtype, "causal": causal,
            "align": "top-left", "scale": None, "layout": "bhsd", "cfg": None, "wrong_scale": False,
            "ref_align": None, **kw}


#: name -> case. Sizes are tiny: the interpreter runs each program's block operations in numpy.
CASES: dict[str, dict[str, Any]] = {
    "fp32-d16-full-tail37": _case(1, 2, 2, 37, 37, 16, "fp32", False),
    "fp32-d16-causal-tail37": _case(1, 2, 2, 37, 37, 16, "fp32", True),
    "fp32-d64-causal-gqa-sq20-skv45": _case(1, 4, 2, 20, 45, 64, "fp32", True),
    "fp32-d64-causal-gqa-sq45-skv20-b2": _case(2, 4, 2, 45, 20, 64, "fp32", True),
    "fp32-d32-causal-bottomright-sq20-skv45": _case(1, 2, 2, 20, 45, 32, "fp32", True, align="bottom-right"),
    "fp32-d32-causal-bottomright-sq45-skv20": _case(1, 2, 2, 45, 20, 32, "fp32", True, align="bottom-right"),
    "fp32-d32-full-sq45-skv20": _case(1, 2, 2, 45, 20, 32, "fp32", False),
    "fp32-d128-causal-mqa": _case(1, 4, 1, 37, 37, 128, "fp32", True),
    "fp32-d32-causal-bshd-strides": _case(2, 2, 2, 33, 33, 32, "fp32", True, layout="bshd"),
    "fp32-d80-padded-headdim": _case(1, 2, 2, 29, 29, 80, "fp32", True),
    "fp32-d32-scale0.3": _case(1, 2, 2, 24, 24, 32, "fp32", True, scale=0.3),
    "fp32-d32-negative-scale": _case(1, 2, 2, 24, 24, 32, "fp32", False, scale=-0.2),
    "fp32-d64-square-tiles": _case(1, 2, 2, 40, 40, 64, "fp32", True,
                                   cfg={"fwd": [16, 16], "dkdv": [16, 16], "dq": [16, 16]}),
    "fp32-d64-wide-key-tiles": _case(1, 2, 2, 40, 50, 64, "fp32", True,
                                     cfg={"fwd": [16, 32], "dkdv": [32, 16], "dq": [16, 32]}),
    "bf16-d16-causal-tail37": _case(1, 2, 2, 37, 37, 16, "bf16", True),
    "bf16-d64-causal-pointer-loads": _case(1, 4, 2, 37, 45, 64, "bf16", True, cfg={
        "fwd": [32, 16, 4, 2, False], "dkdv": [16, 32, 4, 2, False], "dq": [32, 16, 4, 2, False]}),
    "bf16-d32-causal-bshd-tma": _case(2, 4, 2, 33, 40, 32, "bf16", True, layout="bshd"),
    "bf16-d64-bottomright-sq45-skv20": _case(1, 2, 2, 45, 20, 64, "bf16", True, align="bottom-right"),
    "bf16-d64-full-gqa": _case(2, 4, 2, 33, 40, 64, "bf16", False),
    "bf16-d128-causal-gqa": _case(1, 4, 2, 33, 33, 128, "bf16", True),
    "bf16-d128-full-sq48": _case(1, 2, 2, 48, 48, 128, "bf16", False),
    "fp16-d64-causal-tail37": _case(1, 2, 2, 37, 37, 64, "fp16", True),
    # the forward with the next block's Q @ K^T issued before this block's softmax (KernelConfig.pipe)
    "bf16-d64-full-pipelined": _case(1, 2, 2, 33, 70, 64, "bf16", False, cfg={"fwd": [16, 16, 4, 2, True, True]}),
    "fp32-d32-causal-pipelined": _case(1, 2, 2, 40, 40, 32, "fp32", True, cfg={"fwd": [16, 16, 4, 2, False, True]}),
    "fp32-d32-one-full-block-pipelined": _case(1, 2, 2, 20, 20, 32, "fp32", False,
                                               cfg={"fwd": [16, 16, 4, 2, False, True]}),
    # conditional rescaling (KernelConfig.lazy): the default scale takes the rescale branch on the first block
    # only; scale 3 spreads the scores so that later blocks raise a row's max by more than 2^8 and take it again
    "bf16-d64-full-lazy": _case(1, 2, 2, 33, 70, 64, "bf16", False, cfg={"fwd": [16, 16, 4, 2, True, False, True]}),
    "fp32-d32-full-lazy-scale3": _case(1, 2, 2, 40, 90, 32, "fp32", False, scale=3.0,
                                       cfg={"fwd": [16, 16, 4, 2, False, False, True]}),
    "bf16-d64-causal-lazy": _case(1, 2, 2, 45, 45, 64, "bf16", True, cfg={"fwd": [16, 16, 4, 2, True, False, True]}),
    # a persistent grid (KernelConfig.persist: programs per SM, each looping over tiles; 4 "SMs" on the CPU), fewer
    # programs than tiles so every program takes several, causal longest first
    "bf16-d64-causal-persistent-gqa": _case(1, 4, 2, 37, 45, 64, "bf16", True,
                                            cfg={"fwd": [16, 16, 4, 2, True, False, False, 2]}),
    "fp32-d32-full-persistent-b2": _case(2, 4, 2, 33, 40, 32, "fp32", False,
                                         cfg={"fwd": [16, 16, 4, 2, False, False, False, 1]}),
    "bf16-d64-bottomright-persistent": _case(1, 2, 2, 45, 20, 64, "bf16", True, align="bottom-right",
                                             cfg={"fwd": [16, 16, 4, 2, True, False, False, 3]}),
    # the unmasked blocks' exps by the FMA-pipe polynomial (KernelConfig.emu): every other key, and all of them
    "bf16-d64-causal-emu1-gqa": _case(1, 4, 2, 45, 45, 64, "bf16", True, cfg={"fwd": {"block_m": 16, "block_n": 16,
                                                                                      "emu": 1}}),
    "fp32-d32-full-emu2": _case(1, 2, 2, 40, 70, 32, "fp32", False, cfg={"fwd": {"block_m": 16, "block_n": 16,
                                                                                 "emu": 2}}),
    # the Gluon forward asked for where it cannot run (no Hopper GPU here): the Triton kernel, same results
    "bf16-d64-causal-gluon-falls-back": _case(1, 2, 2, 40, 40, 64, "bf16", True,
                                              cfg={"fwd": [16, 16, 4, 2, True, False, False, 0, False, True]}),
    # ... and the warp-specialized one (the d128 default on Hopper), through the case's first Triton config (never
    # Triton's own warp specialization)
    "bf16-d128-causal-ws-gluon-falls-back": _case(1, 2, 2, 40, 40, 128, "bf16", True, cfg={"fwd": {
        "block_m": 128, "block_n": 128, "num_warps": 4, "num_stages": 3, "ws": True, "gluon": True}}),
}
#: Cases that must FAIL the tolerance: the checks can catch a wrong scale and a wrong causal alignment.
BROKEN: dict[str, dict[str, Any]] = {
    "fp32-wrong-scale": _case(1, 2, 2, 24, 24, 32, "fp32", True, wrong_scale=True),
    "bf16-wrong-scale": _case(1, 2, 2, 24, 24, 64, "bf16", False, wrong_scale=True),
    "fp32-wrong-alignment": _case(1, 2, 2, 20, 36, 32, "fp32", True, align="bottom-right", ref_align="top-left"),
}


# ---------------------------------------------------------------------------------------------------------
# the float64 reference and one case's run (in the worker process)
# ---------------------------------------------------------------------------------------------------------
def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, align: str,
              scale: float | None) -> torch.Tensor:
    """Matmul-softmax-matmul per (batch, head) in float64; GQA by kv head = head // (heads // kv_heads);
    rows that see no key give 0 (FlashAttention's convention)."""
    b, h, sq, d = q.shape
    hk, skv = k.shape[1], k.shape[2]
    sc = scale if scale is not None else 1.0 / math.sqrt(d)
    off = 0 if align == "top-left" else skv - sq
    visible = torch.arange(skv)[None, :] <= torch.arange(sq)[:, None] + off
    rows = []
    for bi in range(b):
        heads = []
        for hi in range(h):
            kh = hi // (h // hk)
            s = (q[bi, hi].double() @ k[bi, kh].double().T) * sc
            if causal:
                s = s.masked_fill(~visible, float("-inf"))
                p = torch.softmax(s, -1)
                p = torch.where(visible.any(-1, keepdim=True), p, torch.zeros_like(p))
            else:
                p = torch.softmax(s, -1)
            heads.append(p @ v[bi, kh].double())
        rows.append(torch.stack(heads))
    return torch.stack(rows)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    den = float(b.norm())
    return float((a - b).norm()) / (den if den > 0 else 1.0)


def run_case(case: dict[str, Any], seed: int) -> dict[str, Any]:
    """Relative errors of the Triton output and dq, dk, dv against the float64 reference (autograd)."""
    from profctl.workloads.kernels import triton_attention as ta

    g = torch.Generator().manual_seed(seed)
    dt = DTYPES[case["dtype"]]
    b, h, hk, sq, skv, d = (case[x] for x in ("b", "h", "hk", "sq", "skv", "d"))

    def mk(heads: int, s: int) -> torch.Tensor:
        if case["layout"] == "bshd":  # a (b, s, h, d) buffer seen as (b, h, s, d): non-contiguous strides
            return torch.randn(b, s, heads, d, generator=g).to(dt).transpose(1, 2).requires_grad_()
        return torch.randn(b, heads, s, d, generator=g).to(dt).requires_grad_()

    q, k, v = mk(h, sq), mk(hk, skv), mk(hk, skv)
    do = torch.randn(b, h, sq, d, generator=g).to(dt)
    fn = ta.attention if case["align"] == "top-left" else ta.attention_bottom_right
    scale = case["scale"]
    run_scale = scale
    if case["wrong_scale"]:
        run_scale = 1.1 * (scale if scale is not None else 1.0 / math.sqrt(d))
    cfgs = {k_: ta.KernelConfig(**c) if isinstance(c, dict) else ta.KernelConfig(*c)
            for k_, c in (case["cfg"] or {}).items()}
    t0 = time.perf_counter()
    with ta.use_configs(**cfgs):
        o = fn(q, k, v, is_causal=case["causal"], scale=run_scale, enable_gqa=h != hk)
        dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    seconds = time.perf_counter() - t0
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    ref = reference(q64, k64, v64, case["causal"], case["ref_align"] or case["align"], scale)
    rq, rk, rv = torch.autograd.grad(ref, (q64, k64, v64), do.double())
    return {"o": _rel(o, ref), "dq": _rel(dq, rq), "dk": _rel(dk, rk), "dv": _rel(dv, rv),
            "finite": all(bool(torch.isfinite(x).all()) for x in (o, dq, dk, dv)),
            "shape_ok": o.shape == q.shape and o.dtype == q.dtype, "seconds": seconds}


def _worker() -> None:
    """Entry point of a worker subprocess: case names on argv, JSON results on stdout's last line."""
    torch.set_num_threads(1)
    allcases = {**CASES, **BROKEN}
    out = {}
    for i, name in enumerate(sys.argv[1:]):
        try:
            out[name] = run_case(allcases[name], seed=1000 + i)
        except Exception as e:
            out[name] = {"error": f"{type(e).__name__}: {e}"}
    print(json.dumps(out))


def _spawn(names: list[str], env_extra: dict[str, str]) -> subprocess.Popen[str]:
    env = {**os.environ, **env_extra, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    code = "from tests.unit.test_triton_attention import _worker; _worker()"
    return subprocess.Popen([sys.executable, "-c", code, *names], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture(scope="module")
def interpreted() -> dict[str, dict[str, Any]]:
    """Run every case in two interpreter subprocesses (the CI machine has two cores)."""
    pytest.importorskip("triton")
    names = [*CASES, *BROKEN]
    procs = [_spawn(names[i::2], {"TRITON_INTERPRET": "1"}) for i in range(2)]
    results: dict[str, dict[str, Any]] = {}
    for p in procs:
        stdout, stderr = p.communicate(timeout=600)
        assert p.returncode == 0, f"interpreter worker failed:\n{stderr[-4000:]}"
        results.update(json.loads(stdout.strip().splitlines()[-1]))
    return results


@pytest.mark.parametrize("name", list(CASES))
def test_matches_float64_reference(name: str, interpreted: dict[str, dict[str, Any]]) -> None:
    r = interpreted[name]
    assert "error" not in r, r.get("error")
    assert r["finite"], f"NaN/inf in output or gradients: {r}"
    assert r["shape_ok"]
    tol = TOL[CASES[name]["dtype"]]
    errs = {k: r[k] for k in ("o", "dq", "dk", "dv")}
    assert max(errs.values()) <= tol, f"relative errors {errs} over {tol}"


@pytest.mark.parametrize("name", list(BROKEN))
def test_checks_catch_a_wrong_kernel(name: str, interpreted: dict[str, dict[str, Any]]) -> None:
    """A 10 % wrong scale, or the wrong causal alignment, must fail the same tolerances."""
    r = interpreted[name]
    assert "error" not in r, r.get("error")
    tol = TOL[BROKEN[name]["dtype"]]
    assert r["o"] > tol, f"a wrong kernel passed: {r}"


def test_bad_inputs_raise() -> None:
    from profctl.workloads.kernels.triton_attention import attention

    q = torch.randn(1, 4, 8, 16)
    kv = torch.randn(1, 2, 8, 16)
    with pytest.raises(NotImplementedError, match="attn_mask"):
        attention(q, q, q, attn_mask=torch.ones(8, 8, dtype=torch.bool))
    with pytest.raises(NotImplementedError, match="dropout"):
        attention(q, q, q, dropout_p=0.1)
    with pytest.raises(ValueError, match="enable_gqa"):
        attention(q, kv, kv)
    with pytest.raises(ValueError, match="divide"):
        attention(q, torch.randn(1, 3, 8, 16), torch.randn(1, 3, 8, 16), enable_gqa=True)
    with pytest.raises(NotImplementedError, match="head dim"):
        attention(q, q, torch.randn(1, 4, 8, 32))
    with pytest.raises(NotImplementedError, match=r"int64|bf16"):
        attention(q.long(), q.long(), q.long())
    assert attention.causal_align == "top-left" and attention.name == "triton"  # type: ignore[attr-defined]
    from profctl.workloads.kernels.triton_attention import attention_bottom_right

    assert attention_bottom_right.causal_align == "bottom-right"  # type: ignore[attr-defined]


def _run_snippet(code: str, env_extra: dict[str, str], drop: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(env_extra)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, text=True, capture_output=True,
                          timeout=120)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
def test_cpu_without_interpreter_is_unsupported() -> None:
    """No GPU and no TRITON_INTERPRET: a clear 'not supported' error the benchmark turns into a row."""
    code = ("import torch\n"
            "from profctl.workloads.kernels.triton_attention import attention, TritonAttentionUnavailable\n"
            "q = torch.randn(1, 2, 8, 16)\n"
            "try:\n    attention(q, q, q)\nexcept TritonAttentionUnavailable as e:\n    print('REFUSED', e)\n")
    r = _run_snippet(code, {"CUDA_VISIBLE_DEVICES": ""}, drop=("TRITON_INTERPRET",))
    assert r.returncode == 0, r.stderr
    assert "REFUSED" in r.stdout and "not supported" in r.stdout and "TRITON_INTERPRET" in r.stdout


def test_imports_without_triton() -> None:
    """Importing must not need Triton; calling then says why it cannot run."""
    code = ("import sys, torch\nsys.modules['triton'] = None\nsys.modules['triton.language'] = None\n"
            "from profctl.workloads.kernels.triton_attention import attention, TritonAttentionUnavailable\n"
            "q = torch.randn(1, 2, 8, 16)\n"
            "try:\n    attention(q, q, q)\nexcept TritonAttentionUnavailable as e:\n    print('REFUSED', e)\n")
    r = _run_snippet(code, {})
    assert r.returncode == 0, r.stderr
    assert "REFUSED" in r.stdout and "Triton is not installed" in r.stdout


@pytest.mark.gpu
@pytest.mark.parametrize("fwd", ["default", "m128n128w8s3-e1", "m64n64w4s3-e2"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_gpu_real_size(causal: bool, fwd: str) -> None:
    """b2 h8 s1024 d128 bf16 on the GPU: forward and gradients within the bf16 tolerance of float64; also with the
    forward's exps in part or all on the FMA pipe (KernelConfig.emu)."""
    from profctl.workloads.kernels import triton_attention as ta

    if ta.INTERPRET:
        pytest.skip("kernels were built for the interpreter (TRITON_INTERPRET set at import)")
    g = torch.Generator(device="cuda").manual_seed(7)
    q, k, v, do = (torch.randn(2, 8, 1024, 128, device="cuda", generator=g, dtype=torch.bfloat16)
                   for _ in range(4))
    for x in (q, k, v):
        x.requires_grad_()
    cfgs = {} if fwd == "default" else ta.parse_configs(f"fwd={fwd}")
    with ta.use_configs(**cfgs):
        o = ta.attention(q, k, v, is_causal=causal)
        dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    s = (q64 @ k64.transpose(-1, -2)) / math.sqrt(128)
    if causal:
        s = s.masked_fill(torch.ones(1024, 1024, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    ref = torch.softmax(s, -1) @ v64
    rq, rk, rv = torch.autograd.grad(ref, (q64, k64, v64), do.double())
    errs = {"o": _rel(o, ref), "dq": _rel(dq, rq), "dk": _rel(dk, rk), "dv": _rel(dv, rv)}
    assert all(bool(torch.isfinite(x).all()) for x in (o, dq, dk, dv))
    assert max(errs.values()) <= TOL["bf16"], errs
