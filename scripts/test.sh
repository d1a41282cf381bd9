#!/usr/bin/env bash
# The test suite as CI runs it: lint, types, then pytest (GPU tests are skipped without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(bash scripts/setup-venv.sh | tail -n 1)
"$VENV/bin/ruff" check .
"$VENV/bin/mypy"
"$VENV/bin/mypy" benchmarks  # scripts, not a package: checked on their own
"$VENV/bin/python" -m pytest -q "$@"
