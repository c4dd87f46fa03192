#!/bin/sh
# Run in every image's first stage: Debian's Python 3.11 with venv, the CA bundle, tini
# (PID 1 that reaps and forwards signals) and the tools health checks and KubeRay use.
set -eu
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv ca-certificates tini wget procps
rm -rf /var/lib/apt/lists/*
