#!/bin/sh
# Re-verify the corral deliveries a change brings, in any CI runner:
#   docs/ci/verify.sh [RANGE]     (default: origin/main..HEAD)
# It fetches the attestations (git notes under refs/notes/corral), installs
# corral, and runs `corral verify`, which exits non-zero when an attested
# commit's recorded checks do not give the recorded verdicts again. Plain
# commits in the range are reported as "not delivered by corral" and pass.
# CORRAL_PIP: what to install (default: corral); CORRAL: how to run it.
set -eu
range=${1:-origin/main..HEAD}
git fetch --quiet origin "+refs/notes/corral:refs/notes/corral" || {
    echo "verify.sh: no attestations on origin (refs/notes/corral); nothing was delivered by corral there" >&2
}
if [ -z "${CORRAL:-}" ]; then
    python3 -m pip install --quiet "${CORRAL_PIP:-corral}"
    CORRAL=corral
fi
# shellcheck disable=SC2086 # CORRAL may hold words
exec $CORRAL verify "$range"
