#!/usr/bin/env bash
# Records the planted ranges (planted.py) on the GPU machine with plain tools, not through profctl.
# STEPS (default "time nsys torch"; the later recording was "ncu pysample") picks what runs:
#   time    -> truth.json      : each planted range and its fixed twin timed without any profiler (what fixing gains)
#   nsys    -> ranges.sqlite.xz: nsys profile -t cuda,nvtx,osrt --sample=none, exported with nsys export --type sqlite
#   torch   -> ranges_torch.json.xz: torch.profiler (CPU + CUDA, with_stack) exported with export_chrome_trace
#   ncu     -> ranges_ncu.ncu-rep.xz (+ ranges_ncu_raw.csv.xz): ncu --set full --clock-control none --nvtx
#              --filter-mode per-launch-config -c 1 over the same program (--iters 4): the first launch of each
#              launch configuration (kernel, grid, block), so every kernel of every range once, for explain --range --ncu
#   pysample-> ranges_pysample.sqlite.xz: as nsys, plus --python-sampling=true --python-sampling-frequency=2000
#              (nsys's Python backtrace sampling); if that export has no Python samples, once more with
#              --sample=process-tree (CPU sampling on) and the default frequency; pysample.log says which one it is
# Run from the project root with $NSYS and $NCU set (source .gpu/on-gpu.sh); results go to $OUT.
set -uo pipefail
here=tests/data/ranges
out=${OUT:-/tmp/ranges-out}
work=/tmp/ranges-work
steps=" ${STEPS:-time nsys torch} "
mkdir -p "$out" "$work"
want() { [[ "$steps" == *" $1 "* ]]; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; "$NSYS" --version; "$NCU" --version | tail -1
  python3 -c "import torch; print(torch.__version__)"; } > "$out/device.txt" 2>&1
if want time; then
  python3 "$here/planted.py" --mode time --out "$out" --iters 60 > "$out/time.log" 2>&1 || echo "time mode failed" >> "$out/time.log"
fi
if want nsys; then
  "$NSYS" profile -t cuda,nvtx,osrt --sample=none --cpuctxsw=none --cuda-graph-trace=node -f true -o "$work/ranges" \
    python3 "$here/planted.py" --mode nsys --iters 60 > "$out/nsys.log" 2>&1
  "$NSYS" export --type sqlite -f true -o "$work/ranges.sqlite" "$work/ranges.nsys-rep" >> "$out/nsys.log" 2>&1
fi
if want torch; then
  python3 "$here/planted.py" --mode torch --out "$work" --iters 20 > "$out/torch.log" 2>&1
fi
if want ncu; then
  timeout "${NCU_TIMEOUT:-120}" "$NCU" --set full --clock-control none --nvtx --filter-mode per-launch-config -c 1 \
    -f -o "$work/ranges_ncu" python3 "$here/planted.py" --mode nsys --iters 4 > "$out/ncu.log" 2>&1
  echo "ncu exit $?" >> "$out/ncu.log"
  timeout 60 "$NCU" --import "$work/ranges_ncu.ncu-rep" --csv --page raw > "$work/ranges_ncu_raw.csv" 2>> "$out/ncu.log"
fi
python_rows() {  # how many Python sampling rows the export at $1 holds (tables named PYTHON*), and their schema
  python3 - "$1" <<'PY'
import sqlite3, sys
try:
    db = sqlite3.connect(sys.argv[1])
    n = 0
    for (t, sql) in db.execute("SELECT name, sql FROM sqlite_master WHERE type='table'"):
        if "PYTHON" in t.upper() or "SAMPL" in t.upper() or "CALLCHAIN" in t.upper():
            c = db.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]
            print(t, c, sql, file=sys.stderr)
            n += c if "PYTHON" in t.upper() else 0
    print(n)
except Exception as e:
    print(e, file=sys.stderr)
    print(0)
PY
}
if want pysample; then
  for variant in "--sample=none --python-sampling-frequency=2000" "--sample=process-tree"; do
    rm -f "$work/ranges_pysample.sqlite" "$work/ranges_pysample.nsys-rep"
    echo "== $variant" >> "$out/pysample.log"
    # shellcheck disable=SC2086
    timeout "${PYS_TIMEOUT:-70}" "$NSYS" profile -t cuda,nvtx,osrt $variant --python-sampling=true --cpuctxsw=none \
      --cuda-graph-trace=node -f true -o "$work/ranges_pysample" \
      python3 "$here/planted.py" --mode nsys --iters 60 >> "$out/pysample.log" 2>&1
    timeout 30 "$NSYS" export --type sqlite -f true -o "$work/ranges_pysample.sqlite" "$work/ranges_pysample.nsys-rep" \
      >> "$out/pysample.log" 2>&1
    n=$(python_rows "$work/ranges_pysample.sqlite" 2>> "$out/pysample.log")
    echo "python sampling rows: $n" >> "$out/pysample.log"
    [ "${n:-0}" -gt 0 ] && break
  done
fi
ls -la "$work" >> "$out/files.log"
python3 - "$work" "$out" <<'PY'
import lzma, sys, pathlib
work, out = map(pathlib.Path, sys.argv[1:])
for name in ("ranges.sqlite", "ranges_torch.json", "ranges_ncu.ncu-rep", "ranges_ncu_raw.csv", "ranges_pysample.sqlite"):
    p = work / name
    if p.exists():
        (out / (name + ".xz")).write_bytes(lzma.compress(p.read_bytes(), preset=6))
        print(name, p.stat().st_size, (out / (name + ".xz")).stat().st_size)
PY
