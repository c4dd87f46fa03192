#!/usr/bin/env bash
# The project as a new user gets it: the wheel built from this checkout, installed into
# fresh virtual environments outside the checkout, run from an empty folder with an empty
# home and no DICESWEEP_* variable set. Three parts, each timed:
# - the train extra runs `dicesweep run --preset smoke` (its data set ships in the wheel);
# - the client extra alone, in a second venv, is measured (what it adds to site-packages,
#   capped at CLIENT_MAX_MB) and must leave Ray, MLflow, FastAPI, SQLAlchemy and torch out;
# - with the notebook extra added there, docs/notebooks/smoke_sweep.ipynb runs in that
#   venv's kernel (`jupyter execute`) against `dicesweep serve` from the first venv, the
#   service extra added to it, on a free port with a Ray head of its own.
# Usage: scripts/wheel-check.sh [PYTHON]
set -euo pipefail
python=${1:-python3.11}
# The client extra's size is what its wheels install (--no-compile), capped; the bytecode
# pip compiles by default (over 50 MB more with pandas 3.1 and numpy 2.4, which are most
# of the extra) is printed beside it. The service extra is 1.2 GB.
CLIENT_MAX_MB=150
HEAVY=(ray mlflow fastapi sqlalchemy torch)
checkout=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/dicesweep-wheel-check.XXXXXX")
# A home as short as a user's: Ray's socket paths under it allow 36 characters.
home=$(mktemp -d /tmp/dsw-XXXXXX)
serve_pid=
serving() { local state; state=$(ps -o stat= -p "$serve_pid") && [[ $state != Z* ]]; }
stop_service() {
    [[ -n $serve_pid ]] && serving || return 0
    kill -TERM "$serve_pid"  # the service stops its Ray head with it
    for _ in $(seq 60); do serving || return 0; sleep 1; done
    kill -KILL "$serve_pid"
}
trap 'stop_service; rm -rf "$work" "$home"' EXIT
site_mb() { du -sm "$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" | cut -f1; }

"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --upgrade pip
"$work/venv/bin/pip" wheel --quiet --no-deps --wheel-dir "$work/dist" "$checkout"
wheel=$(ls "$work/dist"/dicesweep-*.whl)
listing=$("$python" -m zipfile -l "$wheel")
grep -q "search_spaces/samples/ud_en_ewt_sample/LICENSE.txt" <<<"$listing" \
    || { echo "wheel-check: $wheel lacks the smoke preset's sample" >&2; exit 1; }
"$work/venv/bin/pip" install --quiet "$wheel[train]"
echo "wheel-check: built and installed in a fresh venv in $SECONDS s"

# No DICESWEEP_* variable, a home of its own, run where no checkout lies.
unset $(compgen -e | grep '^DICESWEEP_' || true)
mkdir -p "$work/run"
cd "$work/run"
started=$SECONDS
HOME="$home" "$work/venv/bin/dicesweep" run --preset smoke 2>&1 | tee "$work/smoke.txt"
grep -q "sweep smoke-.*: 2 done, 0 failed" "$work/smoke.txt" \
    || { echo "wheel-check: the smoke sweep did not finish both trials" >&2; exit 1; }
echo "wheel-check: the installed wheel ran the smoke sweep in $((SECONDS - started)) s"

# The client extra alone: what it adds to a fresh venv, and nothing of the service's.
started=$SECONDS
client=$work/client-venv
"$python" -m venv "$client"
"$client/bin/pip" install --quiet --upgrade pip
bare_mb=$(site_mb "$client")
"$client/bin/pip" install --quiet --no-compile "$wheel[client]"
client_mb=$(($(site_mb "$client") - bare_mb))
"$client/bin/python" -m compileall -q "$("$client/bin/python" -c 'import sysconfig
print(sysconfig.get_path("purelib"))')" >/dev/null
echo "wheel-check: the client extra installed in $((SECONDS - started)) s: $client_mb MB" \
    "(at most $CLIENT_MAX_MB MB; $(($(site_mb "$client") - bare_mb)) MB with its bytecode;" \
    "the venv's own pip $bare_mb MB left out)"
((client_mb <= CLIENT_MAX_MB)) \
    || { echo "wheel-check: the client extra takes $client_mb MB, over $CLIENT_MAX_MB" >&2; exit 1; }
found=$("$client/bin/python" -c 'import importlib.util as u, sys
print(" ".join(m for m in sys.argv[1:] if u.find_spec(m)))' "${HEAVY[@]}")
[[ -z $found ]] || { echo "wheel-check: the client extra installs $found" >&2; exit 1; }

# The notebook in the client venv's kernel against a real service from the first venv.
started=$SECONDS
"$client/bin/pip" install --quiet "$wheel[notebook]"
"$work/venv/bin/pip" install --quiet "$wheel[train,service]"
echo "wheel-check: the notebook extra (+$(($(site_mb "$client") - bare_mb - client_mb)) MB)" \
    "and the service extra installed in $((SECONDS - started)) s"
started=$SECONDS
port=$("$client/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
url=http://127.0.0.1:$port
HOME="$home" DICESWEEP_PORT=$port DICESWEEP_RAY_DASHBOARD_PORT=0 \
    "$work/venv/bin/dicesweep" serve >"$work/serve.log" 2>&1 &
serve_pid=$!
until "$client/bin/python" -c 'import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/healthz", timeout=2)' "$url" 2>/dev/null; do
    if ! serving || ((SECONDS - started > 180)); then
        tail -n 40 "$work/serve.log" >&2
        echo "wheel-check: dicesweep serve did not answer $url/healthz" >&2
        exit 1
    fi
    sleep 1
done
echo "wheel-check: dicesweep serve answered in $((SECONDS - started)) s"
started=$SECONDS
cp "$checkout/docs/notebooks/smoke_sweep.ipynb" "$work/run/"
HOME="$home" PATH="$client/bin:$PATH" DICESWEEP_API_URL=$url \
    MPLBACKEND=module://matplotlib_inline.backend_inline \
    "$client/bin/jupyter" execute --inplace --timeout=600 --kernel_name=python3 \
    "$work/run/smoke_sweep.ipynb"
grep -q '"image/png"' "$work/run/smoke_sweep.ipynb" \
    || { echo "wheel-check: the notebook drew no plot of the table" >&2; exit 1; }
echo "wheel-check: the notebook ran the smoke sweep through the service in $((SECONDS - started)) s"
