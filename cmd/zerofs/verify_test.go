package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/record"
)

// blobsOf lists the blobs the store's checkpoints name, with a path each.
func blobsOf(t *testing.T, ws string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for ev, err := range eventlog.ReadFile(filepath.Join(ws, ".zero", "events.jsonl"), 1) {
		if err != nil {
			t.Fatal(err)
		}
		var cp record.Checkpoint
		if ev.Type == record.TypeCheckpoint && json.Unmarshal(ev.Payload, &cp) == nil {
			for _, f := range cp.Files {
				if f.Blob != "" {
					out[f.Blob] = f.Path
				}
			}
		}
	}
	return out
}

// flipStored flips a byte of what stores blob id: at offset at from the
// start of its stored bytes (negative: into the record's header before
// them); with rescan it drops the pack indexes, so that the next open scans
// the packs (and finds the damage there).
func flipStored(t *testing.T, ws, id string, at int64, rescan bool) {
	t.Helper()
	dir := filepath.Join(ws, ".zero", "blobs")
	bs, err := blobstore.Open(dir, blobstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	path, off, _, err := bs.Locate(blobstore.MustParseID(id))
	bs.Close()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	f.ReadAt(b, off+at)
	b[0] ^= 0x20
	if _, err := f.WriteAt(b, off+at); err != nil {
		t.Fatal(err)
	}
	if !rescan {
		return
	}
	idx, _ := filepath.Glob(filepath.Join(dir, "packs", "*.idx"))
	for _, p := range idx {
		os.Remove(p)
	}
}

func TestVerify(t *testing.T) {
	// Which blob is which: the before-states of a.txt and gone.txt.
	idOf := func(content string) string { return blobstore.Sum([]byte(content)).String() }
	aBefore := idOf("alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta\ntheta\n")
	goneBefore := idOf("bye\n")
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, ws string)
		want   []string // one line each in stdout
	}{
		{"healthy", func(*testing.T, string) {}, nil},
		{"flipped byte", func(t *testing.T, ws string) {
			flipStored(t, ws, aBefore, 3, false)
		}, []string{"corrupt blob " + aBefore + " (a.txt at sequence "}},
		{"missing blob", func(t *testing.T, ws string) {
			flipStored(t, ws, goneBefore, -20, true) // its header: the record is lost
		}, []string{"missing blob " + goneBefore + " (gone.txt at sequence ", "damaged pack: pack "}},
		{"torn tail", func(t *testing.T, ws string) {
			f, err := os.OpenFile(filepath.Join(ws, ".zero", "events.jsonl"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(`{"id":"x","sequence":`)
			f.Close()
		}, []string{"torn tail of 21 bytes at end of log "}},
		{"damaged line", func(t *testing.T, ws string) {
			p := filepath.Join(ws, ".zero", "events.jsonl")
			b, _ := os.ReadFile(p)
			b[0] = '#'
			os.WriteFile(p, b, 0o600)
		}, []string{"eventlog: corrupt log ", "line 1 (byte 0)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := buildHistory(t)
			if blobsOf(t, s.ws)[aBefore] != "a.txt" {
				t.Fatalf("the store does not hold a.txt's before-state as %s", aBefore)
			}
			tc.damage(t, s.ws)
			r := zerofs(t, s.ws, "", "verify")
			if tc.want == nil {
				if r.code != 0 || !strings.HasPrefix(r.stdout, "ok: ") {
					t.Fatalf("verify: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
				}
				return
			}
			if r.code != 1 || !strings.HasPrefix(r.stderr, "zerofs: verify: ") {
				t.Fatalf("verify: exit %d, stderr %q, want 1", r.code, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("verify said %q, want %q", r.stdout, w)
				}
			}
		})
	}
}
