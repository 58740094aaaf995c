package replicate

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// childReplicateAndChange changes the workspace in arg ("DIR PREFIX")
// and replicates it, round after round, until it is killed.
func childReplicateAndChange(arg string) int {
	dir, prefix, _ := strings.Cut(arg, " ")
	compactEvery = 3 // merged segments go up (streamed) in most rounds: kills land in them too
	t := &childT{}
	w := openWorkspace(t, dir)
	b, err := OpenS3(context.Background(), URL{Bucket: "replicas", Prefix: prefix})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r, err := Open(w.eng, b, URL{Bucket: "replicas", Prefix: prefix}, w.store, Options{BaseEvery: time.Nanosecond, SegmentBytes: 4 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rng := testsupport.ChildRand()
	for round := 0; ; round++ {
		for i := 0; i < 30; i++ {
			w.change(t, rng)
		}
		w.eng.BeginStep(context.Background(), "child round", nil)
		if err := r.Once(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "replicate:", err)
			return 1
		}
		fmt.Printf("round %d\n", round)
	}
}

// childT is the testing.TB a child hands the workload helpers: a failure
// ends the child.
type childT struct{ testing.TB }

func (*childT) Helper() {}
func (*childT) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	os.Exit(1)
}
func (*childT) Fatalf(f string, args ...any) {
	fmt.Fprintf(os.Stderr, f+"\n", args...)
	os.Exit(1)
}

// TestSIGKILLMidUpload: a process replicating while it changes the
// workspace is SIGKILLed at random moments (in the middle of uploads);
// each time the replica as it is restores to a state the workspace had
// (its @T, byte for byte), and the next run resumes and brings the
// replica up to date.
func TestSIGKILLMidUpload(t *testing.T) {
	startS3(t)
	rng := testsupport.Rand(t)
	dir := t.TempDir()
	seedTree(t, dir)
	const prefix = "crash"
	u := URL{Bucket: "replicas", Prefix: prefix}
	for kill := 0; kill < 3; kill++ {
		c := testsupport.StartChild(t, "replicate-and-change", dir+" "+prefix, testsupport.ChildOptions{Seed: rng.Uint64()})
		for i := rng.IntN(2); i >= 0; i-- {
			c.Expect(t, "round ")
		}
		time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond) // real time: the kill's random moment
		c.Kill(t)

		w := openWorkspace(t, dir) // recovers what the kill left
		b, err := OpenS3(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		segs, bases, err := listReplica(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		_, end := chain(segs)
		var newest record.Seq
		for _, br := range bases {
			if br.Seq <= end && br.Seq > newest {
				newest = br.Seq
			}
		}
		level := 0
		for _, s := range segs {
			level = max(level, s.Level)
		}
		t.Logf("kill %d: the replica holds events 1..%d (segments merged up to level %d) and bases up to %d (local head %d)", kill, end, level, newest, w.eng.Head())
		if newest > 0 {
			got := treeOf(t, restoreAt(t, u, newest))
			want := stateAt(t, w.eng, newest)
			sameTree(t, fmt.Sprintf("kill %d: the replica as the kill left it, at %d", kill, newest), got, want)
			if t.Failed() {
				var ps []string
				for p := range want {
					if got[p] != want[p] {
						ps = append(ps, p)
					}
				}
				for p := range got {
					if got[p] != want[p] {
						ps = append(ps, p)
					}
				}
				dumpAfter(t, w, newest-5, ps...)
				t.FailNow()
			}
		}
		// Resume: the replica catches up with everything.
		r := replicator(t, w, u, Options{BaseEvery: time.Nanosecond})
		if _, err := w.eng.BeginStep(context.Background(), "after kill", nil); err != nil {
			t.Fatal(err)
		}
		if err := r.Once(context.Background()); err != nil {
			t.Fatalf("kill %d: resume: %v", kill, err)
		}
		st := r.State()
		if st.Logged != w.eng.Head() || st.Base < w.eng.Step().Seq {
			t.Fatalf("kill %d: after resuming the replica is at %d (base %d), want %d (%d)", kill, st.Logged, st.Base, w.eng.Head(), w.eng.Step().Seq)
		}
		at := record.Seq(rng.IntN(int(st.Base) + 1))
		if w.eng.HasState(at) {
			sameTree(t, fmt.Sprintf("kill %d: restore --at %d after resuming", kill, at), treeOf(t, restoreAt(t, u, at)), stateAt(t, w.eng, at))
		}
		r.Close()
		w.close()
	}
}

// dumpAfter logs the events from from on that name one of paths (and
// every event that is not a checkpoint), to see why a state differs.
func dumpAfter(t testing.TB, w *workspace, from record.Seq, paths ...string) {
	for ev, err := range w.eng.Log().Events(from) {
		if err != nil {
			t.Log(err)
			return
		}
		s := string(ev.Payload)
		for _, p := range paths {
			if strings.Contains(s, "\""+p+"\"") || ev.Type != "session_checkpoint" {
				t.Logf("%d %s %s", ev.Seq, ev.Type, s)
				break
			}
		}
	}
}

// childReplicateLarge writes a large file in each round (arg "DIR PREFIX
// MODE") and replicates it in parts, until it is killed. With MODE
// "stop", it stops dead after the first part of an upload is sent and
// says so ("part sent").
func childReplicateLarge(arg string) int {
	f := strings.Fields(arg)
	streamAbove, multipartAbove, partSize = 1<<20, 6<<20, 5<<20
	if f[2] == "stop" {
		partSent = func(name string, n int32) {
			fmt.Println("part sent")
			select {}
		}
	}
	t := &childT{}
	w := openWorkspace(t, f[0])
	u := URL{Bucket: "replicas", Prefix: f[1]}
	b, err := OpenS3(context.Background(), u)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r, err := Open(w.eng, b, u, w.store, Options{BaseEvery: time.Nanosecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rng := testsupport.ChildRand()
	data := make([]byte, 7<<20) // two parts
	for round := 0; ; round++ {
		var seed [32]byte
		binary.LittleEndian.PutUint64(seed[:], rng.Uint64())
		rand.NewChaCha8(seed).Read(data)
		p := fmt.Sprintf("big-%d.bin", round%2)
		release, _, err := w.eng.Begin(context.Background(), rewind.Caller{PID: 1}, rewind.Change{Path: p})
		if err != nil {
			t.Fatal(err)
		}
		err = os.WriteFile(filepath.Join(f[0], p), data, 0o644)
		release()
		if err != nil {
			t.Fatal(err)
		}
		w.change(t, rng)
		w.eng.BeginStep(context.Background(), "child round", nil)
		fmt.Printf("uploading %d\n", round)
		if err := r.Once(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "replicate:", err)
			return 1
		}
	}
}

// TestSIGKILLMidMultipart: a process replicating large files in parts is
// SIGKILLed in the middle of a multipart upload (once right after a part
// was sent, then at random moments): the replica as it is restores to a
// state the workspace had, byte for byte (an object appears only when its
// upload completes), and the next run aborts the upload the kill left,
// resumes and brings the replica up to date.
func TestSIGKILLMidMultipart(t *testing.T) {
	startS3(t)
	rng := testsupport.Rand(t)
	dir := t.TempDir()
	seedTree(t, dir)
	const prefix = "crash-multipart"
	u := URL{Bucket: "replicas", Prefix: prefix}
	bk, err := OpenS3(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	b := bk.(*s3Bucket)
	uploads := func() int {
		out, err := b.c.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(u.Bucket), Prefix: aws.String(u.key(""))})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Uploads)
	}
	kills := 3
	if raceOn {
		kills = 2
	}
	for kill := 0; kill < kills; kill++ {
		mode := "run"
		if kill == 0 {
			mode = "stop"
		}
		c := testsupport.StartChild(t, "replicate-large", dir+" "+prefix+" "+mode, testsupport.ChildOptions{Seed: rng.Uint64()})
		c.Expect(t, "uploading ")
		if mode == "stop" {
			c.Expect(t, "part sent")
		} else {
			time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond) // real time: the kill's random moment
		}
		c.Kill(t)
		left := uploads()
		if mode == "stop" && left != 1 {
			t.Errorf("kill %d: %d multipart uploads left by a kill after a part was sent, want 1", kill, left)
		}

		w := openWorkspace(t, dir)
		segs, bases, err := listReplica(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		_, end := chain(segs)
		newest, based := newestBase(bases, end)
		t.Logf("kill %d: %d uploads left; the replica holds events 1..%d, base %d (local head %d)", kill, left, end, newest.Seq, w.eng.Head())
		if based {
			sameTree(t, fmt.Sprintf("kill %d: the replica as the kill left it, at %d", kill, newest.Seq), treeOf(t, restoreAt(t, u, newest.Seq)), stateAt(t, w.eng, newest.Seq))
		}
		r := replicator(t, w, u, Options{BaseEvery: time.Nanosecond, Logger: quiet})
		if _, err := w.eng.BeginStep(context.Background(), "after kill", nil); err != nil {
			t.Fatal(err)
		}
		if err := r.Once(context.Background()); err != nil {
			t.Fatalf("kill %d: resume: %v", kill, err)
		}
		if n := uploads(); n != 0 {
			t.Errorf("kill %d: %d multipart uploads after resuming, want none", kill, n)
		}
		st := r.State()
		if st.Logged != w.eng.Head() || st.Base < w.eng.Step().Seq {
			t.Fatalf("kill %d: after resuming the replica is at %d (base %d), want %d (%d)", kill, st.Logged, st.Base, w.eng.Head(), w.eng.Step().Seq)
		}
		sameTree(t, fmt.Sprintf("kill %d: restore after resuming", kill), treeOf(t, restoreAt(t, u, st.Base)), stateAt(t, w.eng, st.Base))
		r.Close()
		w.close()
	}
}
