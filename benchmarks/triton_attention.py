"""Check and time profctl's Triton FlashAttention-2 against SDPA flash and SDPA cuDNN on one GPU, in one process.

    python benchmarks/triton_attention.py --out "$OUT"                 # the table (default shapes)
    python benchmarks/triton_attention.py --explore --out "$OUT"       # also time launch-config variants first

Every shape gets fresh random inputs (never zeros). Correctness: the Triton output and gradients against a
float64 reference on a few (batch, head) slices (the full float64 problem does not fit at s16384), and against
SDPA flash on the whole tensor. Times: ``triton.testing.do_bench`` medians (CUDA events, after warm-up, L2
flushed between runs) of the forward, the backward (``torch.autograd.grad`` of a kept graph) and both.
FLOPs: 4 * b * h * visible pairs * d forward (causal: top-left visible pairs), backward 2.5x, fwd+bwd 3.5x.
The compact table prints last; everything goes to ``<out>/triton_attention.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from profctl.workloads.kernels import triton_attention as ta  # noqa: E402

DEV = "cuda"  # a CPU dry run under TRITON_INTERPRET=1 sets "cpu"
TOL = {torch.bfloat16: 3e-2, torch.float16: 4e-3, torch.float32: 1e-4}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}

# (batch, heads, kv_heads, seqlen_q, seqlen_kv, head_dim, dtype, causal)
Shape = tuple[int, int, int, int, int, int, str, bool]
DEFAULT_SHAPES: list[Shape] = [
    (b, 32, 32, s, s, d, "bf16", c)
    for (b, s, d) in ((1, 4096, 128), (1, 4096, 64), (16, 1024, 128), (1, 16384, 128))
    for c in (False, True)
] + [(2, 32, 8, 4096, 4096, 128, "bf16", True)]  # GQA: 4 query heads per kv head

# launch-config variants timed by --explore: (block_m, block_n, num_warps, num_stages[, tma]); tma defaults to
# True (TMA descriptor loads where the inputs allow). None of these spills registers in an offline sm_90 compile
# (triton 3.9 resource report), except where noted in benchmarks/triton_attention_notes.md.
Cfg = tuple[Any, ...]
EXPLORE: dict[str, dict[int, list[Cfg]]] = {
    "fwd": {
        64: [(128, 64, 8, 3), (128, 64, 8, 4), (64, 64, 4, 3), (128, 128, 8, 3), (128, 64, 8, 3, False),
             (64, 64, 4, 3, False)],
        128: [(128, 128, 8, 3), (128, 64, 8, 3), (128, 64, 8, 4), (64, 64, 4, 3), (128, 128, 8, 3, False),
              (64, 64, 4, 3, False)],
    },
    "dkdv": {
        64: [(64, 64, 4, 3), (32, 64, 4, 3), (64, 128, 8, 3), (64, 128, 8, 2), (32, 128, 8, 3),
             (64, 64, 4, 3, False)],
        128: [(32, 64, 4, 3), (64, 128, 8, 2), (32, 128, 8, 3), (64, 64, 4, 3), (32, 128, 8, 4),
              (32, 64, 4, 3, False)],
    },
    "dq": {
        64: [(128, 64, 8, 3), (64, 64, 4, 3), (128, 128, 8, 2), (128, 64, 8, 4), (64, 128, 8, 2),
             (128, 64, 8, 3, False)],
        128: [(128, 64, 8, 3), (128, 128, 8, 2), (128, 64, 8, 4), (64, 64, 4, 3), (128, 32, 8, 3),
              (128, 64, 8, 3, False)],
    },
}
EXPLORE_SHAPES: list[Shape] = [(1, 32, 32, 4096, 4096, d, "bf16", c) for d in (128, 64) for c in (False, True)]


def pairs(sq: int, skv: int, causal: bool) -> int:
    """Visible (query, key) pairs, top-left causal alignment (SDPA's and this kernel's `attention`)."""
    if not causal:
        return sq * skv
    return sum(min(i + 1, skv) for i in range(sq))


def fwd_flops(shape: Shape) -> float:
    b, h, _, sq, skv, d, _, c = shape
    return 4.0 * b * h * pairs(sq, skv, c) * d


def make_inputs(shape: Shape, seed: int, grad: bool) -> tuple[torch.Tensor, ...]:
    b, h, hk, sq, skv, d, dt, _ = shape
    g = torch.Generator(device=DEV).manual_seed(seed)
    mk = lambda *s: torch.randn(*s, device=DEV, dtype=DTYPES[dt], generator=g).requires_grad_(grad)  # noqa: E731
    q, k, v = mk(b, h, sq, d), mk(b, hk, skv, d), mk(b, hk, skv, d)
    do = torch.randn(b, h, sq, d, device=DEV, dtype=DTYPES[dt], generator=g)
    return q, k, v, do


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor,
              causal: bool) -> tuple[torch.Tensor, ...]:
    """float64 matmul-softmax-matmul on (batch, head) slices: output and dq, dk, dv."""
    q, k, v = (x.detach().double().requires_grad_() for x in (q, k, v))
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        i = torch.arange(q.shape[-2], device=q.device)[:, None]
        j = torch.arange(k.shape[-2], device=q.device)[None, :]
        s = s.masked_fill(j > i, float("-inf"))
    o = torch.softmax(s, -1) @ v
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do.double())
    return o.detach(), dq, dk, dv


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm())


def check(shape: Shape, seed: int) -> dict[str, Any]:
    """Relative errors of the Triton output and gradients: float64 reference on 2 (batch, head) slices, and
    against SDPA flash on everything. NaN anywhere fails."""
    b, h, hk, _, _, _, dt, causal = shape
    q, k, v, do = make_inputs(shape, seed, grad=True)
    o = ta.attention(q, k, v, is_causal=causal, enable_gqa=h != hk)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    errs: dict[str, float] = {"o": 0.0, "dq": 0.0, "dk": 0.0, "dv": 0.0}
    rep = h // hk
    for bi, kh in {(0, 0), (b - 1, hk - 1)}:
        hs = slice(kh * rep, (kh + 1) * rep)  # all query heads of one kv head: dk/dv need them all
        ro, rq, rk, rv = reference(q[bi, hs], k[bi, kh:kh + 1].expand(rep, -1, -1),
                                   v[bi, kh:kh + 1].expand(rep, -1, -1), do[bi, hs], causal)
        errs["o"] = max(errs["o"], rel(o[bi, hs], ro))
        errs["dq"] = max(errs["dq"], rel(dq[bi, hs], rq))
        errs["dk"] = max(errs["dk"], rel(dk[bi, kh], rk.sum(0)))
        errs["dv"] = max(errs["dv"], rel(dv[bi, kh], rv.sum(0)))
        del ro, rq, rk, rv
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        so = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=h != hk)
        sq_, sk_, sv_ = torch.autograd.grad(so, (q, k, v), do)
    vs_sdpa = {"o": rel(o, so), "dq": rel(dq, sq_), "dk": rel(dk, sk_), "dv": rel(dv, sv_)}
    finite = all(bool(torch.isfinite(x).all()) for x in (o, dq, dk, dv))
    tol = TOL[DTYPES[dt]]
    return {"vs_float64": errs, "vs_sdpa_flash": vs_sdpa, "finite": finite, "tol": tol,
            "ok": finite and max(errs.values()) <= tol}


def sdpa_fn(kind: str) -> Callable[..., torch.Tensor]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {"sdpa-flash": SDPBackend.FLASH_ATTENTION, "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION}[kind]

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool, enable_gqa: bool) -> torch.Tensor:
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, enable_gqa=enable_gqa)

    return fn


def triton_fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool, enable_gqa: bool) -> torch.Tensor:
    return ta.attention(q, k, v, is_causal=is_causal, enable_gqa=enable_gqa)


def bench_ms(fn: Callable[[], Any], rep: int = 100) -> float:
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=25, rep=rep, return_mode="median"))


def host_us(fn: Callable[[], Any], n: int = 20) -> float:
    """Host time to enqueue one call (no synchronisation inside the loop; n calls stay far below the launch
    queue's depth). When it exceeds the device time, the measured time is the host's, not the kernels'."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def time_backend(fn: Callable[..., torch.Tensor], shape: Shape, seed: int,
                 passes: tuple[str, ...] = ("fwd", "bwd", "fwd+bwd"), rep: int = 100) -> dict[str, float]:
    """Median ms per pass; a pass the backend refuses is NaN (and the reason is printed)."""
    _, h, hk, _, _, _, _, causal = shape
    gqa = h != hk
    out: dict[str, float] = {}
    try:
        q, k, v, do = make_inputs(shape, seed, grad=False)
        if "fwd" in passes:
            with torch.no_grad():
                out["fwd"] = bench_ms(lambda: fn(q, k, v, causal, gqa), rep)
                out["fwd_host_us"] = host_us(lambda: fn(q, k, v, causal, gqa))
        for x in (q, k, v):
            x.requires_grad_(True)
        if "bwd" in passes:
            o = fn(q, k, v, causal, gqa)
            out["bwd"] = bench_ms(lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True), rep)
            del o
        if "fwd+bwd" in passes:
            out["fwd+bwd"] = bench_ms(lambda: torch.autograd.grad(fn(q, k, v, causal, gqa), (q, k, v), do), rep)
            out["fwd+bwd_host_us"] = host_us(lambda: torch.autograd.grad(fn(q, k, v, causal, gqa), (q, k, v), do))
    except Exception as e:  # e.g. a backend without a kernel for this shape
        print(f"  {shape}: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
    for p in passes:
        out.setdefault(p, float("nan"))
    return out


def tflops(shape: Shape, pass_: str, ms: float) -> float:
    factor = {"fwd": 1.0, "bwd": 2.5, "fwd+bwd": 3.5}[pass_]
    return fwd_flops(shape) * factor / (ms * 1e-3) / 1e12 if ms == ms else float("nan")


def shape_name(s: Shape) -> str:
    b, h, hk, sq, skv, d, dt, c = s
    kv = f"/kv{hk}" if hk != h else ""
    seq = f"s{sq}" if sq == skv else f"sq{sq}skv{skv}"
    return f"b{b} h{h}{kv} {seq} d{d} {dt}{' causal' if c else ''}"


# ---------------------------------------------------------------------------------------------------------
# compiling the variants in parallel: each worker runs fwd+bwd once per variant on a short sequence whose
# integer arguments specialise like the long ones (multiples of 16), filling Triton's on-disk cache
# ---------------------------------------------------------------------------------------------------------
#: Small GPU checks of what the table's shapes do not reach: fp32, fp16, head dims 16-256, tails,
#: seqlen_q != seqlen_kv in both alignments, MQA, a (b, s, h, d) memory layout.
#: (b, h, kv_heads, seqlen_q, seqlen_kv, head_dim, dtype, causal, align, layout)
EXTRA_CHECKS: list[tuple[int, int, int, int, int, int, str, bool, str, str]] = [
    (1, 4, 2, 300, 517, 64, "fp32", True, "top-left", "bhsd"),
    (1, 2, 2, 129, 77, 128, "fp32", False, "top-left", "bhsd"),
    (2, 4, 4, 1000, 1000, 128, "fp16", False, "top-left", "bhsd"),
    (1, 8, 1, 200, 1000, 64, "bf16", True, "bottom-right", "bhsd"),
    (1, 4, 4, 1000, 200, 64, "bf16", True, "bottom-right", "bhsd"),
    (1, 4, 4, 1000, 200, 64, "bf16", True, "top-left", "bhsd"),
    (2, 4, 2, 777, 777, 128, "bf16", True, "top-left", "bshd"),
    (1, 4, 4, 513, 513, 16, "bf16", True, "top-left", "bhsd"),
    (1, 4, 4, 513, 513, 32, "bf16", False, "top-left", "bhsd"),
    (1, 4, 4, 384, 384, 256, "bf16", True, "top-left", "bhsd"),
    (1, 4, 4, 300, 300, 80, "bf16", True, "top-left", "bhsd"),
]


def extra_check(spec: tuple[int, int, int, int, int, int, str, bool, str, str]) -> dict[str, Any]:
    """One small case against a float64 reference computed on the GPU."""
    b, h, hk, sq, skv, d, dt, causal, align, layout = spec
    g = torch.Generator(device=DEV).manual_seed(sum(spec[:6]))

    def mk(heads: int, s: int) -> torch.Tensor:
        if layout == "bshd":
            x = torch.randn(b, s, heads, d, device=DEV, generator=g, dtype=DTYPES[dt]).transpose(1, 2)
        else:
            x = torch.randn(b, heads, s, d, device=DEV, generator=g, dtype=DTYPES[dt])
        return x.requires_grad_()

    q, k, v = mk(h, sq), mk(hk, skv), mk(hk, skv)
    do = torch.randn(b, h, sq, d, device=DEV, generator=g, dtype=DTYPES[dt])
    fn = ta.attention if align == "top-left" else ta.attention_bottom_right
    o = fn(q, k, v, is_causal=causal, enable_gqa=h != hk)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    kk, vv = k64.repeat_interleave(h // hk, 1), v64.repeat_interleave(h // hk, 1)
    sc = (q64 @ kk.transpose(-1, -2)) / math.sqrt(d)
    if causal:
        off = 0 if align == "top-left" else skv - sq
        vis = torch.arange(skv, device=DEV)[None, :] <= torch.arange(sq, device=DEV)[:, None] + off
        sc = sc.masked_fill(~vis, float("-inf"))
        p = torch.where(vis.any(-1, keepdim=True), torch.softmax(sc, -1), torch.zeros_like(sc))
    else:
        p = torch.softmax(sc, -1)
    ref = p @ vv
    rq, rk, rv = torch.autograd.grad(ref, (q64, k64, v64), do.double())
    errs = {"o": rel(o, ref), "dq": rel(dq, rq), "dk": rel(dk, rk), "dv": rel(dv, rv)}
    finite = all(bool(torch.isfinite(x).all()) for x in (o, dq, dk, dv))
    tol = TOL[DTYPES[dt]]
    return {"case": str(spec), "errs": errs, "finite": finite, "tol": tol,
            "ok": finite and max(errs.values()) <= tol}


# ---------------------------------------------------------------------------------------------------------
# compiling the variants in parallel: each worker runs fwd+bwd once per variant on a short sequence whose
# integer arguments specialise like the long ones (multiples of 16), filling Triton's on-disk cache; the small
# extra checks run in the workers too
# ---------------------------------------------------------------------------------------------------------
Job = tuple[Any, ...]


def _compile_job(job: Job) -> Any:
    try:
        if job[0] == "check":
            return extra_check(job[1])
        _, kernel, d, causal, cfg = job
        shape: Shape = (1, 32, 32, 512, 512, d, "bf16", causal)
        q, k, v, do = make_inputs(shape, 0, grad=True)
        forced = {kernel: ta.KernelConfig(*cfg)} if cfg else {}
        with ta.use_configs(**forced):
            o = ta.attention(q, k, v, is_causal=causal)
            torch.autograd.grad(o, (q, k, v), do)
        torch.cuda.synchronize()
        return "ok"
    except Exception as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def precompile(jobs: list[Job], workers: int) -> list[Any]:
    import multiprocessing as mp

    t0 = time.perf_counter()
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as ex:
        res = list(ex.map(_compile_job, jobs, timeout=400))
    print(f"ran {len(jobs)} compile/check jobs with {workers} workers in {time.perf_counter() - t0:.1f} s", flush=True)
    return res


def explore(seed: int) -> tuple[list[dict[str, Any]], dict[tuple[int, bool], dict[str, ta.KernelConfig]]]:
    """Time each kernel's variants (the others at their defaults); return rows and the best per (d, causal)."""
    rows: list[dict[str, Any]] = []
    best: dict[tuple[int, bool], dict[str, ta.KernelConfig]] = {}
    for shape in EXPLORE_SHAPES:
        d, causal = shape[5], shape[7]
        best[(d, causal)] = {}
        for kernel in ("fwd", "dkdv", "dq"):
            pass_ = "fwd" if kernel == "fwd" else "bwd"
            timed = {}
            for cfg_t in EXPLORE[kernel][d]:
                cfg = ta.KernelConfig(*cfg_t)
                with ta.use_configs(**{kernel: cfg}):
                    ms = time_backend(triton_fn, shape, seed, (pass_,), rep=200)[pass_]
                rows.append({"shape": shape_name(shape), "kernel": kernel, "config": str(cfg), "pass": pass_,
                             "ms": ms, "tflops": tflops(shape, pass_, ms)})
                print(f"  explore {shape_name(shape):32s} {kernel:5s} {cfg!s:14s} {pass_:4s} {ms:8.3f} ms "
                      f"{tflops(shape, pass_, ms):6.1f} TFLOP/s", flush=True)
                if ms == ms:
                    timed[cfg] = ms
            if timed:
                best[(d, causal)][kernel] = min(timed, key=lambda c: timed[c])
    return rows, best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for triton_attention.json")
    ap.add_argument("--explore", action="store_true", help="time launch-config variants first, then use the best")
    ap.add_argument("--workers", type=int, default=8, help="processes that precompile the variants")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--shapes", default="default", help="'default' or 'quick' (the two b1 s4096 d128 shapes)")
    ap.add_argument("--profile-once", action="store_true",
                    help="for ncu: run fwd+bwd twice at b1 h32 s4096 d128 bf16 (non-causal), time nothing; profile "
                         "the second iteration with ncu -k regex:'_fwd_kernel|_bwd_' -s 4 -c 4 --clock-control none")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    if args.profile_once:
        q, k, v, do = make_inputs((1, 32, 32, 4096, 4096, 128, "bf16", False), args.seed, grad=True)
        for _ in range(2):
            torch.autograd.grad(ta.attention(q, k, v), (q, k, v), do)
        torch.cuda.synchronize()
        return 0
    import triton

    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "python": platform.python_version(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": " ".join(sys.argv), "sms": torch.cuda.get_device_properties(0).multi_processor_count}
    print(json.dumps(meta), flush=True)
    shapes = DEFAULT_SHAPES if args.shapes == "default" else DEFAULT_SHAPES[:2]
    result: dict[str, Any] = {"meta": meta}

    jobs: list[Job] = [("check", c) for c in EXTRA_CHECKS]
    jobs += [("compile", "fwd", d, c, None) for d in sorted({s[5] for s in shapes}) for c in (False, True)]
    if args.explore:
        jobs += [("compile", kern, d, c, cfg) for kern in EXPLORE for d in EXPLORE[kern] for c in (False, True)
                 for cfg in EXPLORE[kern][d]]
    res = precompile(jobs, args.workers)
    result["extra_checks"] = res[:len(EXTRA_CHECKS)]
    result["precompile"] = {str(j[1:]): r for j, r in zip(jobs[len(EXTRA_CHECKS):], res[len(EXTRA_CHECKS):],
                                                           strict=True)}
    bad = {k: v for k, v in result["precompile"].items() if v != "ok"}
    if bad:
        print("precompile failures:", json.dumps(bad, indent=1), flush=True)
    for r in result["extra_checks"]:
        if isinstance(r, dict):
            print(f"extra check {r['case']}: {'ok' if r['ok'] else 'BAD'} "
                  + " ".join(f"{k} {v:.1e}" for k, v in r["errs"].items()), flush=True)
        else:
            print(f"extra check failed to run: {r}", flush=True)

    chosen: dict[tuple[int, bool], dict[str, ta.KernelConfig]] = {}
    if args.explore:
        rows, chosen = explore(args.seed)
        result["explore"] = rows
        result["explore_best"] = {f"d{d} {'causal' if c else 'full'}": {k: str(v) for k, v in cfgs.items()}
                                  for (d, c), cfgs in chosen.items()}
        print("best:", json.dumps(result["explore_best"]), flush=True)

    table: list[dict[str, Any]] = []
    for i, shape in enumerate(shapes):
        d, causal = shape[5], shape[7]
        forced = chosen.get((d, causal), {})
        t0 = time.perf_counter()
        with ta.use_configs(**forced):
            try:
                chk = check(shape, args.seed + i)
            except Exception as e:
                traceback.print_exc()
                chk = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            torch.cuda.empty_cache()
            times = {"triton": time_backend(triton_fn, shape, args.seed + i)}
        for kind in ("sdpa-flash", "sdpa-cudnn"):
            times[kind] = time_backend(sdpa_fn(kind), shape, args.seed + i)
        torch.cuda.empty_cache()
        row: dict[str, Any] = {"shape": shape_name(shape), "fwd_gflop": fwd_flops(shape) / 1e9, "check": chk,
               "configs": {k: str(v) for k, v in forced.items()}, "ms": times,
               "tflops": {b: {p: tflops(shape, p, ms) for p, ms in t.items() if not p.endswith("_us")}
                          for b, t in times.items()}}
        table.append(row)
        err = max(chk.get("vs_float64", {"-": float("nan")}).values())
        print(f"{shape_name(shape):32s} check {'ok ' if chk.get('ok') else 'BAD'} (max rel err {err:.1e}) "
              f"triton fwd {row['tflops']['triton']['fwd']:.0f} bwd {row['tflops']['triton']['bwd']:.0f} TFLOP/s "
              f"[{time.perf_counter() - t0:.1f} s]", flush=True)
    result["table"] = table
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "triton_attention.json").write_text(json.dumps(result, indent=1, default=str))

    # the compact table, last
    print(f"\n{meta['device']}, torch {meta['torch']}, triton {meta['triton']}; TFLOP/s (do_bench median)")
    hdr = f"{'shape':33s}|{'check':>6s} |" + "|".join(
        f"{p:>7s} tri  fla  cud  x/fla" for p in ("fwd", "bwd", "fwd+bwd"))
    print(hdr)
    for row in table:
        cells = []
        for p in ("fwd", "bwd", "fwd+bwd"):
            t = [row["tflops"][b][p] for b in ("triton", "sdpa-flash", "sdpa-cudnn")]
            ratio = t[0] / t[1] if t[1] == t[1] and t[1] > 0 else float("nan")
            cells.append(f"{'':7s}{t[0]:4.0f} {t[1]:4.0f} {t[2]:4.0f} {ratio:5.2f}")
        err = max(row["check"].get("vs_float64", {"-": float("nan")}).values())
        print(f"{row['shape']:33s}|{err:6.0e} |" + "|".join(cells))
    print("host time per call (us), triton / sdpa-flash: fwd, fwd+bwd; device time (us) fwd, fwd+bwd")
    for row in table:
        t, f = row["ms"]["triton"], row["ms"]["sdpa-flash"]
        nan = float("nan")
        print(f"{row['shape']:33s} host {t.get('fwd_host_us', nan):5.0f} {t.get('fwd+bwd_host_us', nan):5.0f}"
              f" / {f.get('fwd_host_us', nan):5.0f} {f.get('fwd+bwd_host_us', nan):5.0f}"
              f"   device {t['fwd'] * 1e3:6.0f} {t['fwd+bwd'] * 1e3:6.0f}")
    extra_ok = all(isinstance(r, dict) and r["ok"] for r in result["extra_checks"])
    print(f"extra checks: {'all ok' if extra_ok else 'FAILURES (see above)'}")
    return 0 if extra_ok and all(r["check"].get("ok") for r in table) else 1


if __name__ == "__main__":
    sys.exit(main())
