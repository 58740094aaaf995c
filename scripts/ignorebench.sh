#!/usr/bin/env bash
# scripts/ignorebench.sh: what .zeroignore saves on an npm-ci-sized unpack
# and an `rm -rf node_modules` (docs/performance.md, "Ignored paths").
#
#   scripts/ignorebench.sh [REPS]
#
# The tree is scripts/nmtree.py's (bench.sh's rmnm tree: 1,737 files, about
# 46 MB, in packages of package.json, sources and a few large bundles, made
# the same way every time). Each round, on a fresh workspace for each side in turn:
# the native directory, go-fuse's plain loopback (scripts/loopmount: the
# floor of the FUSE requests alone), zerofs with nothing ignored, and zerofs
# with a .zeroignore of `node_modules/`: `tar -x` of the tree in one step,
# then `rm -rf node_modules` in the next. It prints each side's median time
# of both and, for zerofs, the store's growth (du of the store, kept files
# counted, after the namer has run) and the log's lines. The store is kept
# outside the workspace (--store) so that it can be measured while mounted.
# Needs root (the loopback and zerofs mount with mount(2) directly).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-5}
PY=$(command -v python3)
BASE=$(mktemp -d "${BENCH_DIR:-/var/tmp}/zerofs-ignorebench.XXXXXX")
trap 'for m in "$BASE"/*/mnt "$BASE"/*/ws; do mountpoint -q "$m" 2>/dev/null && "$BASE/bin/zerofs" umount "$m" >/dev/null 2>&1; done; rm -rf "$BASE"' EXIT
go build -o "$BASE/bin/zerofs" ./cmd/zerofs
go build -o "$BASE/bin/loopmount" ./scripts/loopmount

"$PY" scripts/nmtree.py "$BASE/nm"
tar -cf "$BASE/nm.tar" -C "$BASE/nm" node_modules && rm -rf "$BASE/nm"

now() { echo "${EPOCHREALTIME/./}"; }
out="$BASE/results.tsv"
: >"$out"
for ((r = 1; r <= REPS; r++)); do
	for side in native loopback zerofs zerofs-ignore; do
		d="$BASE/$side"
		rm -rf "$d" && mkdir -p "$d/ws" "$d/mnt"
		echo '{}' >"$d/ws/package.json"
		mp=$d/ws pid=
		case $side in
		loopback)
			mp=$d/mnt
			"$BASE/bin/loopmount" "$d/ws" "$mp" >"$d/ready" &
			pid=$!
			until grep -q ready "$d/ready" 2>/dev/null; do sleep 0.05; done
			;;
		zerofs-ignore)
			echo 'node_modules/' >"$d/ws/.zeroignore"
			"$BASE/bin/zerofs" mount --store "$d/store" "$d/ws" >/dev/null
			;;
		zerofs)
			"$BASE/bin/zerofs" mount --store "$d/store" "$d/ws" >/dev/null
			;;
		esac
		step() { if [[ $side == zerofs* ]]; then printf '%s\n' "$1" >"$mp/.zero/step"; fi; }
		step "npm ci"
		t0=$(now)
		tar -xf "$BASE/nm.tar" -C "$mp"
		t1=$(now)
		step "rm -rf node_modules"
		t2=$(now)
		rm -rf "$mp/node_modules"
		t3=$(now)
		store=- lines=-
		if [[ $side == zerofs* ]]; then
			step "settle" # the namer's batch is named before a step begins
			sleep 3       # and at most 2 s after the removals pause
			store=$(du -sb "$d/store" | cut -f1)
			lines=$(wc -l <"$d/store/events.jsonl")
			"$BASE/bin/zerofs" umount "$mp" >/dev/null
		elif [[ -n $pid ]]; then
			kill -TERM "$pid" && wait "$pid" || true
		fi
		printf '%s\t%s\t%s\t%s\t%s\n' "$side" $(((t1 - t0) / 1000)) $(((t3 - t2) / 1000)) "$store" "$lines" >>"$out"
		rm -rf "$d"
	done
	echo "round $r done" >&2
done
"$PY" - "$out" "$REPS" <<'EOF'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()]
print(f"| side | unpack, ms | rm -rf, ms | store after both | log lines |  ({sys.argv[2]} rounds: median (min-max))")
print("|---|---|---|---|---|")
for side in ["native", "loopback", "zerofs", "zerofs-ignore"]:
    rs = [r for r in rows if r[0] == side]
    med = lambda i: statistics.median(int(r[i]) for r in rs)
    spread = lambda i: f"{med(i):.0f} ({min(int(r[i]) for r in rs)}-{max(int(r[i]) for r in rs)})"
    store = "-" if rs[0][3] == "-" else (f"{med(3) / 1e6:.1f} MB" if med(3) >= 1e6 else f"{med(3) / 1e3:.0f} kB")
    lines = "-" if rs[0][4] == "-" else f"{med(4):.0f}"
    print(f"| {side} | {spread(1)} | {spread(2)} | {store} | {lines} |")
EOF
