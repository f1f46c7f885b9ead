#!/usr/bin/env bash
# Compare whole commands by alternating them: ROUNDS rounds, each running every
# command 100 times under `perf stat`; prints the median of the rounds' means.
# Alternating matters: this kind of machine drifts by about 0.05 ms between runs.
#
#   benches/ab.sh 5 /bin/true "target/release/packs --packs DIR run noop"
#
# Needs `perf` (linux-tools). Commands are split on spaces (no quoting inside).
set -euo pipefail
rounds=${1:?usage: ab.sh ROUNDS COMMAND...}
shift
declare -a results
for _ in $(seq "$rounds"); do
  i=0
  for cmd in "$@"; do
    # shellcheck disable=SC2086 # split on purpose
    ms=$(perf stat -r 100 $cmd 2>&1 >/dev/null | awk '/elapsed/ { print $1 * 1000 }')
    results[i]="${results[i]:-} $ms"
    i=$((i + 1))
  done
done
i=0
for cmd in "$@"; do
  median=$(tr ' ' '\n' <<<"${results[i]}" | grep . | sort -n | awk '{ a[NR] = $1 } END { printf "%.3f", a[int((NR + 1) / 2)] }')
  echo "$median ms  $cmd"
  i=$((i + 1))
done
