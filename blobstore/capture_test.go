package blobstore

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCaptureChooses: Capture takes the first strategy its options allow
// and the file accepts, says which (and which it passed over), and the
// content it names reads back or names to the file's; with a nil *os.File
// it closes the descriptor it was given.
func TestCaptureChooses(t *testing.T) {
	small := randBytes(31, 100<<10)
	never := func(_, _ uint64) bool { return false }
	always := func(_, _ uint64) bool { return true }
	for _, sync := range []bool{false, true} {
		for _, tc := range []struct {
			name       string
			opts       CaptureOptions
			extraLink  bool
			bare       bool // hand Capture the bare descriptor
			want       Strategy
			wantPassed []Strategy
		}{
			{name: "unlink stashes", opts: CaptureOptions{Removed: true, Stash: true, Writing: never}, want: Stashed},
			{name: "unlink stashes bare", opts: CaptureOptions{Removed: true, Stash: true, Writing: never}, bare: true, want: Stashed},
			{name: "removal keeps", opts: CaptureOptions{Removed: true, Writing: never}, want: Kept},
			{name: "open for writing is copied", opts: CaptureOptions{Removed: true, Stash: true, Writing: always}, bare: true, want: Packed, wantPassed: []Strategy{Stashed, Kept, Cloned}},
			{name: "another link is copied", opts: CaptureOptions{Removed: true, Writing: never}, extraLink: true, want: Packed, wantPassed: []Strategy{Kept, Cloned}},
			{name: "a write is copied", opts: CaptureOptions{Writing: never}, want: Packed, wantPassed: []Strategy{Cloned}},
			{name: "a small dense file is no sparse copy", opts: CaptureOptions{Sparse: true}, want: Packed, wantPassed: []Strategy{SparseCopied, Cloned}},
		} {
			t.Run(map[bool]string{false: "batch/", true: "always/"}[sync]+tc.name, func(t *testing.T) {
				base := t.TempDir()
				s, err := Open(filepath.Join(base, "blobs"), Options{Sync: sync})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				f := wsFile(t, filepath.Join(base, "ws"), small)
				if tc.extraLink {
					if err := os.Link(f.Name(), f.Name()+".2"); err != nil {
						t.Fatal(err)
					}
				}
				var c Captured
				if tc.bare {
					fd, err := unix.Dup(int(f.Fd()))
					if err != nil {
						t.Fatal(err)
					}
					c, err = s.Capture(fd, nil, tc.opts)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
						t.Errorf("descriptor %d after Capture: %v, want EBADF (Capture owns a bare descriptor)", fd, err)
					}
				} else {
					c, err = s.Capture(int(f.Fd()), f, tc.opts)
					if err != nil {
						t.Fatal(err)
					}
				}
				f.Close()
				if c.Strategy != tc.want || !slices.Equal(c.Passed, tc.wantPassed) || c.Why == "" {
					t.Fatalf("Capture: %v (passed %v, why %q), want %v (passed %v) with a reason", c.Strategy, c.Passed, c.Why, tc.want, tc.wantPassed)
				}
				if c.Bytes != int64(len(small)) {
					t.Errorf("Capture: %d bytes, want %d", c.Bytes, len(small))
				}
				id := c.ID
				switch c.Strategy {
				case Stashed, SparseCopied:
					if c.Stash == "" || !c.ID.IsZero() {
						t.Fatalf("a stash: name %q, id %v; want a name and no id", c.Stash, c.ID)
					}
					if id, _, err = s.Name(c.Stash); err != nil {
						t.Fatal(err)
					}
				default:
					if c.Stash != "" {
						t.Fatalf("a blob with a stash name %q", c.Stash)
					}
				}
				if id != Sum(small) {
					t.Fatalf("Capture stored %s, want %s", id.Short(), Sum(small).Short())
				}
				if err := s.Sync(); err != nil {
					t.Fatal(err)
				}
				got, err := s.Get(id)
				if err != nil || string(got) != string(small) {
					t.Fatalf("Get: %d bytes, %v; want the file's %d", len(got), err, len(small))
				}
			})
		}
	}
}

// TestCaptureSparse: a large file mostly holes, with Sparse, is a sparse
// copy; without it, it is not.
func TestCaptureSparse(t *testing.T) {
	const size = 256 << 20
	dir := filepath.Join(t.TempDir(), "blobs")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, _ := sparseFileT(t, size, 0, size-4096)
	c, err := s.Capture(int(f.Fd()), f, CaptureOptions{Sparse: true})
	if err != nil || c.Strategy != SparseCopied || c.Stash == "" || c.Bytes != size || len(c.Passed) != 0 {
		t.Fatalf("Capture: %+v, %v; want a sparse copy of %d bytes, nothing passed", c, err, size)
	}
}
