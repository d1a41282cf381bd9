#!/usr/bin/env bash
# One call on the GPU machine (carry [".gpu"]): the GPU tests, the users'-code examples (profctl nsys|ncu|torch
# -- python examples/my_program.py), model sweeps (decode against context, a 24 GB cap) and profctl's overhead
# over ncu and nsys. Every step has its own time limit inside one overall deadline (BUDGET_S, default 560 s), so
# what finished comes back under $OUT even when a later step runs out of time.
#   bash benchmarks/gpu_session.sh
set -u
T0=$(date +%s)
BUDGET_S=${BUDGET_S:-560}
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
step() {  # step SECONDS NAME CMD...: run CMD with at most SECONDS (and never past the deadline)
  local want=$1 name=$2; shift 2
  local l; l=$(left); local t=$(( want < l - 10 ? want : l - 10 ))
  if [ "$t" -le 5 ]; then echo "== $name: skipped (no time left)"; return; fi
  echo "== $name (limit ${t}s, $(( $(date +%s) - T0 ))s in)"
  timeout "$t" "$@"; echo "   -> rc=$? after $(( $(date +%s) - T0 ))s"
}
source .gpu/on-gpu.sh >/dev/null 2>&1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo "pip install -e . failed"
export PROFCTL_NSYS=$NSYS PROFCTL_NCU=$NCU
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUT/gpu.txt"
python3 -c "import distributed; print('distributed', distributed.__version__)" >> "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
P="python3 -m profctl"

step 330 "GPU tests" bash -c "python3 -m pytest -m gpu tests/gpu tests/unit/test_triton_attention.py -q -rs \
  -p no:cacheprovider --durations=15 > '$OUT/gpu_tests.txt' 2>&1"
tail -30 "$OUT/gpu_tests.txt"

source benchmarks/gpu_programs.sh
export -f programs; export P
step 110 "examples: your own program under each profiler" bash -c "programs > '$OUT/programs.txt' 2>&1"
grep -E "error|launch\(es\) profiled|^## " "$OUT/programs.txt" | head -20

M="$P bench --reports runs -q --baseline eager"
step 80 "model: decode against context" bash -c "$M --model llama-7b --layers 4 --mode decode --batch 1 \
  -s 512,4096,32768 -b sdpa-cudnn,sdpa-flash,triton,eager --iters 10 --warmup 3 -f json -o '$OUT/decode.json' \
  > '$OUT/decode.log' 2>&1"
step 60 "model: 24 GB cap" bash -c "$M --model llama-7b --layers 4 --mode train --batch 1 -s 4096,16384 \
  -b sdpa-flash,eager --memory-limit 24 --iters 3 --warmup 1 -f json -o '$OUT/mem24.json' > '$OUT/mem24.log' 2>&1"
for f in decode mem24; do [ -s "$OUT/$f.json" ] && $P report "$OUT/$f.json" -f markdown > "$OUT/$f.md" 2>&1; done
cat "$OUT/decode.md" "$OUT/mem24.md" 2>/dev/null | head -40

step 100 "overhead" python3 benchmarks/tool_overhead.py --out "$OUT/overhead.json" --rounds 2
echo "session done after $(( $(date +%s) - T0 ))s"
