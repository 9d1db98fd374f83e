#!/usr/bin/env bash
# Compares two builds on BenchmarkSuspendLarge, side by side: each
# sub-benchmark runs once per process (so a peak RSS is that process's),
# the builds alternate (and swap order each round) so both see the same
# phases of a noisy machine, and the medians over the rounds are printed.
#
#   go test -c -o /tmp/after.test .
#   mkdir /tmp/before && git archive COMMIT | tar -x -C /tmp/before
#   cp internal/enginebin/quickjs.wasm /tmp/before/internal/enginebin/  # internal/engine/ before the rename
#   cp suspend_bench_test.go /tmp/before/  # the benchmark uses only the public API
#   (cd /tmp/before && go test -c -o /tmp/before.test .)
#   scripts/suspend-large.sh /tmp/before.test /tmp/after.test 7
set -euo pipefail
before=$1 after=$2 rounds=${3:-5}
out=$(mktemp)
for ((r = 1; r <= rounds; r++)); do
	order=("before $before" "after $after")
	((r % 2 == 0)) && order=("after $after" "before $before")
	for mode in suspend timeout-5s execute; do
		for entry in "${order[@]}"; do
			read -r name bin <<<"$entry"
			"$bin" -test.run '^$' -test.bench "SuspendLarge/$mode\$" -test.benchtime 1x |
				awk -v name="$name" -v mode="$mode" '/^Benchmark/ { for (i = 5; i < NF; i += 2) print name, mode, $(i+1), $i }' >>"$out"
		done
	done
done
# build, mode, metric: the median, and every value in order
sort -k1,1 -k2,2 -k3,3 -k4,4g "$out" | awk '
	{ key = $1 " " $2 " " $3; v[key] = v[key] " " $4; n[key]++ }
	END { for (k in v) { split(substr(v[k], 2), a, " "); printf "%-36s median %-8s all %s\n", k, a[int((n[k] + 1) / 2)], substr(v[k], 2) } }' | sort
rm -f "$out"
