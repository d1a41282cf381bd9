#!/usr/bin/env bash
# The ncu checks and wall-time measurements run on the GPU machine (see benchmarks/RESULTS.md, "ncu wall time").
#   phase 1: recipes, metric names, filters, error messages, fixture candidates, pytest -m gpu (no FA4 needed)
#   phase 2: the headline command with FA4, its wall time vs the ncu run it wraps, and vs `ncu --set full`
# Everything goes to $OUT/ncu-<phase>/ and is tarred. Clocks are never touched: --clock-control none throughout.
set -u
phase=${1:-1}
O=${OUT:-/tmp/out}/ncu-$phase
mkdir -p "$O"
exec > >(tee -a "$O/driver.log") 2>&1
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
export PROFCTL_NCU=$NCU PROFCTL_REPORTS=$O/reports
now() { date +%s.%N; }
timed() { # name, command...
  local name=$1; shift
  local t0; t0=$(now)
  "$@" > "$O/$name.out" 2> "$O/$name.err"; local rc=$?
  local t1; t1=$(now)
  echo "$name rc=$rc wall_s=$(python3 -c "print(round($t1 - $t0, 3))")" | tee -a "$O/times.txt"
}
echo "phase $phase on $(hostname) ncu=$NCU"; "$NCU" --version | tail -1
python3 -c 'import flash_attn.cute' 2>/dev/null && echo "fa4: importable" || echo "fa4: NOT importable"
python3 -c 'import ncu_report; print("ncu_report", ncu_report.__file__)' || true
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv || true
W="--seqlen 2048 --clock-control none"
if [ "$phase" = 1 ]; then
  "$NCU" --list-sets > "$O/list-sets.txt" 2>&1
  "$NCU" --list-sections > "$O/list-sections.txt" 2>&1
  "$NCU" --query-metrics > "$O/query-metrics-device.txt" 2>&1
  "$NCU" --query-metrics --chip ga100 > "$O/query-metrics-ga100.txt" 2>&1
  "$NCU" --metrics sm__no_such_counter_anywhere.sum python3 -c "import torch; (torch.ones(4, device='cuda') + 1).sum().item()" > "$O/unknown-metric.txt" 2>&1
  timed tc3 profctl ncu --recipe tensor-core --backend sdpa-flash,sdpa-cudnn,eager $W
  # experiment: the same ncu command line with --profile-from-start off (the workload brackets each case's
  # measured iterations with cudaProfilerStart/Stop)
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
    timed "$r" profctl ncu --recipe "$r" --backend sdpa-flash,eager $W
  done
  timed full profctl ncu --recipe full --backend sdpa-flash --seqlen 1024 --clock-control none
  timed fwdbwd profctl ncu --recipe tensor-core --backend sdpa-flash,eager --pass fwd+bwd $W
  timed nothing profctl ncu --recipe tensor-core --backend sdpa-flash --kernel '^no_such_kernel$' $W
  timed fixture profctl ncu --recipe tensor-core --backend sdpa-flash,eager --seqlen 256 --heads 2 --clock-control none
  for f in "$O"/reports/*/profile.ncu-rep; do
    "$NCU" --import "$f" --csv --page raw --print-units base > "${f%.ncu-rep}.raw.csv" 2>&1
    "$NCU" --import "$f" --csv --page details --print-units base > "${f%.ncu-rep}.details.csv" 2>&1
  done
  timed pytest python3 -m pytest -m gpu tests/gpu/test_ncu_gpu.py -q -p no:cacheprovider
else
  python3 -c 'import flash_attn.cute' || exit 3
  # warm FA4's JIT cache the way a user's second run would find it? No: measure a cold run, as users run it.
  timed headline profctl ncu --recipe tensor-core --backend sdpa-flash,sdpa-cudnn,fa4,eager $W
  rep=$(ls -d "$O"/reports/*-ncu-* | tail -1)
  python3 - "$rep" <<'PY' | tee -a "$O/times.txt"
import json, sys
m = json.load(open(sys.argv[1] + "/summary.json"))["meta"]
print(f"headline ncu_wall_s={m['ncu_wall_s']} profctl_total_wall_s(in-process)={m['total_wall_s']} launches={len(m['launches'])}")
open(sys.argv[1] + "/workload_argv.txt", "w").write("\n".join(json.load(open(sys.argv[1] + "/manifest.json"))["workload_argv"]))
PY
  # the same ncu command line profctl ran (from the run manifest), run again on its own
  python3 - "$rep" "$O" <<'PY'
import json, subprocess, sys, time
rep, out = sys.argv[1], sys.argv[2]
man = json.load(open(rep + "/manifest.json"))
argv = list(man["ncu_argv"])
argv[argv.index("--export") + 1] = out + "/single"
t0 = time.perf_counter()
rc = subprocess.run(argv, stdout=open(out + "/ncu-single.log", "w"), stderr=subprocess.STDOUT).returncode
t1 = time.perf_counter()
with open(out + "/times.txt", "a") as f:
    f.write(f"ncu-single rc={rc} wall_s={t1 - t0:.3f}\n")
# ncu --set full over the whole workload: the same workload command line, no NVTX filter, every launch
wl = man["workload_argv"]
full = [argv[0], "--config-file", "off", "--force-overwrite", "--export", out + "/setfull", "--clock-control", "none",
        "--set", "full", *wl]
import os, signal
t0 = time.perf_counter()
p = subprocess.Popen(full, stdout=open(out + "/setfull.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)
try:
    rc = p.wait(timeout=300)
except subprocess.TimeoutExpired:
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    rc = "killed-after-300s"
t1 = time.perf_counter()
with open(out + "/times.txt", "a") as f:
    f.write(f"setfull rc={rc} wall_s={t1 - t0:.3f}\n")
PY
  cat "$O/times.txt"
  ls -la "$O"/setfull* "$O"/single* || true
  rm -f "$O"/setfull.ncu-rep
fi
cd "$O/.." && tar czf "$OUT/ncu-$phase.tgz" "ncu-$phase" && ls -la "$OUT"
