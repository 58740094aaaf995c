package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestForkIntoAnotherUsersDirectoryWritesNowhereElse: issue 14, defect 5.
// Root forks into a directory whose parent is nobody's; nobody keeps
// renaming the new directory away and putting a symlink to a root-only
// directory in its place. On 10f7db6 the fork wrote its files and .zero/
// into the root-only directory and chmodded it 0755. Now the fork writes
// beneath the directory it made, whatever the name points to, or fails;
// the root-only directory never changes.
func TestForkIntoAnotherUsersDirectoryWritesNowhereElse(t *testing.T) {
	ws := sharedWS(t)
	for i := range 1000 {
		d := filepath.Join(ws, fmt.Sprintf("d%02d", i%30))
		os.MkdirAll(d, 0o755)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mountWS(t, ws, "--allow-other")
	seq := step(t, ws, "fork me")
	top := filepath.Dir(ws)
	nb := filepath.Join(top, "nbparent")
	rootOnly := filepath.Join(top, "rootonly")
	if err := os.Mkdir(nb, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(nb, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(rootOnly, 0o700); err != nil {
		t.Fatal(err)
	}
	swapped := 0
	for round := range 3 {
		target := filepath.Join(nb, fmt.Sprintf("fork%d", round))
		// The swap nobody may make, made as fast as it can be: an
		// inotify watch on the parent sees the fork's new directory
		// appear and at once renames it away and puts a symlink to the
		// root-only directory in its place (in this process, so that it
		// wins the race against the fork's next call; a shell loop as
		// nobody mostly loses it, and the old fork then failed with
		// ENOENT instead of writing into the root-only directory).
		stop := swapOnCreate(t, nb, filepath.Base(target), rootOnly)
		out, err := zerofs(t, ws, "fork", itoa(seq), target)
		stop()
		t.Logf("round %d: fork: %v %s", round, err, out)
		if m, _ := filepath.Glob(filepath.Join(nb, "m.*")); len(m) > swapped {
			swapped = len(m)
		}
		ents, rerr := os.ReadDir(rootOnly)
		fi, serr := os.Stat(rootOnly)
		if rerr != nil || serr != nil || len(ents) != 0 || fi.Mode().Perm() != 0o700 {
			names := []string{}
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Fatalf("round %d: the root-only directory changed: %d entries %v, mode %v (%v %v)", round, len(ents), names[:min(5, len(names))], fi.Mode(), rerr, serr)
		}
	}
	if swapped == 0 {
		t.Errorf("nobody never managed to swap the new directory: the race was not tried")
	}
}

// swapOnCreate watches dir; when name is created in it (once), it renames
// it to m.<n> and puts a symlink to link in its place. stop ends the watch.
func swapOnCreate(t *testing.T, dir, name, link string) (stop func()) {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		buf := make([]byte, 4096)
		for n := 0; ; {
			select {
			case <-done:
				return
			default:
			}
			k, err := unix.Read(fd, buf)
			if err != nil || k <= 0 {
				time.Sleep(100 * time.Microsecond) // a non-blocking inotify read: pace it
				continue
			}
			for off := 0; off+unix.SizeofInotifyEvent <= k; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				nb := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				if i := bytes.IndexByte(nb, 0); i >= 0 {
					nb = nb[:i]
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
				if string(nb) == name && n == 0 {
					p := filepath.Join(dir, name)
					if os.Rename(p, filepath.Join(dir, fmt.Sprintf("m.%d", n))) == nil && os.Symlink(link, p) == nil {
						n++
					}
				}
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		unix.Close(fd)
	}
}
