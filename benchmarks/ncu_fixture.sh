#!/usr/bin/env bash
# GPU machine: pytest -m gpu for ncu, and the small profctl-made .ncu-rep fixtures for tests/data (see its README).
set -u
export PROFCTL_NCU=${NCU:-/usr/local/cuda/bin/ncu} PROFCTL_REPORTS=/tmp/ncu-fx
python3 -m pytest -m gpu tests/gpu/test_ncu_gpu.py -q -p no:cacheprovider 2>&1 | tail -40
mk() { # name, profctl args...
  local name=$1; shift
  profctl ncu "$@" --clock-control none --format markdown > /tmp/ncu-fx-$name.md 2> /tmp/ncu-fx-$name.err
  local d; d=$(ls -d /tmp/ncu-fx/*-ncu-* | tail -1)
  cp "$d/profile.ncu-rep" "$OUT/$name.ncu-rep" && gzip -9 -f "$OUT/$name.ncu-rep"
  "$PROFCTL_NCU" --import "$d/profile.ncu-rep" --csv --page raw --print-units base > "$OUT/${name}_raw.csv" && gzip -9 -f "$OUT/${name}_raw.csv"
  cat /tmp/ncu-fx-$name.err; head -c 1500 /tmp/ncu-fx-$name.md; echo; ls -la "$OUT"
}
mk profctl_tc --recipe tensor-core --backend sdpa-flash,eager --seqlen 256 --heads 2 --warmup 1
mk profctl_occ_fwdbwd --recipe occupancy --backend sdpa-flash --pass fwd+bwd --seqlen 256 --heads 2 --warmup 1
