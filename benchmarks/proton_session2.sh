#!/usr/bin/env bash
# Issue 30, second GPU call, from a copy of the worktree carried as .gpu-proton:
#   source .gpu/on-gpu.sh >/dev/null; cd .gpu-proton; BUDGET=390 bash benchmarks/proton_session2.sh
# profctl proton end to end on profctl's Triton forward (b1 h32 s4096 d128 bf16, non-causal then causal, the
# cost of looking timed), the one change the timeline pointed to (conditional rescaling, KernelConfig lazy)
# measured with profctl bench (A/B in one process, and plain rows with the correctness check), its timeline
# against the default one (profctl explain), the groups_even planted trace, and the Proton GPU tests.
set -u
T0=$(date +%s)
export PYTHONUNBUFFERED=1
lim() { local left=$(( ${BUDGET:-390} - ($(date +%s) - T0) )); [ $left -lt $1 ] && echo $(( left > 5 ? left : 5 )) || echo $1; }
at() { echo "== $1 ($(( $(date +%s) - T0 ))s in)"; }
O=/tmp/o2; R=/tmp/r; mkdir -p $O $R
P="python3 -m profctl"
SHAPE="-b triton -s 4096 --heads 32 -d 128"
finish() {
  find $R \( -name '*.timeline.json' -o -name 'manifest.json' -o -name 'workload.jsonl' -o -name '*.drops.json' \
    -o -name '*.log' \) -exec cp --parents {} $O/ \; 2>/dev/null
  tar -cJf "$OUT/session2.tar.xz" -C /tmp o2; ls -la "$OUT"
}
trap finish EXIT
at install
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pipe.log 2>&1 || tail -5 /tmp/pipe.log
for causal in false true; do
  at "profctl proton, default config, causal=$causal"
  timeout -s INT $(lim 150) $P proton $SHAPE --causal $causal --overhead 5 --reports $R/default_$causal -f json \
    -o $O/default_$causal.json 2> $O/default_$causal.err; echo "exit $?"; tail -4 $O/default_$causal.err
done
at "bench A/B: the default against conditional rescaling (lazy)"
timeout -s INT $(lim 80) $P bench $SHAPE --causal false --rounds 10 --iters 20 -f json -o $O/ab_false.json \
  --ab-env 'PROFCTL_TRITON_CONFIG=fwd=m128n128w8s3|PROFCTL_TRITON_CONFIG=fwd=m128n128w8s3-lazy' > $O/ab_false.txt 2>&1
echo "exit $?"; tail -3 $O/ab_false.txt
timeout -s INT $(lim 80) $P bench $SHAPE --causal true --rounds 10 --iters 20 -f json -o $O/ab_true.json \
  --ab-env 'PROFCTL_TRITON_CONFIG=fwd=m64n64w4s3|PROFCTL_TRITON_CONFIG=fwd=m64n64w4s3-lazy' > $O/ab_true.txt 2>&1
echo "exit $?"; tail -3 $O/ab_true.txt
at "profctl proton with the change (lazy), non-causal"
PROFCTL_TRITON_CONFIG=fwd=m128n128w8s3-lazy timeout -s INT $(lim 90) $P proton $SHAPE --causal false --overhead 0 \
  --reports $R/lazy_false -f json -o $O/lazy_false.json 2> $O/lazy_false.err; echo "exit $?"; tail -3 $O/lazy_false.err
at "explain: default against lazy"
A=$(ls $R/default_false/*/case-0.chrome_trace | head -1); B=$(ls $R/lazy_false/*/case-0.chrome_trace | head -1)
$P explain "$A" "$B" --kernel _fwd_kernel -f markdown > $O/explain_lazy.md 2>&1; head -30 $O/explain_lazy.md
$P report "$(dirname $A)" -f html -o $O/default_false.html 2> /dev/null
$P report "$(dirname $A)" -f markdown > $O/default_false.md 2> /dev/null; head -40 $O/default_false.md
at "bench rows with the change (correctness checked)"
PROFCTL_TRITON_CONFIG=fwd=m128n128w8s3-lazy timeout -s INT $(lim 60) $P bench $SHAPE --causal false -f json \
  -o $O/bench_lazy_false.json > /dev/null 2> $O/bench_lazy_false.err; echo "exit $?"; tail -2 $O/bench_lazy_false.err
PROFCTL_TRITON_CONFIG=fwd=m64n64w4s3-lazy timeout -s INT $(lim 60) $P bench $SHAPE --causal true -f json \
  -o $O/bench_lazy_true.json > /dev/null 2> $O/bench_lazy_true.err; echo "exit $?"; tail -2 $O/bench_lazy_true.err
at "the default trace through profctl, its first 16 CTAs"
timeout -s INT $(lim 40) python3 - "$A" $O/profctl_false_16cta.chrome_trace.gz <<'PY'
import gzip, json, sys
d = json.load(open(sys.argv[1]))
d["traceEvents"] = [e for e in d["traceEvents"] if int(str(e["pid"]).rsplit("CTA", 1)[1]) < 16]
with gzip.open(sys.argv[2], "wt") as f:
    json.dump(d, f, separators=(",", ":"))
print("kept", len(d["traceEvents"]))
PY
at "planted: groups_even"
timeout -s INT $(lim 40) python3 tests/data/proton/record_planted.py --out $O/planted --variant groups_even \
  > $O/planted_even.log 2>&1; echo "exit $?"
at "GPU tests"
timeout -s INT $(lim 150) python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_proton_gpu.py > $O/gpu_tests.txt 2>&1
tail -5 $O/gpu_tests.txt
at done
