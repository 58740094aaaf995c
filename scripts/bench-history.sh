#!/usr/bin/env bash
# History that scales: mount time and daemon RSS with a long history, and
# the cost of one @T lookup with 1k and 1M events (issue "speed", rows
# "mount of a workspace with 1M events" and "@T lookup").
#
# It writes a synthetic store of N events (default 1,000,000: one tool_call
# every ten events, one-file checkpoints over 10,000 paths, about 390 MB of
# log), opens it once with the engine (reading the whole log and writing
# the index snapshot, as the first mount after an upgrade does), then mounts
# it with the real daemon three times, each starting from the snapshot.
# Needs root and /dev/fuse.
#
#   scripts/bench-history.sh [EVENTS [PATHS]]
#
# PATHS (default 10,000) is how many distinct paths the checkpoints touch:
# 900000 with 1M events is the history of a workspace that saw nearly
# every checkpoint name a new path.
set -euo pipefail
cd "$(dirname "$0")/.."
events=${1:-1000000}
paths=${2:-10000}
tmp=$(mktemp -d /tmp/zerofs-bench-history.XXXXXX)
# `|| true`: under set -e a failed umount (the usual case: nothing is
# mounted by then) ended the trap before the rm, leaving ~480 MB behind.
trap 'zerofs_bin=$tmp/zerofs; { [ -x "$zerofs_bin" ] && "$zerofs_bin" umount "$tmp/ws" >/dev/null 2>&1; } || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/zerofs" ./cmd/zerofs
mkdir -p "$tmp/ws" "$tmp/store"
first=$(ZEROFS_SYNTHETIC_STORE=$tmp/store ZEROFS_SYNTHETIC_EVENTS=$events ZEROFS_SYNTHETIC_PATHS=$paths \
	go test -count=1 -v -run '^TestWriteSyntheticStore$' ./rewind/ | grep '^first open')
log_mb=$(( $(stat -c %s "$tmp/store/events.jsonl") / 1048576 ))
echo "history: $events events over $paths paths, ${log_mb} MiB log ($(date -u +%F), $(uname -r), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
echo "$first"
for run in 1 2 3; do
	start=$(date +%s%N)
	"$tmp/zerofs" mount --store "$tmp/store" "$tmp/ws"
	end=$(date +%s%N)
	read -r pid _ <"$tmp/store/daemon.pid" # "PID START-TIME"
	cat "$tmp/ws/.zero/head" >/dev/null # one request served
	sleep 1                             # the daemon returns its start-up memory
	rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
	hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
	snap="no snapshot"
	[ -f "$tmp/store/index.snapshot" ] && snap="snapshot $(( $(stat -c %s "$tmp/store/index.snapshot") / 1048576 )) MiB"
	printf 'mount %d: %5d ms to ready, daemon RSS %d MiB (peak %d MiB), from a %s\n' \
		"$run" $(( (end - start) / 1000000 )) $(( rss / 1024 )) $(( hwm / 1024 )) "$snap"
	"$tmp/zerofs" umount "$tmp/ws"
done
echo "@T lookup of one path (go test -bench StateAt ./rewind):"
go test -run '^$' -bench 'StateAt' -count 5 ./rewind/ | awk '/^Benchmark/ {print "  " $1, $3, $4}'
