#!/usr/bin/env bash
# The peers' scale scenarios against a schedulerd process of its own (the
# embedded store on disk in a new temporary directory), so that its CPU time
# (utime+stime from /proc) is apart from the consumer's and the clients'.
# Builds bin/schedulerd and bin/schedbench, then runs each scenario named
# (default: spread, burst and oneoffs). Figures go into docs/benchmarks.md (schedbench
# workloads); say the load (uptime) with them.
#
#   scripts/bench-server.sh                  # spread, burst, oneoffs
#   scripts/bench-server.sh spread           # 50,000 events spread over 60 s
#   scripts/bench-server.sh burst            # 100,000 events due at one instant
#   scripts/bench-server.sh burst-batch      # the burst to an http_batch target
#   scripts/bench-server.sh spread-batch     # the spread to an http_batch target
#   scripts/bench-server.sh oneoffs          # 1,000,000 one-offs due within a day (intake, disk, idle CPU)
#   ONEOFFS=100000 scripts/bench-server.sh oneoffs
set -euo pipefail
cd "$(dirname "$0")/.."

go build -o bin/ ./cmd/schedulerd ./cmd/schedbench
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(spread burst oneoffs)
for s in "${scenarios[@]}"; do
	extra=()
	if [ "$s" = oneoffs ] && [ -n "${ONEOFFS:-}" ]; then
		extra=(-oneoffs "$ONEOFFS")
	fi
	echo "== $s ($(date -u +%FT%TZ); $(uptime))"
	bin/schedbench -server bin/schedulerd -scenario "$s" "${extra[@]}"
	echo "== $s done ($(uptime))"
done
