#!/usr/bin/env bash
# Benchmarks: the event log, the blob store, the rewind engine, and the
# mount against the native directory in the same run (read the FUSE rows as
# ratios to their "native" neighbours; these machines are small and noisy).
# FUSE benchmarks need root and /dev/fuse. Extra arguments go to go test,
# e.g. scripts/bench.sh -count 5 | benchstat -
set -euo pipefail
cd "$(dirname "$0")/.."
go test -run '^$' -bench . "$@" ./eventlog/ ./blobstore/ ./rewind/ ./fs/
