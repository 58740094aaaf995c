// Command uringspike measures FUSE over io_uring (issue 26): a FUSE server
// over a backing directory with two transports over the same handlers, so
// that one binary can tell what the transport costs
// (docs/performance.md, FUSE over io_uring: a spike).
//
//	uringspike [-server spike|gofuse] [-transport classic|uring] [-readers N] [-enable-uring] BACKING MOUNTPOINT
//
// -server spike: a minimal path-based loopback, as go-fuse's, that speaks
// the FUSE protocol itself, with the settings zerofs and scripts/loopmount
// use (1 h entry, negative-entry and attribute timeouts,
// default_permissions, POSIX ACLs, 1 MiB writes). It answers LOOKUP,
// FORGET, BATCH_FORGET, GETATTR, SETATTR, MKDIR, UNLINK, RMDIR, RENAME(2),
// CREATE, OPEN, READ, WRITE, FLUSH, RELEASE, FSYNC, OPENDIR, READDIR,
// RELEASEDIR, STATFS, GETXATTR (ENODATA) and LISTXATTR (empty); everything
// else ENOSYS. -server gofuse: go-fuse's own loopback, configured as
// scripts/loopmount (gofuse.go says how it gets onto the rings).
//
// -transport classic: N threads in read(2) on /dev/fuse (N defaults to the
// number of CPUs; go-fuse's own loop for gofuse), each serving the request
// it read. uring: one io_uring per possible CPU, served by a thread pinned
// to that CPU, which the kernel hands the requests made on that CPU (plus
// one classic reader for FORGET and INTERRUPT, which the kernel still
// sends through /dev/fuse). The uring transport needs
// /sys/module/fuse/parameters/enable_uring set to Y while the mount
// registers its queues (-enable-uring does that and puts the old value
// back); a connection keeps io_uring once registered.
//
// Run it as root (mount(2)). It prints "ready" and the transport agreed
// once mounted, unmounts on SIGINT or SIGTERM, and prints the requests it
// served on stderr when it exits. It is a measurement tool, not part of
// zerofs.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
)

func main() {
	transport := flag.String("transport", "classic", "classic (read(2) on /dev/fuse) or uring (FUSE over io_uring)")
	readers := flag.Int("readers", runtime.NumCPU(), "classic transport: reader threads")
	serverKind := flag.String("server", "spike", "spike (this command's own handlers) or gofuse (go-fuse's loopback, as scripts/loopmount)")
	enable := flag.Bool("enable-uring", false, "set the fuse module's enable_uring to Y while the queues register, and restore it after")
	flag.Parse()
	if flag.NArg() != 2 || (*transport != "classic" && *transport != "uring") || (*serverKind != "spike" && *serverKind != "gofuse") {
		fmt.Fprintln(os.Stderr, "usage: uringspike [-server spike|gofuse] [-transport classic|uring] [-readers N] [-enable-uring] BACKING MOUNTPOINT")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), flag.Arg(1), *serverKind, *transport, *readers, *enable); err != nil {
		fmt.Fprintln(os.Stderr, "uringspike:", err)
		os.Exit(1)
	}
}

// spikeMount is a mounted spike, whichever server it runs.
type spikeMount interface {
	agreed() string            // the transport the kernel agreed to
	finished() <-chan struct{} // closed once every serving thread stopped
	unmount() error
	summary() string
}

func (m *mounted) agreed() string            { return m.transport }
func (m *mounted) finished() <-chan struct{} { return m.done }
func (m *mounted) summary() string           { return m.srv.summary() }

func (m *goMounted) agreed() string            { return m.transport }
func (m *goMounted) finished() <-chan struct{} { return m.done }
func (m *goMounted) summary() string {
	return fmt.Sprintf("requests over io_uring: %d", m.onRing.total.Load())
}

func run(backing, mp, serverKind, transport string, readers int, enable bool) error {
	backing, err := filepath.Abs(backing)
	if err != nil {
		return err
	}
	if mp, err = filepath.Abs(mp); err != nil {
		return err
	}
	// Creates get exactly the mode the kernel sends.
	syscall.Umask(0)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	uring := transport == "uring"
	var was bool
	if uring && enable {
		if was, err = setEnableURing(true); err != nil {
			return fmt.Errorf("enable_uring: %w", err)
		}
	}
	var m spikeMount
	if serverKind == "gofuse" {
		var gm *goMounted
		if gm, err = mountGoFuse(backing, mp, uring); gm != nil {
			m = gm
		}
	} else {
		var sm *mounted
		if sm, err = mount(backing, mp, uring, readers); sm != nil {
			m = sm
		}
	}
	if uring && enable {
		// The connection keeps io_uring once its queues registered.
		if rerr := restoreEnableURing(was); rerr != nil && err == nil {
			err = rerr
		}
	}
	if err != nil {
		if m != nil {
			err = errors.Join(err, m.unmount())
		}
		return err
	}
	fmt.Printf("ready %s\n", m.agreed())
	select {
	case <-sig:
	case <-m.finished():
	}
	err = m.unmount()
	fmt.Fprintln(os.Stderr, m.summary())
	return err
}

// summary is the requests served, by opcode, and their total.
func (s *server) summary() string {
	var parts []string
	total := uint64(0)
	for op := range s.counts {
		if n := s.counts[op].Load(); n > 0 {
			name := opNames[uint32(op)]
			if name == "" {
				name = fmt.Sprint("op", op)
			}
			parts = append(parts, fmt.Sprintf("%s=%d", name, n))
			total += n
		}
	}
	sort.Strings(parts)
	return fmt.Sprintf("requests: total=%d io_uring=%d %s", total, s.onRing.total.Load(), strings.Join(parts, " "))
}
