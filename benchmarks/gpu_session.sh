#!/usr/bin/env bash
# One call on the GPU machine (carry [".gpu"]): the GPU tests, profctl's overhead over ncu and nsys, and the
# users'-code examples recorded (profctl nsys|ncu|torch -- python examples/my_program.py). Output under $OUT.
#   bash benchmarks/gpu_session.sh
set -u
source .gpu/on-gpu.sh >/dev/null 2>&1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo "pip install -e . failed"
export PROFCTL_NSYS=$NSYS PROFCTL_NCU=$NCU
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUT/gpu.txt"
cat "$OUT/gpu.txt"
P="python3 -m profctl"
echo "== examples: your own program under each profiler"
{
  $P nsys --reports runs -f markdown --limit 8 -- python3 examples/my_program.py --steps 3 --seqlen 2048
  $P nsys --reports runs -f markdown --range myapp@attention -- python3 examples/my_program.py --steps 3 --seqlen 2048
  $P ncu --reports runs --clock-control none --range myapp@attention -f markdown -- python3 examples/my_program.py --steps 2 --seqlen 2048
  $P ncu --reports runs --clock-control none --kernel _scale_add --launch-count 1 -f markdown -- python3 examples/my_program.py --steps 2
  $P torch --reports runs -f markdown --limit 10 --range mlp -- python3 examples/my_program.py --steps 3 --seqlen 2048
} > "$OUT/programs.txt" 2>&1
grep -E "error|launch\(es\) profiled|Kernels" "$OUT/programs.txt" | head -20
echo "== GPU tests"
timeout 420 python3 -m pytest -m gpu tests/gpu tests/unit/test_triton_attention.py -q -rs -p no:cacheprovider \
  > "$OUT/gpu_tests.txt" 2>&1
tail -25 "$OUT/gpu_tests.txt"
echo "== overhead"
timeout 150 python3 benchmarks/tool_overhead.py --out "$OUT/overhead.json" --rounds 2 2>&1 | tail -3
tar czf "$OUT/runs.tgz" runs 2>/dev/null
echo "session done"
