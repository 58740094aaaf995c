#!/usr/bin/env bash
# Replication figures for docs/replication.md: a mount with --replicate
# to a real S3 server (versitygw on 127.0.0.1, its posix backend on this
# disk), without and with --replica-key:
#
#   - tar -x of a big tree (Go's src) in one step: the most the replica
#     fell behind (events, bytes) while it ran, and how long after tar
#     ended the replica was restorable up to the last step;
#   - an agent-paced session (a step, a few small edits, a pause of about
#     a second, STEPS times): the most it fell behind, PUTs per hour;
#   - idle: PUTs over IDLE seconds, per hour;
#   - bytes uploaded against bytes changed (the tree's size, the edits);
#   - restore of the tar's state (Go's src: about 11k files) on "another
#     machine": the time it takes.
#
# The load (the 1-minute average) is printed with each figure: the
# machine may be shared, and every figure moves with it.
# Needs root, /dev/fuse and a versitygw binary in ZEROFS_VERSITYGW (see
# .ci/run).
#
#   scripts/bench-replicate.sh [TREE] [STEPS] [IDLE]
set -euo pipefail
cd "$(dirname "$0")/.."
tree=${1:-$(go env GOROOT)/src}
steps=${2:-60}
idle=${3:-60}
vgw=${ZEROFS_VERSITYGW:?set ZEROFS_VERSITYGW to a versitygw binary}
tmp=$(mktemp -d /tmp/zerofs-bench-replicate.XXXXXX)
z=$tmp/zerofs
cleanup() {
	for m in "$tmp"/ws-*; do [ -d "$m" ] && "$z" umount "$m" >/dev/null 2>&1 || true; done
	[ -n "${vpid:-}" ] && kill "$vpid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
go build -o "$z" ./cmd/zerofs
load() { cut -d' ' -f1 /proc/loadavg; }
now() { date +%s%N; }
ms() { echo $(( ($2 - $1) / 1000000 )); }

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$tmp/s3/bench"
"$vgw" --port "127.0.0.1:$port" --access bench-access --secret bench-secret-key posix "$tmp/s3" >"$tmp/vgw.log" 2>&1 &
vpid=$!
export AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_ACCESS_KEY_ID=bench-access AWS_SECRET_ACCESS_KEY=bench-secret-key \
	AWS_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true
for _ in $(seq 100); do curl -s "$AWS_ENDPOINT_URL" >/dev/null 2>&1 && break; sleep 0.1; done

tar -C "$(dirname "$tree")" -cf "$tmp/tree.tar" "$(basename "$tree")"
files=$(tar -tf "$tmp/tree.tar" | grep -vc '/$')
tree_mb=$(( $(du -sb "$tree" | cut -f1) / 1048576 ))
echo "replication bench: $tree ($files files, $tree_mb MiB), $steps agent steps, ${idle}s idle; $(date -u +%F), $(uname -r), $(nproc) cores, load $(load)"
head -c 32 /dev/urandom >"$tmp/key"

# st FIELD: a field of the mount's replica state (zerofs status --json).
st() { "$z" status --json 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); r=d.get('replica') or {}; print(eval(sys.argv[1]))" "$1"; }

# watch: every 0.5 s until told to stop, the events and bytes behind.
watch() {
	while [ ! -e "$tmp/stop" ]; do
		st "'%d %d' % (d.get('replicaBehindEvents',0), r.get('pendingBytes',0))" >>"$tmp/behind" || true
		sleep 0.5
	done
}
maxbehind() { awk 'BEGIN{e=0;b=0} {if($1>e)e=$1; if($2>b)b=$2} END{printf "%d events, %.1f MiB", e, b/1048576}' "$tmp/behind"; }

# caughtup: waits until the replica is restorable up to the current step
# and holds every event; prints the milliseconds it took.
caughtup() {
	local t0 step
	t0=$(now)
	step=$(st "d['step']['sequence'] if d.get('step') else 0")
	until [ "$(st "'%d %d' % (d.get('replicaBehindEvents',0), 1 if r.get('base',0) >= $step else 0)")" = "0 1" ]; do sleep 0.2; done
	ms "$t0" "$(now)"
}

for mode in plain keyed; do
	keyarg=()
	[ "$mode" = keyed ] && keyarg=(--replica-key "$tmp/key")
	ws=$tmp/ws-$mode
	mkdir -p "$ws"
	echo "seed" >"$ws/README"
	url=s3://bench/$mode
	"$z" mount --replicate "$url" "${keyarg[@]}" "$ws"
	cd "$ws"
	caughtup >/dev/null

	# tar -x of the tree in one step.
	objs0=$(st "r.get('objects',0)"); bytes0=$(st "r.get('bytes',0)")
	"$z" step "tar -x" >/dev/null
	rm -f "$tmp/stop" "$tmp/behind"; watch & wpid=$!
	t0=$(now)
	tar -xf "$tmp/tree.tar"
	t1=$(now)
	"$z" step "after tar" >/dev/null
	catch=$(caughtup)
	touch "$tmp/stop"; wait "$wpid"
	objs1=$(st "r.get('objects',0)"); bytes1=$(st "r.get('bytes',0)")
	printf '%s tar -x: %d ms; most behind %s; restorable up to the last step %d ms after tar ended; %d PUTs, %.1f MiB uploaded for %d MiB written (load %s)\n' \
		"$mode" "$(ms "$t0" "$t1")" "$(maxbehind)" "$catch" $((objs1 - objs0)) "$(echo "($bytes1 - $bytes0)/1048576" | bc -l)" "$tree_mb" "$(load)"

	# An agent-paced session: a step, three small edits, a pause.
	objs0=$objs1; bytes0=$bytes1
	changed=0
	mapfile -t gofiles < <(tar -tf "$tmp/tree.tar" | grep '\.go$')
	RANDOM=1
	rm -f "$tmp/stop" "$tmp/behind"; watch & wpid=$!
	t0=$(now)
	for i in $(seq "$steps"); do
		"$z" step "edit $i" >/dev/null
		for _ in 1 2 3; do
			f=${gofiles[$(( (RANDOM * 32768 + RANDOM) % ${#gofiles[@]} ))]}
			echo "// edit $i" >>"$f"
			changed=$((changed + $(stat -c %s "$f")))
		done
		sleep 1
	done
	"$z" step "session over" >/dev/null
	t1=$(now)
	catch=$(caughtup)
	touch "$tmp/stop"; wait "$wpid"
	objs1=$(st "r.get('objects',0)"); bytes1=$(st "r.get('bytes',0)")
	secs=$(echo "($t1 - $t0)/1000000000" | bc -l)
	printf '%s agent-paced, %d steps in %.0f s: most behind %s; restorable up to the last step %d ms after the session; %d PUTs (%.0f per hour), %.2f MiB uploaded for %.2f MiB of files changed (load %s)\n' \
		"$mode" "$steps" "$secs" "$(maxbehind)" "$catch" $((objs1 - objs0)) "$(echo "($objs1 - $objs0) * 3600 / $secs" | bc -l)" \
		"$(echo "($bytes1 - $bytes0)/1048576" | bc -l)" "$(echo "$changed/1048576" | bc -l)" "$(load)"

	# Idle.
	objs0=$objs1
	sleep "$idle"
	objs1=$(st "r.get('objects',0)")
	printf '%s idle %d s: %d PUTs (%d per hour) (load %s)\n' "$mode" "$idle" $((objs1 - objs0)) $(( (objs1 - objs0) * 3600 / idle )) "$(load)"

	cd "$tmp"
	"$z" umount "$ws"
	# Restore the newest state (the tree after the session) elsewhere.
	t0=$(now)
	"$z" restore "$url" "${keyarg[@]}" "$tmp/restored-$mode" >/dev/null
	t1=$(now)
	n=$(find "$tmp/restored-$mode" -path "$tmp/restored-$mode/.zero" -prune -o -type f -print | wc -l)
	printf '%s restore of the newest state (%d files): %d ms (load %s)\n' "$mode" "$n" "$(ms "$t0" "$t1")" "$(load)"
	du -sh "$tmp/s3/bench/$mode" | awk -v m="$mode" '{print m " bucket size: " $1}'
done
