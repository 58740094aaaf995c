#!/usr/bin/env bash
# scripts/bench.sh: the mount against the native directory, workload by
# workload, and prints the table docs/performance.md shows.
#
#   scripts/bench.sh [quick|full] [root|user|both|always|loopback] [REPS]
#   scripts/bench.sh go [go test -bench flags...]   # the Go benchmarks (log, blobs, engine)
#   scripts/bench.sh profile [--no-passthrough] 'COMMAND' [REPS]   # pprof of the daemon
#   scripts/bench.sh steplat [ROUNDS]   # a step plus a first write, fresh and after a heavy session
#   scripts/bench.sh syscalls [MOUNT FLAGS...]   # system calls and FUSE requests per entry
#   scripts/bench.sh stepwait [MB] [RUNS]   # a step and a first write while the namer hashes a removed file
#
# Each workload runs on a native directory and under a zerofs mount of a
# workspace on the same filesystem, alternating (native, mount, native, ...),
# REPS times (default 5); the table gives the median run of each side and the
# median and range of the per-pair ratio mount/native. "root" mounts as root
# (mount(2) directly, FUSE passthrough where the kernel has it); "user" mounts
# as nobody through fusermount3 (no passthrough) and runs every command, the
# native ones too, as nobody. "full" uses the sizes of docs/performance.md's table and
# adds the 50k-file workspace and a --sync always pass of the capture-heavy
# workloads ("always" runs only that pass); "quick" uses smaller files and
# skips those. Needs root, fio, ripgrep, git, fuse3 (installed with
# apt-get when missing). Work happens under $BENCH_DIR (default /var/tmp);
# BENCH_WORKLOADS="find grep ..." runs only those; BENCH_MOUNT_FLAGS="--no-open"
# adds flags to every mount. "loopback" runs the workloads as root under
# go-fuse's plain loopback (scripts/loopmount, zerofs's mount settings, none
# of its code) instead of zerofs: the floor of what the kernel's FUSE
# requests cost, no steps, no captures (rewind10, stepalone and onestep-*
# need zerofs and are left out; BENCH_MOUNT_FLAGS does not apply).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

if [[ ${1:-} == go ]]; then
	shift
	exec go test -run '^$' -bench . "$@" ./eventlog/ ./blobstore/ ./rewind/ ./fs/
fi
if [[ ${1:-} == profile ]]; then
	# scripts/bench.sh profile [--no-passthrough] 'COMMAND' [REPS]: a CPU
	# profile of the daemon (scripts/profmount) while COMMAND runs REPS times
	# (default 5) in the mount of a workspace holding a copy of Go's src
	# (in src/, made before mounting), after one warm-up run.
	shift
	pflags=()
	if [[ ${1:-} == --no-passthrough ]]; then pflags+=(-no-passthrough) && shift; fi
	cmd=$1 reps=${2:-5}
	dir=$(mktemp -d /var/tmp/zerofs-profile.XXXXXX)
	go build -o "$dir/profmount" ./scripts/profmount
	mkdir -p "$dir/ws/src" "$dir/mnt"
	cp -a "$(go env GOROOT)/src/." "$dir/ws/src/"
	(cd "$dir/ws/src" && git init -q && git add -A && git -c user.name=b -c user.email=b@b.invalid commit -qm src)
	"$dir/profmount" -profile "$dir/cpu.out" "${pflags[@]}" "$dir/ws" "$dir/mnt" >"$dir/out" &
	pid=$!
	until grep -q ready "$dir/out" 2>/dev/null; do sleep 0.1; done
	cat "$dir/out" >&2
	(cd "$dir/mnt" && bash -c "$cmd")
	t0=${EPOCHREALTIME/./}
	for ((i = 0; i < reps; i++)); do (cd "$dir/mnt" && bash -c "$cmd"); done
	t1=${EPOCHREALTIME/./}
	echo "profile: $reps runs of: $cmd: $(((t1 - t0) / reps / 1000)) ms each" >&2
	kill -TERM "$pid" && wait "$pid" || true
	go tool pprof -top -cum -nodecount=45 "$dir/profmount" "$dir/cpu.out" 2>/dev/null | sed -n '1,55p'
	cp "$dir/cpu.out" "${PROFILE_OUT:-/var/tmp/zerofs-profile.out}"
	cp "$dir/profmount" "${PROFILE_OUT:-/var/tmp/zerofs-profile.out}.bin"
	rm -rf "$dir"
	exit 0
fi
if [[ ${1:-} == steplat ]]; then
	# scripts/bench.sh steplat [ROUNDS]: what a step plus a one-line edit
	# costs (a write to .zero/step, then an append to a file: the step's
	# boundary and the first capture in it), ROUNDS times (default 200),
	# 20 ms apart, on a fresh mount and again right after a heavy session:
	# Go's src unpacked into the mount STEPLAT_CYCLES times (default 2),
	# each a git repository committed in its own step, parts of it removed
	# in steps of their own, then a 512 MiB file written, read cold and
	# removed, each in its own step. git's automatic gc is off unless
	# STEPLAT_GITGC=1: on, the commit of Go's src (12k loose objects) starts
	# a gc that goes on packing and removing them in the mount, detached,
	# while the steps are measured, and a step waits for those removals'
	# captures to be durable (SPEC: "always before a step begins"). Prints the median, 99th percentile and
	# largest of each. STEPLAT_SYNC=always mounts with --sync always;
	# STEPLAT_PROFILE=DIR runs the daemon under scripts/profmount and leaves
	# its CPU, blocking and mutex profiles (and the binary) in DIR;
	# STEPLAT_TRACE=FILE appends every round's time (us), in order, to FILE;
	# STEPLAT_BIN=FILE mounts with that zerofs binary instead of building one.
	# The heavy session's own steps are timed too, each right after the
	# operation before it returned, with a one-line edit after the step:
	# "steplat heavy" gives the steps' median and largest, "heavy+w" the
	# step and its edit (what comes after a removal, a git commit or a
	# 512 MiB write, whatever background work it left).
	shift
	rounds=${1:-200} cycles=${STEPLAT_CYCLES:-2} gcauto=0
	if [[ -n ${STEPLAT_GITGC:-} ]]; then gcauto=6700; fi # git's default
	dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/zerofs-steplat.XXXXXX")
	if [[ -n ${STEPLAT_BIN:-} ]]; then cp "$STEPLAT_BIN" "$dir/zerofs"; else go build -o "$dir/zerofs" ./cmd/zerofs; fi
	go build -o "$dir/profmount" ./scripts/profmount
	mkdir -p "$dir/ws" "$dir/mnt"
	tar -cf "$dir/src.tar" -C "$(go env GOROOT)" src
	head -c 512M /dev/urandom >"$dir/big"
	export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.invalid
	export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.invalid
	MP=$dir/mnt pid=
	if [[ -n ${STEPLAT_PROFILE:-} ]]; then
		mkdir -p "$STEPLAT_PROFILE"
		sflag=()
		if [[ ${STEPLAT_SYNC:-batch} == always ]]; then sflag=(-sync); fi
		"$dir/profmount" -profile "$STEPLAT_PROFILE/cpu.out" -block "$STEPLAT_PROFILE/block.out" \
			-mutex "$STEPLAT_PROFILE/mutex.out" "${sflag[@]}" "$dir/ws" "$MP" >"$dir/out" &
		pid=$!
		until grep -q ready "$dir/out" 2>/dev/null; do sleep 0.1; done
	else
		"$dir/zerofs" mount --sync "${STEPLAT_SYNC:-batch}" "$dir/ws" "$MP" >/dev/null
	fi
	stopmount() {
		if [[ -n $pid ]]; then
			kill -TERM "$pid" && wait "$pid" || true
			cp "$dir/profmount" "$STEPLAT_PROFILE/profmount"
		else
			"$dir/zerofs" umount "$MP" >/dev/null || true
		fi
	}
	trap 'stopmount; rm -rf "$dir"' EXIT
	hs=() hw=()
	step() { # step LABEL: a step, then a one-line edit, right after the last operation
		local t0 t1
		t0=${EPOCHREALTIME/./}
		printf '%s\n' "$1" >"$MP/.zero/step"
		t1=${EPOCHREALTIME/./}
		printf 'x\n' >>"$MP/edit.txt"
		hs+=($((t1 - t0)))
		hw+=($((${EPOCHREALTIME/./} - t0)))
		if [[ -n ${STEPLAT_TRACE:-} ]]; then printf 'heavy %s %s %s\n' "${hs[-1]}" "${hw[-1]}" "$1" >>"$STEPLAT_TRACE"; fi
	}
	measure() { # measure NAME: ROUNDS of a step plus a one-line edit
		local t0 t1 k us=()
		for ((k = 0; k < rounds; k++)); do
			sleep 0.02
			t0=${EPOCHREALTIME/./}
			printf 'edit %s\n' "$k" >"$MP/.zero/step"
			printf 'x\n' >>"$MP/edit.txt"
			t1=${EPOCHREALTIME/./}
			us+=($((t1 - t0)))
		done
		if [[ -n ${STEPLAT_TRACE:-} ]]; then printf "$1 %s\n" "${us[@]}" >>"$STEPLAT_TRACE"; fi
		printf '%s\n' "${us[@]}" | sort -n | awk -v name="$1" '{v[NR] = $1}
			END {p = int(NR * 0.99 + 0.999); printf "steplat %-7s rounds %d  median %.2f ms  p99 %.2f ms  max %.2f ms  first %.2f ms\n",
				name, NR, v[int((NR + 1) / 2)] / 1000, v[p] / 1000, v[NR] / 1000, first / 1000}' first="${us[0]}"
	}
	echo "steplat: load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, --sync ${STEPLAT_SYNC:-batch}" >&2
	step warm
	measure fresh
	h0=${EPOCHREALTIME/./}
	for ((c = 1; c <= cycles; c++)); do
		step "unpack $c" && mkdir "$MP/c$c" && tar -xf "$dir/src.tar" -C "$MP/c$c"
		step "git $c" && (cd "$MP/c$c/src" && git init -q && git config gc.auto "$gcauto" && git add -A && git commit -qm src)
		for part in net crypto cmd/compile; do
			step "rm $c $part" && rm -rf "${MP:?}/c$c/src/$part"
		done
	done
	step "write big" && cp "$dir/big" "$MP/big"
	step "read big" && dd if="$MP/big" iflag=nocache count=0 status=none && cat "$MP/big" >/dev/null
	step "rm big" && rm "$MP/big"
	h1=${EPOCHREALTIME/./}
	printf '%s\n' "${hs[@]:1}" | sort -n | awk '{v[NR] = $1}
		END {printf "steplat heavy   steps %d  median %.2f ms  max %.2f ms\n", NR, v[int((NR + 1) / 2)] / 1000, v[NR] / 1000}'
	printf '%s\n' "${hw[@]:1}" | sort -n | awk '{v[NR] = $1}
		END {printf "steplat heavy+w steps %d  median %.2f ms  max %.2f ms  (a step and a one-line edit right after each operation)\n", NR, v[int((NR + 1) / 2)] / 1000, v[NR] / 1000}'
	echo "steplat: heavy session took $(((h1 - h0) / 1000000)) s; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	measure after
	echo "steplat: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	exit 0
fi
if [[ ${1:-} == stepwait ]]; then
	# scripts/bench.sh stepwait [MB] [RUNS]: a step and a one-line append to a
	# file right after a step that removed a file of MB MiB (default 512),
	# RUNS times (default 30) 50 ms apart, while the namer hashes the removed
	# file, against the same after the removal of a 1 MiB file: the median
	# and the 99th percentile (the slowest of RUNS below 100) in ms.
	shift
	mb=${1:-512} runs=${2:-30}
	[[ $(id -u) == 0 ]] || { echo "bench: stepwait: run as root" >&2; exit 1; }
	wdir=$(mktemp -d /var/tmp/zerofs-stepwait.XXXXXX)
	trap 'grep -q " $wdir/mnt " /proc/mounts && "$wdir/zerofs" umount "$wdir/mnt" >/dev/null; rm -rf "$wdir"' EXIT
	go build -o "$wdir/zerofs" ./cmd/zerofs
	for size in "$mb" 1; do
		rm -rf "$wdir/ws" && mkdir -p "$wdir/ws" "$wdir/mnt"
		"$wdir/zerofs" mount --sync batch "$wdir/ws" "$wdir/mnt" >/dev/null
		echo a >"$wdir/mnt/f"
		printf 'write\n' >"$wdir/mnt/.zero/step"
		dd if=/dev/urandom of="$wdir/mnt/big" bs=1M count="$size" status=none
		printf 'remove\n' >"$wdir/mnt/.zero/step"
		rm "$wdir/mnt/big"
		ts=()
		for ((i = 0; i < runs; i++)); do
			sleep 0.05
			t0=${EPOCHREALTIME/./}
			printf 'edit %s\n' "$i" >"$wdir/mnt/.zero/step"
			echo x >>"$wdir/mnt/f"
			t1=${EPOCHREALTIME/./}
			ts+=($((t1 - t0)))
		done
		"$wdir/zerofs" umount "$wdir/mnt" >/dev/null
		printf '%s\n' "${ts[@]}" | sort -n | awk -v size="$size" '{a[NR] = $1} END {
			printf "step + first write after removing %d MiB: median %.1f ms, p99 %.1f ms (%d runs)\n",
				size, a[int((NR + 1) / 2)] / 1000, a[NR] / 1000, NR }'
	done
	echo "load $(cut -d' ' -f1-3 /proc/loadavg); command: scripts/bench.sh stepwait $mb $runs"
	exit 0
fi
if [[ ${1:-} == syscalls ]]; then
	# scripts/bench.sh syscalls [FLAGS...]: what the daemon does per entry,
	# counted rather than timed (counts do not depend on the machine's load):
	# strace -f on the daemon while `tar -x` unpacks a node_modules-like tree
	# of 1,801 entries (1,680 small files in 121 directories) into the
	# mount, and while `rm -rf` removes it in a step of its own; for zerofs
	# (--sync batch, plus FLAGS) and for go-fuse's plain loopback
	# (scripts/loopmount) on the same tree. FUSE requests are the daemon's
	# reads of /dev/fuse; the Go runtime's own calls (futex, nanosleep,
	# epoll, ...: hand-offs between threads, spinning) are counted apart.
	# "while" counts what the daemon did until the command returned, "after"
	# what it did in the second after (background work: the flusher's
	# syncs, the namer hashing removed files). Needs root and strace.
	shift
	[[ $(id -u) == 0 ]] || { echo "bench: syscalls: run as root" >&2; exit 1; }
	command -v strace >/dev/null || apt-get install -y -qq strace >/dev/null
	sdir=$(mktemp -d /var/tmp/zerofs-syscalls.XXXXXX)
	looppid=
	cleanup_sc() {
		if [[ -n $looppid ]]; then kill -TERM "$looppid" 2>/dev/null && wait "$looppid" || true; fi
		if grep -q " $sdir/zmnt " /proc/mounts; then "$sdir/zerofs" umount "$sdir/zmnt" >/dev/null || true; fi
		rm -rf "$sdir"
	}
	trap cleanup_sc EXIT
	go build -o "$sdir/zerofs" ./cmd/zerofs
	go build -o "$sdir/loopmount" ./scripts/loopmount
	python3 - "$sdir/tree" <<'PY'
import os, random, sys
# 60 packages of 28 files (package.json, index.js, 26 in lib/): 1,680 files
# in 121 directories (node_modules, each package and its lib/).
root = os.path.join(sys.argv[1], "node_modules")
rng = random.Random(1801)
for k in range(60):
    d = os.path.join(root, f"pkg{k:03d}")
    os.makedirs(os.path.join(d, "lib"))
    for j in range(28):
        name = "package.json" if j == 0 else ("index.js" if j == 1 else f"lib/m{j}.js")
        with open(os.path.join(d, name), "wb") as f:
            f.write(rng.randbytes(max(1, int(rng.lognormvariate(7.5, 1.2)))))
PY
	tar -cf "$sdir/tree.tar" -C "$sdir/tree" node_modules
	entries=$(tar -tf "$sdir/tree.tar" | wc -l)
	# traced PID OUT CMD...: run CMD with strace -f on PID, and what PID does
	# in the half second after it.
	traced() {
		local pid=$1 out=$2
		shift 2
		strace -f -qq -y -ttt -o "$out" -p "$pid" &
		local st=$!
		sleep 1 # strace attaches to every thread
		"$@"
		date +%s.%N >"$out.end"
		sleep 1
		kill -INT "$st"
		wait "$st" || true
	}
	# count OUT: system calls and FUSE requests per entry in a trace.
	count() {
		python3 - "$1" "$entries" "$(cat "$1.end")" "$2" <<'PY'
import collections, re, sys
n, end, after = int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "after"
calls, fuse = collections.Counter(), 0
for line in open(sys.argv[1]):
    m = re.match(r"\d+\s+([\d.]+)\s+(\w+)\(", line)
    if not m:
        continue  # "<... x resumed>" halves, signals, exits
    if (float(m.group(1)) > end) != after:
        continue
    name = m.group(2)
    calls[name] += 1
    if name == "read" and "</dev/fuse>" in line and "= -1" not in line:
        fuse += 1
runtime = {"futex", "nanosleep", "clock_nanosleep", "epoll_pwait", "epoll_wait", "epoll_ctl",
           "sched_yield", "tgkill", "getpid", "rt_sigreturn", "rt_sigprocmask", "sigaltstack",
           "mmap", "munmap", "madvise", "clone", "clone3", "gettid", "restart_syscall"}
own = sum(v for k, v in calls.items() if k not in runtime)
rt = sum(v for k, v in calls.items() if k in runtime)
top = ", ".join(f"{k} {v/n:.2f}" for k, v in calls.most_common() if k not in runtime and v / n >= 0.1)
rtop = ", ".join(f"{k} {v/n:.1f}" for k, v in calls.most_common() if k in runtime and v / n >= 0.1)
print(f"{own/n:.1f}\t{fuse/n:.1f}\t{rt/n:.1f} ({rtop})\t{top}")
PY
	}
	mkdir -p "$sdir/zws" "$sdir/zmnt" "$sdir/lws" "$sdir/lmnt"
	"$sdir/zerofs" mount --sync batch "$@" "$sdir/zws" "$sdir/zmnt" >/dev/null
	read -r zpid _ <"$sdir/zws/.zero/daemon.pid" # "PID START"
	"$sdir/loopmount" "$sdir/lws" "$sdir/lmnt" >"$sdir/lmnt.ready" &
	looppid=$!
	until grep -q ready "$sdir/lmnt.ready" 2>/dev/null; do
		kill -0 "$looppid" || { echo "bench: loopmount failed" >&2; exit 1; }
		sleep 0.05
	done
	printf 'unpack\n' >"$sdir/zmnt/.zero/step"
	traced "$zpid" "$sdir/z-tar" tar -xf "$sdir/tree.tar" -C "$sdir/zmnt"
	traced "$looppid" "$sdir/l-tar" tar -xf "$sdir/tree.tar" -C "$sdir/lmnt"
	printf 'remove\n' >"$sdir/zmnt/.zero/step"
	traced "$zpid" "$sdir/z-rm" rm -rf "$sdir/zmnt/node_modules"
	traced "$looppid" "$sdir/l-rm" rm -rf "$sdir/lmnt/node_modules"
	echo "zerofs syscalls: $(git rev-parse --short HEAD), $entries entries, zerofs --sync batch${*:+ $*}; load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "command: scripts/bench.sh syscalls${*:+ $*}"
	echo
	echo "| per entry | system calls (runtime's apart) | FUSE requests | runtime's calls | largest |"
	echo "|---|---|---|---|---|"
	declare -A sum
	for t in "z-tar:zerofs tar -x" "l-tar:loopback tar -x" "z-rm:zerofs rm -rf (own step)" "l-rm:loopback rm -rf"; do
		for w in while after; do
			IFS=$'\t' read -r own fuse rt top < <(count "$sdir/${t%%:*}" $w)
			echo "| ${t#*:}, $w | $own | $fuse | $rt | $top |"
			sum[${t%%:*}]=$(awk -v a="${sum[${t%%:*}]:-0}" -v b="$own" 'BEGIN {print a + b}')
		done
	done
	echo
	for w in tar rm; do # while + after, zerofs against the loopback (the goal: 1.2x at most)
		awk -v w="$w" -v z="${sum[z-$w]}" -v l="${sum[l-$w]}" 'BEGIN {
			printf "%s: zerofs %.1f system calls an entry (while + after), loopback %.1f: %.2fx\n", w == "tar" ? "creates (tar -x)" : "removals (rm -rf)", z, l, z / l }'
	done
	if [[ -n ${SYSCALLS_KEEP:-} ]]; then cp "$sdir"/z-* "$sdir"/l-* "$SYSCALLS_KEEP"/; fi
	exit 0
fi
if [[ ${1:-} == --worker ]]; then
	WORKER=1
	shift
fi

# ---------------------------------------------------------------- worker ---
# The worker runs one pass (as root or as nobody): bench.sh --worker PASS
# BASE SYNC SIZE REPS WORKLOADS... It appends "pass<TAB>workload<TAB>kind<TAB>
# native_us<TAB>mount_us" lines to $BASE/results.tsv.
if [[ ${WORKER:-} == 1 ]]; then
	PASS=$1 BASE=$2 SYNC=$3 SIZE=$4 REPS=$5
	shift 5
	WORKLOADS=("$@")
	BIN=$BASE/zerofs
	LOOPMOUNT=$BASE/loopmount # the loopback pass's daemon
	CACHE=$BASE/cache
	P=$BASE/$PASS
	NAT=$P/native WS=$P/ws MP=$P/mnt
	export HOME=$P/home GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.invalid
	export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.invalid
	export GOCACHE=$P/gocache GOFLAGS=-mod=vendor GOTOOLCHAIN=local GOPROXY=off GOTELEMETRY=off
	export PATH=/usr/local/go/bin:/usr/bin:/bin:/usr/sbin:/sbin
	mkdir -p "$NAT" "$WS" "$MP" "$HOME"
	if [[ $SIZE == full ]]; then
		COLD_MB=512 WARM_MB=64 WRITE_MB=1024 TARX=src.tar
	else
		COLD_MB=128 WARM_MB=64 WRITE_MB=256 TARX=cmd.tar
	fi
	mounted=()
	declare -A loopers=() # the loopback pass: mount point -> loopmount's pid
	cleanup() {
		for m in "${mounted[@]}"; do
			if [[ $PASS == loopback ]]; then
				kill -TERM "${loopers[$m]}" 2>/dev/null && wait "${loopers[$m]}" 2>/dev/null || true
				continue
			fi
			"$BIN" umount "$m" >/dev/null 2>&1 || true
		done
	}
	trap cleanup EXIT

	mountws() { # mountws WS MP
		if [[ $PASS == loopback ]]; then
			# go-fuse's plain loopback, in the background until umountws.
			"$LOOPMOUNT" "$1" "$2" >"$2.ready" &
			loopers[$2]=$!
			until grep -q ready "$2.ready" 2>/dev/null; do
				if ! kill -0 "${loopers[$2]}" 2>/dev/null; then
					echo "bench: loopmount $1 $2 failed" >&2
					return 1
				fi
				sleep 0.05
			done
			mounted+=("$2")
			return
		fi
		# shellcheck disable=SC2086 # BENCH_MOUNT_FLAGS="--no-open": more flags
		"$BIN" mount --sync "$SYNC" ${BENCH_MOUNT_FLAGS:-} "$1" "$2" >/dev/null
		mounted+=("$2")
	}
	umountws() {
		if [[ $PASS == loopback ]]; then
			kill -TERM "${loopers[$1]}"
			wait "${loopers[$1]}" # loopmount exits 0 once unmounted
		else
			"$BIN" umount "$1" >/dev/null
		fi
		local keep=()
		for m in "${mounted[@]}"; do [[ $m == "$1" ]] || keep+=("$m"); done
		mounted=("${keep[@]}")
	}
	# step LABEL: begin a step on the mount (native, or the loopback pass,
	# which has no .zero: nothing to do).
	step() { [[ $side == nat || $PASS == loopback ]] || printf '%s\n' "$1" >"$MP/.zero/step"; }
	# dropcache FILE...: drop the page cache of files (fadvise DONTNEED).
	dropcache() { for f in "$@"; do dd if="$f" iflag=nocache count=0 status=none; done; }
	record() { printf '%s\t%s\t%s\t%s\t%s\n' "$PASS" "$1" "$2" "$3" "$4" >>"$BASE/results.tsv"; }

	# run NAME KIND: for REPS rounds, on each side: prep_NAME (untimed),
	# then run_NAME timed. D is the side's directory.
	run() {
		local name=$1 kind=$2 i t0 t1 tn tm
		for ((i = 1; i <= REPS; i++)); do
			for side in nat mnt; do
				if [[ $side == nat ]]; then D=$NAT; else D=$MP; fi
				if declare -F "prep_$name" >/dev/null; then "prep_$name"; fi
				t0=${EPOCHREALTIME/./}
				"run_$name"
				t1=${EPOCHREALTIME/./}
				if [[ $side == nat ]]; then tn=$((t1 - t0)); else tm=$((t1 - t0)); fi
			done
			record "$name" "$kind" "$tn" "$tm"
		done
		echo "  $name done" >&2
	}
	# once NAME: the untimed set-up of a workload on both sides.
	both() { for side in nat mnt; do if [[ $side == nat ]]; then D=$NAT; else D=$MP; fi; "$@"; done; }

	# Go's src as a git repository, on both sides, made before mounting
	# (setting up is not what is measured). No automatic gc: a background
	# gc would race the workloads.
	for d in "$NAT" "$WS"; do
		mkdir -p "$d/src"
		tar -xf "$CACHE/src.tar" -C "$d/src"
		git -C "$d/src" init -q
		git -C "$d/src" config gc.auto 0
		git -C "$d/src" add -A
		git -C "$d/src" commit -qm src
	done
	mountws "$WS" "$MP"
	need_src() { :; }

	run_find() { find "$D/src" -type f >/dev/null; }
	run_grep() { grep -r "func main" "$D/src" >/dev/null || true; }
	run_rg() { rg "func main" "$D/src" >/dev/null || true; }
	run_gitstatus() { git -C "$D/src" status --porcelain >/dev/null; }
	prep_tarx() { rm -rf "$D/tarx"; mkdir "$D/tarx"; step tarx; }
	run_tarx() { tar -xf "$CACHE/$TARX" -C "$D/tarx"; }
	prep_rmsame() { rm -rf "$D/rm1"; step rmsame; mkdir "$D/rm1"; tar -xf "$CACHE/cmd.tar" -C "$D/rm1"; }
	run_rmsame() { rm -rf "$D/rm1"; }
	prep_rmown() { rm -rf "$D/rm2"; mkdir "$D/rm2"; tar -xf "$CACHE/cmd.tar" -C "$D/rm2"; step rmown; }
	run_rmown() { rm -rf "$D/rm2"; }
	prep_rmnm() { rm -rf "$D/nm"; mkdir "$D/nm"; tar -xf "$CACHE/nm.tar" -C "$D/nm"; step "rm node_modules"; }
	run_rmnm() { rm -rf "$D/nm/node_modules"; }
	setup_big() {
		dd if=/dev/urandom of="$D/cold" bs=1M count=$COLD_MB status=none
		dd if=/dev/urandom of="$D/warm" bs=1M count=$WARM_MB status=none
	}
	prep_readcold() {
		if [[ $side == nat ]]; then dropcache "$NAT/cold"; else dropcache "$WS/cold" "$MP/cold"; fi
	}
	run_readcold() { dd if="$D/cold" of=/dev/null bs=1M status=none; }
	prep_readwarm() { dd if="$D/warm" of=/dev/null bs=1M status=none; }
	run_readwarm() { dd if="$D/warm" of=/dev/null bs=1M status=none; }
	prep_write() { rm -f "$D/w"; step write; }
	run_write() { dd if=/dev/zero of="$D/w" bs=1M count=$WRITE_MB status=none; }
	prep_gitcommit() {
		rm -rf "$D/gc"
		mkdir "$D/gc"
		tar -xf "$CACHE/cmd.tar" -C "$D/gc"
		git -C "$D/gc" init -q
		git -C "$D/gc" config gc.auto 0
		step "git commit"
	}
	run_gitcommit() { git -C "$D/gc" add -A && git -C "$D/gc" commit -qm x; }
	setup_vet() { cp -a "$CACHE/vet" "$D/vet"; (cd "$D/vet" && go vet ./...); }
	run_vet() { (cd "$D/vet" && go vet ./...); }
	prep_small() { step small; }
	run_small() {
		mkdir "$D/small"
		for ((k = 0; k < 5000; k++)); do printf 'x\n' >"$D/small/f$k"; done
		rm -rf "$D/small"
	}
	FIO=(--name=rand --size=128M --io_size=32M --bs=4k --rw=randrw --ioengine=psync --randrepeat=1 --output=/dev/null)
	setup_fio() { fio "${FIO[@]}" --filename="$D/fio.dat"; }
	run_fio() { fio "${FIO[@]}" --filename="$D/fio.dat"; }
	prep_mv() { step mv; }
	run_mv() { mv "$D/src" "$D/src.moved"; mv "$D/src.moved" "$D/src"; }

	workload() {
		local w=$1
		case $w in
		find | grep | rg | gitstatus)
			need_src
			side=nat D=$NAT "run_$w" && side=mnt D=$MP "run_$w" # warm
			run "$w" ratio
			;;
		mv)
			need_src
			run mv ratio
			;;
		readcold | readwarm)
			[[ -f $NAT/cold ]] || { both setup_big; step big; }
			run "$w" ratio
			;;
		vet)
			both setup_vet
			run vet ratio
			;;
		fio)
			both setup_fio # lays the file out; the mount captures it once
			run fio ratio
			;;
		tarx | rmsame | rmown | rmnm | write | gitcommit | small)
			run "$w" ratio
			;;
		rewind10)
			# The rewind of a step that changed 10 files (absolute time).
			mkdir -p "$MP/rw"
			for k in {1..10}; do printf 'v0\n' >"$MP/rw/f$k"; done
			for ((i = 1; i <= REPS; i++)); do
				printf 'edit 10\n' >"$MP/.zero/step"
				read -r seq _ <"$MP/.zero/step"
				for k in {1..10}; do printf 'v%s\n' "$i" >"$MP/rw/f$k"; done
				t0=${EPOCHREALTIME/./}
				printf '%s\n' "$seq" >"$MP/.zero/rewind"
				t1=${EPOCHREALTIME/./}
				record rewind10 abs 0 $((t1 - t0))
			done
			;;
		stepalone)
			# A step by itself: one write to .zero/step, 20 ms after the
			# step before (an agent's steps are further apart still), 200
			# times per round; the median round's mean (absolute time).
			for ((i = 1; i <= REPS; i++)); do
				tot=0
				for ((k = 0; k < 200; k++)); do
					sleep 0.02
					t0=${EPOCHREALTIME/./}
					printf 'step %s\n' "$k" >"$MP/.zero/step"
					t1=${EPOCHREALTIME/./}
					tot=$((tot + t1 - t0))
				done
				record stepalone abs 0 $((tot / 200))
			done
			;;
		onestep-*)
			# One step that edits one file under the mount of an N-file
			# workspace, against one shadow-git snapshot (add -A && commit)
			# of the same change in a native repository of the same files.
			n=${w#onestep-}
			ws=$P/os$n-ws mp=$P/os$n-mnt g=$P/os$n-git
			mkdir -p "$ws" "$mp" "$g"
			tar -xf "$CACHE/tree$n.tar" -C "$ws"
			tar -xf "$CACHE/tree$n.tar" -C "$g"
			git -C "$g" init -q && git -C "$g" config gc.auto 0
			git -C "$g" add -A && git -C "$g" commit -qm base
			f=$(cd "$g" && git ls-files | awk 'NR == 1')
			mountws "$ws" "$mp"
			printf 'warm\n' >"$mp/.zero/step"
			printf 'x\n' >>"$mp/$f"
			for ((i = 1; i <= REPS; i++)); do
				t0=${EPOCHREALTIME/./}
				printf 'x\n' >>"$g/$f"
				git -C "$g" add -A && git -C "$g" commit -qm "edit $i"
				t1=${EPOCHREALTIME/./}
				tg=$((t1 - t0))
				t0=${EPOCHREALTIME/./}
				printf 'edit %s\n' "$i" >"$mp/.zero/step"
				printf 'x\n' >>"$mp/$f"
				t1=${EPOCHREALTIME/./}
				record "$w" cheaper "$tg" $((t1 - t0))
			done
			umountws "$mp"
			echo "  $w done" >&2
			;;
		*)
			echo "bench: unknown workload $w" >&2
			exit 2
			;;
		esac
	}
	# Each workload in a subshell of its own: one that fails is reported
	# and the others still run.
	for w in "${WORKLOADS[@]}"; do
		set +e
		(workload "$w")
		rc=$?
		set -e
		if [[ $rc != 0 ]]; then
			echo "bench: workload $w failed (exit $rc)" >&2
			printf '%s\t%s\tfailed\t0\t0\n' "$PASS" "$w" >>"$BASE/results.tsv"
		fi
	done
	umountws "$MP"
	exit 0
fi

# ---------------------------------------------------------------- parent ---
SIZE=${1:-quick}
WHO=${2:-both}
REPS=${3:-5}
case $SIZE in quick | full) ;; *)
	echo "usage: scripts/bench.sh [quick|full] [root|user|both] [REPS]" >&2
	exit 2
	;;
esac
if [[ $(id -u) != 0 ]]; then
	echo "bench: run as root (it mounts, and runs the user pass through setpriv)" >&2
	exit 1
fi
for pkg in fio:fio rg:ripgrep git:git fusermount3:fuse3; do
	if ! command -v "${pkg%%:*}" >/dev/null; then
		apt-get install -y -qq "${pkg#*:}" >/dev/null
	fi
done
PY=$(command -v python3)

BASE=${BENCH_DIR:-/var/tmp}/zerofs-bench
rm -rf "$BASE"
mkdir -p "$BASE/cache"
chmod 755 "$BASE"
CACHE=$BASE/cache
cleanup() {
	# Nothing of ours stays mounted, whatever happened.
	# (|| true: with nothing mounted grep fails, and under set -e and
	# pipefail that ended the trap here, leaving $BASE behind and exit 1.)
	{ grep -E " fuse\.(zerofs|loopmount) " /proc/mounts | awk '{print $2}' | grep "^$BASE/" || true; } | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
	if [[ -n ${FUSE_MODE:-} ]]; then chmod "$FUSE_MODE" /dev/fuse; fi
	[[ -f $BASE/results.tsv ]] && cp "$BASE/results.tsv" "$BASE.tsv" # the raw runs, kept
	rm -rf "$BASE"
}
trap cleanup EXIT

echo "bench: building zerofs and the inputs in $BASE" >&2
go build -o "$BASE/zerofs" ./cmd/zerofs
cp scripts/bench.sh "$BASE/bench.sh"
chmod 755 "$BASE/zerofs" "$BASE/bench.sh"
if [[ $WHO == loopback ]]; then
	go build -o "$BASE/loopmount" ./scripts/loopmount
	chmod 755 "$BASE/loopmount"
fi
GOSRC=$(go env GOROOT)/src
tar -cf "$CACHE/src.tar" -C "$GOSRC" .
tar -cf "$CACHE/cmd.tar" -C "$GOSRC" cmd
# The 1k, 10k and 50k-file workspaces: part of Go's tree, all of it, five copies.
(cd "$GOSRC" && find . -type f | sort | awk 'NR <= 1000' | tar -cf "$CACHE/tree1k.tar" -T -)
cp "$CACHE/src.tar" "$CACHE/tree10k.tar"
if [[ $SIZE == full ]]; then
	mkdir "$BASE/t50k"
	for k in 1 2 3 4 5; do mkdir "$BASE/t50k/c$k" && tar -xf "$CACHE/src.tar" -C "$BASE/t50k/c$k"; done
	tar -cf "$CACHE/tree50k.tar" -C "$BASE/t50k" . && rm -rf "$BASE/t50k"
fi
# A node_modules-like tree, made the same way every time (scripts/nmtree.py).
"$PY" "$REPO/scripts/nmtree.py" "$CACHE/nm"
tar -cf "$CACHE/nm.tar" -C "$CACHE/nm" node_modules && rm -rf "$CACHE/nm"
# go vet's package tree: this repository with its modules vendored.
mkdir "$CACHE/vet"
git archive HEAD | tar -x -C "$CACHE/vet"
(cd "$CACHE/vet" && GOFLAGS= go mod vendor)

ALL=(find grep rg gitstatus tarx rmsame rmown rmnm readcold readwarm write gitcommit vet small fio mv rewind10 stepalone onestep-1k onestep-10k)
CAPTURE=(tarx rmsame rmown rmnm write gitcommit small mv rewind10 onestep-10k)
if [[ $SIZE == full ]]; then
	ALL+=(onestep-50k)
fi
if [[ -n ${BENCH_WORKLOADS:-} ]]; then # a subset, e.g. BENCH_WORKLOADS="find grep"
	read -ra ALL <<<"$BENCH_WORKLOADS"
	read -ra CAPTURE <<<"$BENCH_WORKLOADS"
fi
pass() { # pass NAME USER SYNC WORKLOAD...
	local name=$1 user=$2 sync=$3
	shift 3
	mkdir -p "$BASE/$name"
	echo "bench: pass $name ($user, --sync $sync)" >&2
	if [[ $user == root ]]; then
		bash "$BASE/bench.sh" --worker "$name" "$BASE" "$sync" "$SIZE" "$REPS" "$@"
	else
		FUSE_MODE=$(stat -c %a /dev/fuse) # put back at the end
		chmod 666 /dev/fuse
		chown -R nobody:nogroup "$BASE/$name" "$CACHE"
		touch "$BASE/results.tsv" && chmod 666 "$BASE/results.tsv"
		setpriv --reuid=65534 --regid=65534 --clear-groups \
			bash "$BASE/bench.sh" --worker "$name" "$BASE" "$sync" "$SIZE" "$REPS" "$@"
		chmod "$FUSE_MODE" /dev/fuse
		FUSE_MODE=
	fi
	rm -rf "${BASE:?}/$name"
}
START=$(date -u '+%Y-%m-%d %H:%M UTC')
T0=$SECONDS
if [[ $WHO == root || $WHO == both ]]; then
	pass root root batch "${ALL[@]}"
	if [[ $SIZE == full ]]; then
		pass root-always root always "${CAPTURE[@]}"
	fi
fi
if [[ $WHO == always ]]; then # only the --sync always pass
	pass root-always root always "${CAPTURE[@]}"
fi
if [[ $WHO == user || $WHO == both ]]; then
	pass user nobody batch "${ALL[@]}"
fi
if [[ $WHO == loopback ]]; then # the floor: go-fuse's plain loopback, as root
	LOOP=() # rewind10, stepalone and onestep-* need .zero: left out here
	for w in "${ALL[@]}"; do
		case $w in rewind10 | stepalone | onestep-*) ;; *) LOOP+=("$w") ;; esac
	done
	pass loopback root n/a "${LOOP[@]}"
fi
RATIO="zerofs / native"
if [[ $WHO == loopback ]]; then RATIO="loopback / native"; fi

FS=$(stat -f -c %T "$BASE")
DEV=$(df --output=source "$BASE" | tail -1)
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
# ext4 without a journal skips, one by one, every inode freed in the last
# minute (six while its inode table block is not written back) when it
# allocates one (fs/ext4/ialloc.c, recently_deleted), so a create
# after a large rm -rf costs kernel time that grows with what was removed,
# natively and in the daemon alike, and differently on each side.
if [[ $(cat "/sys/fs/ext4/$(basename "$DEV")/journal_task" 2>/dev/null) == "<none>" ]]; then
	FS="$FS (ext4 without a journal: creates after removals pay for the inodes freed in the last minutes, natively too; the create rows swing between runs)"
fi
cat <<EOF
zerofs bench: $START, $(git -C "$REPO" rev-parse --short HEAD), took $((SECONDS - T0)) s
machine: $(nproc) cores ($CPU), $(free -g | awk '/Mem:/{print $2}') GiB; kernel $(uname -r); filesystem $FS on $DEV
command: ${BENCH_MOUNT_FLAGS:+BENCH_MOUNT_FLAGS="$BENCH_MOUNT_FLAGS" }scripts/bench.sh $SIZE $WHO $REPS (median of $REPS alternating runs; ratio = $RATIO)

EOF
"$PY" - "$BASE/results.tsv" <<'EOF'
import statistics, sys
from collections import OrderedDict
rows = OrderedDict()
for line in open(sys.argv[1]):
    p, w, kind, n, m = line.rstrip("\n").split("\t")
    rows.setdefault((p, w, kind), []).append((int(n), int(m)))
names = {
    "find": ("find . -type f (warm)", "<= 1.2x"),
    "grep": ("grep -r (warm)", "<= 1.5x"),
    "rg": ("rg (warm)", "<= 1.5x"),
    "gitstatus": ("git status (warm)", "<= 1.2x"),
    "tarx": ("tar -x, Go's src (full) or its cmd/ (quick), captures included", "<= 2x"),
    "rmsame": ("rm -rf 4.4k files created in the same step", "<= 1.5x"),
    "rmown": ("rm -rf 4.4k files in a step of its own", "<= 3x"),
    "rmnm": ("rm -rf node_modules (1,737 files, 46 MB)", "<= 3x"),
    "readcold": ("sequential read, cold", "<= 1.2x"),
    "readwarm": ("sequential read, warm (64 MiB)", "<= 1.2x"),
    "write": ("sequential write (new file)", "<= 1.2x"),
    "gitcommit": ("git add -A && git commit (4.4k new files)", "<= 1.5x"),
    "vet": ("go vet ./... (this repository, warm)", ""),
    "small": ("5000 small files created and removed", "<= 2x"),
    "fio": ("fio 4 KiB random read+write, 32 MiB", ""),
    "mv": ("mv of Go's src (11k files) and back", "<= 2x"),
    "rewind10": ("rewind of a 10-file step", ""),
    "stepalone": ("a step alone (mean of 200, 20 ms apart)", ""),
    "onestep-1k": ("one-file step vs shadow git, 1k files", ">= 100x cheaper"),
    "onestep-10k": ("one-file step vs shadow git, 10k files", ">= 200x cheaper"),
    "onestep-50k": ("one-file step vs shadow git, 50k files", ">= 100x cheaper"),
}
def ms(us): return f"{us/1000:.1f} ms" if us < 100_000 else f"{us/1e6:.2f} s"
passes = OrderedDict()
for (p, w, kind), v in rows.items():
    passes.setdefault(p, []).append((w, kind, v))
titles = {"root": "as root: mount(2), FUSE passthrough, --sync batch",
          "root-always": "as root, --sync always",
          "user": "as nobody: fusermount3, no passthrough, --sync batch",
          "loopback": "as root: plain go-fuse loopback (scripts/loopmount: zerofs's mount settings, passthrough, no zerofs), the floor"}
for p, ws in passes.items():
    print(f"{titles.get(p, p)}\n")
    col = "loopback" if p == "loopback" else "zerofs"
    print(f"| workload | native | {col} | ratio (median) | ratio (min-max) | goal |")
    print("|---|---|---|---|---|---|")
    for w, kind, v in ws:
        label, goal = names.get(w, (w, ""))
        if p == "loopback":  # no steps, no captures there
            label = label.replace(", captures included", "").replace(" in a step of its own", "")
        if kind == "failed":
            print(f"| {label} | | | failed | | {goal} |")
            continue
        mn = statistics.median(m for _, m in v)
        if kind == "abs":
            print(f"| {label} | | {ms(mn)} | | {ms(min(m for _, m in v))}-{ms(max(m for _, m in v))} | |")
            continue
        nn = statistics.median(n for n, _ in v)
        if kind == "cheaper":
            r = [n / m for n, m in v]
            print(f"| {label} | git {ms(nn)} | {ms(mn)} | {statistics.median(r):.0f}x cheaper | {min(r):.0f}-{max(r):.0f}x | {goal} |")
        else:
            r = [m / n for n, m in v]
            print(f"| {label} | {ms(nn)} | {ms(mn)} | {statistics.median(r):.2f}x | {min(r):.2f}-{max(r):.2f}x | {goal} |")
    print()
EOF
