"""Issue 50's ladder: profctl's Triton forward under candidate changes, timed beside cuDNN (and FA4 where it is
installed) at the issue's shapes, and the same candidates launched once each inside NVTX ranges for one ncu run, so
that `profctl explain` can set each step's predicted saving against the realized one.

    python3 benchmarks/triton_ladder.py time [--shapes s4096,s4096c,...] [--out ladder.json]
    python3 benchmarks/triton_ladder.py warm                 # compile every candidate (fills Triton's cache)
    python3 benchmarks/triton_ladder.py modes --shapes s4096c --rounds 8   # fresh inputs each round: speed states
    python3 benchmarks/triton_ladder.py fp8modes --shapes s4096,s4096c --rounds 4  # the FP8 candidates, interleaved
    profctl ncu --recipe explain --range ladder@measure --clock-control none -- \\
        python3 benchmarks/triton_ladder.py ncu              # one launch of each candidate in ladder@measure/SHAPE/CFG

Timing: triton.testing.do_bench medians (L2 flushed between calls), each output checked against SDPA's math on
float64 inputs of the same values (the max absolute error is printed beside the time).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: name -> (batch, heads, seqlen, head_dim, causal): the shapes of issue 50, item 1
SHAPES: dict[str, tuple[int, int, int, int, bool]] = {
    "s4096": (1, 32, 4096, 128, False),
    "s4096c": (1, 32, 4096, 128, True),
    "s8192c": (1, 16, 8192, 128, True),
    "b16s1024": (16, 32, 1024, 128, False),
    "b16s1024c": (16, 32, 1024, 128, True),
    "d64": (1, 32, 4096, 64, False),
    "d64c": (1, 32, 4096, 64, True),
}
_WS = ("m128n128w4s3-ws-gl", "m128n128w4s3-p1-ws-gl")
#: exps of the unmasked blocks in part (-e1: every other key) or all (-e2) on the FMA pipe (explain's sfu-bound fix)
_NONCAUSAL = ("m128n128w8s3", *_WS)
_CAUSAL = ("m64n64w4s3", "m128n128w8s3", *_WS)
_D64 = ("m128n64w8s3-ptr", "m128n128w4s3-ws-gl", "m128n128w4s4-p1-ws-gl")
#: earlier rounds also timed (their results: tests/data/ladder50/time_*.json): "m128n128w8s3-p1", "m128n64w8s3",
#: "m128n64w8s3-p1", "m64n64w4s3-p2", "m128n128w8s2", "m128n128w8s3-ws", "m64n64w4s4-p2", "m128n64w8s3-ptr-p1",
#: "m128n128w8s3-gl", "m128n64w8s3-gl", "m128n128w8s4-gl", "m64n64w4s3-gl", "m128n128w4s2-ws-gl", "m128n64w4s3-ws-gl",
#: "m128n128w8s3-e1", "m64n64w4s3-e1", "m128n64w8s3-ptr-e1", "m128n64w8s3-ptr-e2", "m64n64w4s3-ptr-e1",
#: "m64n64w4s4-gl", "m128n64w4s4-ws-gl"
#: the candidates timed per shape (the shape's default config is always timed too, as "default")
CANDIDATES: dict[str, tuple[str, ...]] = {
    "s4096": _NONCAUSAL, "s4096c": _CAUSAL, "s8192c": _CAUSAL, "b16s1024": _NONCAUSAL, "b16s1024c": _CAUSAL,
    "d64": _D64, "d64c": _D64,
}
#: the candidates launched for the ncu run (shape -> configs)
NCU: dict[str, tuple[str, ...]] = {
    "s8192c": ("m128n128w4s3-ws-gl",),
    "s4096": ("m128n128w4s3-ws-gl",),
    "s4096c": ("m128n128w4s3-ws-gl", "m64n64w4s3"),
    "b16s1024": ("m128n128w4s3-ws-gl",),
    "d64": ("m128n64w8s3-ptr",),
}
#: the FP8 (e4m3) forward's candidates launched for the ncu run at b1 h32 s4096 d128 (ladder@measure/fp8s4096/CFG):
#: the Triton default and the warp-specialized Gluon kernel
NCU_FP8: tuple[str, ...] = ("m64n128w4s3", "m128n128w4s4-ws-gl")


def _inputs(shape: tuple[int, int, int, int, bool], seed: int = 0) -> tuple[Any, Any, Any]:
    import torch

    b, h, s, d, _ = shape
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    return q, k, v


def _calls(q: Any, k: Any, v: Any, causal: bool, configs: tuple[str, ...], others: dict[str, Any],
           default: bool) -> list[tuple[str, Any]]:
    """(label, fn()) for the default config (if asked), each named config, and each other backend."""
    from profctl.workloads.kernels import triton_attention as ta

    def triton(cfg: Any) -> Any:
        def call() -> Any:
            if cfg is None:
                return ta.attention(q, k, v, is_causal=causal)
            with ta.use_configs(fwd=cfg):
                return ta.attention(q, k, v, is_causal=causal)
        return call

    def other(fn: Any) -> Any:
        return lambda: fn(q, k, v, causal)

    out = [("default", triton(None))] if default else []
    skip = os.environ.get("LADDER_SKIP")  # configs containing this text are left out (gpu.sh ws-smoke sets it)
    out += [(c, triton(ta.parse_configs(f"fwd={c}")["fwd"])) for c in configs if not (skip and skip in c)]
    return out + [(name, other(fn)) for name, fn in others.items()]


def _flops(shape: tuple[int, int, int, int, bool]) -> float:
    b, h, s, d, causal = shape
    return 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)


def _reference(q: Any, k: Any, v: Any, causal: bool) -> Any:
    """SDPA's math backend on the first (batch, head) pair in float64: the accuracy check of every candidate."""
    import torch
    import torch.nn.functional as F

    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        return F.scaled_dot_product_attention(q[:1, :2].double(), k[:1, :2].double(), v[:1, :2].double(),
                                              is_causal=causal)


def _others() -> dict[str, Any]:
    """cuDNN through SDPA, and FA4 where flash_attn.cute imports: name -> fn(q, k, v, causal)."""
    import torch
    import torch.nn.functional as F

    def cudnn(q: Any, k: Any, v: Any, causal: bool) -> Any:
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    out: dict[str, Any] = {"cudnn": cudnn}
    try:
        from flash_attn.cute import flash_attn_func

        def fa4(q: Any, k: Any, v: Any, causal: bool) -> Any:
            o = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=causal)
            return (o[0] if isinstance(o, tuple) else o).transpose(1, 2)

        out["fa4"] = fa4
    except Exception as e:  # not installed on this machine: said in the output
        print(f"fa4 not timed: {type(e).__name__}: {e}"[:200], file=sys.stderr)
    return out


def time_all(shapes: list[str], out: Path | None) -> dict[str, Any]:
    import torch
    from triton.testing import do_bench


    res: dict[str, Any] = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "shapes": {}}
    others = _others()
    for name in shapes:
        shape = SHAPES[name]
        q, k, v = _inputs(shape)
        ref = _reference(q, k, v, shape[4])
        row: dict[str, Any] = {}
        runs = _calls(q, k, v, shape[4], CANDIDATES[name], others, default=True)
        for label, fn in runs:
            try:
                o = fn()
                err = float((o[:1, :2].double() - ref).abs().max())
                ms = do_bench(fn, warmup=25, rep=150, return_mode="median")
                row[label] = {"ms": ms, "tflops": _flops(shape) / (ms * 1e-3) / 1e12, "max_abs_err": err}
            except Exception as e:  # over the shared-memory or register budget, or not supported here
                row[label] = {"error": f"{type(e).__name__}: {str(e)[:160]}"}
            print(name, label, row[label], file=sys.stderr, flush=True)
        keys = ("batch", "heads", "seqlen", "head_dim", "causal")
        res["shapes"][name] = {"shape": dict(zip(keys, shape, strict=True)), "runs": row}
        if out:
            out.write_text(json.dumps(res, indent=1))
    return res


def modes(shapes: list[str], rounds: int, out: Path | None) -> dict[str, Any]:
    """Whether a config's time depends on where its buffers land: each round allocates fresh inputs and times the
    default config, the Triton kernel alone (m64n64w4s3) and cuDNN on them (do_bench medians), so a kernel with two
    speed states shows both across rounds while the others stay put."""
    import torch
    from triton.testing import do_bench

    res: dict[str, Any] = {"gpu": torch.cuda.get_device_name(), "rounds": {}}
    cudnn = _others()["cudnn"]
    for name in shapes:
        shape = SHAPES[name]
        rows = []
        for r in range(rounds):
            q, k, v = _inputs(shape, seed=r)
            row = {}
            for label, fn in _calls(q, k, v, shape[4], ("m64n64w4s3",), {"cudnn": cudnn}, default=True):
                ms = do_bench(fn, warmup=10, rep=60, return_mode="median")
                row[label] = round(_flops(shape) / (ms * 1e-3) / 1e12, 1)
            rows.append(row)
            print(name, r, row, file=sys.stderr, flush=True)
            del q, k, v
        res["rounds"][name] = rows
        if out:
            out.write_text(json.dumps(res, indent=1))
    return res


#: the FP8 candidates of fp8modes: the Triton default, the same tiles at 2 stages (alone, and capped at 168 or 160
#: registers: three blocks an SM instead of two) and the warp-specialized Gluon kernel; a "+kplain" suffix runs a
#: Gluon config with K's keys in their plain order (gluon_fp8_attention.PERMUTE_K off)
FP8_MODES: tuple[str, ...] = ("m64n128w4s3", "m64n128w4s2", "m64n128w4s2-r168", "m64n128w4s2-r160",
                              "m128n128w4s3-ws-gl")


def _sm_clock() -> dict[str, Any]:
    """The SM clock, power and temperature now (nvidia-smi), so a slow round can be told from a slow kernel."""
    import subprocess

    try:
        query = "--query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"
        r = subprocess.run(["nvidia-smi", query, "--format=csv,noheader,nounits"], capture_output=True, text=True,
                           timeout=20)
        sm, power, temp, reasons = (x.strip() for x in r.stdout.strip().split(",")[:4])
        return {"sm_mhz": float(sm), "power_w": float(power), "temp_c": float(temp), "throttle": reasons}
    except Exception as e:  # no nvidia-smi, or a field this driver lacks
        return {"error": f"{type(e).__name__}: {e}"[:120]}


def fp8_modes(shapes: list[str], rounds: int, out: Path | None,
              candidates: tuple[str, ...] = FP8_MODES) -> dict[str, Any]:
    """The FP8 candidates (FP8_MODES) interleaved round by round on fresh quantized inputs, each a do_bench median,
    each output checked against float64 attention of the dequantized inputs (the fp8 tolerance), with the SM clock
    before every round: which differences survive the round-to-round spread."""
    import statistics

    import torch
    from triton.testing import do_bench

    from profctl.workloads import fp8
    from profctl.workloads.attention import TOLERANCE
    from profctl.workloads.kernels import triton_attention as ta

    res: dict[str, Any] = {"gpu": torch.cuda.get_device_name(), "candidates": candidates, "shapes": {}}
    for name in shapes:
        shape = SHAPES[name]
        causal = shape[4]
        rows = []
        for r in range(rounds):
            q, k, v = _inputs(shape, seed=r)
            (q8, qd), (k8, kd), (v8, vd) = fp8.quantize(q), fp8.quantize(k), fp8.quantize(v)
            args = ta.prepare(q8, k8, v8)
            kw = {"is_causal": causal, "q_descale": qd, "k_descale": kd, "v_descale": vd}
            dq, dk, dv = (fp8.dequantize(x, dsc) for x, dsc in ((q8, qd), (k8, kd), (v8, vd)))
            ref = _reference(dq, dk, dv, causal)
            row: dict[str, Any] = {"clock": _sm_clock()}
            for label in candidates:
                cfg_name, _, flag = label.partition("+")
                cfg = ta.parse_configs(f"fwd={cfg_name}")["fwd"]

                def call(cfg: Any = cfg, args: Any = args, kw: Any = kw) -> Any:
                    with ta.use_configs(fwd=cfg):
                        return ta.attention(*args, **kw)
                try:
                    with ta.gluon_fp8.permute_k(flag != "kplain"):
                        o = call()
                        err = float((o[:1, :2].double() - ref).norm() / ref.norm())
                        ms = do_bench(call, warmup=10, rep=60, return_mode="median")
                    row[label] = {"tflops": round(_flops(shape) / (ms * 1e-3) / 1e12, 1), "rel_err": round(err, 4),
                                  "ok": err <= TOLERANCE["fp8"]}
                except Exception as e:
                    row[label] = {"error": f"{type(e).__name__}: {str(e)[:160]}"}
            rows.append(row)
            print(name, r, row, file=sys.stderr, flush=True)
            del q, k, v, q8, k8, v8, args
        med = {lab: statistics.median(x[lab]["tflops"] for x in rows if "tflops" in x[lab])
               for lab in candidates if any("tflops" in x[lab] for x in rows)}
        res["shapes"][name] = {"rounds": rows, "median_tflops": med}
        print(name, "median", med, file=sys.stderr, flush=True)
        if out:
            out.write_text(json.dumps(res, indent=1))
    return res


def warm(part: int, parts: int) -> None:
    """Compile every candidate once at a small size of each shape's head dim and mask (fills Triton's disk cache, so
    the timed and profiled runs compile nothing); `parts` processes each take every `parts`-th candidate."""
    import torch

    from profctl.workloads.kernels import triton_attention as ta

    todo = sorted({(SHAPES[n][3], SHAPES[n][4], c) for n, cs in {**CANDIDATES, **NCU}.items() for c in cs})
    todo += [(128, False, "fp8:" + c) for c in NCU_FP8]
    skip = os.environ.get("LADDER_SKIP")
    for d, causal, cfg_name in todo[part::parts]:
        if skip and skip in cfg_name:
            continue
        q, k, v = (torch.randn(1, 2, 512, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        descales: dict[str, Any] = {}
        if cfg_name.startswith("fp8:"):
            from profctl.workloads import fp8

            cfg_name = cfg_name[4:]
            (q, descales["q_descale"]), (k, descales["k_descale"]), (v, descales["v_descale"]) = map(
                fp8.quantize, (q, k, v))
            q, k, v = ta.prepare(q, k, v)
        try:
            with ta.use_configs(fwd=ta.parse_configs(f"fwd={cfg_name}")["fwd"]):
                ta.attention(q, k, v, is_causal=causal, **descales)
        except Exception as e:
            print("warm", d, causal, cfg_name, type(e).__name__, str(e)[:120], file=sys.stderr)
    torch.cuda.synchronize()


def ncu_launches() -> None:
    """One launch of each NCU candidate (and cuDNN's) per shape inside ladder@measure/SHAPE/CFG, after a warm call
    outside the range."""
    import nvtx
    import torch


    cudnn = _others()["cudnn"]
    for name, names in NCU.items():
        shape = SHAPES[name]
        q, k, v = _inputs(shape)
        for label, call in _calls(q, k, v, shape[4], names, {"cudnn": cudnn}, default=False):
            call()
            torch.cuda.synchronize()
            with nvtx.annotate("measure", domain="ladder"), nvtx.annotate(name, domain="ladder"), \
                    nvtx.annotate(label, domain="ladder"):
                call()
                torch.cuda.synchronize()
    from profctl.workloads import fp8
    from profctl.workloads.kernels import triton_attention as ta

    q, k, v = _inputs(SHAPES["s4096"])
    (q8, qd), (k8, kd), (v8, vd) = fp8.quantize(q), fp8.quantize(k), fp8.quantize(v)
    q8, k8, v8 = ta.prepare(q8, k8, v8)  # V K-major, outside the launch (as the workload does)
    for label in NCU_FP8:
        def call(label: str = label) -> Any:
            with ta.use_configs(fwd=ta.parse_configs(f"fwd={label}")["fwd"]):
                return ta.attention(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd)
        call()
        torch.cuda.synchronize()
        with nvtx.annotate("measure", domain="ladder"), nvtx.annotate("fp8s4096", domain="ladder"), \
                nvtx.annotate(label, domain="ladder"):
            call()
            torch.cuda.synchronize()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("time", "warm", "ncu", "modes", "fp8modes"))
    ap.add_argument("--rounds", type=int, default=8, help="modes: rounds of fresh inputs per shape")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--part", default="0/1", help="warm: this process's part, I/N")
    ap.add_argument("--fp8-configs", default=",".join(FP8_MODES), help="fp8modes: the candidates (comma list)")
    a = ap.parse_args()
    if a.mode == "time":
        res = time_all([s for s in a.shapes.split(",") if s], a.out)
        print(json.dumps(res, indent=1))
    elif a.mode == "modes":
        print(json.dumps(modes([s for s in a.shapes.split(",") if s], a.rounds, a.out), indent=1))
    elif a.mode == "fp8modes":
        cands = tuple(c for c in a.fp8_configs.split(",") if c)
        print(json.dumps(fp8_modes([s for s in a.shapes.split(",") if s], a.rounds, a.out, cands), indent=1))
    elif a.mode == "warm":
        i, n = map(int, a.part.split("/"))
        warm(i, n)
    else:
        ncu_launches()
    return 0


if __name__ == "__main__":
    sys.exit(main())
