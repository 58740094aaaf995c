package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/zerofs/zerofs/branch"
	"github.com/zerofs/zerofs/daemon"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/quote"
)

var umountCmd = &command{
	name:    "umount",
	usage:   "umount [--lazy] [MOUNTPOINT]",
	summary: "flush, unmount, wait for the daemon to exit",
	about: `Asks the daemon serving MOUNTPOINT (default: the mounted workspace around
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

A mount that processes still use (their working directory, a file they
hold open or have mapped, as 'fuser -m' finds them) is refused: umount
names each (pid, command, what of it is in the mount), changes nothing
and exits 1. A shell standing in the mount is one of them: run umount
from outside it.

A workspace's mounted branches (zerofs branch) read their base through
its mount: they are unmounted first, each named; one in use refuses the
umount as above, and the workspace stays mounted.
`,
	flags: []flagDef{
		{name: "lazy", help: `unmount a mount that processes still use anyway: it is detached
and its daemon exits, and the processes are left in a dead
mount, where reading and writing fail until they leave it; umount
names those still running`},
	},
	args: []argDef{{name: "MOUNTPOINT", comp: compDir}},
	run:  runUmount,
}

func runUmount(e *env, c *command, args []string) error {
	o, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	lazy := o.Bool("lazy")
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
	// A workspace's mounted branches read their base through its mount:
	// they go first (found in the mount table: a dead or hung mount is
	// never touched).
	done, err := branch.UnmountAt(e.ctx, mp, branch.Options{Lazy: lazy, Stderr: e.stderr})
	for _, d := range done {
		fmt.Fprintf(e.stderr, "zerofs: unmounted branch %s first ('zerofs branch %s' in the workspace mounts it again)\n", quote.Name(d), quote.Name(d))
	}
	if err != nil {
		return fmt.Errorf("%w; the workspace stays mounted", err)
	}
	err = daemon.Unmount(mp, daemon.UnmountOptions{
		Stderr: e.stderr,
		Exited: replicaLeftBehind,
		Lazy:   lazy,
		Left: func(mp string, left []daemon.Holder) {
			if len(left) == 0 {
				fmt.Fprintf(e.stderr, "zerofs: detached %s lazily; the processes that used it have exited\n", quote.Name(mp))
				return
			}
			fmt.Fprintf(e.stderr, "zerofs: detached %s lazily; left in the dead mount, where reading and writing fail until they leave it: %s\n", quote.Name(mp), daemon.HoldersText(left))
		},
	})
	var busy *daemon.BusyError
	if errors.As(err, &busy) {
		them := "it"
		if len(busy.Holders) > 1 {
			them = "them"
		}
		shell := ""
		for _, h := range busy.Holders {
			if h.PID == os.Getppid() {
				shell = fmt.Sprintf(" (pid %d is the shell this umount runs from: cd out of the mount first)", h.PID)
			}
		}
		return fmt.Errorf("%w%s; end %s or move %s out of the mount, then run 'zerofs umount %s' again, or 'zerofs umount --lazy %s' to detach it anyway (leaving %s in a dead mount, where reading and writing fail)",
			err, shell, them, them, quote.Name(mp), quote.Name(mp), them)
	}
	return err
}
