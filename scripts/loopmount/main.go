// Command loopmount exists only as the benchmark's floor: it mounts
// WORKSPACE at MOUNTPOINT with go-fuse's plain loopback (fs.NewLoopbackRoot)
// and nothing of zerofs, tuned as zerofs tunes its mount (fs/mount.go), so
// that `scripts/bench.sh quick loopback` measures what the kernel's FUSE
// requests cost a workload when the daemon only passes them on: the floor for
// zerofs's own work on the request path. zerofs goes below it only where it
// spares requests the loopback answers (no FLUSH for readers, no OPENDIR).
//
//	loopmount WORKSPACE MOUNTPOINT
//
// It prints "ready" once mounted and unmounts on SIGINT or SIGTERM (or exits
// once the mount is gone, however it went). Run it as root: it mounts with
// mount(2) directly, as zerofs does as root.
//
// Settings taken from zerofs: 1 h entry and attribute timeouts, negative
// entries kept as long (zerofs's negativeFS does the same), default_permissions,
// NullPermissions, READDIRPLUS off, MaxWrite 1 MiB, DirectMount, POSIX ACLs
// enforced by the kernel, no lock requests, a daemon umask of 0, and
// CAP_NO_OPENDIR_SUPPORT offered (the loopback answers OPENDIR, so the
// kernel keeps sending it: zerofs's dirlessFS, which answers ENOSYS, is
// zerofs's own work and not copied here). CAP_HANDLE_KILLPRIV_V2 is left
// out: with it the daemon must clear set-id bits itself, which the loopback
// does not do. FUSE passthrough is go-fuse's own: its LoopbackFile hands its
// descriptor to the kernel whenever the kernel offers passthrough and lets
// the daemon register it (root), as zerofs does in its root pass.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: loopmount WORKSPACE MOUNTPOINT")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "loopmount:", err)
		os.Exit(1)
	}
}

func run(ws, mp string) error {
	ws, err := filepath.Abs(ws)
	if err != nil {
		return err
	}
	if mp, err = filepath.Abs(mp); err != nil {
		return err
	}
	root, err := fusefs.NewLoopbackRoot(ws)
	if err != nil {
		return err
	}
	// Creates get exactly the mode the kernel sends, as under zerofs.
	syscall.Umask(0)
	timeout := time.Hour
	opts := &fusefs.Options{
		MountOptions: fuse.MountOptions{
			FsName:             ws,
			Name:               "loopmount",
			DirectMount:        true,
			MaxWrite:           1 << 20,
			Options:            []string{"default_permissions"},
			DisableReadDirPlus: true,
			EnableAcl:          true,
			ExtraCapabilities:  fuse.CAP_NO_OPENDIR_SUPPORT,
		},
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &timeout,
		NullPermissions: true,
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	server, err := fusefs.Mount(mp, root, opts)
	if err != nil {
		return err
	}
	gone := make(chan struct{})
	go func() { server.Wait(); close(gone) }()
	pt := server.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH != 0
	fmt.Fprintf(os.Stderr, "loopmount: %s on %s, kernel offers passthrough: %v\n", ws, mp, pt)
	fmt.Println("ready")
	select {
	case <-sig:
	case <-gone:
		return nil
	}
	if err := server.Unmount(); err != nil {
		// Still busy: detach it, so nothing stays mounted after we exit.
		if derr := syscall.Unmount(mp, syscall.MNT_DETACH); derr != nil {
			return errors.Join(err, derr)
		}
		return fmt.Errorf("unmount %s: %w (detached instead)", mp, err)
	}
	<-gone
	return nil
}
