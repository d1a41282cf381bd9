"""Llama-2-7B-shaped model on the GPU: training-step MFU per attention backend, torch.compile, part timing
(attention's share of the step), prefill and decode tokens/s, and the model's own GEMMs as a ceiling.

    python3 benchmarks/model_gpu.py                 # on the GPU machine; JSON to $OUT (or benchmarks/out)
    python3 benchmarks/model_gpu.py --smoke         # tiny shapes on the CPU: checks the script runs
    python3 benchmarks/model_gpu.py --sections rope,parts,compile,masters --best sdpa-cudnn

The model is llama-7b cut to 4 layers (plus embedding and LM head), bf16 weights and AdamW states (no fp32
masters unless the --masters point runs), fused AdamW. MFU counts profctl.workloads.models.model_flops against the
H100's 989.4 TFLOP/s dense bf16 peak. Points run in priority order and the optional ones stop at --deadline-s,
so the script fits one device call; the JSON is rewritten after every row. The table is printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # the repo (one up), installed with pip install -e .

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from profctl.workloads import models as M  # noqa: E402
from profctl.workloads.models import net  # noqa: E402

PEAK_TFLOPS = 989.4  # H100 SXM dense bf16
SECTIONS = ("train", "rope", "parts", "gemm", "prefill", "compile", "masters", "7b-full")
T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


def env() -> dict[str, Any]:
    e: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0],
                         "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        e.update(device=p.name, sms=p.multi_processor_count, mem_gib=round(p.total_memory / 2**30, 1),
                 cudnn=torch.backends.cudnn.version())
    try:
        import triton

        e["triton"] = triton.__version__
    except Exception:
        pass
    return e


def gemm_ceiling(cfg: M.ModelConfig, tokens: int, dev: str) -> list[dict[str, Any]]:
    """TFLOP/s of the model's own forward GEMMs (tokens x in -> out, bf16), median of 20 after 5 warm-ups."""
    shapes = {"qkv": (cfg.d_model, (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim),
              "attn.out": (cfg.heads * cfg.head_dim, cfg.d_model), "gate_up": (cfg.d_model, 2 * cfg.mlp_hidden),
              "down": (cfg.mlp_hidden, cfg.d_model), "head": (cfg.d_model, cfg.vocab), "square8192": (8192, 8192)}
    out = []
    for name, (k, n) in shapes.items():
        m = 8192 if name == "square8192" else tokens
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        for _ in range(5):
            F.linear(a, w)
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(21)]
        for i in range(20):
            ev[i].record()
            F.linear(a, w)
        ev[20].record()
        torch.cuda.synchronize()
        ts = sorted(ev[i].elapsed_time(ev[i + 1]) for i in range(20))
        ms = ts[10]
        out.append({"gemm": name, "m": m, "k": k, "n": n, "ms": ms, "tflops": 2 * m * k * n / ms / 1e9})
        del a, w
    return out


def attn_fns(device: str) -> dict[str, tuple[Any, str]]:
    """name -> (attn_fn, memory kind for the estimate)."""
    return {"sdpa-cudnn": (M.sdpa_backend_fn("cudnn"), "flash"), "sdpa-flash": (M.sdpa_backend_fn("flash"), "flash"),
            "sdpa-math": (M.sdpa_backend_fn("math"), "math"), "eager": (M.eager_attention, "eager")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny model on the CPU")
    ap.add_argument("--deadline-s", type=float, default=330.0, help="skip optional points after this")
    ap.add_argument("--out", default=os.environ.get("OUT") or str(HERE / "out"))
    ap.add_argument("--cap-gib", type=float, default=76.0, help="memory_limit_gib for every point")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma list of {', '.join(SECTIONS)}")
    ap.add_argument("--best", default=None, help="the backend for parts/compile/masters/7b-full when 'train' "
                                                 "does not run (default sdpa-cudnn)")
    ap.add_argument("--compile-batches", default="2,1", help="batches of the compile section")
    a = ap.parse_args()
    want = set(a.sections.split(","))
    if want - set(SECTIONS):
        ap.error(f"unknown sections {sorted(want - set(SECTIONS))}")
    smoke = a.smoke
    dev = "cpu" if smoke else "cuda"
    if not smoke and not torch.cuda.is_available():
        print("no CUDA device (use --smoke on the CPU)", file=sys.stderr)
        return 2
    cfg = M.preset("llama-tiny") if smoke else M.preset("llama-7b", layers=4)
    seqlen = 64 if smoke else 4096
    warm, iters = (1, 2) if smoke else (3, 8)
    cap = None if smoke else a.cap_gib
    dtype = "fp32" if smoke else "bf16"
    outdir = Path(a.out)
    outdir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"env": env(), "model": cfg.to_dict(), "params": M.param_count(cfg),
                              "peak_tflops": PEAK_TFLOPS, "rows": [], "gemms": []}
    log(f"env {result['env']}")
    log(f"{cfg.name}: {M.param_count(cfg) / 1e9:.3f} B params")

    def save() -> None:
        (outdir / "model_gpu.json").write_text(json.dumps(result, indent=1, default=str))

    def late() -> bool:
        return time.perf_counter() - T0 > a.deadline_s

    fns = attn_fns(dev)
    if smoke:
        fns.pop("sdpa-cudnn")

    def run(section: str, backend: str, mode: str, batch: int, sl: int, model_cfg: M.ModelConfig = cfg,
            **kw: Any) -> dict[str, Any]:
        fn, kind = fns.get(backend, (F.scaled_dot_product_attention, "flash"))
        t = time.perf_counter()
        r = M.run_model_case(model_cfg, mode=mode, batch=batch, seqlen=sl, dtype=dtype, device=dev, attn_fn=fn,
                             warmup=kw.pop("warmup", warm), iters=kw.pop("iters", iters), seed=0,
                             memory_limit_gib=cap, attention_memory=kind, peak_tflops=PEAK_TFLOPS, **kw)
        r.update(section=section, backend=backend, setup_and_run_s=time.perf_counter() - t)
        r.pop("config", None)
        result["rows"].append(r)
        save()
        mf = f" MFU {100 * r['mfu']:.1f}%" if r.get("mfu") is not None else ""
        extra = f" attn share {100 * r['attn_share']:.1f}%" if r.get("attn_share") is not None else ""
        msg = (f"{r['median_ms']:.2f} ms{mf} {r['tokens_per_s']:.0f} tok/s{extra}" if r["status"] == "ok"
               else f"{r['status']}: {r['reason']}")
        log(f"{section:9s} {backend:11s} {mode:7s} b{batch} s{sl}: {msg} ({r['setup_and_run_s']:.1f} s)")
        return r

    # 1. training step: every backend, batch 2 (the target) then 1
    best = a.best or ("sdpa-flash" if smoke else "sdpa-cudnn")
    if "train" in want:
        for batch in (2, 1):
            for backend in fns:
                run("train", backend, "train", batch, seqlen)
        ok = {(r["backend"], r["batch"]): r["median_ms"] for r in result["rows"] if r["status"] == "ok"}
        best = min((b for b in ("sdpa-cudnn", "sdpa-flash") if (b, 2) in ok), key=lambda b: ok[(b, 2)],
                   default="sdpa-flash")
        log(f"best backend at batch 2: {best}")

    # 1b. rotary as one autograd node (default) against the textbook formula through autograd, interleaved
    if "rope" in want:
        for rnd in range(2):
            for impl in ("autograd", "function"):
                net.ROPE_IMPL = impl
                for backend in (("sdpa-cudnn", "sdpa-flash") if not smoke else ("sdpa-flash",)):
                    for batch in ((2, 1) if rnd == 0 else (2,)):
                        run(f"rope-{impl[:4]}", backend, "train", batch, seqlen)
        net.ROPE_IMPL = "function"

    # 2. part timing (attention's share) on the best backend and eager; the overhead against section 1
    if "parts" in want:
        for backend in (best, "eager"):
            run("parts", backend, "train", 2, seqlen, part_timing=True, warmup=2, iters=5)

    # 3. the model's own GEMMs: what the matmuls can reach on this card
    if not smoke and "gemm" in want:
        try:
            result["gemms"] = gemm_ceiling(cfg, 2 * seqlen, dev)
            save()
            for g in result["gemms"]:
                log(f"gemm {g['gemm']:10s} {g['m']}x{g['k']}x{g['n']}: {g['tflops']:.0f} TFLOP/s")
        except Exception as e:
            log(f"gemm ceiling failed: {type(e).__name__}: {e}")

    # 4. prefill and decode ('prefill' runs both), batch 1, the 4-layer model
    ctxs_pre = (32, 64) if smoke else (1024, 4096, 16384, 32768)
    ctxs_dec = (32, 64) if smoke else (1024, 4096, 16384, 32768)
    for backend in (best, "sdpa-flash" if best != "sdpa-flash" else "sdpa-cudnn", "eager"):
        if backend not in fns or "prefill" not in want:
            continue
        for c in ctxs_pre:
            if not late():
                run("prefill", backend, "prefill", 1, c, warmup=2, iters=5)
        for c in ctxs_dec:
            if not late():
                run("decode", backend, "decode", 1, c, warmup=5, iters=30)

    # 5. torch.compile of the model (forward + loss; backward through AOTAutograd), SDPA backend pinned around it
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sdp = {"sdpa-cudnn": SDPBackend.CUDNN_ATTENTION, "sdpa-flash": SDPBackend.FLASH_ATTENTION}[best]
    for batch in (int(b) for b in a.compile_batches.split(",")):
        if "compile" not in want:
            continue
        if late():
            log(f"deadline: compile b{batch} skipped")
            continue
        try:
            with sdpa_kernel(sdp):
                run("compile", f"{best}", "train", batch, seqlen, compile_model=True, warmup=3)
        except Exception as e:  # a compile failure must not lose the rest
            log(f"compile failed: {type(e).__name__}: {e}")
            traceback.print_exc()

    # 6. fp32 master weights under autocast, best backend, batch 2
    if not late() and "masters" in want:
        run("masters", best, "train", 2, seqlen, master_fp32=True)

    # 7. the whole Llama-2-7B (32 layers): prefill and decode, batch 1
    full = M.preset("llama-tiny", layers=4) if smoke else M.preset("llama-7b")
    for c in ((32,) if smoke else (4096, 16384)):
        if "7b-full" not in want:
            continue
        if not late():
            run("7b-full", best, "prefill", 1, c, model_cfg=full, warmup=1, iters=3)
        if not late():
            run("7b-full", best, "decode", 1, c, model_cfg=full, warmup=3, iters=15)

    # table last
    result["wall_s"] = time.perf_counter() - T0
    save()
    print()
    print(f"{cfg.name} {result['env'].get('device', 'cpu')} torch {torch.__version__}; MFU vs {PEAK_TFLOPS} TFLOP/s")
    hdr = (f"{'section':9s} {'backend':11s} {'mode':7s} {'b':>2s} {'seq':>6s} {'status':7s} {'ms':>9s} "
           f"{'tok/s':>9s} {'MFU%':>5s} {'peakGiB':>7s} {'estGiB':>6s} {'attn%':>5s}")
    print(hdr)

    def gib(v: Any) -> str:
        return f"{v / 2**30:.1f}" if v else "-"

    for r in result["rows"]:
        ok_ = r["status"] == "ok"
        print(f"{r['section']:9s} {r['backend']:11s} {r['mode']:7s} {r['batch']:2d} {r['seqlen']:6d} "
              f"{r['status']:7s} {r['median_ms'] if ok_ else float('nan'):9.3f} "
              f"{r['tokens_per_s'] if ok_ else float('nan'):9.0f} "
              f"{100 * r['mfu'] if ok_ else float('nan'):5.1f} {gib(r.get('peak_mem_allocated_bytes')):>7s} "
              f"{gib(r.get('estimate_bytes')):>6s} "
              f"{100 * r['attn_share'] if r.get('attn_share') is not None else float('nan'):5.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
