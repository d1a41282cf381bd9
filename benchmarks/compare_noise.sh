#!/usr/bin/env bash
# Run-to-run noise of `profctl bench` and what `profctl compare` makes of it, on the GPU machine:
# three runs of sdpa-flash and one of sdpa-math under the same label over 6 cases (bf16, 32 heads, d 128,
# seqlen 1024/2048/4096, causal false/true, forward, 100 iterations), then the comparisons.
# Usage (GPU machine, project root): bash benchmarks/compare_noise.sh OUTDIR ; results: benchmarks/RESULTS.md
set -u
out=${1:-/tmp/compare-noise}
mkdir -p "$out"
export PROFCTL_REPORTS=/tmp/compare-noise-reports
rm -rf "$PROFCTL_REPORTS"
S=(--device cuda --seqlen 1024,2048,4096 --causal false,true --heads 32 --head-dim 128 --dtype bf16
   --warmup 10 --iters 100 --baseline none --no-check -q --label attn)
{
for b in sdpa-flash sdpa-flash sdpa-flash sdpa-math; do
  python3 -m profctl bench "${S[@]}" --backend "$b"; echo "bench $b rc=$?"
done
mapfile -t R < <(ls "$PROFCTL_REPORTS")
python3 -m profctl runs
python3 -m profctl show "${R[0]}" --format markdown
for pair in "0 1" "0 2" "1 2" "0 3"; do
  set -- $pair
  echo "=== compare ${R[$1]} ${R[$2]} --fail-if-slower 5%"
  python3 -m profctl compare "${R[$1]}" "${R[$2]}" --fail-if-slower 5% --format markdown; echo "rc=$?"
done
} 2>&1 | tee "$out/compare_noise.log"
tar czf "$out/compare_noise_runs.tgz" -C "$PROFCTL_REPORTS" .
