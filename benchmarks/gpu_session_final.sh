#!/usr/bin/env bash
# The second call of the final GPU session (carry [".gpu"]), after benchmarks/gpu_session.sh: the GPU test that
# gpu_session.sh's own time limit interrupted, decode with and without part timing (twice each, interleaved),
# the users'-code examples, and profctl's overhead over ncu and nsys with more rounds. At most 8 files under $OUT.
#   STEPS="decode overhead" bash benchmarks/gpu_session_final.sh     (default: tests decode examples overhead;
#   also: models, the model GPU tests)
set -u
T0=$(date +%s)
source .gpu/on-gpu.sh >/dev/null 2>&1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo "pip install -e . failed"
export PROFCTL_NSYS=$NSYS PROFCTL_NCU=$NCU
P="python3 -m profctl"
at() { echo "== $1 ($(( $(date +%s) - T0 ))s in)"; }
want() { case " ${STEPS:-tests decode examples overhead} " in *" $1 "*) return 0;; esac; return 1; }
if want tests; then
at "GPU tests"
timeout -s INT 120 python3 -m pytest -m gpu -q -rs -p no:cacheprovider --durations=5 tests/gpu/test_torch_gpu.py \
  > "$OUT/gpu_tests_final.txt" 2>&1
tail -4 "$OUT/gpu_tests_final.txt"
fi
if want models; then
at "model GPU tests"
timeout -s INT 150 python3 -m pytest -m gpu -q -rs -p no:cacheprovider --durations=5 tests/gpu/test_models_gpu.py \
  > "$OUT/gpu_tests_models.txt" 2>&1
tail -4 "$OUT/gpu_tests_models.txt"
fi
if want decode; then
at "decode: part timing on and off"
D="$P bench --reports runs -q --baseline eager --model llama-7b --layers 4 --mode decode --batch 1 -s 512,4096,32768
  -b sdpa-cudnn,sdpa-flash,triton,eager --iters 10 --warmup 3"
{
  for round in 1 2; do
    for pt in --part-timing --no-part-timing; do
      echo "### round $round $pt"
      timeout -s INT 60 $D $pt -f markdown --json "$OUT/decode_r${round}${pt#--}.json" 2>&1 | grep '^|'
    done
  done
} > "$OUT/decode_part_timing.md" 2>&1
cat "$OUT/decode_part_timing.md"
fi
if want examples; then
at "examples"
source benchmarks/gpu_programs.sh
timeout -s INT 120 bash -c "$(declare -f programs); P='$P'; programs" > "$OUT/programs.txt" 2>&1
grep -E "error|launch\(es\) profiled" "$OUT/programs.txt" | head -12
fi
if want overhead; then
at "overhead"
timeout -s INT 340 python3 benchmarks/tool_overhead.py --out "$OUT/overhead.json" --rounds 5 > "$OUT/overhead.log" 2>&1
tail -16 "$OUT/overhead.log"
fi
at "done"
