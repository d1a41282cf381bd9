#!/usr/bin/env bash
# Issue 31 on the GPU machines, from a copy of this tree carried as /work/main/.gpu-speed (the main tree beside it
# is the code before): bash .gpu-speed/benchmarks/gpu_session_speed.sh STEP...   (from /work/main's copy root)
#   sweep  -- part 1 on nvidia-h200-x2: benchmarks/dask_scaling.py's 16-point sweep (--iters 150): serial,
#             --workers 2 twice, PROFCTL_WARM=0 (cold), and --workers 2 with the code before (main)
#   sweep2 -- part 1 again: serial, --workers 2 twice, and --workers 2 with the code before
#   ncu    -- parts 2 and 3 on one GPU: the warm-up report recorded, source_overhead.py (both cases, the ways that
#             tell why ncu ran longer inside profctl), --once on a built-in case, the GPU tests of parts 2-3
set -u
ROOT=$PWD
NEW=$ROOT/.gpu-speed
source "$ROOT/.gpu/on-gpu.sh" >/dev/null 2>&1
for d in "$ROOT" "$NEW"; do  # profctl.workloads and profctl.builtin_recipes from a plain tree (pyproject's package-dir)
  ln -sfn ../workloads "$d/profctl/workloads"; ln -sfn ../recipes "$d/profctl/builtin_recipes"
done
export PYTHONPATH=$NEW:$PYTHONPATH PYTHONUNBUFFERED=1 PROFCTL_NCU=$NCU
T0=$(date +%s)
at() { echo "== $1 ($(( $(date +%s) - T0 ))s in)"; }
nvidia-smi -L
nvidia-smi --query-gpu=index,name,persistence_mode,clocks.sm,clocks.max.sm,driver_version --format=csv
python3 -c "import torch, distributed; print('torch', torch.__version__, 'distributed', distributed.__version__)"
cd "$NEW"
for step in "$@"; do
  case $step in
    sweep)
      at sweep
      python3 benchmarks/dask_scaling.py --out "$OUT/sweep" --iters 150 --no-captures --budget-s 330 \
        --steps serial,workers2,workers2_b,cold,before --before-path "$ROOT"
      tar czf "$OUT/sweep.tgz" -C "$OUT" sweep && rm -rf "$OUT/sweep" ;;
    sweep2)
      at sweep2
      python3 benchmarks/dask_scaling.py --out "$OUT/sweep2" --iters 150 --no-captures --budget-s 215 \
        --steps serial,workers2,workers2_b,before --before-path "$ROOT"
      tar czf "$OUT/sweep2.tgz" -C "$OUT" sweep2 && rm -rf "$OUT/sweep2" ;;
    ncu)
      export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
      at "warm-up report"
      mkdir -p "$OUT/ncu"
      REAL=$(mktemp -d)/planted_triton.ncu-rep; xz -dc tests/data/planted/planted_triton.ncu-rep.xz > "$REAL"
      python3 -c "
import time, ncu_report as m
c = m.load_report('$REAL'); a = c.range_by_idx(0).action_by_idx(0)
pc = a.metric_by_name('inst_executed').correlation_ids().as_uint64(0)
t = time.perf_counter(); a.sass_by_pc(pc); print(f'cold: a real report first lookup {time.perf_counter() - t:.4f} s')"
      bash benchmarks/ncu_warm/record.sh "$OUT/ncu" "$REAL" && cp "$OUT/ncu/ncu_warm.ncu-rep" profctl/tools/
      at "source_overhead"
      timeout 270 python3 benchmarks/source_overhead.py --out "$OUT/ncu/source_overhead.json" --rounds 3 \
        --cases program,builtin --why-ways profctl,alone,profctl-old,proc --ways profctl,alone,profctl-old \
        --old "$ROOT" 2>&1 | tee "$OUT/ncu/source_overhead.txt"
      at "GPU tests"
      timeout 170 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_ncu_progress_gpu.py \
        tests/gpu/test_ncu_gpu.py -k "progress or autotun or once or one_measured or nothing_profiled or unknown_metric" \
        2>&1 | tail -15
      at "--once on a built-in case"
      timeout 40 python3 -m profctl ncu --recipe speed-of-light -b sdpa-flash -s 1024 --heads 8 --once \
        --clock-control none --reports /tmp/once -f json > /tmp/once.json 2> /tmp/once.err; tail -3 /tmp/once.err
      python3 -c "import json; d=json.load(open('/tmp/once.json')); print('launches', [(x.get('kernel'), x.get('nvtx_range')) for x in d['meta']['launches']])" 2>&1 | tail -2
      tar czf "$OUT/ncu.tgz" -C "$OUT" ncu && rm -rf "$OUT/ncu" ;;
  esac
done
at done
