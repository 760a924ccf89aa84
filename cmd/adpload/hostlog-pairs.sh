#!/usr/bin/env bash
# Interleaved pairs of in-process adpload runs with the host log off and
# on, the order alternating, to measure the log's cost on write throughput
# as a same-session ratio (README, Host log, Figures). Run from the
# repository root on an otherwise idle machine:
#   PAIRS=16 cmd/adpload/hostlog-pairs.sh
# Prints one line per run and, at the end, the on/off ratio of the totals
# and the median of the pairs' ratios.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(mktemp -d)/adpload
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/adpload
declare -A on off
for i in $(seq 1 "${PAIRS:-16}"); do
	order="false true"
	if [ $((i % 2)) -eq 0 ]; then order="true false"; fi
	for h in $order; do
		out=$("$bin" -inproc -mode message -duration 8s -warmup 1s -verify 0 -rates off -hostlog="$h" 2>&1)
		w=$(sed -nE 's/.* = ([0-9]+) writes\/s.*/\1/p' <<<"$out")
		p99=$(sed -nE 's/.*p99 ([0-9.]+) ms .*/\1/p' <<<"$out")
		echo "pair=$i hostlog=$h writes/s=$w p99_ms=$p99 load=$(cut -d' ' -f1 /proc/loadavg)"
		if [ "$h" = true ]; then on[$i]=$w; else off[$i]=$w; fi
	done
done
for i in "${!on[@]}"; do echo "${on[$i]} ${off[$i]}"; done |
	awk '{ printf "%.6f %s %s\n", $1 / $2, $1, $2 }' | sort -n |
	awk '{ r[NR] = $1; a += $2; b += $3 }
	END {
		m = (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
		printf "pairs=%d on/off total=%.3f median=%.3f\n", NR, a / b, m
	}'
