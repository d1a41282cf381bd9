#!/usr/bin/env bash
# Every step profctl's GPU sessions run, in one script: run it on the GPU machine from the root of the tree to test,
# naming the steps (in order), e.g. (carry [".gpu"]):
#   bash benchmarks/gpu.sh install facts tests overhead
#   bash benchmarks/gpu.sh list                       # the steps, one line each
# Outputs go under $OUT (at most 8 files come back: the steps that write many tar them). Every step has its own time
# limit, cut to what is left of BUDGET seconds (default 560) since the script started, so what finished comes back
# even when a later step runs out of time. Clocks are never touched (--clock-control none throughout).
# benchmarks/RESULTS.md and the data READMEs say which steps make which numbers; only the steps behind today's
# figures are kept. Superseded steps (sweep2..sweep6, ncu_overhead5, ncu_ahead, the one-off test reruns...) are in
# git log -- benchmarks/gpu.sh, the session scripts before them (gpu_session*.sh, proton_session*.sh, ncu_gpu.sh,
# ncu_fixture.sh, compare_noise.sh, gpu_programs.sh) too; benchmarks/history/ has the runs they made.
set -u
if [ $# -eq 0 ] || [ "$1" = list ]; then  # the steps, one line each (before the GPU environment is set up)
  grep -E "^step_[a-z0-9_]+\(\)" "$0" | sed -E 's/^step_([a-z0-9_]+)\(\) \{ *(# )?/\1: /;' \
    | awk -F': ' '{ gsub("_", "-", $1); print }' OFS=': '
  exit 0
fi
T0=$(date +%s)
BUDGET=${BUDGET:-560}
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
for env in "${GPU_ENV:-}" .gpu/on-gpu.sh ../.gpu/on-gpu.sh /tmp/gpu-site/on-gpu.sh; do
  if [ -n "$env" ] && [ -f "$env" ]; then source "$env" >/dev/null 2>&1; break; fi
done
export PROFCTL_NSYS=${NSYS:-${PROFCTL_NSYS:-}} PROFCTL_NCU=${NCU:-${PROFCTL_NCU:-}} PYTHONUNBUFFERED=1
P="python3 -m profctl"
at() { echo "== $1 ($(( $(date +%s) - T0 ))s in)"; }
#: seconds a step may take: its own limit, or what is left of BUDGET
lim() { local left=$(( BUDGET - ($(date +%s) - T0) - 10 )); [ $left -lt $1 ] && echo $(( left > 5 ? left : 5 )) || echo $1; }
latest() { ls -d "$1"/*/ 2>/dev/null | tail -1; }
#: pack DIR [FILE...]: $OUT/DIR (and files of $OUT) into $OUT/DIR.tgz, then DIR removed (at most 8 files come back)
pack() { local d=$1; shift; tar czf "$OUT/$d.tgz" -C "$OUT" "$d" "$@" && rm -rf "${OUT:?}/$d"; }
#: a plain tree (not pip-installed) imports profctl.workloads and profctl.builtin_recipes through links
plain_tree() { ln -sfn ../workloads "$1/profctl/workloads"; ln -sfn ../recipes "$1/profctl/builtin_recipes"; }

# ------------------------------------------------------------------------------------------------ setting up
step_install() {  # this tree, editable, into the machine's Python
  python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pipe.log 2>&1 || tail -5 /tmp/pipe.log
  python3 -c "import profctl.workloads.attention, profctl.builtin_recipes; print('profctl import ok')" 2>&1 | tail -1
  # bytecode, as a pip install leaves it: this machine's Python writes none (PYTHONDONTWRITEBYTECODE), so every
  # profctl process compiled its modules again (78 files, 0.2 s, in the profile of issue 31's ncu runs)
  python3 -c "import os, sys; print('dont_write_bytecode', sys.flags.dont_write_bytecode, os.environ.get('PYTHONDONTWRITEBYTECODE'))"
  python3 -m compileall -q -j 0 profctl workloads ${BEFORE:+"$BEFORE/profctl" "$BEFORE/workloads"} /tmp/gpu-site \
    > /dev/null 2>&1; echo "compileall: $?"
  # and the interpreter's own packages (torch, triton, numpy, pandas...): its installer left no .pyc at all (torch:
  # 0 of 2141 modules), so every process there compiled torch again -- `import torch` 3.9-4.4 s (issue 31, call 4);
  # a user's Python writes them on the first import. SITE_BYTECODE=0 measures the machine as it comes.
  if [ "${SITE_BYTECODE:-1}" = 1 ]; then
    local t0; t0=$(date +%s)
    timeout 240 python3 -m compileall -q -j 0 "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
      > /dev/null 2>&1; echo "site-packages compileall: $? in $(( $(date +%s) - t0 )) s"
  fi
  /usr/bin/time -f "import torch %e s" python3 -c "import torch"
}
step_facts() {  # the GPU, driver, clocks and versions, into $OUT/gpu.txt
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpu.txt"
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUT/gpu.txt"
  python3 -c "import distributed; print('distributed', distributed.__version__)" >> "$OUT/gpu.txt" 2>&1
  cat "$OUT/gpu.txt"
}

# ------------------------------------------------------------------------------------------------ GPU tests
step_tests() {  # every GPU test (TESTS: other test files); all of them take longer than one call leaves after install
  # (tests1 + tests2 + proton: ~9 min on the H200): the limit is what BUDGET leaves, and its SIGINT stops the session
  # (tests/gpu/conftest.py) instead of failing the one test it lands in (issue 39 item 11); tests1/tests2 split it
  timeout -s INT "$(lim 550)" python3 -m pytest -m gpu ${TESTS:-tests/gpu tests/unit/test_triton_attention.py} -q -rs \
    -p no:cacheprovider --durations=15 > "$OUT/gpu_tests.txt" 2>&1
  tail -30 "$OUT/gpu_tests.txt"
}
step_tests1() {  # ncu, nsys, torch, explain, compare (and the record_function NVTX check)
  timeout -s INT "$(lim ${T1:-520})" python3 -m pytest -m gpu -q -rs -p no:cacheprovider --durations=8 \
    tests/gpu/test_ncu_gpu.py tests/gpu/test_nsys_gpu.py tests/gpu/test_torch_gpu.py tests/gpu/test_explain_gpu.py \
    tests/gpu/test_compare_gpu.py $(ls tests/gpu/test_record_function*.py tests/gpu/test_new_user*.py 2>/dev/null) \
    > "$OUT/gpu_tests1.txt" 2>&1
  tail -14 "$OUT/gpu_tests1.txt"
}
step_tests2() {  # bench, models, programs, the Triton bf16 and FP8 kernels
  timeout -s INT "$(lim ${T2:-400})" python3 -m pytest -m gpu -q -rs -p no:cacheprovider --durations=8 \
    tests/gpu/test_bench_gpu.py tests/gpu/test_models_gpu.py tests/gpu/test_program_gpu.py \
    tests/unit/test_triton_attention.py tests/unit/test_triton_fp8.py tests/gpu/test_record_function_nvtx_gpu.py \
    > "$OUT/gpu_tests2.txt" 2>&1
  tail -14 "$OUT/gpu_tests2.txt"
}

# ------------------------------------------------------------------------------------------------ users' code
programs() {  # your own program under each profiler (examples/my_program.py)
  $P nsys --reports runs -f markdown --limit 8 -- python3 examples/my_program.py --steps 3 --seqlen 2048
  $P nsys --reports runs -f markdown --range myapp@attention -- python3 examples/my_program.py --steps 3 --seqlen 2048
  $P ncu --reports runs --clock-control none --range myapp@attention -f markdown -- \
    python3 examples/my_program.py --steps 2 --seqlen 2048
  $P ncu --reports runs --clock-control none --kernel _scale_add --launch-count 1 -f markdown -- \
    python3 examples/my_program.py --steps 2
  $P torch --reports runs -f markdown --limit 10 --range mlp -- python3 examples/my_program.py --steps 3 --seqlen 2048
}
step_examples() {  # the users'-code examples, into $OUT/programs.txt
  timeout -s INT "$(lim 120)" bash -c "$(declare -f programs); P='$P'; programs" > "$OUT/programs.txt" 2>&1
  grep -E "error|launch\(es\) profiled|^## " "$OUT/programs.txt" | head -20
}
step_ncu_model() {  # ncu on a model's attention in train and decode steps, added to $OUT/programs.txt
  timeout -s INT "$(lim 120)" $P ncu --reports runs --clock-control none --model llama-7b --layers 2 --mode train,decode \
    -s 2048 -b sdpa-flash -f markdown >> "$OUT/programs.txt" 2>&1
  grep -E "error|launch\(es\) profiled" "$OUT/programs.txt" | tail -4
}

# ------------------------------------------------------------------------------------------------ models
M_BENCH="bench --reports runs -q --baseline eager"
step_decode() {  # decode against context, llama-7b shapes, 4 layers
  timeout "$(lim 80)" $P $M_BENCH --model llama-7b --layers 4 --mode decode --batch 1 -s 512,4096,32768 \
    -b sdpa-cudnn,sdpa-flash,triton,eager --iters 10 --warmup 3 -f json -o "$OUT/decode.json" > "$OUT/decode.log" 2>&1
  [ -s "$OUT/decode.json" ] && $P report "$OUT/decode.json" -f markdown > "$OUT/decode.md" 2>&1
  head -40 "$OUT/decode.md" 2>/dev/null
}
step_mem24() {  # training under a 24 GB cap
  timeout "$(lim 60)" $P $M_BENCH --model llama-7b --layers 4 --mode train --batch 1 -s 4096,16384 -b sdpa-flash,eager \
    --memory-limit 24 --iters 3 --warmup 1 -f json -o "$OUT/mem24.json" > "$OUT/mem24.log" 2>&1
  [ -s "$OUT/mem24.json" ] && $P report "$OUT/mem24.json" -f markdown > "$OUT/mem24.md" 2>&1
  head -40 "$OUT/mem24.md" 2>/dev/null
}
step_decode_part_timing() {  # decode with and without part timing, twice each, interleaved
  local D="$P $M_BENCH --model llama-7b --layers 4 --mode decode --batch 1 -s 512,4096,32768
    -b sdpa-cudnn,sdpa-flash,triton,eager --iters 10 --warmup 3"
  {
    for round in 1 2; do
      for pt in --part-timing --no-part-timing; do
        echo "### round $round $pt"
        timeout -s INT "$(lim 60)" $D $pt -f markdown --json "$OUT/decode_r${round}${pt#--}.json" 2>&1 | grep '^|'
      done
    done
  } > "$OUT/decode_part_timing.md" 2>&1
  cat "$OUT/decode_part_timing.md"
}

# ------------------------------------------------------------------------------------------------ attention
step_why_explain() {  # the common path: profctl ncu --recipe explain on Triton and cuDNN, then profctl explain
  local R=/tmp/why_runs
  ( time timeout -s INT "$(lim 200)" $P ncu --recipe explain -b triton,sdpa-cudnn -s 4096 --heads 32 \
      --clock-control none --reports $R -f markdown > /tmp/why_ncu.md 2>&1 ) 2>&1 | tail -3
  tail -3 /tmp/why_ncu.md
  $P explain latest --reports $R --kernel _fwd_kernel --vs cudnn -f markdown -o "$OUT/explain_before.md" 2>&1 | tail -2
  head -40 "$OUT/explain_before.md"
}
step_explain_live() {  # issue 43: the floor, the bounds and the kernel choice live: FA2, cuDNN and Triton on the explain
  # recipe, then explain's pairs and kernels alone (JSON and text into $OUT/explain_live.tgz)
  local R=/tmp/live_runs D="$OUT/explain_live"
  mkdir -p "$D"
  ( time timeout -s INT "$(lim 240)" $P ncu --recipe explain -b sdpa-flash,sdpa-cudnn,triton -s 4096 --heads 32 \
      --clock-control none --reports $R -f markdown > "$D/ncu.md" 2>&1 ) 2>&1 | tail -3
  tail -3 "$D/ncu.md"
  local i=0
  for args in "--kernel flash_fwd --vs cudnn" "--kernel _fwd_kernel --vs cudnn" "--kernel _fwd_kernel" \
              "--kernel cudnn" "--kernel flash_fwd" "--kernel fwd"; do
    i=$((i + 1))
    $P explain latest --reports $R $args > "$D/explain_$i.txt" 2>&1; echo "explain $args: exit $?" | tee -a "$D/index.txt"
    $P explain latest --reports $R $args -f json -o "$D/explain_$i.json" > /dev/null 2>&1
    head -12 "$D/explain_$i.txt"
  done
  cp -r $R "$D/runs" 2>/dev/null; find "$D/runs" -name '*.ncu-rep' -size +3M -delete 2>/dev/null
  pack explain_live
}
step_explain_masks() {  # issue 47: matrix work in one unit, live: flex, cuDNN and profctl's Triton forward, causal
  # s8192 h16 d128, under the explain recipe and --recipe full; explain's pairs on both (text and JSON, the reports
  # xz'd, into $OUT/explain_masks.tgz). The two recipes must lead with the same cause, and no wasted-work where the
  # counted work is equal
  local D="$OUT/explain_masks"
  mkdir -p "$D"
  for recipe in explain full; do
    local R=/tmp/masks_$recipe
    ( time timeout -s INT "$(lim 200)" $P ncu --recipe $recipe -b flex,sdpa-cudnn,triton -s 8192 --heads 16 -d 128 \
        --causal --clock-control none --reports $R -f markdown > "$D/ncu_$recipe.md" 2>&1 ) 2>&1 | tail -3
    tail -3 "$D/ncu_$recipe.md"
    local i=0
    for args in "--kernel triton_tem --vs cudnn" "--kernel _fwd_kernel --vs cudnn" "--kernel _fwd_kernel" \
                "--kernel triton_tem"; do
      i=$((i + 1))
      $P explain latest --reports $R $args > "$D/${recipe}_$i.txt" 2>&1; echo "$recipe explain $args: exit $?"
      $P explain latest --reports $R $args -f json -o "$D/${recipe}_$i.json" > /dev/null 2>&1
      grep -E "^(verdict|first cause)" "$D/${recipe}_$i.txt" | head -3
    done
    for f in $R/*/profile.ncu-rep; do [ -f "$f" ] && xz -6 -c "$f" > "$D/masks_$recipe.ncu-rep.xz"; done
  done
  pack explain_masks
}
step_api_gpu() {  # issue 51: the Python API's GPU paths: the notebook's GPU cell (bench, ncu, explain of a user's
  # function), profctl.ab and profctl.proton (benchmarks/api_gpu.py; needs the ncu-report wheel carried in .gpu/whl)
  timeout -s INT "$(lim 300)" python3 benchmarks/api_gpu.py /tmp/api-reports > "$OUT/api_gpu.txt" 2>&1
  echo "api_gpu: exit $?"; grep -E "^== " "$OUT/api_gpu.txt"
}
step_explain_unseen() {  # issue 43: explain alone on kernels none of its tests hold (eager's cuBLAS GEMMs and softmax,
  # SDPA's efficient backend), verdicts and first causes into $OUT/explain_unseen.tgz
  local R=/tmp/unseen_runs D="$OUT/explain_unseen"
  mkdir -p "$D"
  timeout -s INT "$(lim 200)" $P ncu --recipe explain -b eager,sdpa-efficient -s 4096 --heads 32 \
      --clock-control none --reports $R -f markdown > "$D/ncu.md" 2>&1; tail -3 "$D/ncu.md"
  $P report latest --reports $R -f json -o "$D/report.json" > /dev/null 2>&1
  python3 - "$D/report.json" > "$D/names.txt" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
for k in d.get("kernels", []):
    print(k.get("short_name") or k.get("name"))
PY
  sort -u "$D/names.txt" | head -20
  local i=0
  for k in $(sort -u "$D/names.txt" | head -8); do
    i=$((i + 1))
    $P explain latest --reports $R --kernel "^$k\$" -f json -o "$D/alone_$i.json" > /dev/null 2>&1
    $P explain latest --reports $R --kernel "^$k\$" 2>&1 | grep -E "^(A:|verdict|first cause|profctl: error)" | head -4
  done
  for f in $R/*/profile.ncu-rep; do xz -9e -c "$f" > "$D/unseen_explain_recipe.ncu-rep.xz"; done
  pack explain_unseen
}
step_fixes_record() {  # issue 43's real fixes and healthy kernels, plain ncu (tests/data/fixes/record.sh; FIX_GROUPS)
  DEADLINE=$(lim ${FIX_DEADLINE:-540}) bash tests/data/fixes/record.sh "$OUT/fixes" ${FIX_STEPS:-} > "$OUT/fixes.txt" 2>&1
  tail -8 "$OUT/fixes.txt"
}
step_why_change() {  # the change explain pointed to (KernelConfig.pipe): configs, then before/after explain and bench
  timeout -s INT "$(lim 200)" python3 benchmarks/triton_fwd_configs.py > "$OUT/configs_full.json" 2>/tmp/cfg.err \
    || tail -3 /tmp/cfg.err
  timeout -s INT "$(lim 150)" python3 benchmarks/triton_fwd_configs.py --causal \
    --configs m128n128w8s3,m64n64w4s3,m64n64w4s3-pipe,m128n128w8s3-pipe,m128n64w8s3-pipe > "$OUT/configs_causal.json" \
    2>>/tmp/cfg.err
  local BEST
  BEST=${BEST:-$(python3 - "$OUT/configs_full.json" "$OUT/configs_causal.json" <<'PY'
import json, sys
for f in sys.argv[1:]:
    d = json.load(open(f))
    print(d["shape"], file=sys.stderr)
    for k, v in d["configs"].items():
        print(f"  {k:24s} {v.get('tflops', 0) or 0:7.1f} TFLOP/s  err {v.get('max_abs_err')}  {v.get('error', '')[:60]}",
              file=sys.stderr)
d = json.load(open(sys.argv[1]))["configs"]
ok = {k: v["tflops"] for k, v in d.items() if "tflops" in v and k.endswith("-pipe")}
print(max(ok, key=ok.get) if ok else "")
PY
)}
  echo "best pipelined config: $BEST"
  [ -n "$BEST" ] || return
  local R=/tmp/why2 B A
  timeout -s INT "$(lim 120)" $P ncu --recipe explain -b triton,sdpa-cudnn -s 4096 --heads 32 --clock-control none \
    --reports $R/before -f json > /dev/null 2>/tmp/before.err || tail -3 /tmp/before.err
  PROFCTL_TRITON_CONFIG="fwd=$BEST" timeout -s INT "$(lim 100)" $P ncu --recipe explain -b triton -s 4096 --heads 32 \
    --clock-control none --reports $R/after -f json > /dev/null 2>/tmp/after.err || tail -3 /tmp/after.err
  B=$(latest $R/before); A=$(latest $R/after)
  { echo "## before (default) vs after (fwd=$BEST), the Triton forward"; $P explain $B $A --kernel _fwd_kernel -f markdown
    echo; echo "## after vs cuDNN"; $P explain $A $B --kernel _fwd_kernel --vs cudnn -f markdown; } \
    > "$OUT/explain_change.md" 2>&1
  grep -E "^\*\*A takes|^\| (stall: barrier|resident|instructions|tensor pipe|duration) " "$OUT/explain_change.md"
  local BENCH="$P bench -b triton,sdpa-cudnn -s 4096 --heads 32 --causal false,true --iters 30 --warmup 10 -f markdown"
  { for r in 1 2; do echo "### round $r default"; timeout 120 $BENCH 2>&1 | grep '^|'
      echo "### round $r fwd=$BEST"; PROFCTL_TRITON_CONFIG="fwd=$BEST" timeout 120 $BENCH 2>&1 | grep '^|'; done
  } > "$OUT/bench_change.md"
  grep -E "triton|###" "$OUT/bench_change.md"
}
step_fp8() {  # the FP8 forward against bf16, config by config (benchmarks/fp8_attention.py; FP8_CONFIGS, FP8_SHAPES,
  # FP8_ARGS: more of its options)
  timeout -s INT "$(lim 170)" python3 benchmarks/fp8_attention.py --out "$OUT" ${FP8_CONFIGS:+--configs $FP8_CONFIGS} \
    ${FP8_SHAPES:+--shapes $FP8_SHAPES} $FP8_ARGS > /tmp/fp8.json 2> "$OUT/fp8_progress.txt"
  tail -25 "$OUT/fp8_progress.txt"
  python3 - <<'PY'
import json
d = json.load(open("/tmp/fp8.json"))
print("table_fp8_first", d.get("table_fp8_first"))
for n, r in d["shapes"].items():
    print(n, {k: r.get(k) for k in ("bf16_tflops", "fp8_default_tflops", "fp8_best_tflops", "fp8_best_config",
                                    "ratio_best")})
PY
}
step_fp8_tests() {  # the FP8 kernel's GPU tests, and bench's
  timeout -s INT "$(lim 200)" python3 -m pytest -m gpu -q -rs -p no:cacheprovider tests/unit/test_triton_fp8.py \
    tests/gpu/test_bench_gpu.py > "$OUT/gpu_tests_fp8.txt" 2>&1
  tail -3 "$OUT/gpu_tests_fp8.txt"
}
step_fp8_explain() {  # profctl explain on the FP8 kernel against the bf16 one
  local R=/tmp/fp8runs
  timeout -s INT "$(lim 150)" $P ncu --recipe explain -b triton --dtype bf16,fp8 -s 4096 --heads 32 -d 128 \
    --clock-control none --reports $R -f json > /dev/null 2> /tmp/fp8ncu.err || tail -3 /tmp/fp8ncu.err
  $P explain latest --reports $R --kernel _fwd_fp8_kernel --vs '^_fwd_kernel' -f markdown > "$OUT/explain_fp8.md" 2>&1
  grep -E "^\*\*A takes|^\| (tensor pipe|stall: |instructions|duration) " "$OUT/explain_fp8.md" | head -14
}
step_seed004() {  # seed 004's per-GPU forward table rows (SEED_BACKENDS and SEED_FP8=1|0 pick; they add up)
  local S="--batch 8 --heads 32 --head-dim 64 -s 512,1024,2048,4096,8192 --pass fwd --iters 20 --warmup 5 --baseline none"
  timeout -s INT "$(lim 400)" $P bench -b ${SEED_BACKENDS:-eager,sdpa-flash,sdpa-cudnn,triton} --dtype bf16 $S -f json \
    -o /tmp/seed_bf16.json > /tmp/seed_bf16.log 2>&1; tail -2 /tmp/seed_bf16.log
  if [ "${SEED_FP8:-1}" = 1 ]; then
    timeout -s INT "$(lim 120)" $P bench -b triton --dtype fp8 $S -f json -o /tmp/seed_fp8.json > /tmp/seed_fp8.log 2>&1
    tail -2 /tmp/seed_fp8.log
  fi
  python3 - "$OUT/seed004_h200.json" <<'PY'
import json, os, sys
rows = json.load(open("/tmp/seed004.json")) if os.path.exists("/tmp/seed004.json") else []
for f in ("/tmp/seed_bf16.json", "/tmp/seed_fp8.json"):
    if os.path.exists(f):
        rows += json.load(open(f))
        os.remove(f)
json.dump(rows, open("/tmp/seed004.json", "w"))
json.dump(rows, open(sys.argv[1], "w"), indent=1)
for r in rows:
    print(r["backend"], r["dtype"], r["seqlen_q"], r["status"], r.get("median_ms") and round(r["median_ms"], 3),
          r.get("tflops") and round(r["tflops"]), (r.get("reason") or "")[:80])
PY
}

# ------------------------------------------------------------------------------------------------ profctl's cost
step_overhead() {  # profctl's wall time over ncu and nsys alone (benchmarks/tool_overhead.py; ROUNDS)
  timeout -s INT "$(lim 340)" python3 benchmarks/tool_overhead.py --out "$OUT/overhead.json" --rounds ${ROUNDS:-2} \
    > "$OUT/overhead.log" 2>&1
  tail -16 "$OUT/overhead.log"
}
step_source_overhead() {  # profctl ncu --recipe stalls against ncu alone (benchmarks/source_overhead.py), both cases
  # (CASES), ROUNDS (5) rounds, the ways alternating, one GPU; BEFORE: the code before too (profctl-old)
  export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
  [ -n "${BEFORE:-}" ] && plain_tree "$BEFORE"
  local W=profctl,alone${BEFORE:+,profctl-old}
  mkdir -p "$OUT/ncu_overhead"
  timeout "$(lim ${OVER_S:-420})" python3 benchmarks/source_overhead.py --out "$OUT/ncu_overhead/source_overhead.json" \
    --rounds "${ROUNDS:-5}" --cases "${CASES:-program,builtin}" --why-ways "$W" --ways "$W" ${BEFORE:+--old "$BEFORE"} \
    2>&1 | tee "$OUT/ncu_overhead/source_overhead.txt" | tail -14
  pack ncu_overhead
}
step_warm() {  # warm workers on the one GPU here: serial vs --workers 1 vs PROFCTL_WARM=0, and a crash mid-sweep
  local S="-b sdpa-flash,sdpa-cudnn -s 1024,2048,4096,8192 --causal false,true --heads 32 --iters 30 --warmup 10"
  S="$S --baseline none -q -f json"
  local name X t0
  for name in serial warm1 cold1; do
    case $name in serial) X="";; *) X="--workers 1 --gpus 0";; esac
    t0=$(date +%s.%N)
    if [ $name = cold1 ]; then
      PROFCTL_WARM=0 timeout 300 $P bench $S $X -o /tmp/$name.json --reports /tmp/wr > /tmp/$name.log 2>&1
    else
      timeout 300 $P bench $S $X -o /tmp/$name.json --reports /tmp/wr > /tmp/$name.log 2>&1
    fi
    echo "$name rc=$? wall=$(python3 -c "import time;print(round(time.time()-$t0,1))") s"
  done
  PROFCTL_FAULT=crash:sdpa-cudnn timeout 300 $P bench $S --workers 1 --gpus 0 -o /tmp/crash.json --reports /tmp/wr \
    > /tmp/crash.log 2>&1
  echo "crash sweep rc=$?"
  python3 - <<'PY' | tee "$OUT/warm.txt"
import glob, json
r = {n: json.load(open(f"/tmp/{n}.json")) for n in ("serial", "warm1", "cold1", "crash")}
key = lambda x: (x["backend"], x["seqlen_q"], x["causal"])
s = {key(x): x for x in r["serial"]}
for n in ("warm1", "cold1"):
    ratios = [x["median_ms"] / s[key(x)]["median_ms"] for x in r[n]
              if x["status"] == "ok" and s[key(x)]["status"] == "ok"]
    print(n, "points", len(r[n]), "ok", sum(x["status"] == "ok" for x in r[n]),
          "median ratio to serial: min %.3f max %.3f" % (min(ratios), max(ratios)))
print("crash sweep:", [(x["backend"], x["seqlen_q"], x["status"]) for x in r["crash"]][:16])
m = json.load(open(sorted(glob.glob("/tmp/wr/*-bench-*/manifest.json"))[-1]))
print("crash sweep child starts:", len([t for t in m["tools"] if t["name"] == "workload"]),
      "parts:", len(m.get("parts") or []))
PY
}
sweep_run() {  # sweep_run NAME STEPS LIMIT: dask_scaling.py's 16-point sweep (nvidia-h200-x2) into $OUT/NAME;
  # BEFORE: the code before, for the steps "before" and "serial_before"
  [ -n "${BEFORE:-}" ] && plain_tree "$BEFORE"
  python3 benchmarks/dask_scaling.py --out "$OUT/$1" --iters 150 --no-captures --budget-s "$(lim "$3")" \
    --steps "$2" ${BEFORE:+--before-path "$BEFORE"}
}
step_sweep() {  # the 16-point sweep over two GPUs (run install first: the site's bytecode): serial, --workers 2
  # twice, cold (PROFCTL_WARM=0), --workers 2 a third time (BEFORE: and serial by the code before)
  sweep_run sweep serial,workers2,workers2_b,cold,workers2_c${BEFORE:+,serial_before} 330
  pack sweep
}

# ------------------------------------------------------------------------------------------------ ncu
ncu_phase() {  # ncu_phase 1|2: the ncu checks (1) or the headline command's wall time (2), under $OUT/ncu-<phase>
  local phase=$1 O=$OUT/ncu-$1
  mkdir -p "$O"
  local NCU_EXE=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
  export PROFCTL_NCU=$NCU_EXE PROFCTL_REPORTS=$O/reports
  timed() { # name, command...
    local name=$1; shift
    local t0; t0=$(date +%s.%N)
    "$@" > "$O/$name.out" 2> "$O/$name.err"; local rc=$?
    echo "$name rc=$rc wall_s=$(python3 -c "print(round($(date +%s.%N) - $t0, 3))")" | tee -a "$O/times.txt"
  }
  echo "phase $phase on $(hostname) ncu=$NCU_EXE"; "$NCU_EXE" --version | tail -1
  python3 -c 'import flash_attn.cute' 2>/dev/null && echo "fa4: importable" || echo "fa4: NOT importable"
  python3 -c 'import ncu_report; print("ncu_report", ncu_report.__file__)' || true
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv || true
  local W="--seqlen 2048 --clock-control none"
  if [ "$phase" = 1 ]; then
    "$NCU_EXE" --list-sets > "$O/list-sets.txt" 2>&1
    "$NCU_EXE" --list-sections > "$O/list-sections.txt" 2>&1
    "$NCU_EXE" --query-metrics > "$O/query-metrics-device.txt" 2>&1
    "$NCU_EXE" --query-metrics --chip ga100 > "$O/query-metrics-ga100.txt" 2>&1
    "$NCU_EXE" --metrics sm__no_such_counter_anywhere.sum python3 -c \
      "import torch; (torch.ones(4, device='cuda') + 1).sum().item()" > "$O/unknown-metric.txt" 2>&1
    timed tc3 $P ncu --recipe tensor-core --backend sdpa-flash,sdpa-cudnn,eager $W
    # the same ncu command line with --profile-from-start off (the workload brackets each case's measured
    # iterations with cudaProfilerStart/Stop)
    python3 - "$(ls -d "$O"/reports/*-ncu-* | tail -1)" "$O" <<'PY'
import json, subprocess, sys, time
rep, out = sys.argv[1], sys.argv[2]
argv = json.load(open(rep + "/manifest.json"))["ncu_argv"]
argv[argv.index("--export") + 1] = out + "/exp-pfs-off"
argv = argv[:1] + ["--profile-from-start", "off"] + argv[1:]
t0 = time.perf_counter()
rc = subprocess.run(argv, stdout=open(out + "/exp-pfs-off.log", "w"), stderr=subprocess.STDOUT).returncode
print(f"exp-pfs-off rc={rc} wall_s={time.perf_counter() - t0:.1f}")
PY
    grep -c "==PROF== Profiling" "$O/exp-pfs-off.log"
    for r in dram sm-throughput occupancy speed-of-light memory; do
      timed "$r" $P ncu --recipe "$r" --backend sdpa-flash,eager $W
    done
    timed full $P ncu --recipe full --backend sdpa-flash --seqlen 1024 --clock-control none
    timed fwdbwd $P ncu --recipe tensor-core --backend sdpa-flash,eager --pass fwd+bwd $W
    timed nothing $P ncu --recipe tensor-core --backend sdpa-flash --kernel '^no_such_kernel$' $W
    timed fixture $P ncu --recipe tensor-core --backend sdpa-flash,eager --seqlen 256 --heads 2 --clock-control none
    for f in "$O"/reports/*/profile.ncu-rep; do
      "$NCU_EXE" --import "$f" --csv --page raw --print-units base > "${f%.ncu-rep}.raw.csv" 2>&1
      "$NCU_EXE" --import "$f" --csv --page details --print-units base > "${f%.ncu-rep}.details.csv" 2>&1
    done
    timed pytest python3 -m pytest -m gpu tests/gpu/test_ncu_gpu.py -q -p no:cacheprovider
  else
    python3 -c 'import flash_attn.cute' || return 3
    timed headline $P ncu --recipe tensor-core --backend sdpa-flash,sdpa-cudnn,fa4,eager $W
    local rep; rep=$(ls -d "$O"/reports/*-ncu-* | tail -1)
    python3 - "$rep" <<'PY' | tee -a "$O/times.txt"
import json, sys
m = json.load(open(sys.argv[1] + "/summary.json"))["meta"]
print(f"headline ncu_wall_s={m['ncu_wall_s']} profctl_total_wall_s(in-process)={m['total_wall_s']} "
      f"launches={len(m['launches'])}")
open(sys.argv[1] + "/workload_argv.txt", "w").write(
    "\n".join(json.load(open(sys.argv[1] + "/manifest.json"))["workload_argv"]))
PY
    # the same ncu command line profctl ran (from the run manifest), run again on its own; then ncu --set full over
    # the whole workload (no NVTX filter, every launch)
    python3 - "$rep" "$O" <<'PY'
import json, os, signal, subprocess, sys, time
rep, out = sys.argv[1], sys.argv[2]
man = json.load(open(rep + "/manifest.json"))
argv = list(man["ncu_argv"])
argv[argv.index("--export") + 1] = out + "/single"
t0 = time.perf_counter()
rc = subprocess.run(argv, stdout=open(out + "/ncu-single.log", "w"), stderr=subprocess.STDOUT).returncode
with open(out + "/times.txt", "a") as f:
    f.write(f"ncu-single rc={rc} wall_s={time.perf_counter() - t0:.3f}\n")
full = [argv[0], "--config-file", "off", "--force-overwrite", "--export", out + "/setfull", "--clock-control", "none",
        "--set", "full", *man["workload_argv"]]
t0 = time.perf_counter()
p = subprocess.Popen(full, stdout=open(out + "/setfull.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)
try:
    rc = p.wait(timeout=300)
except subprocess.TimeoutExpired:
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    rc = "killed-after-300s"
with open(out + "/times.txt", "a") as f:
    f.write(f"setfull rc={rc} wall_s={time.perf_counter() - t0:.3f}\n")
PY
    cat "$O/times.txt"
    rm -f "$O"/setfull.ncu-rep
  fi
  pack "ncu-$phase"
}
step_ncu_checks() {  # recipes, metric names, filters, error messages, fixture candidates, GPU tests
  ncu_phase 1
}
step_ncu_headline() {  # the headline command with FA4, its wall time vs ncu alone and ncu --set full
  ncu_phase 2
}
step_ncu_fixture() {  # the small profctl-made .ncu-rep fixtures of tests/data (its README), and the ncu GPU tests
  export PROFCTL_REPORTS=/tmp/ncu-fx
  python3 -m pytest -m gpu tests/gpu/test_ncu_gpu.py -q -p no:cacheprovider 2>&1 | tail -40
  mk() { # name, profctl args...
    local name=$1; shift
    $P ncu "$@" --clock-control none --format markdown > /tmp/ncu-fx-$name.md 2> /tmp/ncu-fx-$name.err
    local d; d=$(ls -d /tmp/ncu-fx/*-ncu-* | tail -1)
    cp "$d/profile.ncu-rep" "$OUT/$name.ncu-rep" && gzip -9 -f "$OUT/$name.ncu-rep"
    "$PROFCTL_NCU" --import "$d/profile.ncu-rep" --csv --page raw --print-units base > "$OUT/${name}_raw.csv" \
      && gzip -9 -f "$OUT/${name}_raw.csv"
    cat /tmp/ncu-fx-$name.err; head -c 1500 /tmp/ncu-fx-$name.md; echo; ls -la "$OUT"
  }
  mk profctl_tc --recipe tensor-core --backend sdpa-flash,eager --seqlen 256 --heads 2 --warmup 1
  mk profctl_occ_fwdbwd --recipe occupancy --backend sdpa-flash --pass fwd+bwd --seqlen 256 --heads 2 --warmup 1
}

# ------------------------------------------------------------------------------------------------ compare and the gate
step_compare_noise() {  # run-to-run noise of profctl bench and what profctl compare makes of it
  local out=$OUT
  export PROFCTL_REPORTS=/tmp/compare-noise-reports
  rm -rf "$PROFCTL_REPORTS"
  local S=(--device cuda --seqlen 1024,2048,4096 --causal false,true --heads 32 --head-dim 128 --dtype bf16
           --warmup 10 --iters 100 --baseline none --no-check -q --label attn)
  {
    for b in sdpa-flash sdpa-flash sdpa-flash sdpa-math; do
      $P bench "${S[@]}" --backend "$b"; echo "bench $b rc=$?"
    done
    mapfile -t R < <(ls "$PROFCTL_REPORTS")
    $P runs
    $P show "${R[0]}" --format markdown
    for pair in "0 1" "0 2" "1 2" "0 3"; do
      set -- $pair
      echo "=== compare ${R[$1]} ${R[$2]} --fail-if-slower 5%"
      $P compare "${R[$1]}" "${R[$2]}" --fail-if-slower 5% --format markdown; echo "rc=$?"
    done
  } 2>&1 | tee "$out/compare_noise.log"
  tar czf "$out/compare_noise_runs.tgz" -C "$PROFCTL_REPORTS" .
}
GATE_RUNS=/tmp/gate-runs
gate_verdicts() {  # the verdicts of a compare -f json on one line each: counts, then every judged row
  python3 - "$1" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"  (no compare output: {e})"); sys.exit(0)
print(f"  counts {d['counts']}; band ±{d['threshold']*100:g}% ({d.get('threshold_from')})")
for r in d["rows"]:
    if r["verdict"] == "not judged":
        continue
    ci = f"{(r['ci_lo']-1)*100:+.1f}%..{(r['ci_hi']-1)*100:+.1f}%" if r.get("ci_lo") else "n/a"
    nf = f"±{r['noise_floor']*100:.2f}%" if r.get("noise_floor") is not None else "n/a"
    name = r.get("kernel") or r.get("name")
    print(f"  {r['verdict']:12s} {(r['change'] or 0)*100:+7.2f}%  CI {ci:18s} floor {nf:8s} n={r['n_base']}/{r['n_new']}"
          f"  {name[:70]}")
PY
}
gate_pair() {  # tool seconds: examples/ops_program.py twice and once with the softmax slowed, then the comparisons
  local tool=$1 secs=$2 out="$OUT/gate_$1.txt" R=$GATE_RUNS LOG="$OUT/gate_log.txt" SUM="$OUT/gate_summary.txt"
  local PROG=${PROG:-examples/ops_program.py --rows 8192 --size 4096 --steps 100 --device cuda}
  : > "$out"
  for name in base same; do
    OPS_SLOW= timeout -s INT "$(lim $secs)" $P "$tool" --reports "$R/$tool/$name" -f json -- python3 $PROG \
      > /dev/null 2>> "$LOG" || echo "  $tool $name: failed (see gate_log.txt)" | tee -a "$out"
  done
  OPS_SLOW=softmax timeout -s INT "$(lim $secs)" $P "$tool" --reports "$R/$tool/slow" -f json -- python3 $PROG \
    > /dev/null 2>> "$LOG" || echo "  $tool slow: failed (see gate_log.txt)" | tee -a "$out"
  local a b c
  a=$(latest "$R/$tool/base"); b=$(latest "$R/$tool/same"); c=$(latest "$R/$tool/slow")
  for pair in "same:$b" "slow:$c"; do
    local what=${pair%%:*} other=${pair#*:}
    echo "## $tool: base vs $what ($a vs $other)" >> "$out"
    timeout 120 $P compare "$a" "$other" -f json -o "/tmp/gate_cmp_${tool}_$what.json" 2>> "$LOG"
    gate_verdicts "/tmp/gate_cmp_${tool}_$what.json" >> "$out"
    timeout 120 $P compare "$a" "$other" --fail-if-slower 10% > /dev/null 2>> "$LOG"
    echo "  --fail-if-slower 10%: exit $?" >> "$out"
    timeout 120 $P compare "$a" "$other" >> "$out" 2>&1
  done
  { echo "## $tool"; grep -E "^##|counts|slower|faster|exit" "$out" | grep -v "^  *\(unchanged\|inconclusive\)"; } >> "$SUM"
  grep -E "^##|counts|exit" "$out"
}
step_gate_nsys() {  # a gate one can trust (issue 22): the program under nsys, twice, then slowed
  gate_pair nsys 150
}
step_gate_torch() {  # the same under torch.profiler
  gate_pair torch 120
}
step_gate_ab() {  # bench --ab on identical functions, then a 3 % slower one; and the same as two sequential runs
  local F=benchmarks/gate_ab_functions.py R=$GATE_RUNS LOG="$OUT/gate_log.txt" SUM="$OUT/gate_summary.txt"
  local SHAPE=${SHAPE:--s 4096 --heads 32 --head-dim 128 --dtype bf16}
  local AB="bench $SHAPE --rounds 30 --iters 20 --warmup 10 --no-check"
  : > "$OUT/gate_ab.txt"
  for pair in "$F:attn,$F:attn_same" "$F:attn,$F:attn_3pct"; do
    echo "## --ab $pair" >> "$OUT/gate_ab.txt"
    timeout -s INT "$(lim 150)" $P $AB --ab "$pair" --reports "$R/ab" --fail-if-slower 2% >> "$OUT/gate_ab.txt" 2>> "$LOG"
    echo "  --fail-if-slower 2%: exit $?" >> "$OUT/gate_ab.txt"
    local d; d=$(latest "$R/ab"); grep -h "calibrated" "$d/workload.log" >> "$OUT/gate_ab.txt" 2>/dev/null
  done
  for fn in attn attn_3pct; do
    timeout -s INT "$(lim 100)" $P bench -b "$F:$fn" --label attn --baseline none $SHAPE --iters 200 --warmup 10 \
      --no-check -q --reports "$R/seq" 2>> "$LOG"
  done
  echo "## sequential: two bench runs compared" >> "$OUT/gate_ab.txt"
  timeout 60 $P compare $(ls -d "$R"/seq/*/ | head -1) $(ls -d "$R"/seq/*/ | tail -1) -f json -o /tmp/gate_seq.json \
    2>> "$LOG"
  gate_verdicts /tmp/gate_seq.json >> "$OUT/gate_ab.txt"
  { echo "## ab"; grep -E "^##| vs |calibrated|exit|counts|slower|faster|unchanged|inconclusive" "$OUT/gate_ab.txt"; } \
    >> "$SUM"
  grep -E "^##| vs |calibrated|exit" "$OUT/gate_ab.txt"
}

# ------------------------------------------------------------------------------------------------ Proton
PROTON_CASE='{"backend": "triton", "batch": 1, "seqlen_q": 4096, "seqlen_kv": 4096, "heads": 32, "kv_heads": 32, "head_dim": 128, "dtype": "bf16", "causal": CAUSAL, "pass": "fwd", "layout": "bhsd", "device": "cuda"}'
PROTON_O=/tmp/o1
step_proton_facts() {  # versions, and Proton's mode.py as installed (into the proton tarball)
  mkdir -p "$PROTON_O/src"
  python3 -c "import triton, torch; print('triton', triton.__version__, 'torch', torch.__version__, torch.cuda.get_device_name(0))"
  local PR; PR=$(python3 -c "import triton.profiler, os; print(os.path.dirname(triton.profiler.__file__))")
  cp "$PR/mode.py" "$PR/language.py" "$PR/profile.py" "$PROTON_O/src/" 2>/dev/null
  cp "$PR/hooks/instrumentation.py" "$PROTON_O/src/hook_instrumentation.py" 2>/dev/null
  tar -cJf "$OUT/session.tar.xz" -C /tmp "$(basename $PROTON_O)"
}
step_proton_planted() {  # the planted traces of tests/data/proton, plain Proton
  mkdir -p "$PROTON_O"
  timeout -s INT "$(lim 240)" python3 tests/data/proton/record_planted.py --out /tmp/planted
  ls -la /tmp/planted | head -40
  grep -l "dropped\|Error\|error" /tmp/planted/*.log | head; grep -h "dropped" /tmp/planted/overflow.log | head -3
  cp -r /tmp/planted "$PROTON_O/"
  tar -cJf "$OUT/session.tar.xz" -C /tmp "$(basename $PROTON_O)"
}
step_proton_builtin() {  # profctl's Triton forward with scopes, plain Proton through profctl.workloads.proton_run
  local O=$PROTON_O C causal CLK; mkdir -p "$O"
  for causal in false true; do
    at "builtin causal=$causal: the cost of looking (global buffer)"
    C=${PROTON_CASE/CAUSAL/$causal}
    timeout -s INT "$(lim 200)" python3 -m profctl.workloads.proton_run --out /tmp/time_$causal --buffer global \
      --case "$C" --time 20 --jsonl /tmp/builtin_$causal.jsonl > /tmp/time_$causal.log 2>&1; echo "exit $?"
    tail -3 /tmp/time_$causal.log
    at "builtin causal=$causal: record one launch (global buffer)"
    timeout -s INT "$(lim 200)" python3 -m profctl.workloads.proton_run --out /tmp/rec_$causal --buffer global \
      --case "$C" --jsonl /tmp/builtin_$causal.jsonl > /tmp/rec_$causal.log 2>&1; echo "exit $?"
    tail -3 /tmp/rec_$causal.log
    ls -la /tmp/rec_$causal.* 2>/dev/null
    CLK=$(python3 -c "import json; e=[json.loads(l) for l in open('/tmp/builtin_$causal.jsonl')]; print(next((x.get('clock_mhz') for x in e if x.get('event')=='recorded'), None) or 1000)")
    timeout -s INT "$(lim 150)" python3 benchmarks/proton_summary.py /tmp/rec_$causal.chrome_trace --clock-mhz $CLK \
      --keep-ctas 16 --reduced "$O/builtin_${causal}_16cta.chrome_trace.gz" > "$O/builtin_${causal}_summary.json" \
      2> /tmp/sum_$causal.err
    tail -2 /tmp/sum_$causal.err; head -c 600 "$O/builtin_${causal}_summary.json"; echo
    cp /tmp/builtin_$causal.jsonl /tmp/time_$causal.log /tmp/rec_$causal.log "$O/" 2>/dev/null
    rm -f /tmp/rec_$causal.chrome_trace
  done
  at "builtin: shared buffer, non-causal"
  C=${PROTON_CASE/CAUSAL/false}
  timeout -s INT "$(lim 150)" python3 -m profctl.workloads.proton_run --out /tmp/rec_shared --buffer shared --case "$C" \
    --jsonl /tmp/shared.jsonl > /tmp/rec_shared.log 2>&1; echo "exit $?"
  grep -c dropped /tmp/rec_shared.log; grep -m3 "dropped\|rror" /tmp/rec_shared.log; ls -la /tmp/rec_shared.* 2>/dev/null
  head -c 300 /tmp/rec_shared.log > "$O/rec_shared_head.log"; grep -m 20 -v dropped /tmp/rec_shared.log >> "$O/rec_shared_head.log"
  grep dropped /tmp/rec_shared.log | head -50 >> "$O/rec_shared_head.log"
  tar -cJf "$OUT/session.tar.xz" -C /tmp "$(basename $O)"
}
step_proton_e2e() {  # profctl proton end to end, the change the timeline pointed to (lazy rescaling), the GPU tests
  local O=/tmp/o2 R=/tmp/r SHAPE="-b triton -s 4096 --heads 32 -d 128" causal A B
  mkdir -p $O $R
  for causal in false true; do
    at "profctl proton, default config, causal=$causal"
    timeout -s INT "$(lim 150)" $P proton $SHAPE --causal $causal --overhead 5 --reports $R/default_$causal -f json \
      -o $O/default_$causal.json 2> $O/default_$causal.err; echo "exit $?"; tail -4 $O/default_$causal.err
  done
  at "bench A/B: the default against conditional rescaling (lazy)"
  timeout -s INT "$(lim 80)" $P bench $SHAPE --causal false --rounds 10 --iters 20 -f json -o $O/ab_false.json \
    --ab-env 'PROFCTL_TRITON_CONFIG=fwd=m128n128w8s3|PROFCTL_TRITON_CONFIG=fwd=m128n128w8s3-lazy' > $O/ab_false.txt 2>&1
  echo "exit $?"; tail -3 $O/ab_false.txt
  timeout -s INT "$(lim 80)" $P bench $SHAPE --causal true --rounds 10 --iters 20 -f json -o $O/ab_true.json \
    --ab-env 'PROFCTL_TRITON_CONFIG=fwd=m64n64w4s3|PROFCTL_TRITON_CONFIG=fwd=m64n64w4s3-lazy' > $O/ab_true.txt 2>&1
  echo "exit $?"; tail -3 $O/ab_true.txt
  at "profctl proton with the change (lazy), non-causal"
  PROFCTL_TRITON_CONFIG=fwd=m128n128w8s3-lazy timeout -s INT "$(lim 90)" $P proton $SHAPE --causal false --overhead 0 \
    --reports $R/lazy_false -f json -o $O/lazy_false.json 2> $O/lazy_false.err; echo "exit $?"; tail -3 $O/lazy_false.err
  at "explain: default against lazy"
  A=$(ls $R/default_false/*/case-0.chrome_trace | head -1); B=$(ls $R/lazy_false/*/case-0.chrome_trace | head -1)
  $P explain "$A" "$B" --kernel _fwd_kernel -f markdown > $O/explain_lazy.md 2>&1; head -30 $O/explain_lazy.md
  $P report "$(dirname $A)" -f html -o $O/default_false.html 2> /dev/null
  $P report "$(dirname $A)" -f markdown > $O/default_false.md 2> /dev/null; head -40 $O/default_false.md
  at "bench rows with the change (correctness checked)"
  PROFCTL_TRITON_CONFIG=fwd=m128n128w8s3-lazy timeout -s INT "$(lim 60)" $P bench $SHAPE --causal false -f json \
    -o $O/bench_lazy_false.json > /dev/null 2> $O/bench_lazy_false.err; echo "exit $?"; tail -2 $O/bench_lazy_false.err
  PROFCTL_TRITON_CONFIG=fwd=m64n64w4s3-lazy timeout -s INT "$(lim 60)" $P bench $SHAPE --causal true -f json \
    -o $O/bench_lazy_true.json > /dev/null 2> $O/bench_lazy_true.err; echo "exit $?"; tail -2 $O/bench_lazy_true.err
  at "the default trace through profctl, its first 16 CTAs"
  timeout -s INT "$(lim 40)" python3 - "$A" $O/profctl_false_16cta.chrome_trace.gz <<'PY'
import gzip, json, sys
d = json.load(open(sys.argv[1]))
d["traceEvents"] = [e for e in d["traceEvents"] if int(str(e["pid"]).rsplit("CTA", 1)[1]) < 16]
with gzip.open(sys.argv[2], "wt") as f:
    json.dump(d, f, separators=(",", ":"))
print("kept", len(d["traceEvents"]))
PY
  at "planted: groups_even"
  timeout -s INT "$(lim 40)" python3 tests/data/proton/record_planted.py --out $O/planted --variant groups_even \
    > $O/planted_even.log 2>&1; echo "exit $?"
  at "GPU tests"
  timeout -s INT "$(lim 150)" python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_proton_gpu.py \
    > $O/gpu_tests.txt 2>&1
  tail -5 $O/gpu_tests.txt
  find $R \( -name '*.timeline.json' -o -name 'manifest.json' -o -name 'workload.jsonl' -o -name '*.drops.json' \
    -o -name '*.log' \) -exec cp --parents {} $O/ \; 2>/dev/null
  tar -cJf "$OUT/session2.tar.xz" -C /tmp o2
}

# ------------------------------------------------------------------------------------------------ issue 50
step_ws_smoke() {  # the warp-specialized Gluon forwards once, small, under a short timeout (a wrong mbarrier phase hangs)
  timeout 90 python3 - <<'PY' 2>&1 | grep -v Warning | tail -6
import math, torch, torch.nn.functional as F
from profctl.workloads.kernels import gluon_attention as ga, gluon_ws_persistent as gp
for causal in (False, True):
    q, k, v = (torch.randn(1, 2, 512, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    for name, fwd in (("ws", ga.forward_ws), ("ws-persistent", lambda *a: gp.forward_wsp(*a, sms=3))):
        o, _ = fwd(q, k, v, causal, 0, 1.4426950408889634 / math.sqrt(128), 128, 3)
        torch.cuda.synchronize()
        print(name, "causal", causal, "max abs err", float((o.double() - ref).abs().max()), flush=True)
PY
  local rc=${PIPESTATUS[0]}; echo "ws-smoke exit $rc"
  [ "$rc" = 0 ] || { export LADDER_SKIP=-p1-ws-gl; echo "the ladder leaves -p1-ws-gl out"; }
}
step_issue50_tests() {  # the forward variants' GPU tests: Gluon (and warp-specialized), FP8 and bf16 with FMA-pipe exps
  timeout -s INT "$(lim 240)" python3 -m pytest -m gpu -q -rs -p no:cacheprovider --durations=5 \
    tests/gpu/test_gluon_attention_gpu.py tests/gpu/test_launch_gpu.py tests/unit/test_triton_fp8.py \
    tests/unit/test_triton_attention.py \
    > "$OUT/gpu_tests_issue50.txt" 2>&1
  tail -12 "$OUT/gpu_tests_issue50.txt"
}
step_issue50_bench() {  # issue 50's shapes in one profctl bench per shape group: triton, cuDNN and FA4 (where carried:
  # a call with .gpu-fa4 right after one with .gpu; with this tree, 34 MB, the 61-MiB .gpu-fa4 no longer fits one call's
  # 64 MiB: carry its halves, `split -b 32000000 .gpu-fa4/cu13.tar.xz` into .gpu-fa4a/ and .gpu-fa4b/, in two calls,
  # the first copying its half to /tmp, the second joining them with `cat` and unpacking into /tmp/gpu-site), FP8, and
  # the backward beside cuDNN's, rows into $OUT/issue50_*.json
  local B="--baseline none --warmup 10 --iters 50 -f json" g
  for g in "-s 4096 --heads 32 --causal false,true" "-s 8192 --heads 16 --causal true" \
           "--batch 16 -s 1024 --heads 32 --causal false,true" "-s 4096 --heads 32 -d 64 --causal false,true"; do
    timeout -s INT "$(lim 120)" $P bench -b triton,sdpa-cudnn,fa4 --dtype bf16 $g $B -o "$OUT/issue50_fwd_${g//[^a-z0-9]/}.json" \
      > /dev/null 2>> "$OUT/issue50_bench.log"; echo "fwd ($g): exit $?"
  done
  timeout -s INT "$(lim 90)" $P bench -b triton --dtype fp8 -s 4096 --heads 32 -d 128,64 --causal false,true $B \
    -o "$OUT/issue50_fp8.json" > /dev/null 2>> "$OUT/issue50_bench.log"; echo "fp8: exit $?"
  timeout -s INT "$(lim 120)" $P bench -b triton,sdpa-cudnn --dtype bf16 --pass bwd -s 4096 --heads 32 --causal false,true \
    $B -o "$OUT/issue50_bwd.json" > /dev/null 2>> "$OUT/issue50_bench.log"; echo "bwd: exit $?"
  tail -3 "$OUT/issue50_bench.log"
}
step_ladder() {  # the Triton forward's candidate changes timed beside cuDNN (FA4 too where carried), then one ncu run
  # (explain recipe) of the NCU candidates (benchmarks/triton_ladder.py; LADDER_SHAPES picks the timed shapes,
  # LADDER_TIME=0 / LADDER_NCU=0 leave a part out)
  local i
  for i in 0 1 2 3 4 5 6 7; do
    timeout "$(lim 150)" python3 benchmarks/triton_ladder.py warm --part $i/8 > "$OUT/ladder_warm$i.log" 2>&1 &
  done
  wait; cat "$OUT"/ladder_warm*.log | grep -v Warning | tail -8; rm -f "$OUT"/ladder_warm*.log
  at "ladder: time"
  [ "${LADDER_TIME:-1}" = 1 ] && { timeout "$(lim 240)" python3 benchmarks/triton_ladder.py time \
    ${LADDER_SHAPES:+--shapes $LADDER_SHAPES} --out "$OUT/ladder_time.json" > /dev/null 2> "$OUT/ladder_time.log"
    echo "time exit $?"; }
  at "ladder: ncu"
  if [ "${LADDER_NCU:-1}" = 1 ]; then
    timeout "$(lim 240)" $P ncu --recipe explain --range ladder@measure --clock-control none --reports /tmp/ladder-runs \
      -f json -- python3 benchmarks/triton_ladder.py ncu > "$OUT/ladder_ncu.json" 2> "$OUT/ladder_ncu.log"
    echo "ncu exit $?"; tail -3 "$OUT/ladder_ncu.log"
    local rep; rep=$(ls /tmp/ladder-runs/*/*.ncu-rep 2>/dev/null | tail -1)
    [ -n "$rep" ] && xz -T0 -c "$rep" > "$OUT/ladder.ncu-rep.xz"
  fi
}

# ------------------------------------------------------------------------------------------------ run the steps
for s in "$@"; do
  fn="step_${s//-/_}"
  if ! declare -F "$fn" > /dev/null; then echo "unknown step: $s (bash benchmarks/gpu.sh list)"; exit 2; fi
done
for s in "$@"; do
  at "$s"
  "step_${s//-/_}"
done
at done
ls -la "$OUT"
