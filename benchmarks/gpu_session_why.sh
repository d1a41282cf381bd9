#!/usr/bin/env bash
# Issue 26 on the GPU machine (carry [".gpu"]): install check, the "why and where" GPU tests, the common path
# (profctl ncu --recipe explain on triton and cuDNN, then profctl explain), the Triton forward's launch configs,
# and profctl ncu --recipe stalls|explain against the same ncu argv alone. Everything under $OUT (at most 8 files):
#   STEPS="install tests explain configs overhead" bash benchmarks/gpu_session_why.sh
DEFAULT_STEPS="install tests explain configs overhead"
source benchmarks/_gpu_env.sh
LOG=$OUT/why_log.txt
if want install; then
  at install
  install
  python3 -c "import profctl.workloads.attention, profctl.builtin_recipes; print('profctl import ok')" 2>&1 | tail -1
fi
if want tests; then
  at "GPU tests (why and where)"
  timeout -s INT 240 python3 -m pytest -m gpu -q -rs -p no:cacheprovider --durations=5 tests/gpu/test_explain_gpu.py \
    > "$OUT/gpu_tests_why.txt" 2>&1
  tail -4 "$OUT/gpu_tests_why.txt"
fi
if want explain; then
  at "common path: ncu --recipe explain, then explain"
  R=/tmp/why_runs
  ( time timeout -s INT 200 $P ncu --recipe explain -b triton,sdpa-cudnn -s 4096 --heads 32 --clock-control none \
      --reports $R -f markdown > /tmp/why_ncu.md 2>&1 ) 2>&1 | tail -3
  tail -3 /tmp/why_ncu.md
  $P explain latest --reports $R --kernel _fwd_kernel --vs cudnn -f markdown -o "$OUT/explain_before.md" 2>&1 | tail -2
  head -40 "$OUT/explain_before.md"
  cp "$(ls -d $R/*/ | tail -1)profile.ncu-rep" /tmp/before.ncu-rep
fi
if want configs; then
  at "Triton forward launch configs"
  timeout -s INT 240 python3 benchmarks/triton_fwd_configs.py > "$OUT/triton_configs.json" 2>&1
  python3 - "$OUT/triton_configs.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k, v in d["configs"].items():
    print(k, v.get("tflops") and round(v["tflops"]), v.get("max_abs_err"), v.get("error", "")[:80])
PY
fi
if want overhead; then
  at "profctl ncu --recipe stalls|explain against ncu alone"
  timeout -s INT 400 python3 benchmarks/source_overhead.py --out "$OUT/source_overhead.json" --rounds ${ROUNDS:-3} \
    --cases ${CASES:-program,builtin}
fi
at done
