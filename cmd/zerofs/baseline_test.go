package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOldStoreRefused: a store older than the store-format baseline (blobs
// one file each from before packs, rewind/testdata/legacy; a session_rewind
// with no form) is refused by log, verify and mount alike with one line
// that says why, exit 1, and nothing in the store changes. A store made
// now (the baseline) is read.
func TestOldStoreRefused(t *testing.T) {
	legacy := func(t *testing.T, ws string) {
		out, err := exec.Command("cp", "-a", filepath.Join("..", "..", "rewind", "testdata", "legacy", "store"), filepath.Join(ws, ".zero")).CombinedOutput()
		if err != nil {
			t.Fatalf("copy testdata: %v: %s", err, out)
		}
	}
	formless := func(t *testing.T, ws string) {
		store := filepath.Join(ws, ".zero")
		if err := os.Mkdir(store, 0o700); err != nil {
			t.Fatal(err)
		}
		log := `{"id":"00000000-0000-4000-8000-000000000001","sessionId":"00000000-0000-4000-8000-00000000000a","sequence":1,"type":"tool_call","createdAt":"2026-12-03T10:00:00.000000000Z","payload":{"name":"one"}}
{"id":"00000000-0000-4000-8000-000000000002","sessionId":"00000000-0000-4000-8000-00000000000a","sequence":2,"type":"session_rewind","createdAt":"2026-12-03T10:00:01.000000000Z","payload":{"targetSequence":1,"report":{"restored":0,"deleted":0,"skipped":[]}}}
`
		if err := os.WriteFile(filepath.Join(store, "events.jsonl"), []byte(log), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		make func(t *testing.T, ws string)
		want string
	}{
		{"blobs before packs", legacy, "blobstore: blobs in the layout from before packs"},
		{"a rewind without its form", formless, `line 2 (sequence 2): a session_rewind with no "form"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := filepath.Join(t.TempDir(), "ws")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.make(t, ws)
			filepath.Walk(filepath.Join(ws, ".zero"), func(p string, fi os.FileInfo, err error) error {
				if err == nil && fi.IsDir() {
					return os.Chmod(p, 0o700)
				}
				if err == nil {
					return os.Chmod(p, 0o600)
				}
				return err
			})
			logBefore, err := os.ReadFile(filepath.Join(ws, ".zero", "events.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"log"}, {"verify"}} {
				// log refuses in its one line; verify lists it as a
				// finding on stdout.
				r := zerofs(t, ws, "", args...)
				said := r.stderr + r.stdout
				if r.code != 1 || !strings.HasPrefix(r.stderr, "zerofs: ") || !strings.Contains(said, tc.want) || !strings.Contains(said, "older than the store format this version reads") {
					t.Errorf("zerofs %s: exit %d, stdout %q, stderr %q; want exit 1 saying %q and why", args[0], r.code, r.stdout, r.stderr, tc.want)
				}
			}
			t.Run("mount", func(t *testing.T) {
				built.NeedFUSE(t)
				t.Cleanup(func() { unmountT(t, ws) })
				r := bin(t, "/", "", "mount", ws)
				if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
					t.Errorf("zerofs mount: exit %d, stderr %q; want exit 1 saying %q", r.code, r.stderr, tc.want)
				}
			})
			if logAfter, _ := os.ReadFile(filepath.Join(ws, ".zero", "events.jsonl")); !bytes.Equal(logAfter, logBefore) {
				t.Error("the refused store's log changed")
			}
		})
	}
	// The baseline: a store this version makes, with a rewind in it, is
	// read unmounted.
	t.Run("baseline", func(t *testing.T) {
		ws := mountedWS(t)
		binOK(t, ws, "step", "one")
		sh(t, ws, "echo one > a.txt")
		binOK(t, ws, "rewind", "1")
		binOK(t, "/", "umount", ws)
		if out := mustRun(t, ws, "log"); !strings.Contains(out, "rewind to 1") {
			t.Errorf("log of the baseline store:\n%s", out)
		}
		mustRun(t, ws, "verify")
	})
}
