#!/usr/bin/env bash
# Records the planted-bottleneck reports with plain Nsight Compute (not through profctl), on the GPU machine, from
# the repository root: bash tests/data/planted/record.sh OUTDIR. Needs nvcc, ncu (--clock-control none: never
# touch the clocks there), PyTorch and Triton. Writes OUTDIR/planted.tar.xz with every report and CSV page.
set -uo pipefail
OUT=${1:?usage: record.sh OUTDIR}
HERE=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH="$HERE/../../..${PYTHONPATH:+:$PYTHONPATH}"  # attn_pair.py imports profctl's Triton kernel
NCU=${NCU:-ncu}
W=$(mktemp -d)
cd "$W"
NCU_FULL=("$NCU" --set full --import-source yes --clock-control none -f)
nvcc --version | tail -2
"$NCU" --version | tail -1
nvcc -O3 -lineinfo -arch=sm_90 -o planted "$HERE/planted.cu"
nvcc -O3 -arch=sm_90 -o planted_nolineinfo "$HERE/planted.cu"
./planted --time | tee planted_time.txt
"${NCU_FULL[@]}" -o planted_cuda ./planted > ncu_planted_cuda.log 2>&1; echo "planted_cuda exit $?"
"${NCU_FULL[@]}" -k regex:exp_loop -o planted_nolineinfo ./planted_nolineinfo exp_loop > ncu_nolineinfo.log 2>&1
echo "nolineinfo exit $?"
"${NCU_FULL[@]}" -o planted_triton python3 "$HERE/planted_triton.py" > ncu_planted_triton.log 2>&1
echo "planted_triton exit $?"
"${NCU_FULL[@]}" --nvtx --nvtx-include "measure/" -o attn_pair python3 "$HERE/attn_pair.py" > ncu_attn_pair.log 2>&1
echo "attn_pair exit $?"
# the tool's own pages, as ground truth for profctl's reading of the same reports
for r in planted_cuda planted_triton attn_pair planted_nolineinfo; do
  "$NCU" --import $r.ncu-rep --csv --page details --print-units base > ${r}_details.csv 2> ${r}_details.err
  "$NCU" --import $r.ncu-rep --csv --page raw --print-units base > ${r}_raw.csv 2> ${r}_raw.err
  "$NCU" --import $r.ncu-rep --csv --page source --print-source cuda,sass > ${r}_source.csv 2> ${r}_source.err
  ls -la $r.ncu-rep ${r}_*.csv
done
cp "$HERE"/planted.cu "$HERE"/planted_triton.py "$HERE"/attn_pair.py .
rm -f planted planted_nolineinfo
tar cf - . | xz -T4 -6 > "$OUT/planted.tar.xz"
ls -la "$OUT"
