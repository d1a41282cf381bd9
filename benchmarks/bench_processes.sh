#!/usr/bin/env bash
# One `profctl bench` process after another, one JSON line a row (backend, shape, TFLOP/s, median ms, host_ms and its
# warning), for numbers that differ from process to process (the host's speed on the H200 machine does):
#   bash benchmarks/bench_processes.sh N CONFIG BENCH-ARGS...
# CONFIG: a forward config forced through PROFCTL_TRITON_CONFIG (fwd=CONFIG), or `default`. E.g. (RESULTS.md, "The
# host's share of a call"):  bash benchmarks/bench_processes.sh 8 m128n128w4s3-ws-gl -b triton --causal true -s 4096 --heads 32
set -u
n=$1; cfg=$2; shift 2
out=$(mktemp -d)
for _ in $(seq 1 "$n"); do
  if [ "$cfg" = default ]; then unset PROFCTL_TRITON_CONFIG; else export PROFCTL_TRITON_CONFIG=fwd=$cfg; fi
  python3 -m profctl bench --baseline none --warmup 10 --iters 50 -f json -o "$out/rows.json" "$@" >/dev/null \
    2>"$out/err" || { tail -3 "$out/err"; continue; }
  python3 - "$out/rows.json" "$cfg" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    shape = f"b{r['batch']} h{r['heads']} s{r['seqlen_q']} d{r['head_dim']} {r['dtype']}{' causal' if r['causal'] else ''}"
    print(json.dumps({"cfg": sys.argv[2], "b": r["backend"], "shape": shape, "tflops": round(r.get("tflops") or 0, 1),
                      "median_ms": round(r.get("median_ms") or 0, 4), "host_ms": round(r.get("host_ms") or 0, 4),
                      "hw": bool(r.get("host_warning")), "status": r.get("status")}))
PY
done
rm -rf "$out"
