#!/usr/bin/env bash
# Issue 23 on the GPU machine. Call 1 (carry [".gpu"]): STEPS="install fp8 tests explain" -- the FP8 forward
# against bf16 config by config (benchmarks/fp8_attention.py), the FP8 GPU tests, and profctl explain on the FP8
# kernel against the bf16 one. Call 2, right after on the warm machine (carry [".gpu-fa4"]): STEPS="seed004"
# -- the rows of seed 004's per-GPU forward table (batch 8, 32 heads, head dim 64, seqlen 512..8192): eager,
# SDPA flash (FA2), cuDNN, FA4, Triton bf16 and Triton FP8 (at the best FP8 config call 1 found).
DEFAULT_STEPS="install fp8 tests explain"
source benchmarks/_gpu_env.sh
if want install; then
  at install
  install
fi
if want fp8; then
  at "FP8 against bf16, config by config"
  timeout -s INT 170 python3 benchmarks/fp8_attention.py --out "$OUT" > /tmp/fp8.json 2> "$OUT/fp8_progress.txt"
  tail -25 "$OUT/fp8_progress.txt"
  python3 - <<'PY'
import json
d = json.load(open("/tmp/fp8.json"))
print("table_fp8_first", d.get("table_fp8_first"))
best = (d.get("table_fp8_first") or {}).get("d64-full")  # the seed table is head dim 64
open("/tmp/fp8_best.txt", "w").write(best or "")
for n, r in d["shapes"].items():
    print(n, {k: r.get(k) for k in ("bf16_tflops", "fp8_default_tflops", "fp8_best_tflops", "fp8_best_config", "ratio_best")})
PY
fi
if want tests; then
  at "FP8 GPU tests"
  timeout -s INT 200 python3 -m pytest -m gpu -q -rs -p no:cacheprovider tests/unit/test_triton_fp8.py \
    tests/gpu/test_bench_gpu.py > "$OUT/gpu_tests_fp8.txt" 2>&1
  tail -3 "$OUT/gpu_tests_fp8.txt"
fi
if want explain; then
  at "explain: the FP8 kernel against the bf16 one"
  R=/tmp/fp8runs
  timeout -s INT 150 $P ncu --recipe explain -b triton --dtype bf16,fp8 -s 4096 --heads 32 -d 128 --clock-control none \
    --reports $R -f json > /dev/null 2> /tmp/fp8ncu.err || tail -3 /tmp/fp8ncu.err
  $P explain latest --reports $R --kernel _fwd_fp8_kernel --vs '^_fwd_kernel' -f markdown > "$OUT/explain_fp8.md" 2>&1
  grep -E "^\*\*A takes|^\| (tensor pipe|stall: |instructions|duration) " "$OUT/explain_fp8.md" | head -14
fi
if want seed004; then  # SEED_BACKENDS (bf16) and SEED_FP8=1|0 pick the rows; they add up in /tmp/seed004.json
  at "seed 004 forward table rows"
  S="--batch 8 --heads 32 --head-dim 64 -s 512,1024,2048,4096,8192 --pass fwd --iters 20 --warmup 5 --baseline none"
  timeout -s INT 400 $P bench -b ${SEED_BACKENDS:-eager,sdpa-flash,sdpa-cudnn,triton} --dtype bf16 $S -f json \
    -o /tmp/seed_bf16.json > /tmp/seed_bf16.log 2>&1; tail -2 /tmp/seed_bf16.log
  if [ "${SEED_FP8:-1}" = 1 ]; then
    timeout -s INT 120 $P bench -b triton --dtype fp8 $S -f json -o /tmp/seed_fp8.json > /tmp/seed_fp8.log 2>&1
    tail -2 /tmp/seed_fp8.log
  fi
  python3 - "$OUT/seed004_h200.json" <<'PY'
import json, os, sys
rows = json.load(open("/tmp/seed004.json")) if os.path.exists("/tmp/seed004.json") else []
for f in ("/tmp/seed_bf16.json", "/tmp/seed_fp8.json"):
    if os.path.exists(f):
        rows += json.load(open(f))
        os.remove(f)
json.dump(rows, open("/tmp/seed004.json", "w"))
json.dump(rows, open(sys.argv[1], "w"), indent=1)
for r in rows:
    print(r["backend"], r["dtype"], r["seqlen_q"], r["status"], r.get("median_ms") and round(r["median_ms"], 3),
          r.get("tflops") and round(r["tflops"]), (r.get("reason") or "")[:80])
PY
fi
at done
