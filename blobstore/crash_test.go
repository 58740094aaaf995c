package blobstore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/internal/testsupport"
)

// SIGKILL crash tests. The child is this test binary re-executed
// (testsupport.StartChild) naming what to run; crash points are the put's own reader and durable.TestHook, so no build tag is
// needed and `go test ./...` runs them.

var children = map[string]func(dir string) int{
	"die-mid-temp":     childDieMidTemp,
	"die-after-append": childDieAfterAppend,
	"put-loop":         childPutLoop,
}

func TestMain(m *testing.M) {
	testsupport.RunChild(children)
	os.Exit(m.Run())
}

// runChild starts children[name] on the store in dir, its random choices
// seeded by seed.
func runChild(t *testing.T, name, dir string, seed uint64) *testsupport.Child {
	t.Helper()
	return testsupport.StartChild(t, name, dir, testsupport.ChildOptions{Seed: seed})
}

func die() { testsupport.Die() }

// dyingReader yields n bytes of data, then SIGKILLs the process: by then Put
// has written part of them to its temporary file.
type dyingReader struct {
	data []byte
	n    int
}

func (r *dyingReader) Read(p []byte) (int, error) {
	if r.n >= len(r.data)/2 {
		die()
	}
	k := copy(p, r.data[r.n:len(r.data)/2])
	r.n += k
	return k, nil
}

// crashContent is what the crash children put: 1 MiB, more than one copy
// buffer.
func crashContent() []byte { return randBytes(42, 1<<20) }

func childDieMidTemp(dir string) int {
	s, err := Open(dir, Options{Sync: true})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	s.Put(&dyingReader{data: crashContent()})
	fmt.Println("survived")
	return 1
}

func childDieAfterAppend(dir string) int {
	s, err := Open(dir, Options{Sync: true})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	durable.TestHook = func(point, path string) {
		if point == "pack:appended" {
			die()
		}
	}
	s.Put(bytes.NewReader(crashContent()))
	fmt.Println("survived")
	return 1
}

// checkAfterCrash opens the store as the next mount would and checks that
// every blob under a final name verifies and that CleanTemp empties tmp/.
// It returns the blobs and how many temporary files were left.
func checkAfterCrash(t *testing.T, dir string) ([]BlobInfo, int) {
	t.Helper()
	s, err := Open(dir, Options{Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	blobs := walkAll(t, s)
	for _, b := range blobs {
		if err := s.Verify(b.ID); err != nil {
			t.Errorf("a blob under its final name: %v", err)
		}
	}
	left := len(tmpFiles(t, s))
	if err := s.CleanTemp(); err != nil {
		t.Fatal(err)
	}
	if tmp := tmpFiles(t, s); len(tmp) != 0 {
		t.Errorf("got %v in tmp/ after CleanTemp, want nothing", tmp)
	}
	return blobs, left
}

func TestCrashMidPut(t *testing.T) {
	want := Sum(crashContent())
	tests := []struct {
		child    string
		wantBlob bool // the blob is under its name after the crash
		wantTemp bool // a temporary file is left
	}{
		// Killed after reading half the content.
		{"die-mid-temp", false, false},
		// Killed after appending the record, before its fdatasync.
		{"die-after-append", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.child, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "blobs")
			c := runChild(t, tt.child, dir, 0)
			testsupport.WaitKilled(t, c.Cmd)
			for line := range c.Lines {
				t.Errorf("child printed %q, want it dead", line)
			}
			blobs, left := checkAfterCrash(t, dir)
			if got := len(blobs) == 1 && blobs[0].ID == want; got != tt.wantBlob || len(blobs) > 1 {
				t.Errorf("got blobs %v, want the blob there: %v", blobs, tt.wantBlob)
			}
			if (left > 0) != tt.wantTemp {
				t.Errorf("got %d temporary files left, want some: %v", left, tt.wantTemp)
			}
			// The next Put of the same content completes.
			s, err := Open(dir, Options{Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			if id := putT(t, s, crashContent()); id != want {
				t.Errorf("got %s, want %s", id.Short(), want.Short())
			}
			if err := s.Verify(want); err != nil {
				t.Error(err)
			}
		})
	}
}

// childPutLoop puts blobs of random sizes until killed, printing "ack <id>"
// after each Put returns.
func childPutLoop(dir string) int {
	rand := testsupport.ChildRand()
	s, err := Open(dir, Options{Sync: rand.IntN(2) == 0})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	for {
		size := rand.IntN(64 << 10)
		if rand.IntN(8) == 0 {
			size = rand.IntN(8 << 20)
		}
		id, _, err := s.Put(bytes.NewReader(randBytes(rand.Uint64(), size)))
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("ack", id)
	}
}

// TestCrashLoop SIGKILLs a child putting blobs at random moments: after each
// round every acknowledged blob is there and verifies, no damaged blob is
// under a final name, and CleanTemp clears what the crash left.
func TestCrashLoop(t *testing.T) {
	rounds := 10
	if testing.Short() {
		rounds = 3
	}
	rnd := testsupport.Rand(t)
	dir := filepath.Join(t.TempDir(), "blobs")
	acked := map[ID]bool{}
	temps := 0
	for round := range rounds {
		c := runChild(t, "put-loop", dir, rnd.Uint64())
		lines := c.Lines
		// Wait for the first acknowledgement (a slow start under -race
		// must not end every round before any Put), then kill at a
		// random moment.
		var first []string
		select {
		case l, ok := <-lines:
			if ok {
				first = append(first, l)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: the child acknowledged nothing in 30 s", round)
		}
		time.Sleep(time.Duration(rnd.IntN(150)) * time.Millisecond) // real time: the kill's random moment
		c.Kill(t)
		all := func(yield func(string) bool) {
			for _, l := range first {
				if !yield(l) {
					return
				}
			}
			for l := range lines {
				if !yield(l) {
					return
				}
			}
		}
		for line := range all {
			s, ok := strings.CutPrefix(line, "ack ")
			id, err := ParseID(s)
			if !ok || err != nil {
				t.Fatalf("round %d: child printed %q", round, line)
			}
			acked[id] = true
		}
		blobs, left := checkAfterCrash(t, dir)
		temps += left
		present := map[ID]bool{}
		for _, b := range blobs {
			present[b.ID] = true
		}
		for id := range acked {
			if !present[id] {
				t.Fatalf("round %d: blob %s was acknowledged but is gone", round, id.Short())
			}
		}
	}
	if len(acked) == 0 {
		t.Fatal("nothing acknowledged")
	}
	t.Logf("%d rounds: %d blobs acknowledged, %d temporary files cleaned", rounds, len(acked), temps)
}
