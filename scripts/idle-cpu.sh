#!/usr/bin/env bash
# Idle CPU and file size of schedulerd on the embedded store (on disk)
# holding N one-offs due 2-24 h later: builds schedulerd into bin/, starts it
# on an empty data directory, creates the one-offs through
# POST /v1/schedules/batch (1,000 a request, fixed seed), waits 10 s, then
# reads utime+stime from /proc/PID/stat over 60 s. Needs curl, jq, python3.
# Figures go into docs/benchmarks.md (Stores).
#
#   scripts/idle-cpu.sh                 # N=100000
#   N=10000 PORT=18921 scripts/idle-cpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-100000}
PORT=${PORT:-18920}
WORK=$(mktemp -d)
DIR=$WORK/data
BIN=bin/schedulerd
ADMIN=admin-idle-key-1234567890abcdef
API=http://127.0.0.1:$PORT

go build -o "$BIN" ./cmd/schedulerd
SCHEDULER_ADMIN_KEY=$ADMIN "$BIN" --data-dir "$DIR" --listen "127.0.0.1:$PORT" >"$WORK/server.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$WORK"' EXIT

for _ in $(seq 50); do
	curl -sf "$API/v1/tenants" -H "Authorization: Bearer $ADMIN" >/dev/null && break
	sleep 0.2
done
T=$(curl -sf -X POST "$API/v1/tenants" -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' -d '{"name":"idle"}' | jq -r .id)
curl -sf -X PATCH "$API/v1/tenants/$T" -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
	-d '{"quotas":{"maxSchedules":10000000}}' >/dev/null
KEY=$(curl -sf -X POST "$API/v1/tenants/$T/keys" -H "Authorization: Bearer $ADMIN" | jq -r .key)

python3 - "$API" "$KEY" "$N" <<'PY'
import datetime, json, random, sys, urllib.request
api, key, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = random.Random(1)
now = datetime.datetime.now(datetime.timezone.utc)
for start in range(0, n, 1000):
    items = [{
        "name": "j%d" % i,
        "runAt": (now + datetime.timedelta(seconds=7200 + r.randrange(22 * 3600))).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "target": {"type": "http", "url": "http://127.0.0.1:9/hook"},
        "payload": {"job": "nightly-report", "region": "eu-central-1", "batch": 42},
    } for i in range(start, min(start + 1000, n))]
    req = urllib.request.Request(api + "/v1/schedules/batch", data=json.dumps({"items": items}).encode(),
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    res = json.load(urllib.request.urlopen(req))
    if res.get("failed"):
        sys.exit("batch at %d: %d failed: %s" % (start, res["failed"], json.dumps(res)[:500]))
PY

sleep 10
tick=$(getconf CLK_TCK)
cpu() { awk '{print $14+$15}' "/proc/$PID/stat"; }
a=$(cpu)
sleep 60
b=$(cpu)
size=$(stat -c %s "$DIR/schedulerd.db")
python3 -c "
t=($b-$a)/$tick
print('%d one-offs: idle CPU %.2f s over 60 s = %.2f%% of a core; file %d bytes = %.0f per one-off' % ($N, t, t/60*100, $size, $size/$N))"
uptime
