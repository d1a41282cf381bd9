#!/usr/bin/env bash
# Records profctl/tools/ncu_warm.ncu-rep on the GPU machine with plain ncu (clocks untouched) and checks what it
# is for: ncu_report's first SASS lookup in a fresh process, cold and after profctl.tools.ncu.warm_reader on it.
#   bash benchmarks/ncu_warm/record.sh OUTDIR   (from the project root; NCU set, profctl importable)
set -uo pipefail
OUT=${1:?usage: record.sh OUTDIR}
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d)
nvcc -O3 -lineinfo -arch=sm_90 -o "$W/warm" "$HERE/warm.cu" || exit 1
"${NCU:-ncu}" --clock-control none --section SourceCounters -f -o "$W/ncu_warm" "$W/warm" > "$OUT/ncu_warm.log" 2>&1
ls -la "$W/ncu_warm.ncu-rep"
cp "$W/ncu_warm.ncu-rep" "$OUT/ncu_warm.ncu-rep"
python3 - "$W/ncu_warm.ncu-rep" "${2:-}" <<'PY'
import sys, time
from pathlib import Path
from profctl.tools.ncu import warm_reader
import ncu_report as m
t = time.perf_counter(); ok = warm_reader(Path(sys.argv[1])); dt = time.perf_counter() - t
print(f"warm_reader on the tiny report: {ok} in {dt:.3f} s")
if len(sys.argv) > 2 and sys.argv[2]:  # a real report: its first lookup now
    c = m.load_report(sys.argv[2]); a = c.range_by_idx(0).action_by_idx(0)
    pc = a.metric_by_name("inst_executed").correlation_ids().as_uint64(0)
    t = time.perf_counter(); a.sass_by_pc(pc); print(f"then a real report's first lookup: {time.perf_counter() - t:.4f} s")
PY
