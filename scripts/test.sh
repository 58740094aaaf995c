#!/usr/bin/env bash
# The test suite: formatting, vet, and every package's tests under the race
# detector. FUSE tests mount for real (as root, with DirectMount); in CI they
# must not skip, so ZEROFS_REQUIRE_FUSE=1 turns a missing /dev/fuse into a
# failure. go.mod must be tidy (go mod tidy -diff prints what would change).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${CI:-}" = "true" ]; then
	export ZEROFS_REQUIRE_FUSE=1
fi
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go mod tidy -diff
go vet ./...
go test -race -count=1 -timeout 20m "$@" ./...
