#!/usr/bin/env bash
# Times and records the planted kernel pairs (pairs.cu, pairs_triton.py) and the SDPA FlashAttention-2 / cuDNN
# pair (sdpa_pair.py) with PLAIN Nsight Compute, on the GPU machine:
#     bash tests/data/pairs/record.sh OUTDIR [STEP...]
# STEPs (default all): build check time ncu csv. Needs nvcc, ncu (--clock-control none: never touch the clocks
# there), PyTorch and Triton. Each step runs under a timeout and a failing step does not stop the others; the
# whole script stays inside DEADLINE seconds (default 500) and always ends by writing OUTDIR/pairs.tar.xz with
# every report (xz -9e), details CSV page (xz), timing JSON, log and the sources the reports embed.
set -uo pipefail
OUT=$(mkdir -p "${1:?usage: record.sh OUTDIR [STEP...]}" && cd "$1" && pwd)
shift
STEPS=${*:-build check time ncu csv}
HERE=$(cd "$(dirname "$0")" && pwd)
NCU=${NCU:-ncu}
DEADLINE=${DEADLINE:-500}
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
W=$(mktemp -d)
cd "$W" || exit 1
cp "$HERE"/pairs.cu "$HERE"/pairs_triton.py "$HERE"/sdpa_pair.py "$HERE"/record.sh .
FAILS=""
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
  nvcc --version | tail -2
  "$NCU" --version | tail -1
  $PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version())"
} > versions.txt 2>&1
cat versions.txt

if want build; then
  limited 120 nvcc -O3 -lineinfo -arch=sm_90 -Xptxas -v -o pairs pairs.cu > build.log 2>&1 || fail "build ($(tail -3 build.log))"
  grep -E "entry function|registers|spill" build.log | paste - - - 2>/dev/null | sed 's/ptxas info *: //g' | cut -c1-200 > build_resources.txt
fi
if want check; then
  # (the Triton pairs are checked by --time, at full size, against each other and torch)
  [ -x pairs ] && { limited 90 ./pairs --check > cuda_check.log 2>&1 || fail "cuda check"; cat cuda_check.log; }
fi
if want time; then
  [ -x pairs ] && { limited 120 ./pairs --time cuda_times.json > cuda_time.log 2>&1 || fail "cuda time"; grep -E "^time|tail|FAIL" cuda_time.log; }
  limited 200 $PY pairs_triton.py --time triton_times.json > triton_time.log 2>&1 || fail "triton time"
  grep -E "^time|error" triton_time.log
  limited 90 $PY sdpa_pair.py --time sdpa_times.json > sdpa_time.log 2>&1 || fail "sdpa time"
  grep -E "^time|Error" sdpa_time.log
fi

# each report: csv page and xz in the background while the next one records
post() {
  local r=$1
  "$NCU" --import "$r.ncu-rep" --csv --page details --print-units base > "${r}_details.csv" 2> "${r}_details.err"
  xz -9e -f "${r}_details.csv"
  xz -9e -k -f "$r.ncu-rep"
}
NCU_FULL=("$NCU" --set full --import-source yes --clock-control none -f --nvtx --nvtx-include "measure/")
record() {  # record NAME TIMEOUT COMMAND...
  local name=$1 t=$2; shift 2
  echo "[$SECONDS s] ncu $name: $*"
  limited "$t" "${NCU_FULL[@]}" -o "$name" "$@" > "ncu_$name.log" 2>&1 || fail "ncu $name (exit $?: $(grep -E 'ERROR|rror' "ncu_$name.log" | head -2))"
  if [ -f "$name.ncu-rep" ]; then
    echo "  $(grep -c '==PROF== Profiling' "ncu_$name.log") kernels, $(stat -c %s "$name.ncu-rep") bytes"
    want csv && post "$name" &
  fi
}
if want ncu; then
  if [ -x pairs ]; then
    for g in cuda_mem cuda_occ cuda_exec; do record "pairs_$g" 120 ./pairs --record "$g"; done
  fi
  for g in triton_mem triton_attn triton_sfu triton_mma; do record "pairs_$g" 120 $PY pairs_triton.py --record "$g"; done
  record pairs_sdpa 120 $PY sdpa_pair.py --record
fi
echo "[$SECONDS s] waiting for the csv/xz jobs"
wait
ls -la
rm -f pairs
for f in *.ncu-rep; do [ -f "$f.xz" ] && rm -f "$f"; done
echo "failed steps:${FAILS:- none}" | tee failed.txt
tar cf - . | xz -1 -T4 > "$OUT/pairs.tar.xz"
ls -la "$OUT"
echo "[$SECONDS s] done"
