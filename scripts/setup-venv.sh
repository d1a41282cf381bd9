#!/usr/bin/env bash
# Create ./.venv and install profctl with its test, plot, ncu and notebook extras. Idempotent: a second run is quick.
# PROFCTL_TORCH picks the torch requirement (default torch==2.13.0: on machines without a GPU it resolves to the
# CPU build; set e.g. PROFCTL_TORCH='torch>=2.5' on a CUDA machine that has its own index configured).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${PROFCTL_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import profctl, torch, typer, pandas, yaml, pytest, ruff, triton, nbclient, ipykernel" >/dev/null 2>&1; then
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q "${PROFCTL_TORCH:-torch==2.13.0}"
  "$VENV/bin/python" -m pip install -q -e ".[dev,plot,ncu,notebook]"
fi
echo "$VENV"
