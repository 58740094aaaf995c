package rewind

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

// The crash tests run a child process (this test binary again) that
// rewinds and kills itself with SIGKILL at a named point of the rewind; the
// parent then reopens the store and checks that the workspace is whole:
// either not rewound at all (crash before the intent) or fully rewound.

// rapidChecksDefaulted: -rapid.checks was set here, not by the user (a
// test of heavier cases may then choose its own number).
var rapidChecksDefaulted bool

func TestMain(m *testing.M) {
	testsupport.RunChild(map[string]func(string) int{
		"bound":    boundChild,
		"crash":    func(point string) int { crashChild(point); return 0 },
		"stash":    func(point string) int { stashCrashChild(point); return 0 },
		"sparse":   func(point string) int { sparseCrashChild(point); return 0 },
		"snapshot": snapshotCrashChild,
	})
	// TestModel runs 500 random cases unless -rapid.checks says otherwise
	// (rapid's default of 100 leaves rare interleavings untried; 500 take
	// a few seconds).
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		flag.Set("rapid.checks", "500")
		rapidChecksDefaulted = true
	}
	os.Exit(m.Run())
}

// killedAt runs child (crash, stash or sparse) in a new process of this
// test binary (testsupport.StartChild), to die at point, with env added,
// and fails t unless SIGKILL ended it: the point was reached.
func killedAt(t *testing.T, child, point string, env ...string) {
	t.Helper()
	c := testsupport.StartChild(t, child, point, testsupport.ChildOptions{Env: env, Stderr: io.Discard})
	if err := c.Cmd.Wait(); !testsupport.KilledBySIGKILL(c.Cmd.ProcessState) {
		t.Fatalf("the %s child was not killed at %s: %v", child, point, err)
	}
}

// crashChild rewinds the workspace in $ZEROFS_TEST_WS to $ZEROFS_TEST_SEQ
// and dies at point.
func crashChild(point string) {
	crashPoint = func(name string) {
		if name == point {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	crashReader = func(r io.Reader) io.Reader { return &midWrite{r: r} }
	// The blob store's crash points (durable.TestHook), under names of
	// their own here: "gc:removing" is the store's "prune:removing".
	durable.TestHook = func(name, path string) {
		if "gc:"+strings.TrimPrefix(name, "prune:") == point {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	root, err := os.Open(os.Getenv("ZEROFS_TEST_WS"))
	if err != nil {
		os.Exit(3)
	}
	var ignore []string
	if s := os.Getenv("ZEROFS_TEST_IGNORE"); s != "" {
		ignore = strings.Split(s, ",")
	}
	e, err := Open(context.Background(), root, Options{StoreDir: os.Getenv("ZEROFS_TEST_STORE"), Sync: true, RenameRecords: true, Ignore: ignore})
	if err != nil {
		os.Exit(4)
	}
	seq, _ := strconv.ParseUint(os.Getenv("ZEROFS_TEST_SEQ"), 10, 64)
	switch form := os.Getenv("ZEROFS_TEST_FORM"); {
	case form == "renamedir":
		err = crashRenameDir(e, os.Getenv("ZEROFS_TEST_WS"))
	case form == "thin":
		_, err = e.GCWith(context.Background(), record.GCRequest{ThinBefore: record.Seq(seq)})
	case strings.HasPrefix(point, "gc:"):
		_, err = e.GC(context.Background(), record.Seq(seq))
	case form == "revert":
		_, err = e.Apply(context.Background(), record.Request{Revert: record.Seq(seq)})
	case form == "undo":
		_, err = e.Apply(context.Background(), record.Request{Undo: true})
	case form == "merge":
		_, err = e.Apply(context.Background(), record.Request{Merge: &record.MergeRequest{Dir: os.Getenv("ZEROFS_TEST_FORK"), Workspace: os.Getenv("ZEROFS_TEST_WS")}})
	case form != "":
		_, err = e.Apply(context.Background(), record.Request{Target: record.Seq(seq), Paths: strings.Split(form, ",")})
	default:
		_, err = e.Rewind(context.Background(), record.Seq(seq))
	}
	if err != nil {
		os.Exit(5)
	}
	os.Exit(0) // the point was never reached
}

// midWrite reaches the crash point "rewind:write" at its second read: the
// restored file's temporary copy then exists, partly written.
type midWrite struct {
	r     io.Reader
	reads int
}

func (m *midWrite) Read(p []byte) (int, error) {
	m.reads++
	if m.reads == 2 {
		crashPoint("rewind:write")
	}
	return m.r.Read(p)
}

// buildHistory makes a workspace with enough history that a rewind changes
// many paths: it returns the sequence to rewind to and the trees before.
// With renameRecords, d holds files before the step too, and its rename
// is one rename record: a rewind restores them from where they are now.
func buildHistory(t *testing.T, renameRecords bool) (ws, store string, target record.Seq, atTarget, now tree) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	ws, store = filepath.Join(dir, "ws"), filepath.Join(dir, "store")
	os.Mkdir(ws, 0o755)
	e := openAt(t, ws, Options{StoreDir: store, Sync: true, RenameRecords: renameRecords})
	for i := range 10 {
		p := "f" + strconv.Itoa(i)
		change(t, e, func() error { return os.WriteFile(filepath.Join(ws, p), []byte("old "+p), 0o644) }, Change{Path: p})
	}
	change(t, e, func() error { return os.Mkdir(filepath.Join(ws, "d"), 0o755) }, Change{Path: "d"})
	if renameRecords {
		for i := range 5 {
			q := "d/old" + strconv.Itoa(i)
			change(t, e, func() error { return os.WriteFile(filepath.Join(ws, q), []byte("old "+q), 0o644) }, Change{Path: q})
		}
	}
	ev, err := e.BeginStep(ctx, "agent edits", nil)
	if err != nil {
		t.Fatal(err)
	}
	target = ev.Seq
	atTarget = diskTree(t, ws)
	for i := range 10 {
		p := "f" + strconv.Itoa(i)
		change(t, e, func() error { return os.WriteFile(filepath.Join(ws, p), []byte("new "+p), 0o600) }, Change{Path: p})
		q := "d/new" + strconv.Itoa(i)
		change(t, e, func() error { return os.WriteFile(filepath.Join(ws, q), []byte(q), 0o644) }, Change{Path: q})
	}
	if renameRecords {
		renameDir(t, e, ws, "d", "e")
	} else {
		change(t, e, func() error { return os.Rename(filepath.Join(ws, "d"), filepath.Join(ws, "e")) }, Change{Path: "d", Tree: true}, Change{Path: "e"})
	}
	now = diskTree(t, ws)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return ws, store, target, atTarget, now
}

// TestRewindCrash kills a full rewind, a path rewind and a revert at each
// crash point: after reopening, each is either not done at all or done
// whole, recorded, and undoable.
func TestRewindCrash(t *testing.T) {
	for _, form := range []string{"", "f1,f2,d", "revert"} {
		for _, tc := range []struct {
			point   string
			rewound bool // after recovery, is the workspace at the target?
		}{
			{"rewind:captured", false},
			{"rewind:intent", true},
			{"rewind:half", true},
			{"rewind:write", true},
			{"rewind:applied", true},
		} {
			name := tc.point
			if form != "" {
				name = form + "/" + tc.point
			}
			t.Run(name, func(t *testing.T) { testRewindCrash(t, form, tc.point, tc.rewound, false) })
		}
	}
}

// TestRewindCrashAcrossRenameRecord: as TestRewindCrash, for a rewind and a
// revert across a directory's rename record, whose files are restored from
// their present names (or, recovering, from the rewind's own checkpoint).
func TestRewindCrashAcrossRenameRecord(t *testing.T) {
	for _, form := range []string{"", "revert"} {
		for _, tc := range []struct {
			point   string
			rewound bool
		}{
			{"rewind:captured", false},
			{"rewind:intent", true},
			{"rewind:half", true},
			{"rewind:write", true},
			{"rewind:applied", true},
		} {
			t.Run(form+"/"+tc.point, func(t *testing.T) { testRewindCrash(t, form, tc.point, tc.rewound, true) })
		}
	}
}

func testRewindCrash(t *testing.T, form, point string, rewound, renameRecords bool) {
	ws, store, target, atTarget, now := buildHistory(t, renameRecords)
	if form != "" && form != "revert" {
		// A path rewind: those paths as at the target, the rest as now.
		atTarget = modelRewindPaths(atTarget, now, strings.Split(form, ","))
	}
	killedAt(t, "crash", point, "ZEROFS_TEST_WS="+ws, "ZEROFS_TEST_FORM="+form,
		"ZEROFS_TEST_STORE="+store, "ZEROFS_TEST_SEQ="+strconv.FormatUint(uint64(target), 10))
	root, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	e, err := Open(context.Background(), root, Options{StoreDir: store, Sync: true})
	if err != nil {
		t.Fatalf("reopen after crash at %s: %v", point, err)
	}
	defer e.Close()
	want := now
	if rewound {
		want = atTarget
	}
	filepath.Walk(ws, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasPrefix(info.Name(), ".tmp-") {
			t.Errorf("after a crash at %s and reopen, a temporary file is left: %s", point, p)
		}
		return nil
	})
	if d := diffTrees(diskTree(t, ws), want); d != "" {
		t.Fatalf("after a crash at %s and reopen, the workspace is half-rewound:\n%s", point, d)
	}
	if _, err := os.Stat(filepath.Join(store, intentName)); !os.IsNotExist(err) {
		t.Fatalf("intent still there after recovery: %v", err)
	}
	last, _, ok := e.LastRewind()
	if rewound != ok {
		t.Fatalf("session_rewind recorded: got %v, want %v", ok, rewound)
	}
	if !rewound {
		return
	}
	switch {
	case form == "revert" && last.RevertOf != target:
		t.Fatalf("recovered revert records revertOf %d, want %d", last.RevertOf, target)
	case form != "" && form != "revert" && strings.Join(last.Paths, ",") != "d,f1,f2":
		t.Fatalf("recovered path rewind records paths %v, want [d f1 f2]", last.Paths)
	}
	// The recovered rewind can be undone like any other.
	if _, err := e.Rewind(context.Background(), last.CheckpointSequence-1); err != nil {
		t.Fatal(err)
	}
	if d := diffTrees(diskTree(t, ws), now); d != "" {
		t.Fatalf("undoing the recovered rewind:\n%s", d)
	}
}

// A gc killed while it removes blobs loses nothing it was not asked to
// forget: every state from its cut on is intact after reopening, and the
// next gc finishes the job.
func TestGCCrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ws, store := filepath.Join(dir, "ws"), filepath.Join(dir, "store")
	os.Mkdir(ws, 0o755)
	e := openAt(t, ws, Options{StoreDir: store, Sync: true})
	states := map[record.Seq]tree{}
	for round := range 6 {
		ev, _ := e.BeginStep(ctx, "round", nil)
		states[ev.Seq] = diskTree(t, ws)
		for i := range 4 {
			p := "f" + strconv.Itoa(i)
			change(t, e, func() error {
				return os.WriteFile(filepath.Join(ws, p), []byte(strconv.Itoa(round*10+i)), 0o644)
			}, Change{Path: p})
		}
	}
	cut := record.Seq(0)
	for s := range states {
		if s > cut && s < e.Head()/2 {
			cut = s
		}
	}
	e.Close()
	killedAt(t, "crash", "gc:removing", "ZEROFS_TEST_WS="+ws,
		"ZEROFS_TEST_STORE="+store, "ZEROFS_TEST_SEQ="+strconv.FormatUint(uint64(cut), 10))
	e = openAt(t, ws, Options{StoreDir: store, Sync: true}) // reopened after the crash in gc
	check := func() {
		t.Helper()
		for s, want := range states {
			if s < cut {
				if _, err := e.StateAt("", s); err == nil {
					t.Fatalf("@%d still exists below the cut %d", s, cut)
				}
				continue
			}
			if d := diffTrees(indexTree(t, e, s), want); d != "" {
				t.Fatalf("@%d after a crash in gc:\n%s", s, d)
			}
		}
	}
	check()
	if _, err := e.GC(ctx, cut); err != nil {
		t.Fatal(err)
	}
	check()
}
