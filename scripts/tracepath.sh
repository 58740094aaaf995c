#!/usr/bin/env bash
# scripts/tracepath.sh: which packages and files a first write and a `zerofs
# undo` enter, in order, and how often control goes back up the import
# order (issue 31's count of the trips).
#
#   scripts/tracepath.sh [OUT]
#
# Builds zerofs from this tree without optimisation or inlining (every
# function a call of its own), mounts a fresh workspace holding a.txt in
# place, begins a step, attaches gdb to the daemon with a breakpoint on
# every function of the module (trace.py logs each entry, with its thread
# and file, and lets it go on), then times two windows: `echo two > a.txt`
# (the step's first write) and `zerofs undo` (run under a gdb of its own, so
# the client is traced too). analyze.py prints, per window, the packages
# and files entered in order of first entry, and the package crossings:
# all, and those back up (to a package higher in the import order,
# STYLE.md rule 1). Background goroutines (the flusher, the namer) are in
# the windows too: counts vary by about a tenth from run to run.
#
# Needs root, /dev/fuse, gdb with Python; takes a few minutes (setting 2,800
# breakpoints). OUT (default /tmp/zerofs-tracepath) holds the raw traces.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/tmp/zerofs-tracepath}
rm -rf "$out"
mkdir -p "$out/ws"
bin=$out/zerofs
(cd "$here/.." && go build -gcflags='all=-N -l' -o "$bin" ./cmd/zerofs)
go tool nm "$bin" | awk '$2=="T" && ($3 ~ /^github.com\/zerofs\/zerofs\// || $3 ~ /^main\./) {print $3}' >"$out/syms.txt"
echo one >"$out/ws/a.txt"
"$bin" mount "$out/ws"
trap '"$bin" umount "$out/ws" || true' EXIT
(cd "$out/ws" && "$bin" step edit)
pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$out/ws/.zero/status")
TRACE_SYMS=$out/syms.txt TRACE_OUT=$out/daemon.trace gdb -p "$pid" -batch -x "$here/tracepath/trace.py" \
	-ex 'python import time; out.write("# continue %f\n" % time.time())' -ex continue -ex detach >"$out/gdb-daemon.log" 2>&1 &
gdbpid=$!
for _ in $(seq 1 1200); do grep -q '^# continue' "$out/daemon.trace" 2>/dev/null && break; sleep 0.5; done
sleep 2
echo "# write-start $(date +%s.%N)" >>"$out/marks"
sh -c "echo two > '$out/ws/a.txt'"
echo "# write-end $(date +%s.%N)" >>"$out/marks"
sleep 2
echo "# undo-start $(date +%s.%N)" >>"$out/marks"
(cd "$out/ws" && TRACE_SYMS=$out/syms.txt TRACE_OUT=$out/client.trace gdb -batch -x "$here/tracepath/trace.py" -ex run --args "$bin" undo >"$out/gdb-client.log" 2>&1)
echo "# undo-end $(date +%s.%N)" >>"$out/marks"
sleep 2
kill -INT "$gdbpid"
wait "$gdbpid" || true
python3 "$here/tracepath/analyze.py" "$out"
