#!/usr/bin/env bash
# The gate's power and false alarms (issue 48) on quiet CPUs: a many-core host cut into 2-CPU slices, each a
# "2-core machine" of its own (every process and the level's spinners pinned to it with taskset), the pairs of
# benchmarks/run_noise.py --bench shared out among the slices and run side by side. Records only; judge the
# recording with `python benchmarks/run_noise.py --bench --reanalyse REC.json` where its run directories are.
#
#   bash benchmarks/gate_slices.sh OUT_DIR LOADS PAIRS DEADLINE_S [STORE]
#   e.g. bash benchmarks/gate_slices.sh "$OUT" 0,1 20 230 /tmp/g48a/store     (on the GPU machine's host CPUs)
#
# The levels' pairs are taken in turn (--interleave), so the deadline cuts every level alike; PLANTED and
# PLANTED_AB (default 1.1,1.3,2; empty: only the identical code) choose the planted slowdowns of the sequential
# runs and of the --ab runs; PROCESSES sets every sequential run's --processes (default: bench's, 3 on a CPU).
#
# OUT_DIR gets machine.txt (lscpu, load, versions), rec.json (the recording) and runs.tgz (the runs' JSON files,
# paths as in rec.json: unpack with `tar xzf runs.tgz -C STORE`).
set -euo pipefail
out=$1 loads=$2 pairs=$3 deadline=$4 store=${5:-/tmp/g48/store}
py=${PYTHON:-python3}
n=$(nproc)
slices=$(seq 0 2 $((n - 2)) | awk '{printf "%s%d-%d", (NR > 1 ? "," : ""), $1, $1 + 1}')
mkdir -p "$out" "$store"
# a plain tree (not pip-installed, PYTHONPATH=.) imports profctl.workloads and profctl.builtin_recipes through links
# (benchmarks/gpu.sh plain_tree); and every process should not compile torch again: this machine's Python is told
# to write no bytecode, so the first imports here write it (benchmarks/RESULTS.md: import torch 3.9-4.4 s without)
PYTHONPATH=. "$py" -c "import profctl.workloads.attention" 2>/dev/null || {
  ln -sfn ../workloads profctl/workloads; ln -sfn ../recipes profctl/builtin_recipes; }
unset PYTHONDONTWRITEBYTECODE
PYTHONPATH=. "$py" -c "import torch, numpy, pandas, typer, rich, profctl.cli, profctl.workloads.attention" || exit 3
export PYTHONPATH=.
t0=$(date +%s)
probe=$("$py" -m profctl bench --device cpu -b benchmarks/gate_ab_functions.py:attn --label attn --baseline none \
  -s 512 --heads 4 --iters 20 -q --reports "$store/probe" 2>&1) || { echo "probe bench failed: $probe"; exit 4; }
echo "probe bench: $(( $(date +%s) - t0 )) s"
{
  date -u; uptime; nproc; lscpu; lscpu -e 2>/dev/null || true
  "$py" -c "import torch, sys; print(sys.version); print('torch', torch.__version__, torch.get_num_threads())"
  echo "slices $slices"
} > "$out/machine.txt" 2>&1
"$py" benchmarks/run_noise.py --bench --record-only --loads "$loads" --pairs "$pairs" \
  --planted "${PLANTED-1.1,1.3,2}" --planted-ab "${PLANTED_AB-1.1,1.3,2}" --interleave --threads 2 \
  ${PROCESSES:+--processes "$PROCESSES"} \
  --slices "$slices" --deadline "$deadline" --store "$store" \
  --out "$out/rec.json" 2> "$out/log.txt" || echo "run_noise exit $?" >> "$out/log.txt"
(cd "$store" && find . -name '*.json' | tar czf "$out/runs.tgz" -T -)
{ echo "end"; date -u; uptime; } >> "$out/machine.txt"
tail -3 "$out/log.txt"
