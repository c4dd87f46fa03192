#!/usr/bin/env bash
# The Docker engine and the base image the project's images build FROM, on a machine
# that has neither and pulls no image: Debian's docker.io, docker-compose (v1) and
# debootstrap through apt, dockerd started in the background, and debian:bookworm-slim
# made locally with debootstrap (Debian's own minbase, Python 3.11 from Debian).
# Idempotent: what is there already is kept. DOCKER_STATE (default /var/tmp/dicesweep-docker)
# keeps dockerd's log and pid.
set -euo pipefail

STATE=${DOCKER_STATE:-/var/tmp/dicesweep-docker}
# The mirror apt is configured with (deb.debian.org unless DEBIAN_MIRROR says otherwise).
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$STATE"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v dockerd >/dev/null || ! command -v docker-compose >/dev/null \
    || ! command -v debootstrap >/dev/null; then
    echo "installing docker.io, docker-compose and debootstrap from Debian's packages"
    as_root apt-get update -q
    as_root apt-get -o DPkg::Lock::Timeout=600 install -y -q docker.io docker-compose debootstrap
fi

if ! docker info >/dev/null 2>&1; then
    echo "starting dockerd (log: $STATE/dockerd.log)"
    as_root sh -c "nohup /usr/sbin/dockerd >'$STATE/dockerd.log' 2>&1 & echo \$! >'$STATE/dockerd.pid'"
    for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null || { tail -20 "$STATE/dockerd.log"; exit 1; }
fi

if ! docker image inspect debian:bookworm-slim >/dev/null 2>&1; then
    echo "making debian:bookworm-slim with debootstrap from $MIRROR"
    rootfs=$(mktemp -d /var/tmp/bookworm-rootfs.XXXXXX)
    as_root debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$STATE/debootstrap.log"
    as_root rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    as_root tar -C "$rootfs" -c . | docker import - debian:bookworm-slim >/dev/null
    as_root rm -rf "$rootfs"
fi
echo "docker engine up: $(docker version --format '{{.Server.Version}}'); base image debian:bookworm-slim"
