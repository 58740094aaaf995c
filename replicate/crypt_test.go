package replicate

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zerofs/zerofs/rewind"
)

// TestReplicaKey: with a key the bucket holds no plaintext (contents,
// paths, labels) and no object name holds a content's sha256; a restore
// without the key or with another fails clearly; with it the state comes
// back equal to @T; a tampered object is refused; the store cannot go on
// without its key.
func TestReplicaKey(t *testing.T) {
	srv := startS3(t)
	dir := t.TempDir()
	const secret = "TOP-SECRET-CONTENT-4711"
	os.WriteFile(filepath.Join(dir, "secret-path-name.txt"), []byte(secret+" old\n"), 0o644)
	w := openWorkspace(t, dir)
	defer w.close()
	ctx := context.Background()
	w.eng.BeginStep(ctx, "secret-step-label", nil)
	newContent := []byte(secret + " new\n")
	release, _, err := w.eng.Begin(ctx, rewind.Caller{PID: 1, Comm: "test"}, rewind.Change{Path: "secret-path-name.txt"})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "secret-path-name.txt"), newContent, 0o644)
	release()
	w.eng.BeginStep(ctx, "after", nil)

	key := bytes.Repeat([]byte{7}, 32)
	u := URL{Bucket: "replicas", Prefix: "sealed"}
	r := replicator(t, w, u, Options{Key: key, BaseEvery: time.Nanosecond})
	if err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	hashes := []string{hashHex([]byte(secret + " old\n")), hashHex(newContent)}
	objects := 0
	filepath.Walk(filepath.Join(srv.Root, "replicas", "sealed"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		objects++
		data, _ := os.ReadFile(p)
		for _, leak := range []string{secret, "secret-path-name", "secret-step-label"} {
			if bytes.Contains(data, []byte(leak)) || strings.Contains(p, leak) {
				t.Errorf("object %s holds %q", p, leak)
			}
		}
		for _, h := range hashes {
			if strings.Contains(p, h) || bytes.Contains(data, []byte(h)) {
				t.Errorf("object %s reveals the content hash %s", p, h[:12])
			}
		}
		return nil
	})
	if objects < 4 {
		t.Fatalf("only %d objects in the replica", objects)
	}

	b, _ := OpenS3(ctx, u)
	restore := func(k []byte) (string, error) {
		d := filepath.Join(t.TempDir(), "r")
		_, err := Restore(ctx, b, u, d, RestoreOptions{Key: k, Logger: quiet})
		return d, err
	}
	if _, err := restore(nil); !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), "--replica-key") {
		t.Errorf("restore without the key: %v, want ErrKey asking for it", err)
	}
	if _, err := restore(bytes.Repeat([]byte{8}, 32)); !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), "another replica key") {
		t.Errorf("restore with another key: %v, want ErrKey", err)
	}
	got, err := restore(key)
	if err != nil {
		t.Fatal(err)
	}
	sameTree(t, "restore with the key", treeOf(t, got), stateAt(t, w.eng, w.eng.Step().Seq))

	// The same store without its key is refused.
	r.Close()
	r2 := replicator(t, w, u, Options{})
	if err := r2.Once(ctx); !errors.Is(err, ErrKey) {
		t.Errorf("replicating on without the key: %v, want ErrKey", err)
	}
	r2.Close()

	// One byte of one blob changed on the server: refused, naming it.
	blobs, _ := filepath.Glob(filepath.Join(srv.Root, "replicas", "sealed", "blobs", "*"))
	if len(blobs) == 0 {
		t.Fatal("no blob objects")
	}
	for _, p := range blobs {
		data, _ := os.ReadFile(p)
		data[len(data)-1] ^= 1
		os.WriteFile(p, data, 0o644)
	}
	var de *DamageError
	if _, err := restore(key); !errors.As(err, &de) || !strings.Contains(err.Error(), "does not authenticate") {
		t.Errorf("restore of a tampered replica: %v, want a *DamageError", err)
	}
}
