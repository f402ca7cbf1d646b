#!/usr/bin/env bash
# Runs the long versions of the chaos tests (package ./chaos with
# CHAOS_LONG=1: minutes per test, more events, more kills, both store-outage
# modes) and then a few schedbench workloads in process. Takes about 25-35
# minutes on two cores. Output goes to the terminal and to
# chaos-long-YYYY-MM-DD.log; copy the figures into BENCHMARKS.md.
#
#   scripts/chaos-long.sh              # everything
#   scripts/chaos-long.sh -run Kill    # only the tests matching a pattern
#   SKIP_BENCH=1 scripts/chaos-long.sh # chaos tests only
#
# CHAOS_SEED=N repeats a run's random kill schedule; CHAOS_LOG_DIR=DIR keeps
# every process's log.
set -euo pipefail
cd "$(dirname "$0")/.."

run_pattern='.'
if [ "${1:-}" = "-run" ] && [ -n "${2:-}" ]; then
  run_pattern="$2"
fi
log="chaos-long-$(date -u +%F).log"
{
  echo "== chaos-long on $(uname -sm), $(nproc) cores, $(go version), $(date -u +%FT%TZ)"
  echo "== go test ./chaos -run '$run_pattern' (CHAOS_LONG=1)"
  CHAOS_LONG=1 go test -count=1 -timeout 90m -v -run "$run_pattern" ./chaos/ 2>&1 |
    grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|result:|policy |lateness|phase 1|readyz|store:|created|chaos over|kills?|LOSS|STUCK|THROTTLE|DUPLICATES|CRASH|seed ' || true
  if [ "${SKIP_BENCH:-}" != "1" ]; then
    echo "== schedbench (in process, embedded store)"
    go build -o /tmp/schedbench-$$ ./cmd/schedbench
    trap 'rm -f /tmp/schedbench-$$' EXIT
    /tmp/schedbench-$$ -inprocess -markdown -schedules 20 -events-per-fire 50 -policies 0 -duration 20s
    /tmp/schedbench-$$ -inprocess -markdown -schedules 100 -events-per-fire 100 -policies 4 -max-in-flight 50 -consumer-latency 20ms -duration 60s
    /tmp/schedbench-$$ -inprocess -markdown -schedules 200 -events-per-fire 250 -policies 0 -duration 60s
    /tmp/schedbench-$$ -inprocess -markdown -schedules 50 -events-per-fire 100 -policies 2 -max-in-flight 20 -consumer-latency 50ms -failure-rate 0.1 -duration 30s
  fi
} 2>&1 | tee "$log"
