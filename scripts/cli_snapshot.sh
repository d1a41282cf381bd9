#!/usr/bin/env bash
# Snapshot what the documented CLI examples print on this machine (CPU, recorded reports), so a refactor can be
# diffed against it: bash scripts/cli_snapshot.sh OUTDIR [FIXTURES_DIR]. Timings differ run to run: the bench and
# torch outputs are kept with their numbers masked (every digit run -> N) so only their shape is compared.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: cli_snapshot.sh OUTDIR [FIXTURES]}
FIX=${2:-tests/data}
mkdir -p "$OUT"
P=${PROFCTL:-.venv/bin/profctl}
T=$(mktemp -d)
for f in attn.sqlite attn_tc_raw.csv flash_sol_details.csv torch_trace.json.gz; do
  if [ -f "$FIX/$f" ]; then cp "$FIX/$f" "$T/"; elif [ -f "$FIX/$f.gz" ]; then gunzip -c "$FIX/$f.gz" > "$T/$f"; fi
done
for f in attn_tc.ncu-rep flash_sol.ncu-rep; do
  if [ -f "$FIX/$f" ]; then cp "$FIX/$f" "$T/"; elif [ -f "$FIX/$f.gz" ]; then gunzip -c "$FIX/$f.gz" > "$T/$f";
  elif [ -f "$FIX/$f.xz" ]; then xz -dc "$FIX/$f.xz" > "$T/$f"; fi
done
cp tests/data/bench_h100_s4096.json.gz "$T/bench.json.gz"
run() {  # name, then the command; stdout, stderr and the exit status go to OUT/name
  local name=$1; shift
  ( cd "$T" && "$@" ) > "$OUT/$name.out" 2> "$OUT/$name.err"
  echo "exit $?" >> "$OUT/$name.out"
  sed -i -e "s#$T#TMP#g" -e "s#$PWD#REPO#g" "$OUT/$name.out" "$OUT/$name.err"
}
mask() { sed -i -E -e 's/[0-9]+/N/g' -e 's/ +/ /g' "$OUT/$1.out" "$OUT/$1.err"; }
R=$PWD
run help "$R/$P" --help
run recipes "$R/$P" recipes
run recipe_tc "$R/$P" recipes tensor-core
run recipe_tc_cc80 "$R/$P" recipes tensor-core --cc 8.0
run rep_sqlite "$R/$P" report attn.sqlite --limit 12
run rep_sqlite_md "$R/$P" report attn.sqlite -f markdown --by-range
run rep_sqlite_json "$R/$P" report attn.sqlite -f json
run rep_sqlite_csv "$R/$P" report attn.sqlite -f csv
run rep_torch_md "$R/$P" report torch_trace.json.gz -f markdown
run rep_ncu_md "$R/$P" report attn_tc.ncu-rep -f markdown --by-range
run rep_ncucsv_md "$R/$P" report attn_tc_raw.csv -f markdown --by-range
run rep_sol_md "$R/$P" report flash_sol.ncu-rep -f markdown
run rep_details_md "$R/$P" report flash_sol_details.csv -f markdown
run rep_three_md "$R/$P" report attn.sqlite attn_tc.ncu-rep torch_trace.json.gz -f markdown
run rep_three_json "$R/$P" report attn.sqlite attn_tc.ncu-rep torch_trace.json.gz -f json
run rep_bench_pivot "$R/$P" report bench.json.gz --pivot tflops,ms -f markdown
run rep_bench_md "$R/$P" report bench.json.gz -f markdown
run rep_bench_csv "$R/$P" report bench.json.gz -f csv
run rep_examples_md "$R/$P" report "$R"/reports/examples/h100-b1h32d128/ -f markdown
run cmp_same "$R/$P" compare bench.json.gz bench.json.gz -f markdown
run err_backend "$R/$P" bench --backend nope
run err_report "$R/$P" report "$R/README.md"
run err_recipe "$R/$P" recipes nosuch
run bench_cpu "$R/$P" bench --device cpu -s 128 -b sdpa-math,eager --heads 2 --iters 3 --warmup 1 -f markdown --reports runs
mask bench_cpu
run torch_cpu "$R/$P" torch --device cpu -s 64 --heads 2 --iters 2 --warmup 1 -f markdown --reports runs
mask torch_cpu
sort -o "$OUT/torch_cpu.out" "$OUT/torch_cpu.out"  # rows come in order of time, which varies run to run
rm -rf "$T"
echo "snapshot in $OUT"
