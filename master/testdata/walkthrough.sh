#!/bin/bash
# Usage: start schedulerd with SCHEDULER_ADMIN_KEY=admin-walkthrough-key-123456 on
# 127.0.0.1:8080 and python3 consumer.py (port 9099) in the same directory,
# then run this script there. docs/api.md (Walk-through) shows its output.
# Runs the README walkthrough against a live schedulerd and prints a transcript.
API=http://127.0.0.1:8080
ADMIN=admin-walkthrough-key-123456
run() { echo "\$ $1"; eval "$1" | tee last.out; echo; }
run "curl -s -X POST \$API/v1/tenants -H \"Authorization: Bearer \$ADMIN\" -H 'Content-Type: application/json' -d '{\"name\":\"acme\"}' | jq -c ."
TENANT=$(jq -r .id last.out)
echo "TENANT=$TENANT"
run "curl -s -X POST \$API/v1/tenants/\$TENANT/keys -H \"Authorization: Bearer \$ADMIN\" | jq -c ."
KEY=$(jq -r .key last.out)
echo "KEY=$KEY"
run "curl -s -X POST \$API/v1/policies -H \"Authorization: Bearer \$KEY\" -H 'Content-Type: application/json' -d '{\"name\":\"reports\",\"maxInFlight\":1,\"tokenTimeout\":\"15m\",\"autoRelease\":false}' | jq -c ."
POLICY=$(jq -r .id last.out)
echo "POLICY=$POLICY"
run "curl -s -X POST \$API/v1/schedules -H \"Authorization: Bearer \$KEY\" -H 'Content-Type: application/json' -H 'Idempotency-Key: report-v1' -d '{\"name\":\"report\",\"cron\":\"* * * * *\",\"timezone\":\"Europe/Berlin\",\"eventCount\":3,\"policyId\":\"'\$POLICY'\",\"target\":{\"type\":\"http\",\"url\":\"http://127.0.0.1:9099/hook\"},\"payload\":{\"report\":\"daily\"}}' | jq ."
SCHED=$(jq -r .id last.out)
echo "SCHED=$SCHED"
run "curl -s \"\$API/v1/schedules/\$SCHED/preview?count=3\" -H \"Authorization: Bearer \$KEY\" | jq -c '.fireTimes[]'"
# wait for the first fire to be delivered
for i in $(seq 1 90); do [ -s deliveries.jsonl ] && break; sleep 1; done
sleep 1
run "curl -s \"\$API/v1/events?scheduleId=\$SCHED&limit=4\" -H \"Authorization: Bearer \$KEY\" | jq -c '.items[] | {id, status, launchAt}'"
run "head -1 deliveries.jsonl | jq ."
URL=$(head -1 deliveries.jsonl | jq -r .release.url); TOKEN=$(head -1 deliveries.jsonl | jq -r .release.token)
echo "URL=$URL"; echo "TOKEN=$TOKEN"
run "curl -s \$API/v1/policies/\$POLICY -H \"Authorization: Bearer \$KEY\" | jq -c '{tokensInUse, waiting}'"
run "curl -s -X POST \$URL -H 'Content-Type: application/json' -d '{\"token\":\"'\$TOKEN'\"}'"
run "curl -s -X POST \$URL -H 'Content-Type: application/json' -d '{\"token\":\"'\$TOKEN'\"}'"
run "curl -s -X POST \$URL -H 'Content-Type: application/json' -d '{\"token\":\"guess\"}' | jq -c ."
sleep 1
run "jq -c '{eventId, index}' deliveries.jsonl"
FIRE=$(head -1 deliveries.jsonl | jq -r .fireId)
echo "FIRE=$FIRE"
run "curl -s \$API/v1/fires/\$FIRE -H \"Authorization: Bearer \$KEY\" | jq -c '{fireTime, localTime, n, decision, counts}'"
run "curl -s -X POST \$API/v1/schedules/\$SCHED/pause -H \"Authorization: Bearer \$KEY\" | jq -c '{state, version, nextFireTimes}'"
run "curl -s \"\$API/v1/events?scheduleId=\$SCHED&status=cancelled\" -H \"Authorization: Bearer \$KEY\" | jq '.items | length'"
run "curl -s -i -X POST \$API/v1/schedules -H \"Authorization: Bearer \$KEY\" -H 'Content-Type: application/json' -d '{\"name\":\"bad\",\"cron\":\"0 24 * * *\",\"timezone\":\"Mars/Olympus\",\"target\":{\"type\":\"http\",\"url\":\"ftp://example.com\"}}' | grep -v '^Date'"
run "curl -s -X POST \$API/v1/schedules -H \"Authorization: Bearer \$KEY\" -H 'Content-Type: application/json' -d '{\"name\":\"x\",\"cron\":\"0 3 * * *\",\"colour\":\"red\",\"target\":{\"type\":\"http\",\"url\":\"https://example.com\"}}' | jq -c ."
run "curl -s \$API/v1/schedules | jq -c ."
run "curl -s -o /dev/null -w '%{http_code} replayed=%header{idempotent-replayed}\n' -X POST \$API/v1/schedules -H \"Authorization: Bearer \$KEY\" -H 'Content-Type: application/json' -H 'Idempotency-Key: report-v1' -d '{\"name\":\"report\",\"cron\":\"* * * * *\",\"timezone\":\"Europe/Berlin\",\"eventCount\":3,\"policyId\":\"'\$POLICY'\",\"target\":{\"type\":\"http\",\"url\":\"http://127.0.0.1:9099/hook\"},\"payload\":{\"report\":\"daily\"}}'"
run "curl -s -X DELETE \$API/v1/policies/\$POLICY -H \"Authorization: Bearer \$KEY\" | jq -c ."
RUNAT=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:00Z)
echo "RUNAT=$RUNAT"
run "curl -s -X POST \$API/v1/schedules -H \"Authorization: Bearer \$KEY\" -H 'Content-Type: application/json' -d '{\"name\":\"send-reminder\",\"runAt\":\"'\$RUNAT'\",\"target\":{\"type\":\"sqs\",\"queueUrl\":\"https://sqs.eu-west-1.amazonaws.com/123456789012/reminders\"}}' | jq -c '{id, runAt, children, nextFireTimes}'"
JOB=$(jq -r .id last.out)
echo "JOB=$JOB"
run "curl -s \"\$API/v1/events?scheduleId=\$JOB\" -H \"Authorization: Bearer \$KEY\" | jq -c '.items[] | {id, status, launchAt}'"
run "curl -s -o /dev/null -w '%{http_code}\n' -X DELETE \$API/v1/schedules/\$JOB -H \"Authorization: Bearer \$KEY\""
run "curl -s \"\$API/v1/events?scheduleId=\$JOB\" -H \"Authorization: Bearer \$KEY\" | jq -c '.items[] | {id, status}'"
