# Sourced by the benchmarks/gpu_session_*.sh scripts on the GPU machine: the carried tools (.gpu/on-gpu.sh, or
# /tmp/gpu-site/on-gpu.sh on a warm machine that already unpacked them), profctl's tool paths, and the two helpers
# every session uses: `at STEP` (a timestamped heading) and `want STEP` (whether $STEPS, default $DEFAULT_STEPS,
# names it). `install` installs this tree (editable) into the GPU machine's Python.
set -u
T0=$(date +%s)
if [ -f .gpu/on-gpu.sh ]; then source .gpu/on-gpu.sh >/dev/null 2>&1; else source /tmp/gpu-site/on-gpu.sh >/dev/null 2>&1; fi
export PROFCTL_NSYS=${NSYS:-} PROFCTL_NCU=${NCU:-} PYTHONUNBUFFERED=1
P="python3 -m profctl"
at() { echo "== $1 ($(( $(date +%s) - T0 ))s in)"; }
want() { case " ${STEPS:-${DEFAULT_STEPS:-}} " in *" $1 "*) return 0;; esac; return 1; }
install() { python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pipe.log 2>&1 || tail -5 /tmp/pipe.log; }
