#!/usr/bin/env bash
# The soak (e2e/TestSoak, long form): random agent workloads on a real mount
# of a child `zerofs mount -f`, with steps, rewinds, undos, redos, reverts,
# gc and thins, the daemon SIGKILLed at random points (one round in ten the
# moment its mount answers) and remounted, every killed daemon gone (exited
# and reaped) within 5 s, every recorded state checked through @T after
# each remount. Not part of CI (the
# normal suite runs its short form). Needs root and /dev/fuse.
#
#   scripts/soak.sh [DURATION]          run for DURATION (default 30m)
#   ZEROFS_SOAK_KILLS=1000 scripts/soak.sh   run until 1000 kills
#   ZEROFS_SEED=N scripts/soak.sh       replay the choices of seed N
#   ZEROFS_SOAK_KEEP=DIR                on a failure, copy the workspace and
#                                       its store to DIR for a post-mortem
#   ZEROFS_SOAK_HARDLINKS=0, ZEROFS_SOAK_XATTRS=0   leave out hard links, xattrs
#
# It prints its seed first and a progress line every 50 rounds; at the end
# the rounds, kills, states checked and "nothing lost", or the first loss
# with the actions that led to it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${ZEROFS_SOAK_KILLS:-}" ] && [ -z "${ZEROFS_SOAK_ROUNDS:-}" ]; then
	export ZEROFS_SOAK_DURATION="${1:-${ZEROFS_SOAK_DURATION:-30m}}"
fi
export ZEROFS_REQUIRE_FUSE=1
exec go test -count=1 -timeout 0 -v -run '^TestSoak$' ./e2e
