package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/zerofs/zerofs/daemon"
	zfs "github.com/zerofs/zerofs/fs"
	"github.com/zerofs/zerofs/replicate"
)

var mountCmd = &command{
	name:    "mount",
	usage:   "mount [flags] WORKSPACE [MOUNTPOINT]",
	summary: "mount (in place when MOUNTPOINT is omitted); returns once ready",
	flags: []flagDef{
		{name: "foreground", short: "f", help: "stay in the foreground; Ctrl-C or SIGTERM unmounts cleanly"},
		{name: "store", arg: "DIR", comp: compDir, help: "store location (default WORKSPACE/.zero)"},
		{name: "auto-step", arg: "DURATION", def: time.Duration(0), comp: compNone,
			help: "begin a new step after this much idle time (0: only explicit steps)"},
		{name: "allow-other", help: "let other users use the mount (their permissions still apply)"},
		{name: "sync", arg: "always|batch", def: "batch", comp: compWords,
			help: "when captures reach stable storage (default batch)"},
		{name: "max-store-size", arg: "SIZE", def: "0", comp: compNone,
			help: `keep the store (log and blobs) under SIZE (e.g. 20G, 512M):
at a step boundary that finds it larger, the oldest
history is pruned (a history_pruned event says what
went); 0: no bound`},
		{name: "replicate", arg: "URL", comp: compNone, help: `copy the history to s3://BUCKET/PREFIX as it is made
(see 'zerofs help replicate'); the workspace never
waits for it`},
		{name: "replica-key", arg: "FILE", help: "seal what --replicate uploads with this key"},
		{name: "no-open", help: `serve files without OPEN, RELEASE and FLUSH requests: a
warm read of a tree costs no request per file; no
passthrough; .zero is a mount of its own (docs/performance.md)`},
		{name: "rename-records", def: true, help: `record a directory's rename as one record instead of a
capture of everything beneath it (on by default;
--rename-records=false turns it off; docs/performance.md)`},
		{name: "ignore", arg: "PATTERN", def: patternsValue(nil), comp: compNone,
			help: `never capture or rewind the paths PATTERN matches
(gitignore syntax, after .zeroignore's patterns;
repeatable; for this mount only: lasting patterns
go in .zeroignore; docs/guide.md)`},
		{name: "debug", help: "log every FUSE request"},
	},
	args: []argDef{{name: "WORKSPACE", comp: compDir}, {name: "MOUNTPOINT", comp: compDir}},
	more: `Without -f, zerofs starts itself again as a daemon (its log goes to
STORE/daemon.log, its pid to STORE/daemon.pid) and returns once the mount is
ready, or exits 1 with the daemon's reason.
`,
	run: runMount,
}

type mountFlags struct {
	foreground    bool
	store         string
	autoStep      time.Duration
	allowOther    bool
	sync          string
	debug         bool
	maxStore      string
	replicate     string
	replicaKey    string
	noOpen        bool
	renameRecords bool
	ignore        patternsValue
}

func runMount(e *env, c *command, args []string) error {
	o, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	mf := mountFlags{
		foreground: o.Bool("foreground"), store: o.String("store"), autoStep: o.Duration("auto-step"),
		allowOther: o.Bool("allow-other"), sync: o.String("sync"), debug: o.Bool("debug"),
		maxStore: o.String("max-store-size"), replicate: o.String("replicate"), replicaKey: o.String("replica-key"),
		noOpen: o.Bool("no-open"), renameRecords: o.Bool("rename-records"), ignore: o.Patterns("ignore"),
	}
	pos = append(pos, rest...)
	if len(pos) < 1 || len(pos) > 2 {
		return usagef(c, "want WORKSPACE and optionally MOUNTPOINT")
	}
	if mf.sync != "always" && mf.sync != "batch" {
		return usagef(c, "--sync must be always or batch, not %q", mf.sync)
	}
	if mf.autoStep < 0 {
		return usagef(c, "--auto-step must not be negative")
	}
	maxStore, err := parseSize(mf.maxStore)
	if err != nil {
		return usagef(c, "--max-store-size: %v", err)
	}
	if mf.replicate != "" {
		if _, err := replicate.ParseURL(mf.replicate); err != nil {
			return usagef(c, "--replicate: %v", err)
		}
	}
	if mf.replicaKey != "" {
		if mf.replicate == "" {
			return usagef(c, "--replica-key goes with --replicate")
		}
		if !filepath.IsAbs(mf.replicaKey) {
			mf.replicaKey = filepath.Join(e.cwd, mf.replicaKey)
		}
		if _, err := replicate.ReadKey(mf.replicaKey); err != nil {
			return err
		}
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(e.cwd, p)
	}
	opts := zfs.Options{
		Workspace:       abs(pos[0]),
		StoreDir:        abs(mf.store),
		Sync:            mf.sync == "always",
		AutoStep:        mf.autoStep,
		AllowOther:      mf.allowOther,
		Debug:           mf.debug,
		MaxStore:        maxStore,
		NoOpen:          mf.noOpen,
		NoRenameRecords: !mf.renameRecords,
		Ignore:          mf.ignore,
	}
	if opts.StoreDir == "." {
		opts.StoreDir = ""
	}
	if len(pos) == 2 {
		opts.Mountpoint = abs(pos[1])
	}
	err = daemon.Mount(e.ctx, daemon.Config{
		FS:         opts,
		Foreground: mf.foreground,
		Args:       daemonArgs(mf, opts),
		Replicate:  mf.replicate,
		ReplicaKey: mf.replicaKey,
		Stderr:     e.stderr,
	})
	if err == nil && !mf.foreground {
		warnBacking(e)
		mp := opts.Mountpoint
		if mp == "" {
			mp = opts.Workspace
		}
		warnIgnoreUnused(e, mp)
	}
	return err
}

// daemonArgs is the daemon's command line: the parsed flags with absolute
// paths, so that it can run from "/" and pin no directory.
func daemonArgs(mf mountFlags, opts zfs.Options) []string {
	args := []string{"mount", "--foreground", "--sync=" + mf.sync, "--auto-step=" + mf.autoStep.String()}
	if opts.StoreDir != "" {
		args = append(args, "--store="+opts.StoreDir)
	}
	if mf.allowOther {
		args = append(args, "--allow-other")
	}
	if mf.debug {
		args = append(args, "--debug")
	}
	if mf.noOpen {
		args = append(args, "--no-open")
	}
	if !mf.renameRecords {
		args = append(args, "--rename-records=false")
	}
	for _, p := range mf.ignore {
		args = append(args, "--ignore="+p)
	}
	if opts.MaxStore > 0 {
		args = append(args, "--max-store-size="+strconv.FormatInt(opts.MaxStore, 10))
	}
	if mf.replicate != "" {
		args = append(args, "--replicate="+mf.replicate)
	}
	if mf.replicaKey != "" {
		args = append(args, "--replica-key="+mf.replicaKey)
	}
	args = append(args, "--", opts.Workspace)
	if opts.Mountpoint != "" {
		args = append(args, opts.Mountpoint)
	}
	return args
}

// parseSize reads a size in bytes with an optional binary suffix: 512K,
// 20M, 3G, 1T (also KiB, MiB, GiB, TiB, and B).
func parseSize(s string) (int64, error) {
	num := strings.TrimRight(s, "KMGTiBkmgtb")
	unit := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(s[len(num):], "B"), "i"))
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q: want a number of bytes, optionally with K, M, G or T", s)
	}
	shift := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}
	sh, ok := shift[unit]
	if !ok {
		return 0, fmt.Errorf("bad size %q: unknown unit %q", s, s[len(num):])
	}
	return int64(n * float64(uint64(1)<<sh)), nil
}

// warnBacking tells the user, on stderr, when their shell stands in the
// directory under the mount (daemon.InBacking), and how to enter the mount.
func warnBacking(e *env) {
	if daemon.InBacking(e.cwd) {
		fmt.Fprintf(e.stderr, "zerofs: warning: this shell's working directory is the directory under the mount, not the mount: nothing changed from here is recorded; enter the mount with: cd \"$PWD\"\n")
	}
}
