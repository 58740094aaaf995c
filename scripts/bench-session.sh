#!/usr/bin/env bash
# scripts/bench-session.sh: a scripted agent session, natively and under a
# zerofs mount, alternating, each tool call a step of its own.
#
#   scripts/bench-session.sh [REPS] [MOUNT FLAGS...]
#
# The session is what an agent does to a Go repository in one task: search
# (rg, grep -r), read 200 files, edit 20 with sed -i, go build, go vet,
# write 300 generated files, git add + commit, rm -rf of them, mv of a
# directory and back, unpack a node_modules-like tree (1,737 files, 46 MB)
# and remove it. Each side gets a fresh copy of this repository (a git
# clone), then builds, vets, searches and runs git status in it before its
# run (untimed: an agent session's caches are warm, the mount's too). On
# the mount, each tool call begins with a write to .zero/step, as an agent's
# hook makes it (timed: it is part of what the mount costs).
#
# Prints, per tool call and in total, the median time of each side over REPS
# alternating runs (default 5) and the median of the per-run ratio
# mount/native, with the load before and after. Needs root (the mount), go,
# git, rg, python3. MOUNT FLAGS go to `zerofs mount` (e.g. --no-open,
# --sync always). Work happens under $BENCH_DIR (default /var/tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
REPS=${1:-5}
shift || true
FLAGS=("$@")
PY=$(command -v python3)
for tool in go git rg "$PY"; do
	command -v "$tool" >/dev/null || {
		echo "bench-session: needs $tool" >&2
		exit 1
	}
done
BASE=$(mktemp -d "${BENCH_DIR:-/var/tmp}/zerofs-session.XXXXXX")
MP=$BASE/mnt
cleanup() {
	if mountpoint -q "$MP" 2>/dev/null; then "$BASE/zerofs" umount "$MP" >/dev/null 2>&1 || umount -l "$MP" || true; fi
	rm -rf "$BASE"
}
trap cleanup EXIT
go build -o "$BASE/zerofs" ./cmd/zerofs
git clone -q --no-hardlinks "$REPO" "$BASE/template"
git -C "$BASE/template" config gc.auto 0
"$PY" "$REPO/scripts/nmtree.py" "$BASE/nm"
tar -cf "$BASE/nm.tar" -C "$BASE/nm" node_modules && rm -rf "$BASE/nm"
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.invalid
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.invalid
export GOFLAGS=-mod=mod GOPROXY=off GOTELEMETRY=off GOTOOLCHAIN=local

mapfile -t GOFILES < <(git -C "$BASE/template" ls-files '*.go')
CALLS=(rg grep read sed build vet write300 commit rm300 mvdir unpack rmtree)
call() { # call NAME: one tool call in the current directory
	case $1 in
	rg) rg -n "func New" . >/dev/null || true ;;
	grep) grep -rn --include='*.go' "Engine" . >/dev/null || true ;;
	read) cat "${GOFILES[@]:0:200}" >/dev/null ;;
	sed) sed -i 's/^\/\/ Package /\/\/ Package /' "${GOFILES[@]:0:20}" ;;
	build) go build ./... ;;
	vet) go vet ./eventlog/ ./blobstore/ ./internal/... ;;
	write300)
		mkdir -p gen
		for i in $(seq 1 300); do printf 'package gen\n\nconst C%d = %d\n' "$i" "$i" >"gen/c$i.go"; done
		;;
	commit) git add -A && git commit -qm "session" ;;
	rm300) rm -rf gen ;;
	mvdir) mv timeline timeline2 && mv timeline2 timeline ;;
	unpack) tar -xf "$BASE/nm.tar" ;;
	rmtree) rm -rf node_modules ;;
	esac
}
session() { # session SIDE DIR: the whole session, one line per call to results
	local side=$1 dir=$2 c t0 t1
	cd "$dir"
	for c in "${CALLS[@]}"; do
		t0=${EPOCHREALTIME/./}
		if [[ $side == mnt ]]; then printf '%s\n' "$c" >"$dir/.zero/step"; fi
		call "$c"
		t1=${EPOCHREALTIME/./}
		printf '%s\t%s\t%s\t%s\n' "$run" "$side" "$c" "$((t1 - t0))" >>"$BASE/results.tsv"
	done
	cd "$BASE"
}
copyto() { # copyto DIR: a fresh copy of the repository, with a build cache of its own
	rm -rf "$1"
	cp -a "$BASE/template" "$1"
	export GOCACHE=$1.gocache
}
warm() { # warm DIR: what an agent session has done before (untimed): caches warm
	(cd "$1" && go build ./... && go vet ./eventlog/ ./blobstore/ ./internal/... >/dev/null &&
		rg -q "func New" . && git status --porcelain >/dev/null)
}
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
for ((run = 1; run <= REPS; run++)); do
	copyto "$BASE/nat"
	warm "$BASE/nat"
	session nat "$BASE/nat"
	copyto "$BASE/ws"
	mkdir -p "$MP"
	"$BASE/zerofs" mount ${FLAGS[@]+"${FLAGS[@]}"} "$BASE/ws" "$MP" >/dev/null
	warm "$MP"
	session mnt "$MP"
	"$BASE/zerofs" umount "$MP" >/dev/null
	rm -rf "$BASE/nat" "$BASE/ws" "$BASE"/*.gocache
	echo "bench-session: run $run of $REPS done" >&2
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
echo "zerofs agent session: $(date -u '+%Y-%m-%d %H:%M UTC'), $(git -C "$REPO" rev-parse --short HEAD), $(nproc) cores, kernel $(uname -r)"
echo "command: scripts/bench-session.sh $REPS${FLAGS[*]:+ ${FLAGS[*]}} (median of $REPS alternating runs; load before $LOAD0, after $LOAD1)"
"$PY" - "$BASE/results.tsv" "${CALLS[@]}" <<'EOF'
import statistics, sys
from collections import defaultdict
t = defaultdict(dict)  # (call) -> run -> side -> us
for line in open(sys.argv[1]):
    run, side, call, us = line.split("\t")
    t[call].setdefault(run, {})[side] = int(us)
calls = sys.argv[2:]
print(f"{'tool call':10} {'native ms':>10} {'mount ms':>10} {'ratio':>7}  (range)")
tot = defaultdict(lambda: {"nat": 0, "mnt": 0})
for c in calls:
    runs = t[c]
    for r, s in runs.items():
        tot[r]["nat"] += s["nat"]; tot[r]["mnt"] += s["mnt"]
    nat = statistics.median(s["nat"] for s in runs.values()) / 1000
    mnt = statistics.median(s["mnt"] for s in runs.values()) / 1000
    ratios = [s["mnt"] / max(s["nat"], 1) for s in runs.values()]
    print(f"{c:10} {nat:10.1f} {mnt:10.1f} {statistics.median(ratios):6.2f}x  ({min(ratios):.2f}-{max(ratios):.2f})")
nat = statistics.median(s["nat"] for s in tot.values()) / 1000
mnt = statistics.median(s["mnt"] for s in tot.values()) / 1000
ratios = [s["mnt"] / s["nat"] for s in tot.values()]
print(f"{'session':10} {nat:10.1f} {mnt:10.1f} {statistics.median(ratios):6.2f}x  ({min(ratios):.2f}-{max(ratios):.2f})")
EOF
