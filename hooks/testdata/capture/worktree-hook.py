#!/usr/bin/env python3
# Stands in for zerofs as Claude Code's WorktreeCreate / WorktreeRemove
# hook: appends the hook's stdin to $ZEROFS_CAPTURE, then does what a
# worktree hook must: on WorktreeCreate makes a git worktree beside the
# repository and prints its path; on WorktreeRemove removes it.
import json, os, subprocess, sys
raw = sys.stdin.read()
with open(os.environ.get("ZEROFS_CAPTURE", "captured.jsonl"), "a") as f:
    f.write(raw.rstrip("\n") + "\n")
p = json.loads(raw)
if p.get("hook_event_name") == "WorktreeCreate":
    root = p["cwd"]
    path = os.path.join(os.path.dirname(root), os.path.basename(root) + "-worktrees", p["name"])
    subprocess.run(["git", "-C", root, "worktree", "add", "-q", "--detach", path], check=True, stdout=sys.stderr)
    print(path)
elif p.get("hook_event_name") == "WorktreeRemove":
    subprocess.run(["git", "worktree", "remove", "--force", p["worktree_path"]], check=True, cwd=p["cwd"])
