#!/usr/bin/env bash
# The whole CPU test suite, N times in a row (default 3), while LOAD busy processes (default 2: both cores of the
# CI machine) spin beside it: the suite must not fail at random when the machine is busy (issue 29, "Done means").
# Usage: bash benchmarks/suite_under_load.sh [N] > log; each run's last line and exit status are printed.
set -u
cd "$(dirname "$0")/.."
N=${1:-3}
LOAD=${LOAD:-2}
pids=()
for _ in $(seq "$LOAD"); do python3 -c "while True: pass" & pids+=($!); done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
echo "load: $LOAD spinners (pids ${pids[*]}) on $(nproc) cores"
fails=0
for i in $(seq "$N"); do
  t0=$(date +%s)
  bash scripts/test.sh -q -p no:cacheprovider > "/tmp/suite_under_load_$i.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && fails=$((fails + 1))
  echo "run $i: exit $rc in $(( $(date +%s) - t0 )) s: $(tail -1 /tmp/suite_under_load_$i.log)"
  grep -E "^(FAILED|ERROR) " "/tmp/suite_under_load_$i.log" | head -20
done
echo "$fails of $N runs failed"
exit $(( fails > 0 ))
