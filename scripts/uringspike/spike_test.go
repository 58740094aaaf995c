package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/testsupport"
	"golang.org/x/sys/unix"
)

// TestSpikeServesBothTransports mounts the spike over a backing directory,
// its own server over each transport and go-fuse's loopback over io_uring,
// and checks through the mount and in the backing directory what a
// workload does: creates, writes (one larger than a request), reads back,
// renames of a file and of a directory, truncates, lists and removes. Over
// io_uring it checks that the kernel agreed to the transport and that the
// requests came through the rings, not /dev/fuse. It skips an io_uring
// case only where the kernel has no FUSE over io_uring (enable_uring
// cannot be set, or registration is refused with EOPNOTSUPP); it always
// unmounts and puts enable_uring back.
func TestSpikeServesBothTransports(t *testing.T) {
	testsupport.RequireFUSE(t)
	for _, tc := range []struct{ server, transport string }{
		{"spike", "classic"}, {"spike", "uring"}, {"gofuse", "uring"},
	} {
		t.Run(tc.server+"/"+tc.transport, func(t *testing.T) {
			uring := tc.transport == "uring"
			backing, mp := t.TempDir(), t.TempDir()
			sm, gm := mountT(t, tc.server, backing, mp, uring)
			exercise(t, mp, backing)
			if gm != nil {
				if n := gm.onRing.total.Load(); n < 50 {
					t.Errorf("go-fuse requests over io_uring: got %d, want the workload's (50 or more)", n)
				}
				return
			}
			total, onRing := uint64(0), sm.srv.onRing.total.Load()
			for i := range sm.srv.counts {
				total += sm.srv.counts[i].Load()
			}
			// Only INIT, FORGET and INTERRUPT come through /dev/fuse
			// once the rings are up.
			notRing := sm.srv.counts[opInit].Load() + sm.srv.counts[opForget].Load() + sm.srv.counts[opBatchForget].Load() + sm.srv.counts[opInterrupt].Load()
			if uring && onRing != total-notRing {
				t.Errorf("requests over io_uring: got %d, want %d of %d (%s)", onRing, total-notRing, total, sm.srv.summary())
			}
			if !uring && onRing != 0 {
				t.Errorf("requests over io_uring on the classic transport: got %d, want 0", onRing)
			}
		})
	}
}

// mountT mounts server ("spike" or "gofuse") over backing at mp, over
// io_uring if uring, and unmounts it when t ends. It skips t only where
// the kernel has no FUSE over io_uring (enable_uring cannot be set, or
// registration is refused with EOPNOTSUPP), and fails it if the kernel
// does not agree to the transport asked for. enable_uring is the whole
// machine's: it is Y only while the queues register (a connection keeps
// io_uring once they have), and is put back also if t fails before that.
func mountT(t *testing.T, server, backing, mp string, uring bool) (*mounted, *goMounted) {
	t.Helper()
	restore := func() {}
	if uring {
		was, err := setEnableURing(true)
		if err != nil {
			t.Skipf("kernel has no FUSE over io_uring here: cannot set enable_uring: %v", err)
		}
		var once sync.Once
		restore = func() {
			once.Do(func() {
				if err := restoreEnableURing(was); err != nil {
					t.Errorf("restore enable_uring: %v", err)
				}
			})
		}
		t.Cleanup(restore)
	}
	var m spikeMount
	var sm *mounted
	var gm *goMounted
	var err error
	if server == "gofuse" {
		if gm, err = mountGoFuse(backing, mp, uring); gm != nil {
			m = gm
		}
	} else if sm, err = mount(backing, mp, uring, 2); sm != nil {
		m = sm
	}
	restore()
	if m != nil {
		t.Cleanup(func() { testsupport.Unmount(t, mp, 10*time.Second, m.unmount) })
	}
	if err != nil {
		if m != nil && errors.Is(err, syscall.EOPNOTSUPP) {
			t.Skipf("kernel has no FUSE over io_uring here: %v", err)
		}
		t.Fatalf("mount: %v", err)
	}
	want := "classic"
	if uring {
		want = "uring"
	}
	if m.agreed() != want {
		t.Fatalf("transport: got %s, want %s", m.agreed(), want)
	}
	return sm, gm
}

// TestURingServesOnTheCallersCPU checks what the io_uring transport is
// for: a request goes to the queue of the CPU that made it, whose thread
// is pinned to that CPU. From a thread pinned to each CPU in turn it
// creates, stats and removes files in the spike's mount, and wants at
// least 90% of the requests that burst caused on that CPU's queue (the
// kernel may send one from a worker of its own elsewhere).
func TestURingServesOnTheCallersCPU(t *testing.T) {
	testsupport.RequireFUSE(t)
	cpus, err := possibleCPUs()
	if err != nil {
		t.Fatal(err)
	}
	backing, mp := t.TempDir(), t.TempDir()
	sm, _ := mountT(t, "spike", backing, mp, true)
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	for cpu := range cpus {
		if !allowed.IsSet(cpu) {
			continue
		}
		var before [64]uint64
		for q := range before {
			before[q] = sm.srv.onRing.byQueue[q].Load()
		}
		errc := make(chan error, 1)
		go func() {
			// The thread stays locked and is discarded with this
			// goroutine: its affinity must not leak.
			runtime.LockOSThread()
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				errc <- err
				return
			}
			for i := range 20 {
				p := filepath.Join(mp, fmt.Sprintf("cpu%d-%d", cpu, i))
				fd, err := unix.Open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
				if err == nil {
					_, err = unix.Write(fd, []byte("x"))
					unix.Close(fd)
				}
				var st unix.Stat_t
				if err == nil {
					err = unix.Stat(p, &st)
				}
				if err == nil {
					err = unix.Unlink(p)
				}
				if err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
		if err := <-errc; err != nil {
			t.Fatalf("files from CPU %d: %v", cpu, err)
		}
		var mine, all uint64
		for q := range before {
			d := sm.srv.onRing.byQueue[q].Load() - before[q]
			all += d
			if q == cpu {
				mine = d
			}
		}
		t.Logf("CPU %d: %d of %d requests on its queue", cpu, mine, all)
		if all < 100 || mine*10 < all*9 {
			t.Errorf("requests made on CPU %d: %d of %d served by its queue, want at least 90%% of 100 or more", cpu, mine, all)
		}
	}
}

// exercise runs the workload through mp and checks backing after each step.
func exercise(t *testing.T, mp, backing string) {
	t.Helper()
	names := []string{"a.txt", "b.txt", "c.txt"}
	for i, n := range names {
		if err := os.WriteFile(filepath.Join(mp, n), bytes.Repeat([]byte{byte('a' + i)}, 100*(i+1)), 0o644); err != nil {
			t.Fatalf("create %s: %v", n, err)
		}
	}
	// Larger than one 1 MiB request, at an odd size: several WRITEs and READs.
	big := make([]byte, 3<<20+12345)
	for i := range big {
		big[i] = byte(i * 7)
	}
	if err := os.MkdirAll(filepath.Join(mp, "dir/sub"), 0o755); err != nil {
		t.Fatalf("mkdir: %v", err)
	}
	if err := os.WriteFile(filepath.Join(mp, "dir/sub/big"), big, 0o600); err != nil {
		t.Fatalf("write big: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(mp, "dir/sub/big"))
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read big back through the mount: %d bytes, err %v; want the %d written", len(got), err, len(big))
	}
	if got, err := os.ReadFile(filepath.Join(backing, "dir/sub/big")); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("big in the backing directory: %d bytes, err %v; want the %d written", len(got), err, len(big))
	}
	for i, n := range names {
		want := bytes.Repeat([]byte{byte('a' + i)}, 100*(i+1))
		if got, err := os.ReadFile(filepath.Join(mp, n)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("read %s: got %q, err %v", n, got, err)
		}
		if fi, err := os.Stat(filepath.Join(backing, n)); err != nil || fi.Size() != int64(len(want)) || fi.Mode().Perm() != 0o644 {
			t.Errorf("backing %s: %v, err %v; want %d bytes, mode 0644", n, fi, err, len(want))
		}
	}

	// Renames: a file over another, and a directory with files in it.
	if err := os.Rename(filepath.Join(mp, "a.txt"), filepath.Join(mp, "b.txt")); err != nil {
		t.Fatalf("rename a.txt over b.txt: %v", err)
	}
	if err := os.Rename(filepath.Join(mp, "dir"), filepath.Join(mp, "moved")); err != nil {
		t.Fatalf("rename dir: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(mp, "b.txt")); err != nil || !bytes.Equal(got, bytes.Repeat([]byte{'a'}, 100)) {
		t.Errorf("b.txt after the rename: got %d bytes, err %v; want a.txt's 100", len(got), err)
	}
	if got, err := os.ReadFile(filepath.Join(mp, "moved/sub/big")); err != nil || !bytes.Equal(got, big) {
		t.Errorf("moved/sub/big through the mount: %d bytes, err %v", len(got), err)
	}
	if _, err := os.Stat(filepath.Join(backing, "dir")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("backing dir after its rename: err %v, want not exist", err)
	}
	// A file written after the rename lands under the new name.
	if err := os.WriteFile(filepath.Join(mp, "moved/sub/new"), []byte("after"), 0o644); err != nil {
		t.Fatalf("write under the renamed directory: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(backing, "moved/sub/new")); err != nil || string(got) != "after" {
		t.Errorf("backing moved/sub/new: %q, err %v", got, err)
	}

	// Truncate and chmod (SETATTR), then list.
	if err := os.Truncate(filepath.Join(mp, "c.txt"), 10); err != nil {
		t.Fatalf("truncate: %v", err)
	}
	if err := os.Chmod(filepath.Join(mp, "c.txt"), 0o600); err != nil {
		t.Fatalf("chmod: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(backing, "c.txt")); err != nil || fi.Size() != 10 || fi.Mode().Perm() != 0o600 {
		t.Errorf("backing c.txt after truncate and chmod: %v, err %v", fi, err)
	}
	if got, want := list(t, mp), []string{"b.txt", "c.txt", "moved"}; !slices.Equal(got, want) {
		t.Errorf("listing: got %v, want %v", got, want)
	}

	// Remove everything through the mount.
	if err := os.RemoveAll(filepath.Join(mp, "moved")); err != nil {
		t.Fatalf("rm -rf moved: %v", err)
	}
	for _, n := range []string{"b.txt", "c.txt"} {
		if err := os.Remove(filepath.Join(mp, n)); err != nil {
			t.Fatalf("remove %s: %v", n, err)
		}
	}
	if got := list(t, backing); len(got) != 0 {
		t.Errorf("backing directory after removing everything: %v, want empty", got)
	}
	if _, err := os.Stat(filepath.Join(mp, "b.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat a removed file: err %v, want not exist", err)
	}
}

func list(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("readdir %s: %v", dir, err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}
