"""Writes the constructed bench rows of tests/data (not measured: made here, for the seed table layouts whose
shapes the recorded rows lack). Every row says so in its ``constructed`` field, which profctl's seed tables
count in a note. Run from the repository root: ``python tests/data/constructed_rows.py``; the output is the same
on every run.

- ``seed004_h200_constructed.json.gz``: the seed-004 forward sweep the lead records on the H200 (b1 h32 d128,
  forward, non-causal, seqlen 1024-16384; eager, sdpa-flash, sdpa-cudnn, fa4, triton bf16 and fp8). eager,
  sdpa-* and fa4 take the H100 medians of bench_h100_b1h32d128_fwd.json.gz (recorded); triton bf16 and fp8 run
  at issue 23's H200 figures at seqlen 4096 (482 and 576 TFLOP/s), other lengths scaled as sdpa-flash's
  TFLOP/s scale on the H100.
- ``batch_scaling_constructed.json.gz``: seed 002's scaling over batch (batch 1, 2, 4, 8, 16; seqlen 1024, h32,
  d128, bf16, forward; sdpa-flash and eager): time = a + batch x c, with a + c equal to the H100 median at batch 1
  and a fixed part a of 40 % (sdpa-flash) and 10 % (eager) of it.
- ``torch_triton_constructed.json.gz``: seed 003's torch-against-Triton table (eager and triton; seqlen 1024,
  4096, 16384; head dim 64 and 128; bf16 and fp32; passes fwd, bwd and fwd+bwd; b1 h32): time = FLOPs / an
  assumed rate per backend, dtype and pass (RATES), fwd+bwd = fwd + bwd; eager in fp32 at 16384 out of memory
  in the passes that keep the score matrix for the backward.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
PASS_FACTOR = {"fwd": 1.0, "bwd": 2.5, "fwd+bwd": 3.5}
WHY = "constructed for tests/data (tests/data/constructed_rows.py), not measured"
#: TFLOP/s assumed for torch_triton_constructed: (backend, dtype) -> (fwd, bwd)
RATES = {("triton", "bf16"): (420.0, 300.0), ("triton", "fp32"): (48.0, 36.0),
         ("eager", "bf16"): (85.0, 60.0), ("eager", "fp32"): (24.0, 18.0)}


def flops(b: int, h: int, s: int, d: int, pass_: str) -> float:
    return 4.0 * b * h * s * s * d * PASS_FACTOR[pass_]


def row(backend: str, b: int, s: int, h: int, d: int, dtype: str, pass_: str, ms: float | None,
        mem: int | None, gpu: str, status: str = "ok") -> dict[str, object]:
    f = flops(b, h, s, d, pass_)
    return {"backend": backend, "batch": b, "seqlen_q": s, "seqlen_kv": s, "heads": h, "kv_heads": h, "head_dim": d,
            "dtype": dtype, "causal": False, "pass": pass_, "layout": "bhsd", "device": "cuda", "flops": f,
            "status": status, "reason": None if status == "ok" else "CUDA out of memory (constructed)",
            "median_ms": round(ms, 6) if ms is not None and status == "ok" else None,
            "tflops": round(f / (ms * 1e9), 3) if ms and status == "ok" else None,
            "peak_mem_bytes": mem if status == "ok" else None, "gpu_name": gpu, "constructed": WHY}


def seed004() -> list[dict[str, object]]:
    with gzip.open(HERE / "bench_h100_b1h32d128_fwd.json.gz", "rt") as f:
        h100 = [r for r in json.load(f) if not r["causal"]]
    gpu = "NVIDIA H200"
    out = [row(r["backend"], 1, r["seqlen_q"], 32, 128, "bf16", "fwd", r["median_ms"], r["peak_mem_bytes"], gpu)
           for r in h100]
    flash = {r["seqlen_q"]: r["tflops"] for r in h100 if r["backend"] == "sdpa-flash"}
    for s, scale in ((s, flash[s] / flash[4096]) for s in sorted(flash)):
        f = flops(1, 32, s, 128, "fwd")
        out.append(row("triton", 1, s, 32, 128, "bf16", "fwd", f / (482e9 * scale), 4 * s * 32 * 128 * 2, gpu))
        out.append(row("triton", 1, s, 32, 128, "fp8", "fwd", f / (576e9 * scale), 6 * s * 32 * 128, gpu))
    return out


def batch_scaling() -> list[dict[str, object]]:
    with gzip.open(HERE / "bench_h100_b1h32d128_fwd.json.gz", "rt") as f:
        t1 = {r["backend"]: r["median_ms"] for r in json.load(f) if not r["causal"] and r["seqlen_q"] == 1024}
    out = []
    for backend, fixed in (("sdpa-flash", 0.4), ("eager", 0.1)):
        a, c = fixed * t1[backend], (1 - fixed) * t1[backend]
        for b in (1, 2, 4, 8, 16):
            out.append(row(backend, b, 1024, 32, 128, "bf16", "fwd", a + b * c, None, "NVIDIA H100 80GB HBM3"))
    return out


def torch_triton() -> list[dict[str, object]]:
    out = []
    for s in (1024, 4096, 16384):
        for d in (64, 128):
            for dtype in ("bf16", "fp32"):
                for backend in ("eager", "triton"):
                    fwd, bwd = RATES[(backend, dtype)]
                    t_f = flops(1, 32, s, d, "fwd") / (fwd * 1e9)
                    t_b = flops(1, 32, s, d, "bwd") / (bwd * 1e9)
                    for pass_, ms in (("fwd", t_f), ("bwd", t_b), ("fwd+bwd", t_f + t_b)):
                        oom = backend == "eager" and dtype == "fp32" and s == 16384 and pass_ != "fwd"
                        out.append(row(backend, 1, s, 32, d, dtype, pass_, ms, None, "NVIDIA H100 80GB HBM3",
                                       "oom" if oom else "ok"))
    return out


def main() -> None:
    for name, rows in (("seed004_h200_constructed", seed004()), ("batch_scaling_constructed", batch_scaling()),
                       ("torch_triton_constructed", torch_triton())):
        data = json.dumps(rows, indent=1).encode()
        with gzip.GzipFile(HERE / f"{name}.json.gz", "wb", mtime=0, compresslevel=9) as f:
            f.write(data)
        print(f"{name}.json.gz: {len(rows)} rows")


if __name__ == "__main__":
    main()
