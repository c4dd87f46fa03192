#!/usr/bin/env bash
# The project as a new user gets it: the wheel built from this checkout, installed with
# its train extra into a fresh virtual environment outside the checkout, runs
# `dicesweep run --preset smoke` from an empty folder with no DICESWEEP_* variable set
# (the smoke preset's data set ships in the wheel). Usage: scripts/wheel-check.sh [PYTHON]
set -euo pipefail
python=${1:-python3.11}
checkout=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/dicesweep-wheel-check.XXXXXX")
# A home as short as a user's: Ray's socket paths under it allow 36 characters.
home=$(mktemp -d /tmp/dsw-XXXXXX)
trap 'rm -rf "$work" "$home"' EXIT

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
