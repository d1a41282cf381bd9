#!/usr/bin/env bash
# Issue 22 on the GPU machine (carry [".gpu"]): a regression gate one can trust.
#   (a) examples/ops_program.py run twice under profctl nsys and twice under profctl torch; each pair compared:
#       expect no kernel called faster or slower;
#   (b) the same program with a slowdown planted in one kernel (OPS_SLOW=softmax: the softmax does twice the
#       work) under nsys and under torch, compared with the first run: expect the softmax kernel slower, and
#       nothing else;
#   (c) profctl bench --ab on two identical attention functions (expect an interval around 0) and on a variant 3 %
#       slower (benchmarks/gate_ab_functions.py: SDPA followed by a torch.cuda._sleep kernel calibrated at the
#       first call to 3 % of the attention's time; its calibration line is in the log), with the intervals.
# Everything is written to $OUT: gate_nsys.txt, gate_torch.txt, gate_ab.txt, gate_summary.txt, gate_log.txt.
# About 4-6 minutes on an H200.
#   STEPS="install nsys torch ab" bash benchmarks/gpu_session_gate.sh
# (PROG and SHAPE override the program's arguments and the A/B shape, e.g. to try the script on a CPU.)
set -u
T0=$(date +%s)
source .gpu/on-gpu.sh >/dev/null 2>&1
export PROFCTL_NSYS=${NSYS:-} PYTHONUNBUFFERED=1
P="python3 -m profctl"
OUT=${OUT:-/tmp/gate-out}
mkdir -p "$OUT"
R=/tmp/gate-runs
rm -rf "$R"
LOG="$OUT/gate_log.txt"
SUM="$OUT/gate_summary.txt"
: > "$LOG"; : > "$SUM"
PROG=${PROG:-examples/ops_program.py --rows 8192 --size 4096 --steps 100 --device cuda}
SHAPE=${SHAPE:--s 4096 --heads 32 --head-dim 128 --dtype bf16}
at() { echo "== $1 ($(( $(date +%s) - T0 ))s in)" | tee -a "$LOG"; }
want() { case " ${STEPS:-install nsys torch ab} " in *" $1 "*) return 0;; esac; return 1; }
latest() { ls -d "$1"/*/ 2>/dev/null | tail -1; }

# the verdicts of a compare -f json on one line each: counts, then every judged row
verdicts() {
  python3 - "$1" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"  (no compare output: {e})"); sys.exit(0)
print(f"  counts {d['counts']}; band ±{d['threshold']*100:g}% ({d.get('threshold_from')})")
for r in d["rows"]:
    if r["verdict"] == "not judged":
        continue
    ci = f"{(r['ci_lo']-1)*100:+.1f}%..{(r['ci_hi']-1)*100:+.1f}%" if r.get("ci_lo") else "n/a"
    nf = f"±{r['noise_floor']*100:.2f}%" if r.get("noise_floor") is not None else "n/a"
    name = r.get("kernel") or r.get("name")
    print(f"  {r['verdict']:12s} {(r['change'] or 0)*100:+7.2f}%  CI {ci:18s} floor {nf:8s} n={r['n_base']}/{r['n_new']}  {name[:70]}")
PY
}

if want install; then
  at install
  python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pipe.log 2>&1 || tail -5 /tmp/pipe.log
fi

tool_pair() {  # tool: two plain runs and one slowed run, then the two comparisons
  local tool=$1 secs=$2 out="$OUT/gate_$1.txt"
  : > "$out"
  for name in base same; do
    OPS_SLOW= timeout -s INT "$secs" $P "$tool" --reports "$R/$tool/$name" -f json -- python3 $PROG \
      > /dev/null 2>> "$LOG" || echo "  $tool $name: failed (see gate_log.txt)" | tee -a "$out"
  done
  OPS_SLOW=softmax timeout -s INT "$secs" $P "$tool" --reports "$R/$tool/slow" -f json -- python3 $PROG \
    > /dev/null 2>> "$LOG" || echo "  $tool slow: failed (see gate_log.txt)" | tee -a "$out"
  local a b c
  a=$(latest "$R/$tool/base"); b=$(latest "$R/$tool/same"); c=$(latest "$R/$tool/slow")
  for pair in "same:$b" "slow:$c"; do
    local what=${pair%%:*} other=${pair#*:}
    echo "## $tool: base vs $what ($a vs $other)" >> "$out"
    timeout 120 $P compare "$a" "$other" -f json -o "/tmp/gate_cmp_${tool}_$what.json" 2>> "$LOG"
    verdicts "/tmp/gate_cmp_${tool}_$what.json" >> "$out"
    timeout 120 $P compare "$a" "$other" --fail-if-slower 10% > /dev/null 2>> "$LOG"
    echo "  --fail-if-slower 10%: exit $?" >> "$out"
    timeout 120 $P compare "$a" "$other" >> "$out" 2>&1
  done
  { echo "## $tool"; grep -E "^##|counts|slower|faster|exit" "$out" | grep -v "^  *\(unchanged\|inconclusive\)"; } >> "$SUM"
  grep -E "^##|counts|exit" "$out"
}

if want nsys; then
  at "nsys: the program twice, then with the softmax slowed"
  tool_pair nsys 150
fi
if want torch; then
  at "torch: the program twice, then with the softmax slowed"
  tool_pair torch 120
fi

if want ab; then
  at "bench --ab: identical functions, then a 3% slower one"
  F=benchmarks/gate_ab_functions.py
  AB="bench $SHAPE --rounds 30 --iters 20 --warmup 10 --no-check"
  : > "$OUT/gate_ab.txt"
  for pair in "$F:attn,$F:attn_same" "$F:attn,$F:attn_3pct"; do
    echo "## --ab $pair" >> "$OUT/gate_ab.txt"
    timeout -s INT 150 $P $AB --ab "$pair" --reports "$R/ab" --fail-if-slower 2% >> "$OUT/gate_ab.txt" 2>> "$LOG"
    echo "  --fail-if-slower 2%: exit $?" >> "$OUT/gate_ab.txt"
    d=$(latest "$R/ab"); grep -h "calibrated" "$d/workload.log" >> "$OUT/gate_ab.txt" 2>/dev/null
  done
  # the same 3 % as two sequential bench runs compared, for contrast with the interleaved A/B
  for fn in attn attn_3pct; do
    timeout -s INT 100 $P bench -b "$F:$fn" --label attn --baseline none $SHAPE --iters 200 --warmup 10 --no-check -q \
      --reports "$R/seq" 2>> "$LOG"
  done
  echo "## sequential: two bench runs compared" >> "$OUT/gate_ab.txt"
  timeout 60 $P compare $(ls -d "$R"/seq/*/ | head -1) $(ls -d "$R"/seq/*/ | tail -1) -f json -o /tmp/gate_seq.json 2>> "$LOG"
  verdicts /tmp/gate_seq.json >> "$OUT/gate_ab.txt"
  { echo "## ab"; grep -E "^##| vs |calibrated|exit|counts|slower|faster|unchanged|inconclusive" "$OUT/gate_ab.txt"; } >> "$SUM"
  grep -E "^##| vs |calibrated|exit" "$OUT/gate_ab.txt"
fi
at done
cat "$SUM"
