#!/usr/bin/env bash
# The peers' scale scenarios against a schedulerd process of its own (the
# embedded store on disk in a new temporary directory), so that its CPU time
# (utime+stime from /proc) is apart from the consumer's and the clients'.
# Builds bin/schedulerd and bin/schedbench, then runs each scenario named
# (default: spread, burst and oneoffs). Figures go into docs/benchmarks.md (schedbench
# workloads); say the load (uptime) and the steal with them.
#
#   scripts/bench-server.sh                  # spread, burst, oneoffs
#   scripts/bench-server.sh spread           # 50,000 events spread over 60 s
#   scripts/bench-server.sh burst            # 100,000 events due at one instant
#   scripts/bench-server.sh burst-batch      # the burst to an http_batch target
#   scripts/bench-server.sh spread-batch     # the spread to an http_batch target
#   scripts/bench-server.sh oneoffs          # 1,000,000 one-offs due within a day (intake, disk, idle CPU)
#   scripts/bench-server.sh fire100k fire1m  # one fire of 100,000 / 1,000,000 events due at one instant (peak PSS)
#   scripts/bench-server.sh fire100k-throttled fire1m-throttled  # the same, maxInFlight 100 with autoRelease
#   scripts/bench-server.sh oneoffs-burst oneoffs-burst-1m     # 100,000 / 1,000,000 one-offs due at one instant, batch creates
#   ONEOFFS=100000 scripts/bench-server.sh oneoffs
set -euo pipefail
cd "$(dirname "$0")/.."

go build -o bin/ ./cmd/schedulerd ./cmd/schedbench

# cpu_ticks prints the machine's busy (user, nice, system) and steal ticks
# from /proc/stat. On a shared VM, steal is the time the host gave the
# vCPUs to others: figures measured under much of it are not comparable.
cpu_ticks() { awk '/^cpu /{print $2+$3+$4, $9}' /proc/stat; }
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(spread burst oneoffs)
for s in "${scenarios[@]}"; do
	extra=()
	if [ "$s" = oneoffs ] && [ -n "${ONEOFFS:-}" ]; then
		extra=(-oneoffs "$ONEOFFS")
	fi
	echo "== $s ($(date -u +%FT%TZ); $(uptime))"
	read -r busy0 steal0 < <(cpu_ticks)
	bin/schedbench -server bin/schedulerd -scenario "$s" "${extra[@]}"
	read -r busy1 steal1 < <(cpu_ticks)
	busy=$((busy1 - busy0)) steal=$((steal1 - steal0))
	echo "== $s done ($(uptime)); steal $steal ticks, $((100 * steal / (busy + steal + 1)))% of the busy time"
done
