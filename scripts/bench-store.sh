#!/usr/bin/env bash
# The store's benchmarks (issue 10), one run each: store growth after 100
# steps that each change one 4 KiB block of a large file (1 GiB; set
# ZEROFS_BENCH_BIG=BYTES for another size, ZEROFS_BENCH_STEPS=N), with the capture time of a
# step touching it; a 10k-file source tree edited over 200 steps against
# the bytes of the before-states changed, uncompressed and compressed; one
# step of 100 small-file captures beside 100 native files with their
# fsyncs; a gc thinning a month of steps to one state a day; and the blob
# store's Put throughput. Extra arguments go to go test.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -run '^$' -bench 'BenchmarkStore' -benchtime 1x -timeout 60m "$@" ./rewind/
go test -run '^$' -bench 'BenchmarkPut' "$@" ./blobstore/
