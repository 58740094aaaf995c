package history

import (
	"os"
	"testing"

	"github.com/zerofs/zerofs/rewind"
)

// TestCaptureMode: a store on the workspace's filesystem links removed
// files; one on a tmpfs copies them, and says why.
func TestCaptureMode(t *testing.T) {
	ws := t.TempDir()
	if got := captureMode(ws, t.TempDir()); got != rewind.CaptureLink {
		t.Errorf("same filesystem: %q, want %q", got, rewind.CaptureLink)
	}
	shm, err := os.MkdirTemp("/dev/shm", "zerofs-store")
	if err != nil {
		t.Skipf("no /dev/shm tmpfs: %v", err)
	}
	defer os.RemoveAll(shm)
	if got, want := captureMode(ws, shm), "copy: "+rewind.CopyOtherFS; got != want {
		t.Errorf("store on a tmpfs: %q, want %q", got, want)
	}
}
