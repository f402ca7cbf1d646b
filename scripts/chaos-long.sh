#!/usr/bin/env bash
# Runs the long versions of the chaos tests (package ./chaos with
# CHAOS_LONG=1: minutes per test, more events and kills, two instances and
# both outage modes in the store test), then a few schedbench workloads in
# process. About 25-35 minutes on two cores. The summary goes to the terminal
# and to $CHAOS_OUT_DIR/chaos-long-YYYY-MM-DD.log (default /tmp), the full
# test output to chaos-long-YYYY-MM-DD.test.log beside it; copy the figures
# into docs/benchmarks.md.
#
#   scripts/chaos-long.sh              # everything
#   scripts/chaos-long.sh -run Kill    # only the chaos tests matching a pattern
#   SKIP_BENCH=1 scripts/chaos-long.sh # chaos tests only
#
# CHAOS_SEED=N repeats a run's random kill schedule; CHAOS_LOG_DIR=DIR keeps
# every process's log. Exits non-zero if a chaos test failed.
set -uo pipefail
cd "$(dirname "$0")/.."

run_pattern='.'
if [ "${1:-}" = "-run" ] && [ -n "${2:-}" ]; then
  run_pattern="$2"
fi
day=$(date -u +%F)
out="${CHAOS_OUT_DIR:-/tmp}"
mkdir -p "$out"
log="$out/chaos-long-$day.log"
testlog="$out/chaos-long-$day.test.log"
status=0
{
  echo "== chaos-long: $(uname -sm), $(nproc) cores, $(go version | cut -d' ' -f3), started $(date -u +%FT%TZ)"
  echo "== CHAOS_LONG=1 go test -count=1 -timeout 90m -v -run '$run_pattern' ./chaos/"
} | tee "$log"
start=$(date +%s)
CHAOS_LONG=1 go test -count=1 -timeout 90m -v -run "$run_pattern" ./chaos/ >"$testlog" 2>&1
status=$?
grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|result:|^        (policy|lateness)|phase 1|readyz|store:|created [0-9]|chaos over|LOSS|STUCK|THROTTLE|DUPLICATES|DOUBLE|CRASH|LATE SEND|duplicates: |missing .*GET|seed ' "$testlog" | tee -a "$log"
echo "== chaos tests: exit $status after $(( $(date +%s) - start ))s (full output in $testlog)" | tee -a "$log"

if [ "${SKIP_BENCH:-}" != "1" ]; then
  bin=$(mktemp -d)/schedbench
  trap 'rm -rf "$(dirname "$bin")"' EXIT
  go build -o "$bin" ./cmd/schedbench
  bench() {
    echo "== schedbench -inprocess $*"
    "$bin" -inprocess -markdown "$@" 2>&1 | grep -v ' events delivered$'
    echo
  }
  {
    bench -schedules 20 -events-per-fire 500 -policies 0 -duration 0s
    bench -schedules 100 -events-per-fire 100 -policies 4 -max-in-flight 50 -consumer-latency 20ms -duration 60s
    bench -schedules 10 -events-per-fire 500 -policies 1 -throttled 1 -max-in-flight 50 -consumer-latency 100ms -duration 0s
    bench -schedules 50 -events-per-fire 100 -policies 2 -max-in-flight 20 -consumer-latency 50ms -failure-rate 0.1 -duration 30s -drain 6m
    bench -schedules 100 -events-per-fire 1000 -policies 0 -duration 30s
  } 2>&1 | tee -a "$log"
fi
exit $status
