#!/usr/bin/env bash
# Runs every check and the full test suite. This is the README's test command
# and what CI runs. It installs what it needs: Go modules and the npm test
# servers (local-aws-sqs) and, as root on Debian, PostgreSQL for the chaos tests
# and Chromium for the console's browser tests, curl and jq for the
# documentation's walk-through tests.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== no large files in git (binaries are built into bin/, which git ignores)"
if git rev-parse --git-dir >/dev/null 2>&1; then
  large=$({ git ls-files -z | xargs -0 -r stat -c '%s %n' -- 2>/dev/null || true; } | awk '$1 > 1048576 { n = $1; sub(/^[0-9]+ /, ""); print "  " $0 " (" n " bytes)" }')
  if [ -n "$large" ]; then
    echo "git-tracked files larger than 1 MB:"; echo "$large"; exit 1
  fi
fi

echo "== installing Go modules and npm test servers"
go mod download
if [ -f internal/testkit/sqstest/package-lock.json ]; then
  npm ci --prefix internal/testkit/sqstest --no-audit --no-fund --loglevel=error
fi

echo "== PostgreSQL server (FerretDB's backend in the chaos tests; SQLite without it)"
if [ -z "${CHAOS_PG_BINDIR:-}" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
  && ! [ -x "$(pg_config --bindir 2>/dev/null)/initdb" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } \
      || echo "could not install PostgreSQL: the chaos tests run FerretDB on SQLite"
  else
    echo "no PostgreSQL server found (Debian: apt-get install postgresql): the chaos tests run FerretDB on SQLite"
  fi
fi

echo "== Chromium (the console's browser tests in ./ui; they skip without it)"
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
      || echo "could not install Chromium: the console's browser tests skip"
  else
    echo "no Chromium found (Debian: apt-get install chromium): the console's browser tests skip"
  fi
fi

echo "== curl and jq (the documentation's walk-throughs in ./docs; they skip without them)"
if ! command -v curl >/dev/null || ! command -v jq >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl jq >/dev/null; } \
      || echo "could not install curl and jq: the walk-through tests skip"
  else
    echo "no curl or jq found (Debian: apt-get install curl jq): the walk-through tests skip"
  fi
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path '*/node_modules/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== generated code is up to date"
go generate ./api/... ./client/...
if git rev-parse --git-dir >/dev/null 2>&1 && ! git diff --exit-code --stat -- api client; then
  echo "generated code differs from openapi.yaml: run 'go generate ./api/... ./client/...' and commit"; exit 1
fi

echo "== lint openapi.yaml"
npm ci --prefix scripts/lint --no-audit --no-fund --loglevel=error
npm exec --prefix scripts/lint --no -- redocly lint --config scripts/lint/redocly.yaml openapi.yaml

echo "== go vet"
go vet ./...

echo "== staticcheck"
go tool staticcheck ./...

echo "== tests (race detector on the concurrent packages)"
race_pkgs="./lease/... ./store/... ./emitter/... ./handler/... ./throttle/... ./master/... ./delivery/... ./internal/... ./app/..."
go test -race -count=1 -timeout 15m $race_pkgs
others=$(go list ./... | grep -vE '/(lease|store|emitter|handler|throttle|master|delivery|internal|app)(/|$)' | grep -vx '.*/chaos')
go test -count=1 -timeout 15m $others
# The conformance cases of more than a thousand events and the MongoDB
# driver's round-trip count skip under -race (the MongoDB tests' in-process
# FerretDB takes minutes for them there).
go test -count=1 -timeout 10m -run 'TestConformance/.*/.*LargeLimit|TestRoundTrips' ./store/embedded/ ./store/mongo/
echo "== chaos tests (alone: they time real processes on a 2-core machine)"
go test -count=1 -timeout 15m ./chaos
