#!/usr/bin/env bash
# Issue 26, second GPU call (carry [".gpu"]): the candidate change explain points to (the forward's Q @ K^T of the
# next block issued before this block's softmax: KernelConfig.pipe) against the current default, timed with
# do_bench and with profctl bench, profiled before and after with profctl ncu --recipe explain and compared with
# profctl explain; then the GPU tests and profctl ncu --recipe stalls|explain against ncu alone.
#   STEPS="install configs change tests overhead" bash benchmarks/gpu_session_why2.sh
DEFAULT_STEPS="install configs change tests overhead"
source benchmarks/_gpu_env.sh
if want install; then
  at install
  install
fi
BEST=${BEST:-}
if want configs; then
  at "forward configs (non-causal, then causal)"
  timeout -s INT 200 python3 benchmarks/triton_fwd_configs.py > "$OUT/configs_full.json" 2>/tmp/cfg.err || tail -3 /tmp/cfg.err
  timeout -s INT 150 python3 benchmarks/triton_fwd_configs.py --causal \
    --configs m128n128w8s3,m64n64w4s3,m64n64w4s3-pipe,m128n128w8s3-pipe,m128n64w8s3-pipe > "$OUT/configs_causal.json" 2>>/tmp/cfg.err
  BEST=$(python3 - "$OUT/configs_full.json" "$OUT/configs_causal.json" <<'PY'
import json, sys
for f in sys.argv[1:]:
    d = json.load(open(f))
    print(d["shape"], file=sys.stderr)
    for k, v in d["configs"].items():
        print(f"  {k:24s} {v.get('tflops', 0) or 0:7.1f} TFLOP/s  err {v.get('max_abs_err')}  {v.get('error', '')[:60]}", file=sys.stderr)
d = json.load(open(sys.argv[1]))["configs"]
ok = {k: v["tflops"] for k, v in d.items() if "tflops" in v and k.endswith("-pipe")}
print(max(ok, key=ok.get) if ok else "")
PY
)
  echo "best pipelined config: $BEST"
fi
if want change && [ -n "$BEST" ]; then
  at "before/after: profctl ncu --recipe explain, profctl explain, profctl bench"
  R=/tmp/why2
  timeout -s INT 120 $P ncu --recipe explain -b triton,sdpa-cudnn -s 4096 --heads 32 --clock-control none --reports $R/before -f json > /dev/null 2>/tmp/before.err || tail -3 /tmp/before.err
  PROFCTL_TRITON_CONFIG="fwd=$BEST" timeout -s INT 100 $P ncu --recipe explain -b triton -s 4096 --heads 32 --clock-control none --reports $R/after -f json > /dev/null 2>/tmp/after.err || tail -3 /tmp/after.err
  B=$(ls -d $R/before/*/ | tail -1); A=$(ls -d $R/after/*/ | tail -1)
  { echo "## before (default) vs after (fwd=$BEST), the Triton forward"; $P explain $B $A --kernel _fwd_kernel -f markdown
    echo; echo "## after vs cuDNN"; $P explain $A $B --kernel _fwd_kernel --vs cudnn -f markdown; } > "$OUT/explain_change.md" 2>&1
  grep -E "^\*\*A takes|^\| (stall: barrier|resident|instructions|tensor pipe|duration) " "$OUT/explain_change.md"
  BENCH="$P bench -b triton,sdpa-cudnn -s 4096 --heads 32 --causal false,true --iters 30 --warmup 10 -f markdown"
  { for r in 1 2; do echo "### round $r default"; timeout 120 $BENCH 2>&1 | grep '^|';
      echo "### round $r fwd=$BEST"; PROFCTL_TRITON_CONFIG="fwd=$BEST" timeout 120 $BENCH 2>&1 | grep '^|'; done; } > "$OUT/bench_change.md"
  cat "$OUT/bench_change.md" | grep -E "triton|###"
fi
if want tests; then
  at "GPU tests (why and where)"
  timeout -s INT 200 python3 -m pytest -m gpu -q -rs -p no:cacheprovider tests/gpu/test_explain_gpu.py > "$OUT/gpu_tests_why.txt" 2>&1
  tail -2 "$OUT/gpu_tests_why.txt"
fi
if want overhead; then
  at "profctl ncu --recipe stalls|explain against ncu alone"
  timeout -s INT ${OVER_S:-300} python3 benchmarks/source_overhead.py --out "$OUT/source_overhead.json" --rounds ${ROUNDS:-3} \
    --cases ${CASES:-program,builtin}
fi
at done
