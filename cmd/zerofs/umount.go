package main

import (
	"fmt"
	"path/filepath"

	"github.com/zerofs/zerofs/daemon"
	"github.com/zerofs/zerofs/history"
)

var umountCmd = &command{
	name:    "umount",
	usage:   "umount [MOUNTPOINT]",
	summary: "flush, unmount, wait for the daemon to exit",
	help: `Asks the daemon serving MOUNTPOINT (default: the mounted workspace around
the current directory) to unmount, and waits until it has exited and its
mount is gone. A daemon that replicates (mount --replicate) makes a last
attempt, of at most 30s, to upload what it has not replicated yet, after
its mount is gone and before it exits: umount waits for that too, and
when that attempt left events behind (the endpoint down or hung) it says
what and exits 1 (they stay in the store for the next 'zerofs replicate'
or mount --replicate): 'umount && rm -rf' never loses them silently. A dead
mount (its daemon killed) at MOUNTPOINT is detached, and a live zerofs
mount under it, or over it, is unmounted too: umount succeeds only once
no zerofs mount, live or dead, is left there.
`,
	run: runUmount,
}

func runUmount(e *env, c *command, args []string) error {
	pos, rest, err := parseArgs(c, newFlags(c), args)
	if err != nil {
		return err
	}
	pos = append(pos, rest...)
	var mp string
	switch len(pos) {
	case 0:
		ws, err := history.Find(e.cwd)
		if err != nil {
			return err
		}
		if !ws.Mounted {
			return fmt.Errorf("%s is not mounted", ws.Root)
		}
		mp = ws.Status.Mountpoint
	case 1:
		mp = pos[0]
		if !filepath.IsAbs(mp) {
			mp = filepath.Join(e.cwd, mp)
		}
		mp = filepath.Clean(mp)
	default:
		return usagef(c, "want one MOUNTPOINT")
	}
	return daemon.Unmount(mp, daemon.UnmountOptions{Stderr: e.stderr, Exited: replicaLeftBehind})
}
