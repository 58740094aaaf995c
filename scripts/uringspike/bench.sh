#!/usr/bin/env bash
# scripts/uringspike/bench.sh: what FUSE over io_uring saves (issue 26).
# Runs the same workloads on native, go-fuse's loopback (scripts/loopmount),
# the spike's own server (scripts/uringspike) over its classic and its
# io_uring transport, and go-fuse's loopback over io_uring (uringspike
# -server gofuse), all mounted at once, in alternating order each round:
# N creates (open O_CREAT + 100-byte write + close), N unlinks, tar -x of the
# node_modules-like tree (scripts/nmtree.py) and rm -rf of it. Prints each
# round, then medians, with the load average, and the context switches per
# file of the workload and of the daemon (all its threads, /proc/PID/task).
#
#   ROUNDS=5 N=3000 PIN=0 TMPFS=0 scripts/uringspike/bench.sh
#
# TMPFS=1 puts the native directory and the mounts' backing directories on a
# tmpfs of the script's own (mounted and unmounted by it): on the ext4 without
# a journal of these machines a create's inode allocation alone costs
# hundreds of microseconds and swings with what was deleted before
# (docs/performance.md, The request path), which hides the transport.
#
# PIN=1 runs the workloads on CPU 0 only (taskset -c 0); the daemons stay
# free. Run as root. enable_uring is set to Y only while the io_uring
# mount registers its queues and is put back as it was on exit.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "bench: run as root" >&2; exit 2; }
REPO=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${ROUNDS:-5} N=${N:-3000} PIN=${PIN:-0} TMPFS=${TMPFS:-0}
PY=${PY:-python3}
DRIVE="$REPO/scripts/uringspike/drive.py"
UR=/sys/module/fuse/parameters/enable_uring
BASE=$(mktemp -d /tmp/uringspike-bench.XXXXXX)
was=$(cat "$UR")
declare -A pid=() mnt=()

cleanup() {
	local t
	for t in "${!pid[@]}"; do kill -TERM "${pid[$t]}" 2>/dev/null || true; done
	for t in "${!pid[@]}"; do wait "${pid[$t]}" 2>/dev/null || true; done
	for t in "${!mnt[@]}"; do
		if grep -q " ${mnt[$t]} " /proc/mounts; then umount -l "${mnt[$t]}" || true; fi
	done
	for t in classic uring gouring; do
		[ -f "$BASE/$t.log" ] && sed "s/^/$t: /" "$BASE/$t.log" | grep requests || true
	done
	echo "$was" >"$UR"
	if grep -q " $BASE/fs " /proc/mounts; then umount "$BASE/fs" || umount -l "$BASE/fs"; fi
	rm -rf "$BASE"
}
trap cleanup EXIT

cd "$REPO"
go build -o "$BASE/uringspike" ./scripts/uringspike
go build -o "$BASE/loopmount" ./scripts/loopmount
"$PY" scripts/nmtree.py "$BASE/nmsrc" >/dev/null
tar -C "$BASE/nmsrc" -cf "$BASE/nm.tar" node_modules
ENTRIES=$(tar -tf "$BASE/nm.tar" | wc -l)
rm -rf "$BASE/nmsrc"

FS=$BASE
if [ "$TMPFS" = 1 ]; then
	mkdir -p "$BASE/fs"
	mount -t tmpfs -o size=4g uringspike-bench "$BASE/fs"
	FS=$BASE/fs
fi

# start NAME CMD...: mount NAME's workspace with CMD, wait for "ready".
start() {
	local name=$1
	shift
	mkdir -p "$FS/$name.ws" "$BASE/$name.mnt"
	"$@" "$FS/$name.ws" "$BASE/$name.mnt" >"$BASE/$name.ready" 2>"$BASE/$name.log" &
	pid[$name]=$!
	mnt[$name]=$BASE/$name.mnt
	for _ in $(seq 100); do
		grep -q ready "$BASE/$name.ready" && return
		kill -0 "${pid[$name]}" || { cat "$BASE/$name.log" >&2; exit 1; }
		sleep 0.1
	done
	echo "bench: $name not ready" >&2
	exit 1
}
start loopback "$BASE/loopmount"
start classic "$BASE/uringspike" -transport classic
start uring "$BASE/uringspike" -transport uring -enable-uring
start gouring "$BASE/uringspike" -server gofuse -transport uring -enable-uring
for t in uring gouring; do
	grep -q "ready uring" "$BASE/$t.ready" || { echo "bench: $t: io_uring transport not agreed" >&2; exit 1; }
done
mkdir -p "$FS/native"
dir() { if [ "$1" = native ]; then echo "$FS/native"; else echo "${mnt[$1]}"; fi; }

# dcsw NAME: the daemon's context switches so far, all threads.
dcsw() {
	[ "$1" = native ] && { echo 0; return; }
	cat /proc/"${pid[$1]}"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s + 0}'
}
pin=()
[ "$PIN" = 1 ] && pin=(taskset -c 0)
val() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }

targets=(native loopback classic uring gouring)
res="$BASE/results"
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, N=$N, $ENTRIES tar entries, PIN=$PIN, backing on $(stat -f -c %T "$FS")"
printf "%-5s %-9s %5s | %9s %7s %7s | %9s %7s %7s | %8s %7s %7s | %8s %7s %7s\n" \
	round target load create_us app/f dmn/f unlink_us app/f dmn/f tar_ms app/e dmn/e rm_ms app/e dmn/e
for r in $(seq "$ROUNDS"); do
	for k in "${!targets[@]}"; do
		t=${targets[$(((k + r) % ${#targets[@]}))]}
		d=$(dir "$t")
		load=$(cut -d' ' -f1 /proc/loadavg)
		c0=$(dcsw "$t")
		cr=$("${pin[@]}" "$PY" "$DRIVE" create "$d" "$N")
		c1=$(dcsw "$t")
		ul=$("${pin[@]}" "$PY" "$DRIVE" unlink "$d" "$N")
		c2=$(dcsw "$t")
		tx=$("${pin[@]}" "$PY" "$DRIVE" run tar -C "$d" -xf "$BASE/nm.tar")
		c3=$(dcsw "$t")
		rm=$("${pin[@]}" "$PY" "$DRIVE" run rm -rf "$d/node_modules")
		c4=$(dcsw "$t")
		line=$(printf "%-5s %-9s %5s | %9s %7s %7.2f | %9s %7s %7.2f | %8s %7.2f %7.2f | %8s %7.2f %7.2f" \
			"$r" "$t" "$load" \
			"$(echo "$cr" | val us)" "$(echo "$cr" | val csw)" "$(echo "($c1 - $c0) / $N" | bc -l)" \
			"$(echo "$ul" | val us)" "$(echo "$ul" | val csw)" "$(echo "($c2 - $c1) / $N" | bc -l)" \
			"$(echo "$tx" | val ms)" "$(echo "$(echo "$tx" | val csw) / $ENTRIES" | bc -l)" "$(echo "($c3 - $c2) / $ENTRIES" | bc -l)" \
			"$(echo "$rm" | val ms)" "$(echo "$(echo "$rm" | val csw) / $ENTRIES" | bc -l)" "$(echo "($c4 - $c3) / $ENTRIES" | bc -l)")
		echo "$line"
		echo "$line" >>"$res"
	done
done
echo "# medians"
"$PY" - "$res" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.replace("|", " ").split()
    rows.setdefault(f[1], []).append([float(x) for x in f[2:]])
for t in ("native", "loopback", "classic", "uring", "gouring"):
    cols = list(zip(*rows[t]))
    m = [statistics.median(c) for c in cols]
    print(f"{'med':<5} {t:<9} {m[0]:5.2f} | {m[1]:9.1f} {m[2]:7.2f} {m[3]:7.2f} | {m[4]:9.1f} {m[5]:7.2f} {m[6]:7.2f} | "
          f"{m[7]:8.1f} {m[8]:7.2f} {m[9]:7.2f} | {m[10]:8.1f} {m[11]:7.2f} {m[12]:7.2f}")
EOF
