#!/usr/bin/env bash
# Checks, times and records the ladders of ladders.py with PLAIN Nsight Compute, on the GPU machine:
#     bash tests/data/ladders/record.sh OUTDIR [STEP...]
# STEPs (default all): check time ncu csv. LADDER_GROUPS (default: every ladder) picks the ncu groups; NCU (default
# ncu), PYTHON (default python3), DEADLINE (seconds, default 540) come from the environment. Never touches the
# clocks (--clock-control none). Each step runs under a timeout and a failing step does not stop the others; the
# script stays inside DEADLINE and always ends by writing OUTDIR/ladders.tar.xz: every report (xz -9e), its details
# CSV page (xz -9e), times.json, manifest.json, the logs and the source the reports embed.
set -uo pipefail
OUT=$(mkdir -p "${1:?usage: record.sh OUTDIR [STEP...]}" && cd "$1" && pwd)
shift
STEPS=${*:-check time ncu csv}
HERE=$(cd "$(dirname "$0")" && pwd)
NCU=${NCU:-ncu}
DEADLINE=${DEADLINE:-540}
PY=${PYTHON:-python3}
GROUPS_=${LADDER_GROUPS:-gemm_tiles gemm_order field causal}
export PYTHONUNBUFFERED=1
W=$(mktemp -d)
cd "$W" || exit 1
cp "$HERE"/ladders.py "$HERE"/record.sh .
exec > >(tee record_log.txt) 2>&1
FAILS=""
PIDS=""
fail() { echo "FAILED: $*"; FAILS="$FAILS $*"; }
left() { echo $(( DEADLINE - SECONDS )); }
want() { [[ " $STEPS " == *" $1 "* ]]; }
# runs "$@" under a timeout of min($1, time left - 30) seconds
limited() {
  local t=$1; shift
  local l=$(( $(left) - 30 )); (( l < t )) && t=$l
  if (( t < 5 )); then echo "skipped (deadline): $*"; return 124; fi
  timeout "$t" "$@"
}

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader
  "$NCU" --version | tail -1
  $PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version())"
} > versions.txt 2>&1
cat versions.txt

if want check; then  # full size on the GPU; also fills Triton's cache for the steps below
  echo "[$SECONDS s] check"
  limited 150 $PY ladders.py --check > check.log 2>&1 || fail "check"
  grep -E "^check|FAIL|^ok" check.log
fi
if want time; then
  echo "[$SECONDS s] time"
  limited 120 $PY ladders.py --time times.json > time.log 2>&1 || fail "time"
  grep -E "^time|FAIL|^ok" time.log
  [ -f times.json ] && $PY ladders.py --manifest times.json manifest.json
fi

# each report: csv page and xz in the background while the next one records
post() {
  local r=$1
  timeout 120 "$NCU" --import "$r.ncu-rep" --csv --page details --print-units base > "${r}_details.csv" 2> "${r}_details.err"
  xz -9e -f "${r}_details.csv"
  xz -9e -k -f "$r.ncu-rep"
}
NCU_FULL=("$NCU" --set full --import-source yes --clock-control none -f --nvtx --nvtx-include "measure/")
if want ncu; then
  for g in $GROUPS_; do
    name=ladders_$g
    echo "[$SECONDS s] ncu $name"
    limited 110 "${NCU_FULL[@]}" -o "$name" $PY ladders.py --record "$g" > "ncu_$name.log" 2>&1 \
      || fail "ncu $name (exit $?: $(grep -E 'ERROR|rror' "ncu_$name.log" | head -2 | cut -c1-160))"
    grep -E "^recorded|^record .*error" "ncu_$name.log"
    if [ -f "$name.ncu-rep" ]; then
      echo "  $(grep -c '==PROF== Profiling' "ncu_$name.log") kernels, $(stat -c %s "$name.ncu-rep") bytes"
      if want csv; then post "$name" & PIDS="$PIDS $!"; fi
    fi
  done
fi
echo "[$SECONDS s] waiting for the csv/xz jobs"
for p in $PIDS; do wait "$p"; done  # (a bare wait would also wait for the tee above)
for f in *.ncu-rep; do [ -f "$f.xz" ] && rm -f "$f"; done
ls -la
echo "failed steps:${FAILS:- none}" | tee failed.txt
echo "[$SECONDS s] done"
tar cf - . | xz -1 -T4 > "$OUT/ladders.tar.xz"
ls -la "$OUT"
