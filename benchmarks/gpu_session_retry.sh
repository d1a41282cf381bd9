#!/usr/bin/env bash
# A second call (carry [".gpu"]): the GPU tests that failed in gpu_session.sh after their fixes, the users'-code
# examples (outputs in one file), profctl's overhead over ncu and nsys. At most 8 files come back under $OUT.
set -u
T0=$(date +%s)
source .gpu/on-gpu.sh >/dev/null 2>&1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo "pip install -e . failed"
export PROFCTL_NSYS=$NSYS PROFCTL_NCU=$NCU
P="python3 -m profctl"
echo "== GPU tests ($(( $(date +%s) - T0 ))s in)"
timeout -s INT 240 python3 -m pytest -m gpu -q -rs -p no:cacheprovider --durations=8 tests/gpu/test_models_gpu.py \
  tests/gpu/test_bench_gpu.py::test_bench_gpu_rows \
  tests/gpu/test_program_gpu.py::test_program_failure_keeps_the_report > "$OUT/gpu_tests_retry.txt" 2>&1
tail -12 "$OUT/gpu_tests_retry.txt"
echo "== examples ($(( $(date +%s) - T0 ))s in)"
source benchmarks/gpu_programs.sh
{
  programs
  $P ncu --reports runs --clock-control none --model llama-7b --layers 2 --mode train,decode -s 2048 -b sdpa-flash \
    -f markdown
} > "$OUT/programs.txt" 2>&1
grep -E "error|launch\(es\) profiled" "$OUT/programs.txt" | head -12
echo "== overhead ($(( $(date +%s) - T0 ))s in)"
timeout -s INT 200 python3 benchmarks/tool_overhead.py --out "$OUT/overhead.json" --rounds 2 2>&1 | tail -4
echo "done after $(( $(date +%s) - T0 ))s"
