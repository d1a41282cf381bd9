"""Time profctl's Triton FP8 (e4m3) forward against its bf16 forward on one GPU, config by config, in one process.

    python benchmarks/fp8_attention.py                        # b1 h32 s4096, d128 and d64, causal and not
    python benchmarks/fp8_attention.py --out "$OUT"           # also writes <out>/fp8_attention.json
    python benchmarks/fp8_attention.py --configs 128x128w8s3,64x64w4s3 --shapes d128-full
    TRITON_INTERPRET=1 python benchmarks/fp8_attention.py --dry-run    # the script's logic on the CPU, tiny shapes

Per shape: random inputs (seeded), quantized per tensor to e4m3 (workloads/fp8.py, ``descale = amax / 448``), V
made K-major once by ``triton_attention.prepare`` (outside the timed call, as the workload does). Timed with
``triton.testing.do_bench`` (median, L2 flushed between runs): the bf16 Triton forward at its default config, then
the FP8 forward at its default config and at each explored config (``use_configs(fwd=...)``). Each FP8 output is
checked against float64 attention of the dequantized inputs (the workload's check, tolerance 5e-2) and compared
with the bf16 output of the unquantized inputs (what FP8 costs end to end; informative). A config that does not
compile or launch (shared memory, registers) is recorded with its error and skipped. Also timed once per shape:
the preparation of V (the K-major copy, not in the timed call) and the same FP8 call given a row-major V (the copy
inside the call), and the per-tensor quantization of one input. Registers, spills and shared memory of each FP8
config come from Triton's compiled kernel. FLOPs: 4 * b * h * visible pairs * d, as for bf16 (profctl.flops).

One JSON object goes to standard output (TFLOP/s per config, the fp8/bf16 ratios, the best config per shape);
progress goes to standard error. An explored config is skipped once the run passes --budget seconds (default
100), so the whole run stays under two minutes on an H200.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from profctl import devices, flops  # noqa: E402
from profctl.spec import AttentionSpec  # noqa: E402
from profctl.workloads import fp8  # noqa: E402
from profctl.workloads.attention import TOLERANCE, reference, rel_error  # noqa: E402
from profctl.workloads.kernels import triton_attention as ta  # noqa: E402

#: FP8 launch configs explored per head-dim class, most promising first (the default of
#: triton_attention._TABLE_FP8 is timed first in any case). "-pipe": the next block's Q K^T issued before this
#: block's softmax (KernelConfig.pipe); "-e1"/"-e2": every other / every exp of the unmasked blocks by a polynomial
#: on the FMA pipe (KernelConfig.emu: explain's sfu-bound fix). None spills in an offline sm_90 compile (triton 3.9;
#: registers in benchmarks/fp8_attention_notes.md); 128x128 with 4 warps spills and is left out.
EXPLORE: dict[int, list[str]] = {
    128: ["64x128w4s3-e1", "64x128w4s3-e2", "128x128w8s3-pipe-e1", "128x128w8s3", "128x128w8s3-pipe",
          "64x128w4s3-pipe", "128x128w8s2-pipe", "128x64w8s3", "64x128w4s3", "64x64w4s3", "128x128w8s4"],
    64: ["64x128w4s3-e1", "64x128w4s3-e2", "128x128w8s3", "128x64w8s3", "64x128w4s3", "64x64w4s3",
         "128x128w8s3-pipe"],
}
SHAPES = {"d128-full": (128, False), "d128-causal": (128, True), "d64-full": (64, False), "d64-causal": (64, True)}


def parse_config(text: str) -> ta.KernelConfig:
    """``128x64w8s3`` or ``m128n64w8s3`` and KernelConfig's suffixes (``-ptr``: pointer loads; ``-pipe``: the
    pipelined loop; ``-e1``/``-e2``: exps in part or all on the FMA pipe) -> KernelConfig (ta.parse_configs)."""
    t = text.strip()
    if not t.startswith("m"):
        m, rest = t.split("x", 1)
        t = f"m{m}n{rest}"
    return ta.parse_configs(f"fwd={t}")["fwd"]


def bench_ms(fn: Callable[[], Any], dry: bool) -> float:
    if dry:  # the interpreter: one wall-clock call, only to exercise the script
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=25, rep=100, return_mode="median"))


def resources() -> dict[str, Any]:
    """Registers, spills and shared memory of the last FP8 launch (Triton's compiled kernel)."""
    k = ta.LAST_COMPILED.get("fwd_fp8")
    if k is None:
        return {}
    meta = getattr(k, "metadata", None)
    return {"registers": getattr(k, "n_regs", None), "spills": getattr(k, "n_spills", None),
            "shared_bytes": getattr(meta, "shared", None)}


class Shape:
    """One case: inputs (bf16, and e4m3 with descales, V K-major), the float64 reference, the bf16 output."""

    def __init__(self, name: str, b: int, h: int, s: int, d: int, causal: bool, dev: str) -> None:
        self.name, self.causal, self.d = name, causal, d
        self.spec = AttentionSpec(backend="triton", batch=b, seqlen_q=s, seqlen_kv=s, heads=h, kv_heads=h,
                                  head_dim=d, dtype="fp8", causal=causal, device="cpu" if dev == "cpu" else "cuda")
        g = torch.Generator(device=dev).manual_seed(0)
        q, k, v = (torch.randn(b, h, s, d, device=dev, generator=g) for _ in range(3))
        self.bf16 = (q.to(torch.bfloat16), k.to(torch.bfloat16), v.to(torch.bfloat16))
        (q8, qd), (k8, kd), (v8, vd) = fp8.quantize(q), fp8.quantize(k), fp8.quantize(v)
        self.raw8 = (q8, k8, v8)
        self.fp8 = ta.prepare(q8, k8, v8)
        self.kw: dict[str, Any] = {"is_causal": causal, "q_descale": qd, "k_descale": kd, "v_descale": vd}
        self.ref = reference(self.spec, *(fp8.dequantize(x, dsc) for x, dsc in ((q8, qd), (k8, kd), (v8, vd))))
        self.flop = flops.forward_flops(self.spec)
        self.bf16_out: torch.Tensor | None = None  # set by run_bf16

    def tflops(self, ms: float) -> float:
        return self.flop / (ms * 1e-3) / 1e12 if ms and math.isfinite(ms) else float("nan")

    def call_fp8(self, args: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        q, k, v = args or self.fp8
        return ta.attention(q, k, v, **self.kw)


def run_bf16(sh: Shape, dry: bool) -> dict[str, Any]:
    fn = lambda: ta.attention(sh.bf16[0], sh.bf16[1], sh.bf16[2], is_causal=sh.causal)  # noqa: E731
    with torch.no_grad():
        o = fn()
        ref = reference(sh.spec.with_(dtype="bf16"), *sh.bf16)
        ms = bench_ms(fn, dry)
    sh.bf16_out = o
    return {"ms": ms, "tflops": sh.tflops(ms), "rel_err": rel_error(o, ref), "tolerance": TOLERANCE["bf16"]}


def run_fp8(sh: Shape, cfg: ta.KernelConfig | None, dry: bool) -> dict[str, Any]:
    """One FP8 config (None: the default): time, TFLOP/s, errors, resources; the error when it cannot run."""
    try:
        with torch.no_grad(), ta.use_configs(**({"fwd": cfg} if cfg else {})):
            o = sh.call_fp8()
            if not dry:
                torch.cuda.synchronize()
            res = resources()
            ms = bench_ms(sh.call_fp8, dry)
    except Exception as e:  # over the shared-memory or register budget, or a compile error
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"}
    err = rel_error(o, sh.ref)
    vs_bf16 = rel_error(o, sh.bf16_out.double()) if sh.bf16_out is not None else None
    return {"ms": ms, "tflops": sh.tflops(ms), "rel_err": err, "check": "pass" if err <= TOLERANCE["fp8"] else "fail",
            "rel_err_vs_bf16": vs_bf16, **res}


def run_costs(sh: Shape, dry: bool) -> dict[str, Any]:
    """What the timed call leaves out or pays for: V's K-major copy, a call given a row-major V, quantizing q."""
    q8, k8, v8 = sh.raw8
    with torch.no_grad():
        prep_ms = bench_ms(lambda: ta.prepare(q8, k8, v8), dry)
        rowmajor_ms = bench_ms(lambda: sh.call_fp8((sh.fp8[0], sh.fp8[1], v8)), dry)
        quant_ms = bench_ms(lambda: fp8.quantize(sh.bf16[0]), dry)
    return {"prepare_v_ms": prep_ms, "fp8_call_with_rowmajor_v_ms": rowmajor_ms,
            "fp8_call_with_rowmajor_v_tflops": sh.tflops(rowmajor_ms), "quantize_one_tensor_ms": quant_ms}


def run_shape(sh: Shape, cfgs: list[ta.KernelConfig], t_start: float, budget: float, dry: bool,
              k_plain: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"gflop": sh.flop / 1e9, "bf16": run_bf16(sh, dry)}
    default = ta._candidates("fwd", sh.d, fp8.E4M3, sh.causal, sh.spec.seqlen_q)[0]
    out["fp8_default_config"] = str(default)
    out["fp8"] = {}
    runs: list[tuple[ta.KernelConfig, str, bool | None]] = [
        (cfg, str(cfg), None) for cfg in [default, *[c for c in cfgs if c != default]]]
    if k_plain:  # each warp-specialized Gluon config also with K's keys in their plain order (gluon_fp8.PERMUTE_K)
        runs += [(c, f"{c} k-plain", False) for c, _, _ in runs if c.gluon and c.ws]
    for cfg, label, perm in runs:
        if cfg != default and time.perf_counter() - t_start > budget:
            out["fp8"][label] = {"error": f"skipped: past the --budget of {budget:.0f} s"}
            continue
        with ta.gluon_fp8.permute_k(perm):
            r = run_fp8(sh, cfg, dry)
        out["fp8"][label] = r
        print(f"  {sh.name} fp8 {label}: " + (f"{r['tflops']:.0f} TFLOP/s, rel err {r['rel_err']:.2e} {r['check']}, "
                                            f"{r.get('registers')} regs, {r.get('spills')} spills"
                                            if "error" not in r else r["error"]), file=sys.stderr, flush=True)
    ok = {c: r for c, r in out["fp8"].items() if "error" not in r and r["check"] == "pass"}
    bf = out["bf16"]["tflops"]
    if ok:
        best = max(ok, key=lambda c: ok[c]["tflops"])
        out["fp8_best_config"] = best
        out["ratio_fp8_best_over_bf16"] = ok[best]["tflops"] / bf
    d = out["fp8"].get(str(default), {})
    out["ratio_fp8_default_over_bf16"] = d["tflops"] / bf if "tflops" in d else None
    out["costs"] = run_costs(sh, dry)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default=",".join(SHAPES), help=f"comma list of {', '.join(SHAPES)}")
    p.add_argument("--configs", default=None, help="FP8 configs to explore instead of the built-in list, e.g. "
                                                   "128x128w8s3,64x64w4s3 (-ptr: pointer loads)")
    p.add_argument("--seqlen", type=int, default=4096)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--budget", type=float, default=100.0, help="seconds after which explored configs are skipped")
    p.add_argument("--out", default=None, help="also write <out>/fp8_attention.json")
    p.add_argument("--k-plain", action="store_true", help="also time each warp-specialized Gluon config with K's keys "
                                                          "in their plain order (gluon_fp8_attention.PERMUTE_K off)")
    p.add_argument("--dry-run", action="store_true", help="CPU under TRITON_INTERPRET=1: tiny shapes, no timing")
    a = p.parse_args(argv)
    dry = a.dry_run
    if dry and not ta.INTERPRET:
        p.error("--dry-run needs TRITON_INTERPRET=1 in the environment")
    if not dry and not torch.cuda.is_available():
        p.error("needs a CUDA GPU (or --dry-run under TRITON_INTERPRET=1)")
    dev = "cpu" if dry else "cuda"
    s, h = (64, 2) if dry else (a.seqlen, a.heads)
    t_start = time.perf_counter()
    name = "cpu" if dry else torch.cuda.get_device_name(0)
    result: dict[str, Any] = {
        "device": name, "torch": torch.__version__, "triton": getattr(ta.triton, "__version__", None),
        "python": platform.python_version(), "peak_tflops": {"fp8": devices.peak_tflops(name, "fp8"),
                                                             "bf16": devices.peak_tflops(name, "bf16")},
        "batch": 1, "heads": h, "seqlen": s, "tolerance_fp8": TOLERANCE["fp8"], "shapes": {}}
    for shape_name in [x.strip() for x in a.shapes.split(",") if x.strip()]:
        if shape_name not in SHAPES:
            p.error(f"unknown shape {shape_name!r}; choose from {', '.join(SHAPES)}")
        d, causal = SHAPES[shape_name]
        dry_list = ["32x32w4s2", "32x32w4s2-ptr", "32x16w4s2-pipe"]
        cfgs = [parse_config(c) for c in (a.configs.split(",") if a.configs else dry_list if dry else EXPLORE[d])]
        print(f"{shape_name}: b1 h{h} s{s}", file=sys.stderr, flush=True)
        try:
            sh = Shape(shape_name, 1, h, s, d, causal, dev)
            result["shapes"][shape_name] = run_shape(sh, cfgs, t_start, a.budget, dry, a.k_plain)
        except Exception as e:
            traceback.print_exc()
            result["shapes"][shape_name] = {"error": f"{type(e).__name__}: {e}"}
        finally:
            if not dry:
                torch.cuda.empty_cache()
    peaks = result["peak_tflops"]
    for r in result["shapes"].values():  # % of the dtype's dense datasheet peak (profctl.devices)
        for row, peak in [(r.get("bf16", {}), peaks["bf16"]), *((x, peaks["fp8"]) for x in r.get("fp8", {}).values())]:
            if peak and "tflops" in row:
                row["pct_of_peak"] = 100.0 * row["tflops"] / peak
    result["table_fp8_first"] = {n: r.get("fp8_best_config") for n, r in result["shapes"].items()}
    result["wall_s"] = time.perf_counter() - t_start
    text = json.dumps(result, indent=1, default=str)
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "fp8_attention.json").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
