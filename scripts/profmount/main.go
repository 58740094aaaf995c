// Command profmount mounts a workspace as `zerofs mount -f` does and writes
// a CPU profile (pprof) of the daemon from mount to unmount (SIGINT or
// SIGTERM). scripts/bench.sh profile runs workloads under it.
//
//	profmount -profile cpu.out [-block block.out] [-mutex mutex.out] [-no-passthrough] [-sync] [-debug] WORKSPACE MOUNTPOINT
//
// -block and -mutex also write the daemon's blocking and mutex-contention
// profiles (every event recorded), for finding what a request waits for.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"

	"github.com/zerofs/zerofs/fs"
)

func main() {
	profile := flag.String("profile", "cpu.out", "where to write the CPU profile")
	noPassthrough := flag.Bool("no-passthrough", false, "never use FUSE passthrough")
	sync := flag.Bool("sync", false, "--sync always")
	debug := flag.Bool("debug", false, "trace every FUSE request on stderr (go-fuse's debug log)")
	block := flag.String("block", "", "also write a blocking profile here")
	mutex := flag.String("mutex", "", "also write a mutex-contention profile here")
	flag.Parse()
	if *block != "" {
		runtime.SetBlockProfileRate(1)
	}
	if *mutex != "" {
		runtime.SetMutexProfileFraction(1)
	}
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: profmount [flags] WORKSPACE MOUNTPOINT")
		os.Exit(2)
	}
	err := run(*profile, flag.Arg(0), flag.Arg(1), *noPassthrough, *sync, *debug)
	for _, p := range [][2]string{{"block", *block}, {"mutex", *mutex}} {
		if p[1] == "" {
			continue
		}
		if werr := writeProfile(p[0], p[1]); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "profmount:", err)
		os.Exit(1)
	}
}

func run(profile, ws, mp string, noPassthrough, sync, debug bool) error {
	out, err := os.Create(profile)
	if err != nil {
		return err
	}
	defer out.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := fs.Mount(context.Background(), fs.Options{
		Workspace: ws, Mountpoint: mp, Sync: sync, NoPassthrough: noPassthrough, Logger: logger, Debug: debug,
		SelfOpens: true,
	})
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		m.Unmount()
		return err
	}
	fmt.Printf("ready passthrough=%v\n", m.Passthrough())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-sig:
	case <-waitDone(m):
	}
	pprof.StopCPUProfile()
	return m.Unmount()
}

// writeProfile writes the runtime's profile name to path.
func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func waitDone(m *fs.Mounted) <-chan struct{} {
	c := make(chan struct{})
	go func() { m.Wait(); close(c) }()
	return c
}
