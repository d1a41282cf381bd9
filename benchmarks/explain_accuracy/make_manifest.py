"""Builds tests/data/pairs/ from what record.sh brought back (the unpacked pairs.tar.xz): the xz reports and
details pages, the sources the reports embed, the timings, and manifest.json with the ground truth of every pair.

    python benchmarks/explain_accuracy/make_manifest.py UNPACKED_DIR [tests/data/pairs]

Kernel names come from the reports themselves (the launch inside NVTX range measure/<pair>.<a|b>), planted lines
from the `PLANT: <cause>` markers in the sources, times from the timing run (medians, not ncu's durations).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

from profctl.readers.ncu_profiles import read_profiles

#: faults that live in the launch configuration: no source line carries them
NO_LINE = {"occupancy-registers", "occupancy-shared-memory", "occupancy-block-size", "tail-effect", "too-few-blocks"}
MIN_RATIO = 1.3  # B must be at least this much faster for the pair to count in the accuracy set

WHAT = {
    "gemv_rows": "y = A x with one thread per row, so a warp's loads are a row (2 KB) apart (32 sectors per "
                 "request); fix: one warp per row, lanes reading neighbouring floats, then a shuffle reduction.",
    "transpose_tile": "a 32x32 shared-memory transpose tile without padding: the column read is a 32-way bank "
                      "conflict; fix: pad the rows to 33 floats.",
    "codebook_lut": "each thread copies a 16-entry codebook into a per-thread array indexed by the data (local "
                    "memory, up to 16 lines per load); fix: one copy per block in shared memory.",
    "projections_reuse": "8 passes over each block's 256 KB chunk, so the grid reads 256 MB (5x the L2) between "
                         "two reads of an element and every pass comes from DRAM; fix: loop tile by tile (8 KB), "
                         "the 8 passes over a tile reuse it from cache.",
    "chase_live_registers": "a latency-bound pointer chase that keeps 96 values loaded before the loop live across "
                            "it (128 registers: 2 blocks of 256 per SM); fix: load them after the loop "
                            "(32 registers, 8 blocks per SM).",
    "chase_unused_smem": "the latency-bound chase launched with 100 KB of dynamic shared memory it never uses "
                         "(2 blocks per SM); fix: launch without it (8 blocks per SM).",
    "chase_tiny_blocks": "a latency-bound chase through a table in DRAM in blocks of 32 threads, which hit the "
                         "32-blocks-per-SM limit (32 warps per SM); fix: blocks of 256 threads (64 warps).",
    "tail_one_extra_block": "a compute-bound grid of one full wave plus one block (from the SM count and the "
                            "blocks per SM at run time): the last block runs alone in a second wave; fix: the same "
                            "elements spread over exactly one wave.",
    "grid_16_blocks": "a grid-stride loop launched on 16 blocks, so 16 of the SMs work; fix: 8 blocks per SM.",
    "spill_accumulators": "64 accumulators per thread under __launch_bounds__(256, 8) (32 registers): they spill, "
                          "and every loop step loads and stores them from local memory; fix: "
                          "__launch_bounds__(256, 2) (75 registers, no spill).",
    "odd_even_branches": "odd and even lanes of every warp take different 512-step loops, so each warp runs both; "
                         "fix: remap elements so whole warps take one branch.",
    "sum_one_address": "one float atomicAdd per element, all on one address; fix: per-thread sums, a warp "
                       "shuffle and a shared-memory reduction, one atomic per block.",
    "block_sum_barriers": "a block sum as a shared-memory tree with a __syncthreads after every level (10 barriers "
                          "per step); fix: warp shuffles and one exchange of 8 partial sums (2 barriers).",
    "exp_chains": "four dependent chains of exponentials per thread (a softmax's exp2 without the rest), every "
                  "exp on the SFU (MUFU.EX2); fix (FlashAttention-4's trick): two of the four chains by a cubic "
                  "polynomial on the FMA pipe.",
    "transpose_gather": "a Triton transpose written as a flat gather: neighbouring outputs read elements a row "
                        "apart; fix: a 2-D tile read along rows and written along columns.",
    "softmax_passes": "a row softmax in three passes (max, sum, output), each re-reading the 128 KB row from "
                      "DRAM; fix: one pass with the row held in registers.",
    "attn_num_stages": "an attention forward loop launched with num_stages=1: each K/V tile load waits in the "
                       "loop; fix: num_stages=3 (the next tiles load during this one).",
    "attn_qk_fp32": "attention whose Q.K^T is an fp32 input_precision='ieee' dot (FMA instructions, tensor "
                    "cores idle); fix: the bf16 dot on the tensor cores (the same products, fp32 accumulation).",
    "attn_exp_sfu": "attention with head dim 16, whose softmax exp2 binds the SFU; fix (FlashAttention-4's "
                    "trick): a quarter of the exps by a cubic polynomial on the FMA pipe.",
    "attn_causal_masked": "causal attention that runs Q.K^T, softmax and P.V on every key block, also the blocks "
                          "above the diagonal that the mask zeroes; fix: stop the loop at the diagonal block.",
    "attn_mma_sync": "an attention forward compiled with Triton's DISABLE_MMA_V3=1: both dots on Ampere's mma.sync "
                     "(HMMA) on Hopper, as FlashAttention-2 does; fix: the same kernel on wgmma.",
    "gemm_mma_sync": "a bf16 GEMM compiled with Triton's DISABLE_MMA_V3=1, Ampere's mma.sync (HMMA) on Hopper, the "
                     "fallback Triton takes when a dot cannot use wgmma; fix: the same kernel on wgmma.",
    "sdpa_fa2_cudnn": "PyTorch SDPA's FlashAttention-2 forward issues Ampere's mma.sync (HMMA.16816) where "
                      "cuDNN's SDPA forward issues Hopper's wgmma fed by TMA (b1 h32 s4096 d128 bf16, non-causal).",
}
ATTENTION = {"softmax_passes", "attn_num_stages", "attn_qk_fp32", "attn_exp_sfu", "attn_causal_masked",
             "attn_mma_sync", "sdpa_fa2_cudnn"}
#: pairs whose measured profile does not fit their catalog id as the catalog defines it: kept, out of the set
CAVEATS = {
    "attn_causal_masked": "A does twice the matrix work of B, but it is not at a compute roof: its tensor pipe is "
                          "28 % active in the report (B 27 %), so 'compute-bound' (at the roof, little left) is not "
                          "what a correct diagnosis of A says; kept out of the accuracy set",
}
REPORTS = {"cuda_mem", "cuda_occ", "cuda_exec", "triton_mem", "triton_attn", "triton_sfu", "triton_mma", "sdpa"}


def planted_line(source: Path, kernel: str, cause: str) -> int | None:
    """The line of `PLANT: <cause>` inside the definition of `kernel` (CUDA or Python), 1-based."""
    lines = source.read_text().splitlines()
    head = re.compile(rf"(__global__.*\b{kernel}\s*\(|^def {kernel}\s*\()")
    start = next((i for i, t in enumerate(lines) if head.search(t)), None)
    if start is None:
        raise SystemExit(f"{kernel} not found in {source}")
    for i in range(start, len(lines)):
        if i > start and (lines[i].startswith("__global__") or lines[i].startswith("def ")
                          or lines[i].startswith("@triton.jit")):
            break
        if f"PLANT: {cause}" in lines[i]:
            return i + 1
    return None


def main(argv: list[str]) -> int:
    src = Path(argv[0])
    dst = Path(argv[1] if len(argv) > 1 else "tests/data/pairs")
    dst.mkdir(parents=True, exist_ok=True)
    times: dict[str, dict] = {}
    for name, lang in (("cuda_times.json", "cuda"), ("triton_times.json", "triton"), ("sdpa_times.json", "library")):
        data = json.loads((src / name).read_text())
        for row in data["pairs"]:
            times[row["id"]] = {**row, "lang": lang}
    merged = {n: json.loads((src / n).read_text()) for n in ("cuda_times.json", "triton_times.json",
                                                              "sdpa_times.json")}
    (dst / "timings.json").write_text(json.dumps(merged, indent=1) + "\n")
    for f in ("pairs.cu", "pairs_triton.py", "sdpa_pair.py", "record.sh", "versions.txt", "build_resources.txt"):
        shutil.copy(src / f, dst / f)
    if (src / "record.log").exists():
        shutil.copy(src / "record.log", dst / "record_log.txt")
    pairs = []
    for rep in sorted(src.glob("pairs_*.ncu-rep.xz")):
        group = rep.name[len("pairs_"):-len(".ncu-rep.xz")]
        if group not in REPORTS:
            continue
        shutil.copy(rep, dst / rep.name)
        details = src / f"pairs_{group}_details.csv.xz"
        if details.exists():
            shutil.copy(details, dst / details.name)
        by_range: dict[str, list[str]] = {}
        for prof in read_profiles(rep):
            parts = "/".join(prof.nvtx).split("/")
            if len(parts) >= 2 and parts[0] == "measure":
                by_range.setdefault(parts[1], []).append(prof.base_name)
        ids = sorted({r.rsplit(".", 1)[0] for r in by_range})
        for pid in ids:
            t = times.get(pid)
            if t is None:
                print(f"no timing for {pid}: left out")
                continue
            a = by_range[f"{pid}.a"]
            b = by_range[f"{pid}.b"]
            ka = "flash_fwd_kernel" if pid == "sdpa_fa2_cudnn" else t["a"]
            kb = next((k for k in b if "cudnn" in k or "fprop" in k), b[-1]) if pid == "sdpa_fa2_cudnn" else t["b"]
            if ka not in a or kb not in b:
                raise SystemExit(f"{pid}: {ka} / {kb} not in the report's ranges {a} / {b}")
            file = {"cuda": "pairs.cu", "triton": "pairs_triton.py", "library": None}[t["lang"]]
            line = None if (file is None or t["cause"] in NO_LINE) else planted_line(src / file, ka, t["cause"])
            if file is not None and t["cause"] not in NO_LINE and line is None:
                raise SystemExit(f"{pid}: no 'PLANT: {t['cause']}' in {ka}")
            ratio = t["time_a_us"] / t["time_b_us"]
            pairs.append({
                "id": pid, "cause": t["cause"], "report": rep.name, "a": ka, "b": kb, "file": file, "line": line,
                "attention": pid in ATTENTION, "what": WHAT[pid], "time_a_us": t["time_a_us"],
                "time_b_us": t["time_b_us"], "lang": t["lang"], "check": t.get("check"),
                "costs_nothing": ratio < MIN_RATIO,
                "in_accuracy_set": ratio >= MIN_RATIO and pid not in CAVEATS,
                **({"caveat": CAVEATS[pid]} if pid in CAVEATS else {}),
            })
    order = list(WHAT)
    pairs.sort(key=lambda p: order.index(p["id"]))
    manifest = {"min_ratio": MIN_RATIO,
                "note": "costs_nothing: B is less than min_ratio times faster than A on the recording GPU; such "
                        "pairs, and those with a caveat, stay out of the accuracy set (in_accuracy_set false)",
                "pairs": pairs}
    (dst / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    for p in pairs:
        flag = "  COSTS NOTHING" if p["costs_nothing"] else ""
        print(f"{p['id']:22s} {p['cause']:24s} {p['time_a_us']:9.1f} {p['time_b_us']:9.1f} "
              f"{p['time_a_us'] / p['time_b_us']:6.2f} line {p['line']}{flag}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
