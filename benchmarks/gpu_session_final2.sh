#!/usr/bin/env bash
# The last GPU session of issues 21-26 (carry [".gpu"]). STEPS picks:
#   tests1   GPU tests: ncu, nsys, torch, explain, compare (and the record_function NVTX check)
#   tests2   GPU tests: bench, models, programs, the Triton bf16 and FP8 kernels
#   warm     warm workers on the one GPU here: serial vs --workers 1 (warm) vs PROFCTL_WARM=0, medians compared,
#            and a crash in the middle of a warm sweep (PROFCTL_FAULT=crash:sdpa-cudnn)
#   overhead profctl ncu --recipe stalls|explain against ncu alone (benchmarks/source_overhead.py)
DEFAULT_STEPS="tests1"
source benchmarks/_gpu_env.sh
install
if want tests1; then
  at "GPU tests 1"
  timeout -s INT ${T1:-520} python3 -m pytest -m gpu -q -rs -p no:cacheprovider --durations=8 tests/gpu/test_ncu_gpu.py \
    tests/gpu/test_nsys_gpu.py tests/gpu/test_torch_gpu.py tests/gpu/test_explain_gpu.py tests/gpu/test_compare_gpu.py \
    $(ls tests/gpu/test_record_function*.py tests/gpu/test_new_user*.py 2>/dev/null) > "$OUT/gpu_tests1.txt" 2>&1
  tail -14 "$OUT/gpu_tests1.txt"
fi
if want tests2; then
  at "GPU tests 2"
  timeout -s INT ${T2:-400} python3 -m pytest -m gpu -q -rs -p no:cacheprovider --durations=8 tests/gpu/test_bench_gpu.py \
    tests/gpu/test_models_gpu.py tests/gpu/test_program_gpu.py tests/unit/test_triton_attention.py \
    tests/unit/test_triton_fp8.py tests/gpu/test_record_function_nvtx_gpu.py > "$OUT/gpu_tests2.txt" 2>&1
  tail -14 "$OUT/gpu_tests2.txt"
fi
if want warm; then
  at "warm workers on one GPU"
  S="-b sdpa-flash,sdpa-cudnn -s 1024,2048,4096,8192 --causal false,true --heads 32 --iters 30 --warmup 10 --baseline none -q -f json"
  for name in serial warm1 cold1; do
    case $name in serial) X="";; warm1) X="--workers 1 --gpus 0";; cold1) X="--workers 1 --gpus 0";; esac
    t0=$(date +%s.%N)
    if [ $name = cold1 ]; then PROFCTL_WARM=0 timeout 300 $P bench $S $X -o /tmp/$name.json --reports /tmp/wr > /tmp/$name.log 2>&1
    else timeout 300 $P bench $S $X -o /tmp/$name.json --reports /tmp/wr > /tmp/$name.log 2>&1; fi
    echo "$name rc=$? wall=$(python3 -c "import time;print(round(time.time()-$t0,1))") s"
  done
  PROFCTL_FAULT=crash:sdpa-cudnn timeout 300 $P bench $S --workers 1 --gpus 0 -o /tmp/crash.json --reports /tmp/wr > /tmp/crash.log 2>&1
  echo "crash sweep rc=$?"
  python3 - <<'PY' | tee "$OUT/warm.txt"
import json
r = {n: json.load(open(f"/tmp/{n}.json")) for n in ("serial", "warm1", "cold1", "crash")}
key = lambda x: (x["backend"], x["seqlen_q"], x["causal"])
s = {key(x): x for x in r["serial"]}
for n in ("warm1", "cold1"):
    ratios = [x["median_ms"] / s[key(x)]["median_ms"] for x in r[n] if x["status"] == "ok" and s[key(x)]["status"] == "ok"]
    print(n, "points", len(r[n]), "ok", sum(x["status"] == "ok" for x in r[n]), "median ratio to serial: min %.3f max %.3f" % (min(ratios), max(ratios)))
print("crash sweep:", [(x["backend"], x["seqlen_q"], x["status"]) for x in r["crash"]][:16])
import glob
m = json.load(open(sorted(glob.glob("/tmp/wr/*-bench-*/manifest.json"))[-1]))
print("crash sweep child starts:", len([t for t in m["tools"] if t["name"] == "workload"]), "parts:", len(m.get("parts") or []))
PY
fi
if want overhead; then
  at "profctl ncu --recipe stalls|explain against ncu alone"
  timeout -s INT ${OVER_S:-400} python3 benchmarks/source_overhead.py --out "$OUT/source_overhead.json" --rounds ${ROUNDS:-4} \
    --cases ${CASES:-program,builtin}
fi
at done
