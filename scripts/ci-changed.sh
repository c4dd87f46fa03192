#!/usr/bin/env bash
# Whether a long suite must run: exit 0 when any of PATHS changed since the commit at
# which SUITE last passed (its hash in .ci/verified/SUITE), or when none is recorded;
# exit 1 when they are as they were then. After SUITE passes on a commit whose PATHS
# are committed, `scripts/ci-changed.sh --record SUITE` writes that commit.
#   scripts/ci-changed.sh SUITE PATH...
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--record" ]; then
    git rev-parse HEAD > ".ci/verified/$2"
    echo "$2 verified at $(cat ".ci/verified/$2")"
    exit 0
fi
suite=$1
shift
stamp=".ci/verified/$suite"
if [ ! -f "$stamp" ]; then
    echo "$suite: never verified: it runs"
    exit 0
fi
base=$(cat "$stamp")
if ! git cat-file -e "$base^{commit}" 2>/dev/null; then
    echo "$suite: verified at $base, a commit this clone lacks: it runs"
    exit 0
fi
if git diff --quiet "$base" HEAD -- "$@"; then
    echo "$suite: nothing it covers changed since $base (passed there): skipped"
    exit 1
fi
echo "$suite: what it covers changed since $base: it runs"
git diff --stat "$base" HEAD -- "$@" | tail -1
exit 0
