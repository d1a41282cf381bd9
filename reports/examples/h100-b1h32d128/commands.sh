#!/usr/bin/env bash
# How reports/examples/h100-b1h32d128/ was made on the GPU machine (docs/reports.md explains each step).
# usage: commands.sh STAGE RUNS OUT
#   STAGE  sdpa  (sdpa-flash, sdpa-cudnn and the eager baseline)  |  fa4  (FlashAttention-4, then the report)
#   RUNS   where the run directories go (both stages must use the same one)
#   OUT    where the report and the compact copies of the inputs are written
# Two stages only because FA4's libraries reach the GPU machine in a second call; on a machine that has FA4,
# run the four commands once with -b fa4,sdpa-flash,sdpa-cudnn,eager.
set -u
STAGE=$1 RUNS=$2 OUT=$3
SHAPE=(--batch 1 --heads 32 --head-dim 128 --dtype bf16 --causal false,true)
SEQ=1024,2048,4096,8192,16384
NCU_SEQ=1024,4096
if [ "$STAGE" = sdpa ]; then B=sdpa-flash,sdpa-cudnn,eager BASE=eager; else B=fa4 BASE=none; fi
mkdir -p "$RUNS" "$OUT"
ls "$RUNS" >"$OUT/.before-$STAGE"
log="$OUT/$STAGE.log"
{
  set -x
  profctl bench -b $B --baseline $BASE "${SHAPE[@]}" -s $SEQ --iters 10 --warmup 3 --no-check \
    --reports "$RUNS" --json "$OUT/bench-$STAGE.json" -q
  profctl nsys -b $B "${SHAPE[@]}" -s $SEQ --iters 5 --warmup 2 --no-check --reports-dir "$RUNS" --limit 5
  profctl ncu --recipe tensor-core --clock-control none -b $B "${SHAPE[@]}" -s $NCU_SEQ --no-check \
    --reports-dir "$RUNS" -f markdown | tail -5
  profctl ncu --recipe dram --clock-control none -b $B "${SHAPE[@]}" -s $NCU_SEQ --no-check \
    --reports-dir "$RUNS" -f markdown | tail -5
  set +x
} >"$log" 2>&1
# compact copies of what the report reads (the .ncu-rep files are tens of MB)
python3 - "$RUNS" "$OUT" "$STAGE" >>"$log" 2>&1 <<'PY'
import gzip, sys
from pathlib import Path
from profctl import readers
from profctl.merge import nsys_first_case, read_nsys_paths
runs, out, stage = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
before = set((out / f".before-{stage}").read_text().split())
for d in sorted(runs.iterdir()):
    if "-nsys-" in d.name and (d / "profile.sqlite").exists():  # every stage's: small
        s = read_nsys_paths(d / "profile.sqlite", first_case=nsys_first_case(d))
        name = f"nsys-{d.name.split('-')[0]}.summary.json.gz"
    elif d.name in before:
        continue
    elif "-ncu-" in d.name and (d / "summary.json").exists():
        s = readers.read(d / "summary.json")
        name = f"ncu-{stage}-{s.meta.get('recipe', 'x')}.summary.json.gz"
    else:
        continue
    with gzip.open(out / name, "wt", encoding="utf-8") as f:
        f.write(s.to_json(indent=None))
    print("wrote", out / name, "from", d)
PY
profctl report "$RUNS" --format html --title "flash attention vs baselines, H100, b1 h32 d128 bf16" \
  -o "$OUT/report.html" >>"$log" 2>&1
rm -f "$OUT/.before-$STAGE"
tail -c 6000 "$log"
