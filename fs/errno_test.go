package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A store errno (EACCES creating a blob's temporary file) reached the
// user's write(2) as that errno: the caller's own file was never refused.
// Only a backing-filesystem errno about the workspace reaches the caller
// as itself; a store failure is EIO (STYLE rule 6), a full disk ENOSPC.
func TestEngineErrnoStoreFailureIsEIO(t *testing.T) {
	storeFile := &os.PathError{Op: "open", Path: "/proc/self/fd/9/blobs/tmp/.tmp-blob-0123456789abcdef", Err: syscall.EACCES}
	wsFile := &os.PathError{Op: "read", Path: "src/a.go", Err: syscall.EACCES}
	for _, tc := range []struct {
		name string
		err  error
		want syscall.Errno
	}{
		{"EACCES on a store file", fmt.Errorf("rewind: capture %q: blobstore: put: %w", "a", storeFile), syscall.EIO},
		{"rename in the store", fmt.Errorf("durable: %w", &os.LinkError{Op: "rename", Old: "/s/blobs/tmp/x", New: "/s/blobs/ab/x", Err: syscall.EXDEV}), syscall.EIO},
		{"ENOSPC on a store file", fmt.Errorf("x: %w", &os.PathError{Op: "write", Path: "/s/events.jsonl", Err: syscall.ENOSPC}), syscall.ENOSPC},
		{"EACCES on a workspace file", fmt.Errorf("rewind: capture %q: %w", "src/a.go", wsFile), syscall.EACCES},
		{"bare workspace errno", fmt.Errorf("rewind: capture %q: %w", "a", syscall.ENAMETOOLONG), syscall.ENAMETOOLONG},
		{"no errno", errors.New("something"), syscall.EIO},
	} {
		if got := engineErrno(testLogger(), "test", "a", tc.err, seqInvalid); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The same on a real mount: the store's pack cannot grow (EFBIG on every
// append to it), and the user's open(2) for writing, and write(2) to a file
// opened before, fail with EIO, not EFBIG; nothing changes in the
// workspace.
func TestStoreErrnoReachesUserAsEIO(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "f"), "before")
	writeFile(t, filepath.Join(ws, "g"), "before")
	// Without passthrough, the write reaches the daemon, which captures g
	// for the new step and fails. (With passthrough the step boundary
	// itself captures g, before the store is broken, and the write is
	// then free to proceed: TestPassthroughHeldWriterAcrossStep.)
	m := mountT(t, Options{Workspace: ws, Sync: true, NoPassthrough: true})
	mp := m.Mountpoint()
	held, err := os.OpenFile(filepath.Join(mp, "g"), os.O_WRONLY, 0) // captured in this step
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if m.fs.noOpen {
		// Without OPEN the open captured nothing: a chmod to the same
		// mode does (the write below is what must fail).
		if err := os.Chmod(filepath.Join(mp, "g"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stepT(t, mp, "next")

	// No file of the process may grow beyond the store's pack as it is
	// now (RLIMIT_FSIZE: writes past it fail with EFBIG; Go ignores
	// SIGXFSZ), so the next before-state cannot be appended to it.
	packs, _ := filepath.Glob(filepath.Join(ws, ".zero", "blobs", "packs", "*.pack"))
	if len(packs) != 1 {
		t.Fatalf("got packs %v, want one", packs)
	}
	fi, err := os.Stat(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := unix.Rlimit{Cur: uint64(fi.Size()), Max: old.Max}
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_FSIZE, &old) })

	_, err = os.OpenFile(filepath.Join(mp, "f"), os.O_WRONLY|os.O_TRUNC, 0)
	wantErrno(t, "open(O_TRUNC) when the store cannot take the before-state", err, syscall.EIO)
	_, err = held.Write([]byte("after"))
	wantErrno(t, "write(2) when the store cannot take the before-state", err, syscall.EIO)
	for _, n := range []string{"f", "g"} {
		if got := readFile(t, filepath.Join(ws, n)); got != "before" {
			t.Errorf("%s = %q, want it unchanged", n, got)
		}
	}
}
