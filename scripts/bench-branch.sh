#!/bin/sh
# scripts/bench-branch.sh [ZEROFS]: what a branch costs (issue 29), as root.
#  1. zerofs branch DIR in workspaces of 1k, 20k and 200k files (100 files a
#     directory, 1 KiB each): the median of 5 of the command's wall time, and
#     of the workspace daemon's part (the branch request: a capture
#     boundary and the branch's record, timed from its .zero/rewind write);
#     the rest is the overlay mount and the branch's own zerofs daemon.
#     Then the wall time of zerofs merge of a branch that changed one file.
#  2. The store growth of ten branches of the 20k-file workspace that each
#     change one file of 64 KiB (append a line): bytes of STORE/branches
#     (copy-up layers, the branches' stores and records), from du -sb.
# Prints one line per figure; the load average before and after. SIZES="20000"
# runs one size only.
set -eu
Z=${1:-zerofs}
T=$(mktemp -d /tmp/bench-branch-XXXXXX)
cleanup() {
	for b in "$T"/b*; do
		[ -d "$b" ] || continue
		mountpoint -q "$b" && "$Z" umount "$b" >/dev/null 2>&1 || true
		mountpoint -q "$b" && umount "$b" || true
	done
	mountpoint -q "$T/ws" && "$Z" umount "$T/ws" >/dev/null 2>&1 || true
	rm -rf "$T"
}
trap cleanup EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ms() { date +%s%N; }
for n in ${SIZES:-1000 20000 200000}; do
	rm -rf "$T/ws"
	mkdir -p "$T/ws"
	python3 - "$T/ws" "$n" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
blob = b"x" * 1023 + b"\n"
for i in range(n):
    d = os.path.join(root, f"d{i // 100:05d}")
    if i % 100 == 0:
        os.mkdir(d)
    with open(os.path.join(d, f"f{i % 100:02d}"), "wb") as f:
        f.write(blob)
EOF
	"$Z" mount "$T/ws"
	total="" req=""
	for i in 1 2 3 4 5; do
		b="$T/b$i"
		s=$(ms)
		"$Z" -C "$T/ws" branch "$b" >/dev/null
		e=$(ms)
		total="$total $(( (e - s) / 1000000 ))"
		# The daemon's part alone: the same request a branch sends, for a
		# branch record that is removed again at once.
		s=$(ms)
		printf '{"branch": {"dir": "%s/x%d"}}\n' "$T" "$i" > "$T/ws/.zero/rewind"
		e=$(ms)
		req="$req $(( (e - s) / 1000 ))"
		id=$("$Z" -C "$T/ws" branch --list --json | python3 -c "import json,sys; print([b['id'] for b in json.load(sys.stdin) if b['dir'].endswith('/x$i')][0])")
		printf '{"branch": {"delete": "%s"}}\n' "$id" > "$T/ws/.zero/rewind"
	done
	# A merge of a branch that changed one file reads what it changed.
	"$Z" -C "$T/ws" branch "$T/bm" >/dev/null
	echo more >> "$T/bm/d00000/f00"
	s=$(ms)
	"$Z" -C "$T/ws" merge "$T/bm" >/dev/null
	e=$(ms)
	merge=$(( (e - s) / 1000000 ))
	"$Z" -C "$T/ws" branch --delete "$T/bm" >/dev/null
	echo "files $n: zerofs merge of a branch that changed one file: $merge ms"
	echo "files $n: zerofs branch median $(echo $total | tr ' ' '\n' | median) ms (runs:$total); the daemon's branch request median $(echo $req | tr ' ' '\n' | median) us (runs:$req)"
	if [ "$n" = 20000 ]; then
		for i in 1 2 3 4 5; do "$Z" -C "$T/ws" branch --delete "$T/b$i" --force >/dev/null; done
		head -c 65536 /dev/urandom > "$T/ws/d00000/big"
		store=$("$Z" -C "$T/ws" status --json | python3 -c "import json,sys; s=json.load(sys.stdin); print('/proc/%d/fd' % s['pid'])")
		sdir=""
		for fd in "$store"/*; do
			[ "$(readlink "$fd")" = "$T/ws/.zero" ] && sdir=$fd
		done
		before=$(du -sb "$sdir/" | cut -f1)
		for i in 1 2 3 4 5 6 7 8 9 10; do
			"$Z" -C "$T/ws" branch "$T/b$i" >/dev/null
			echo "branch $i" >> "$T/b$i/d00000/big"
		done
		sync
		after=$(du -sb "$sdir/" | cut -f1)
		br=$(du -sb "$sdir/branches" | cut -f1)
		echo "ten branches each appending a line to one 64 KiB file of 20000: store grew $((after - before)) bytes; STORE/branches holds $br bytes ($(du -sb "$sdir"/branches/*/upper | awk '{s+=$1} END {print s}') in copy-up layers, $(du -sb "$sdir"/branches/*/store | awk '{s+=$1} END {print s}') in the branches' stores)"
		for i in 1 2 3 4 5 6 7 8 9 10; do "$Z" -C "$T/ws" branch --delete "$T/b$i" --force >/dev/null; done
	else
		for i in 1 2 3 4 5; do "$Z" -C "$T/ws" branch --delete "$T/b$i" --force >/dev/null; done
	fi
	"$Z" umount "$T/ws"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
