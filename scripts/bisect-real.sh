#!/bin/sh
# bisect-real.sh: zerofs bisect over this repository's own recent history.
#
# Writes the tree of the commit N first-parent commits back on a branch
# (default: main), mounts it, and replays the N commits after it, one step
# per commit (only the files whose content or mode differs from the
# commit's tree are written, and those it lacks removed), and plants a bug in step K (internal/quote/quote.go
# stops quoting a name with a newline; the later steps keep it). Then it times `zerofs bisect -- go test ./internal/quote/` and,
# for comparison, writing out each state in turn (zerofs fork) and running
# go test there, oldest first, until it fails.
#
#   scripts/bisect-real.sh [N] [K] [BRANCH]
#
# Needs root (FUSE), python3 and go; works in /tmp/zerofs-bisect-real.
set -eu
N=${1:-40}
K=${2:-23}
BRANCH=${3:-main}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=/tmp/zerofs-bisect-real
bin=$work/zerofs
export GOTOOLCHAIN=local GOFLAGS=-count=1
rm -rf "$work" && mkdir -p "$work/ws" "$work/tree"
(cd "$repo" && go build -o "$bin" ./cmd/zerofs)
ws=$work/ws
commits=$(git -C "$repo" log --first-parent -"$((N + 1))" --format=%H "$BRANCH" | tac)
git -C "$repo" archive "$(echo "$commits" | head -1)" | tar -x -C "$ws"
"$bin" mount "$ws" >/dev/null
trap '"$bin" umount "$ws" >/dev/null 2>&1 || true' EXIT
sync_tree() { # make $2 hold what $1 holds (but $2/.zero)
	python3 - "$1" "$2" <<'PY'
import filecmp, os, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
for root, dirs, files in os.walk(dst, topdown=False):
    rel = os.path.relpath(root, dst)
    if rel == ".zero" or rel.startswith(".zero" + os.sep):
        continue
    for n in files + dirs:
        p = os.path.join(root, n)
        if rel == "." and n == ".zero":
            continue
        if not os.path.lexists(os.path.join(src, rel, n)):
            shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)
for root, dirs, files in os.walk(src):
    rel = os.path.relpath(root, src)
    os.makedirs(os.path.join(dst, rel), exist_ok=True)
    for n in files:
        a, b = os.path.join(root, n), os.path.join(dst, rel, n)
        if os.path.islink(a):
            if not os.path.islink(b) or os.readlink(a) != os.readlink(b):
                if os.path.lexists(b): os.remove(b)
                os.symlink(os.readlink(a), b)
        elif not os.path.exists(b) or not filecmp.cmp(a, b, shallow=False) or os.stat(a).st_mode != os.stat(b).st_mode:
            shutil.copyfile(a, b); os.chmod(b, os.stat(a).st_mode & 0o7777)
PY
}
plant() {
	# Name no longer quotes a name holding a newline: quote_test fails.
	sed -i 's/^func Needed(s string) bool {$/&\n\tif strings.Contains(s, "\\n") {\n\t\treturn false\n\t}/' "$ws/internal/quote/quote.go"
}
i=0
for c in $(echo "$commits" | tail -n +2); do
	i=$((i + 1))
	rm -rf "$work/tree" && mkdir "$work/tree"
	git -C "$repo" archive "$c" | tar -x -C "$work/tree"
	"$bin" -C "$ws" step "commit $i $(git -C "$repo" log -1 --format=%h "$c")" >/dev/null
	sync_tree "$work/tree" "$ws"
	if [ "$i" -ge "$K" ]; then plant; fi
done
echo "replayed $i commits; planted the bug in step $K"
(cd "$ws" && go test ./internal/quote/ >/dev/null 2>&1) && { echo "go test passes at the head: the bug did not take"; exit 1; }
uptime
start=$(date +%s.%N)
(cd "$ws" && "$bin" bisect -- go test ./internal/quote/)
end=$(date +%s.%N)
echo "bisect: $(echo "$end - $start" | bc) s"
# The other way: the state after each step in turn, oldest first, until go
# test fails.
start=$(date +%s.%N)
steps=$("$bin" -C "$ws" log | awk '/commit [0-9]+ /{print $2}' | tac)
head=$(cat "$ws/.zero/head")
n=0
for s in $(echo "$steps" | tail -n +2) $((head + 1)); do
	n=$((n + 1))
	rm -rf "$work/state"
	"$bin" -C "$ws" fork "$((s - 1))" "$work/state" >/dev/null
	if ! (cd "$work/state" && go test ./internal/quote/ >/dev/null 2>&1); then
		echo "each state in turn: step $n's state fails; $n states written and tested"
		break
	fi
done
end=$(date +%s.%N)
echo "each state in turn: $(echo "$end - $start" | bc) s"
