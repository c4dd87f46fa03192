#!/usr/bin/env bash
# Schemathesis against a running `dicesweep serve`: every phase (examples, coverage,
# fuzzing, stateful), every check, an API key on every request. Starts the service on
# embedded defaults in a temporary home (its own Ray head; the reconciler idle so that
# no sweep runs) and stops it afterwards. Any 5xx is a failure of the
# `not_a_server_error` check; the summary counts the requests.
#
#   scripts/fuzz-api.sh [MAX_EXAMPLES]    # 40 by default
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
home=$(mktemp -d /tmp/dsw-fuzz-XXXX)
port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
dash=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export DICESWEEP_HOME=$home DICESWEEP_PORT=$port DICESWEEP_RAY_DASHBOARD_PORT=$dash
export DICESWEEP_RECONCILE_INTERVAL_S=86400 RAY_AUTH_MODE=disabled
# A key makes every route ask for one, loopback or not.
key=$($PY -m sweep_service.cli keys create --owner fuzz --max-concurrent-sweeps 100000 |
  grep -o 'ds_[A-Za-z0-9_-]*' | head -1)
# A session of its own: stopping, it ends its whole process group (its Ray head).
setsid $PY -m sweep_service.cli serve >"$home/serve.log" 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$home"' EXIT
for _ in $(seq 360); do
  curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break
  sleep 0.5
done
"$(dirname "$PY")/schemathesis" run "http://127.0.0.1:$port/openapi.json" \
  --phases examples,coverage,fuzzing,stateful --checks all \
  --header "Authorization: Bearer $key" --max-examples "${1:-40}" \
  --seed 41 --report ndjson --report-dir "${REPORT_DIR:-$home/report}" || status=$?
# Every request sent and its answer's status, from the run's own record.
$PY - "${REPORT_DIR:-$home/report}" <<'COUNT'
import collections, json, pathlib, sys

statuses = collections.Counter()
for path in pathlib.Path(sys.argv[1]).glob("*.ndjson"):
    for line in path.read_text().splitlines():
        event = json.loads(line)
        for interaction in (event.get("ScenarioFinished", {}).get("recorder", {}).get("interactions") or {}).values():
            response = interaction.get("response")
            statuses[response["status_code"] if response else "no answer"] += 1
shown = ", ".join(f"{status} x {count}" for status, count in sorted(statuses.items(), key=str))
print(f"requests: {sum(statuses.values())} ({shown}); 5xx: {sum(n for s, n in statuses.items() if str(s).startswith('5'))}")
COUNT
exit "${status:-0}"
