#!/usr/bin/env bash
# Issue 30 (Proton timelines) on the GPU machine, run from a copy of the worktree carried as .gpu-proton:
#   source .gpu/on-gpu.sh >/dev/null; cd .gpu-proton; STEPS="..." bash benchmarks/proton_session.sh
# Steps: install (this tree, editable), facts (versions; Proton's mode.py as installed), planted (the planted
# traces of tests/data/proton, plain Proton), builtin (profctl's Triton forward with scopes, plain Proton through
# profctl.workloads.proton_run: one recorded launch per mask, the cost of looking, a shared-buffer try).
set -u
T0=$(date +%s)
export PYTHONUNBUFFERED=1
at() { echo "== $1 ($(( $(date +%s) - T0 ))s in)"; }
#: seconds a step may take: its own limit, or what is left of BUDGET (the call's limit less the final tar)
lim() { local left=$(( ${BUDGET:-530} - ($(date +%s) - T0) )); [ $left -lt $1 ] && echo $(( left > 5 ? left : 5 )) || echo $1; }
want() { case " ${STEPS:-install facts planted builtin} " in *" $1 "*) return 0;; esac; return 1; }
O=/tmp/o1; mkdir -p $O
CASE='{"backend": "triton", "batch": 1, "seqlen_q": 4096, "seqlen_kv": 4096, "heads": 32, "kv_heads": 32, "head_dim": 128, "dtype": "bf16", "causal": CAUSAL, "pass": "fwd", "layout": "bhsd", "device": "cuda"}'
if want install; then
  at install
  python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pipe.log 2>&1 || tail -5 /tmp/pipe.log
fi
if want facts; then
  at facts
  python3 -c "import triton, torch; print('triton', triton.__version__, 'torch', torch.__version__, torch.cuda.get_device_name(0))"
  mkdir -p "$O/src"
  P=$(python3 -c "import triton.profiler, os; print(os.path.dirname(triton.profiler.__file__))")
  cp "$P/mode.py" "$P/language.py" "$P/profile.py" "$O/src/" 2>/dev/null
  cp "$P/hooks/instrumentation.py" "$O/src/hook_instrumentation.py" 2>/dev/null
fi
if want planted; then
  at planted
  timeout -s INT $(lim 240) python3 tests/data/proton/record_planted.py --out /tmp/planted
  ls -la /tmp/planted | head -40
  grep -l "dropped\|Error\|error" /tmp/planted/*.log | head; grep -h "dropped" /tmp/planted/overflow.log | head -3
  cp -r /tmp/planted "$O/"
fi
if want builtin; then
  for causal in false true; do
    at "builtin causal=$causal: the cost of looking (global buffer)"
    C=${CASE/CAUSAL/$causal}
    timeout -s INT $(lim 200) python3 -m profctl.workloads.proton_run --out /tmp/time_$causal --buffer global --case "$C" \
      --time 20 --jsonl /tmp/builtin_$causal.jsonl > /tmp/time_$causal.log 2>&1; echo "exit $?"; tail -3 /tmp/time_$causal.log
    at "builtin causal=$causal: record one launch (global buffer)"
    timeout -s INT $(lim 200) python3 -m profctl.workloads.proton_run --out /tmp/rec_$causal --buffer global --case "$C" \
      --jsonl /tmp/builtin_$causal.jsonl > /tmp/rec_$causal.log 2>&1; echo "exit $?"; tail -3 /tmp/rec_$causal.log
    ls -la /tmp/rec_$causal.* 2>/dev/null
    at "builtin causal=$causal: summary"
    CLK=$(python3 -c "import json; e=[json.loads(l) for l in open('/tmp/builtin_$causal.jsonl')]; print(next((x.get('clock_mhz') for x in e if x.get('event')=='recorded'), None) or 1000)")
    timeout -s INT $(lim 150) python3 benchmarks/proton_summary.py /tmp/rec_$causal.chrome_trace --clock-mhz $CLK --keep-ctas 16 \
      --reduced "$O/builtin_${causal}_16cta.chrome_trace.gz" > "$O/builtin_${causal}_summary.json" 2> /tmp/sum_$causal.err
    tail -2 /tmp/sum_$causal.err; head -c 600 "$O/builtin_${causal}_summary.json"; echo
    cp /tmp/builtin_$causal.jsonl /tmp/time_$causal.log /tmp/rec_$causal.log "$O/" 2>/dev/null
    rm -f /tmp/rec_$causal.chrome_trace
  done
  at "builtin: shared buffer, non-causal"
  C=${CASE/CAUSAL/false}
  timeout -s INT $(lim 150) python3 -m profctl.workloads.proton_run --out /tmp/rec_shared --buffer shared --case "$C" \
    --jsonl /tmp/shared.jsonl > /tmp/rec_shared.log 2>&1; echo "exit $?"
  grep -c dropped /tmp/rec_shared.log; grep -m3 "dropped\|rror" /tmp/rec_shared.log; ls -la /tmp/rec_shared.* 2>/dev/null
  head -c 300 /tmp/rec_shared.log > "$O/rec_shared_head.log"; grep -m 20 -v dropped /tmp/rec_shared.log >> "$O/rec_shared_head.log"
  grep dropped /tmp/rec_shared.log | head -50 >> "$O/rec_shared_head.log"
fi
at done
tar -cJf "$OUT/session.tar.xz" -C /tmp "$(basename $O)"; ls -la "$OUT"
