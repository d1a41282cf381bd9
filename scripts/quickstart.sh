#!/usr/bin/env bash
# The main job, from a fresh checkout: install, then compare attention backends on whatever this machine has.
# Without a GPU: CPU backends (sdpa-flash, sdpa-math, eager), a torch.profiler capture, and the recorded H100
# reports read back. With a GPU: every backend installed, and nsys/ncu if found (see `profctl doctor`).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(bash scripts/setup-venv.sh | tail -n 1)
P="$VENV/bin/profctl"
echo "== profctl doctor"; "$P" doctor || true
echo "== profctl bench (defaults for this machine; the rows also in reports/quickstart-bench.md)"
"$P" bench -f markdown -o reports/quickstart-bench.md && cat reports/quickstart-bench.md
echo "== profctl torch (torch.profiler, measured iterations only)"
"$P" torch --seqlen 512 --iters 3 || echo "(profctl torch failed; see above)"
echo "== profctl bench --model (a whole model step with the attention backend inside: train and decode)"
"$P" bench --model gpt-tiny --mode train,decode --iters 3 || echo "(profctl bench --model failed; see above)"
echo "== profctl report on a recorded H100 nsys export (tests/data/h100-sm90)"
"$P" report tests/data/h100-sm90/attn.sqlite.gz --limit 12
echo "done: runs are under reports/"
