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
{
  $P nsys --reports runs -f markdown --limit 8 -- python3 examples/my_program.py --steps 3 --seqlen 2048
  $P nsys --reports runs -f markdown --range myapp@attention -- python3 examples/my_program.py --steps 3 --seqlen 2048
  $P ncu --reports runs --clock-control none --range myapp@attention -f markdown -- \
    python3 examples/my_program.py --steps 2 --seqlen 2048
  $P ncu --reports runs --clock-control none --kernel _scale_add --launch-count 1 -f markdown -- \
    python3 examples/my_program.py --steps 2
  $P torch --reports runs -f markdown --limit 10 --range mlp -- python3 examples/my_program.py --steps 3 --seqlen 2048
  $P ncu --reports runs --clock-control none --model llama-7b --layers 2 --mode train,decode -s 2048 -b sdpa-flash \
    -f markdown
} > "$OUT/programs.txt" 2>&1
grep -E "error|launch\(es\) profiled" "$OUT/programs.txt" | head -12
echo "== overhead ($(( $(date +%s) - T0 ))s in)"
timeout -s INT 200 python3 benchmarks/tool_overhead.py --out "$OUT/overhead.json" --rounds 2 2>&1 | tail -4
echo "done after $(( $(date +%s) - T0 ))s"
