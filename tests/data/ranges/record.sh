#!/usr/bin/env bash
# Records the planted ranges (planted.py) on the GPU machine with plain tools, not through profctl:
#   truth.json      : each planted range and its fixed twin timed without any profiler (what fixing gains)
#   ranges.sqlite.xz: nsys profile -t cuda,nvtx,osrt --sample=none, exported with nsys export --type sqlite
#   ranges_torch.json.xz: torch.profiler (CPU + CUDA, with_stack) exported with export_chrome_trace
# Run from the project root with $NSYS set (source .gpu/on-gpu.sh); results go to $OUT.
set -uo pipefail
here=tests/data/ranges
out=${OUT:-/tmp/ranges-out}
work=/tmp/ranges-work
mkdir -p "$out" "$work"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; "$NSYS" --version; python3 -c "import torch; print(torch.__version__)"; } > "$out/device.txt" 2>&1
python3 "$here/planted.py" --mode time --out "$out" --iters 60 > "$out/time.log" 2>&1 || echo "time mode failed" >> "$out/time.log"
"$NSYS" profile -t cuda,nvtx,osrt --sample=none --cpuctxsw=none --cuda-graph-trace=node -f true -o "$work/ranges" \
  python3 "$here/planted.py" --mode nsys --iters 60 > "$out/nsys.log" 2>&1
"$NSYS" export --type sqlite -f true -o "$work/ranges.sqlite" "$work/ranges.nsys-rep" >> "$out/nsys.log" 2>&1
python3 "$here/planted.py" --mode torch --out "$work" --iters 20 > "$out/torch.log" 2>&1
ls -la "$work" >> "$out/nsys.log"
python3 - "$work" "$out" <<'PY'
import lzma, sys, pathlib
work, out = map(pathlib.Path, sys.argv[1:])
for name in ("ranges.sqlite", "ranges_torch.json"):
    p = work / name
    if p.exists():
        (out / (name + ".xz")).write_bytes(lzma.compress(p.read_bytes(), preset=9 | lzma.PRESET_EXTREME))
        print(name, p.stat().st_size, (out / (name + ".xz")).stat().st_size)
PY
