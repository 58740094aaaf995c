package eventlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerofs/zerofs/record"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const goldenPath = "testdata/golden.jsonl"

// fixedOptions gives a deterministic clock and ids: ids ...0001, ...0002,
// and times 2026-01-02T03:04:05Z plus 1.25 s per event (so some createdAt
// values have trailing zeros in their fraction, and one has none).
func fixedOptions() Options {
	var mu sync.Mutex
	n, m := 0, 0
	zone := time.FixedZone("CET", 3600) // written as UTC all the same
	return Options{
		SessionID: "5e5510aa-0000-4000-8000-000000000000",
		Logger:    quietLogger(),
		Now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			t := time.Date(2026, 1, 2, 4, 4, 5, 0, zone).Add(time.Duration(m) * 1250 * time.Millisecond)
			if m == 3 {
				t = t.Add(7) // 7 ns: all nine digits matter
			}
			m++
			return t
		},
		NewID: func() string {
			mu.Lock()
			defer mu.Unlock()
			n++
			return fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
		},
	}
}

// writeGolden writes the events behind testdata/golden.jsonl to a log at path.
func writeGolden(t *testing.T, path string) {
	t.Helper()
	l, err := Open(path, fixedOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.Append(ctx, record.TypeToolCall, json.RawMessage(` {"name": "edit main.go", "by": "agent"} `)))
	must(l.Append(ctx, record.TypeCheckpoint, map[string]any{
		"tool": "edit main.go",
		"files": []map[string]any{
			{"path": "main.go", "kind": "file", "blob": strings.Repeat("ab", 32), "bytes": 123, "mode": 420, "pid": 4242, "comm": "sed"},
			{"path": "new.go", "kind": "file", "absent": true},
		},
	}))
	must(l.AppendBatch(ctx, []Record{
		{Type: record.TypeCheckpoint, Payload: map[string]any{"tool": "edit main.go", "files": []map[string]any{{"path": "dir/ü ☃.txt", "kind": "symlink", "target": "../a\nb"}}}},
		{Type: record.TypeCheckpoint, Payload: map[string]any{"tool": "edit main.go", "files": []map[string]any{{"path": "big", "kind": "file", "skipped": true, "reason": "too large"}}}},
	}))
	must(l.Append(ctx, record.TypeRewind, map[string]any{"targetSequence": 1, "report": map[string]any{"restored": 1, "deleted": 1, "skipped": []string{}}}))
	must(l.Append(ctx, "some_future_type", nil))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// golden returns the golden log's bytes and its lines (each with its '\n').
func golden(t *testing.T) ([]byte, [][]byte) {
	t.Helper()
	b, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	return b, bytes.SplitAfter(b, []byte("\n"))[:bytes.Count(b, []byte("\n"))]
}

// TestGolden checks the exact bytes Append writes against
// testdata/golden.jsonl (go test -run TestGolden -update rewrites it).
func TestGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	writeGolden(t, path)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(goldenPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := golden(t)
	if !bytes.Equal(got, want) {
		t.Errorf("log differs from %s (run with -update if the change is intended)\ngot:\n%s\nwant:\n%s", goldenPath, got, want)
	}
}

var createdAtRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$`)

func TestEnvelope(t *testing.T) {
	_, lines := golden(t)
	wantCreated := []string{
		"2026-01-02T03:04:05.000000000Z",
		"2026-01-02T03:04:06.250000000Z",
		"2026-01-02T03:04:07.500000000Z",
		"2026-01-02T03:04:08.750000007Z",
		"2026-01-02T03:04:10.000000000Z",
		"2026-01-02T03:04:11.250000000Z",
	}
	if len(lines) != len(wantCreated) {
		t.Fatalf("got %d golden lines, want %d", len(lines), len(wantCreated))
	}
	wantKeys := []string{"createdAt", "id", "payload", "sequence", "sessionId", "type"}
	for i, line := range lines {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		})
		if !slices.Equal(keys, wantKeys) {
			t.Errorf("line %d: got keys %v, want %v", i+1, keys, wantKeys)
		}
		var created string
		if err := json.Unmarshal(m["createdAt"], &created); err != nil {
			t.Fatalf("line %d: createdAt: %v", i+1, err)
		}
		if !createdAtRE.MatchString(created) || created != wantCreated[i] {
			t.Errorf("line %d: got createdAt %q, want %q (RFC 3339, nine digits, UTC)", i+1, created, wantCreated[i])
		}
		if got, want := string(m["sequence"]), fmt.Sprint(i+1); got != want {
			t.Errorf("line %d: got sequence %s, want %s", i+1, got, want)
		}
		if got, want := string(m["sessionId"]), `"5e5510aa-0000-4000-8000-000000000000"`; got != want {
			t.Errorf("line %d: got sessionId %s, want %s", i+1, got, want)
		}
		if got, want := string(m["id"]), fmt.Sprintf(`"00000000-0000-4000-8000-%012d"`, i+1); got != want {
			t.Errorf("line %d: got id %s, want %s", i+1, got, want)
		}
		if bytes.ContainsAny(line[:len(line)-1], "\n\r") {
			t.Errorf("line %d: a raw newline inside the line", i+1)
		}
	}
	// The caller's JSON is kept, compacted.
	var first map[string]json.RawMessage
	json.Unmarshal(lines[0], &first)
	if got, want := string(first["payload"]), `{"name":"edit main.go","by":"agent"}`; got != want {
		t.Errorf("got payload %s, want %s", got, want)
	}
	// What Append returns is what a reader gets back.
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	l := openT(t, path, Options{})
	ev, err := l.Append(context.Background(), record.TypeToolCall, map[string]string{"name": "x"})
	if err != nil {
		t.Fatal(err)
	}
	back := readAll(t, path, 0)
	if len(back) != 1 || !back[0].CreatedAt.Equal(ev.CreatedAt) || back[0].ID != ev.ID ||
		back[0].SessionID != ev.SessionID || string(back[0].Payload) != string(ev.Payload) || back[0].Type != ev.Type {
		t.Errorf("got %+v back, want %+v", back, ev)
	}
	if ev.CreatedAt.Location() != time.UTC {
		t.Errorf("got createdAt in %v, want UTC", ev.CreatedAt.Location())
	}
	if ev.SessionID != l.SessionID() || ev.SessionID == "" {
		t.Errorf("got session %q, want the log's %q", ev.SessionID, l.SessionID())
	}
}

func TestAppendPayloads(t *testing.T) {
	tests := []struct {
		name    string
		typ     string
		payload any
		want    string // the payload as written, or "" for an error
	}{
		{"nil", "t", nil, `{}`},
		{"raw JSON is compacted", "t", json.RawMessage(" [1, 2,\n 3] "), `[1,2,3]`},
		{"map", "t", map[string]int{"b": 2, "a": 1}, `{"a":1,"b":2}`},
		{"struct", "t", struct {
			Name string `json:"name"`
		}{"x"}, `{"name":"x"}`},
		{"string with a newline", "t", "a\nb", `"a\nb"`},
		{"invalid raw JSON", "t", json.RawMessage(`{"a":`), ""},
		{"cannot marshal", "t", func() {}, ""},
		{"empty type", "", nil, ""},
	}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l := openT(t, path, Options{})
	var want record.Seq
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := l.Append(context.Background(), tt.typ, tt.payload)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("got event %d, want an error", ev.Seq)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want++
			if ev.Seq != want {
				t.Errorf("got seq %d, want %d", ev.Seq, want)
			}
			if string(ev.Payload) != tt.want {
				t.Errorf("got payload %s, want %s", ev.Payload, tt.want)
			}
		})
	}
	// Refused appends left nothing behind: the log reads back whole.
	l.Close()
	if head, torn, err := Check(path); head != want || torn != 0 || err != nil {
		t.Errorf("Check: got head %d, torn %d, err %v; want %d, 0, nil", head, torn, err, want)
	}
}

func TestAppendCancelledContext(t *testing.T) {
	l := openT(t, filepath.Join(t.TempDir(), "events.jsonl"), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Append(ctx, "t", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	if h := l.Head(); h != 0 {
		t.Errorf("got head %d, want 0", h)
	}
}

func TestAppendBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l := openT(t, path, Options{Sync: true})
	appendN(t, l, 2)
	evs, err := l.AppendBatch(context.Background(), []Record{{Type: "a"}, {Type: "b", Payload: 1}, {Type: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, evs, 3, 5)
	for i, typ := range []string{"a", "b", "c"} {
		if evs[i].Type != typ {
			t.Errorf("event %d: got type %q, want %q", i, evs[i].Type, typ)
		}
	}
	if got, err := l.AppendBatch(context.Background(), nil); err != nil || got != nil {
		t.Errorf("empty batch: got %v, %v; want nil, nil", got, err)
	}
	if _, err := l.AppendBatch(context.Background(), []Record{{Type: "a"}, {Type: ""}}); err == nil {
		t.Error("batch with an empty type: got nil, want an error")
	}
	if h := l.Head(); h != 5 {
		t.Errorf("got head %d, want 5", h)
	}
	checkSeqs(t, readAll(t, path, 0), 1, 5)
}

// TestConcurrentAppends: many goroutines appending at once (some in batches)
// get 1..n, each exactly once, in file order, and each goroutine's events
// are in the file in the order it appended them.
func TestConcurrentAppends(t *testing.T) {
	const goroutines, each = 64, 200
	for _, syncOn := range []bool{true, false} {
		t.Run(fmt.Sprintf("sync=%v", syncOn), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			l := openT(t, path, Options{Sync: syncOn})
			type mark struct{ G, I int }
			got := make([][]record.Seq, goroutines)
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Go(func() {
					for i := 0; i < each; {
						if g%4 == 0 && i+3 <= each { // every fourth goroutine appends in batches of three
							recs := []Record{{"t", mark{g, i}}, {"t", mark{g, i + 1}}, {"t", mark{g, i + 2}}}
							evs, err := l.AppendBatch(context.Background(), recs)
							if err != nil {
								errs <- err
								return
							}
							if evs[1].Seq != evs[0].Seq+1 || evs[2].Seq != evs[1].Seq+1 {
								errs <- fmt.Errorf("batch got seqs %v, want consecutive", seqs(evs))
								return
							}
							got[g] = append(got[g], seqs(evs)...)
							i += 3
							continue
						}
						ev, err := l.Append(context.Background(), "t", mark{g, i})
						if err != nil {
							errs <- err
							return
						}
						got[g] = append(got[g], ev.Seq)
						i++
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			const n = goroutines * each
			seen := make([]bool, n+1)
			for g := range got {
				for _, s := range got[g] {
					if s < 1 || s > n || seen[s] {
						t.Fatalf("goroutine %d got seq %d: out of 1..%d or twice", g, s, n)
					}
					seen[s] = true
				}
			}
			if h := l.Head(); h != n {
				t.Errorf("got head %d, want %d", h, n)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			evs := readAll(t, path, 0) // checks 1..n in file order
			checkSeqs(t, evs, 1, n)
			next := make([]int, goroutines)
			for _, ev := range evs {
				var m mark
				if err := json.Unmarshal(ev.Payload, &m); err != nil {
					t.Fatal(err)
				}
				if m.I != next[m.G] {
					t.Fatalf("seq %d: got goroutine %d's event %d, want its event %d next", ev.Seq, m.G, m.I, next[m.G])
				}
				if got[m.G][m.I] != ev.Seq {
					t.Fatalf("seq %d holds goroutine %d's event %d, which Append said was seq %d", ev.Seq, m.G, m.I, got[m.G][m.I])
				}
				next[m.G]++
			}
		})
	}
}

// tornCase writes data as a log, opens it, and checks the recovery: head,
// the file cut to good bytes, the tail saved aside and logged.
func checkRecovery(t *testing.T, data []byte, wantHead record.Seq, good int) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	l, err := Open(path, Options{Logger: slog.New(rec)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l.Close()
	if h := l.Head(); h != wantHead {
		t.Errorf("got head %d, want %d", h, wantHead)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after, data[:good]) {
		t.Errorf("got a log of %d bytes after Open, want the first %d bytes of %d", len(after), good, len(data))
	}
	torn := tornFiles(t, path)
	if good == len(data) {
		if len(torn) != 0 || len(rec.records()) != 0 {
			t.Errorf("nothing to cut: got torn files %v and log %q, want none", torn, rec.records())
		}
	} else {
		if len(torn) != 1 {
			t.Fatalf("got torn files %v, want one", torn)
		}
		tail, err := os.ReadFile(torn[0])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tail, data[good:]) {
			t.Errorf("got saved tail %q, want %q", tail, data[good:])
		}
		if recs := rec.records(); len(recs) != 1 || !strings.Contains(recs[0], "torn tail") ||
			!strings.Contains(recs[0], filepath.Base(torn[0])) {
			t.Errorf("got log records %q, want one warning naming %s", recs, filepath.Base(torn[0]))
		}
	}
	// The log goes on from the recovered head, and the next Open finds
	// nothing to cut.
	ev, err := l.Append(context.Background(), "after", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Seq != wantHead+1 {
		t.Errorf("next append: got seq %d, want %d", ev.Seq, wantHead+1)
	}
	l.Close()
	if head, tornBytes, err := Check(path); head != wantHead+1 || tornBytes != 0 || err != nil {
		t.Errorf("Check after the append: got %d, %d, %v; want %d, 0, nil", head, tornBytes, err, wantHead+1)
	}
}

// TestTornTailEveryByte cuts the golden log at every byte offset of its last
// two lines, and around every line boundary before them, and checks that
// Open keeps exactly the complete lines before the cut. A cut just before a
// '\n' leaves a line that parses but lacks its newline: torn too. (Every
// byte of the whole file is the same code with other heads, at a few fsyncs
// per cut; the earlier lines get their boundaries.)
func TestTornTailEveryByte(t *testing.T) {
	data, lines := golden(t)
	lastTwo := len(data) - len(lines[len(lines)-1]) - len(lines[len(lines)-2])
	interesting := func(cut int) bool {
		if cut >= lastTwo {
			return true
		}
		for end := 0; end <= cut+1; {
			if d := cut - end; d == -1 || d == 0 || d == 1 {
				return true
			}
			i := bytes.IndexByte(data[end:], '\n')
			if i < 0 {
				break
			}
			end += i + 1
		}
		return false
	}
	// Each cut pays for a few fsyncs: run 16 at a time, more than
	// t.Parallel would on a small machine (t.Run may be called from
	// several goroutines).
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	lineAt := 0 // lines complete before the cut
	end := 0    // end of those lines
	for cut := 0; cut <= len(data); cut++ {
		if lineAt < len(lines) && cut == end+len(lines[lineAt]) {
			end += len(lines[lineAt])
			lineAt++
		}
		head, good := record.Seq(lineAt), end
		if !interesting(cut) {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t.Run(fmt.Sprint(cut), func(t *testing.T) {
				checkRecovery(t, data[:cut], head, good)
			})
		})
	}
	wg.Wait()
}

func TestTornTailShapes(t *testing.T) {
	data, lines := golden(t)
	two := len(lines[0]) + len(lines[1])
	tests := []struct {
		name string
		data []byte
		head record.Seq
		good int
	}{
		{"final line parses but lacks its newline", data[:len(data)-1], 5, len(data) - len(lines[5])},
		{"zeros where a crash lost data", append(slices.Clip(data[:two]), make([]byte, 300)...), 2, two},
		{"zeros then a newline", append(slices.Clip(data[:two]), "\x00\x00\x00\n"...), 2, two},
		{"garbage line then an incomplete one", append(slices.Clip(data[:two]), "{\"garbage\n{\"id\":"...), 2, two},
		{"bad line then a line that parses but lacks its newline", append(append(slices.Clip(data[:two]), "xx\n"...), bytes.TrimSuffix(lines[2], []byte("\n"))...), 2, two},
		{"an empty final line", append(slices.Clip(data), '\n'), 6, len(data)},
		{"empty log", nil, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkRecovery(t, tt.data, tt.head, tt.good) })
	}
}

// TestCorrupt: damage that a crash cannot produce is refused, naming the
// line, and the file is left exactly as it was.
func TestCorrupt(t *testing.T) {
	_, l := golden(t)
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	garbled := bytes.Repeat([]byte("#"), len(l[2])-1)
	noType := bytes.Replace(l[2], []byte(`"type":"session_checkpoint"`), []byte(`"kind":"session_checkpoint"`), 1)
	zeroSeq := bytes.Replace(l[2], []byte(`"sequence":3`), []byte(`"sequence":0`), 1)
	tests := []struct {
		name   string
		data   []byte
		line   int
		reason string // a word the reason must contain
	}{
		{"damaged middle line", join(l[0], l[1], garbled, []byte("\n"), l[3], l[4]), 3, "JSON"},
		{"zeroed middle line", join(l[0], l[1], make([]byte, len(l[2])-1), []byte("\n"), l[3]), 3, "JSON"},
		{"lines glued together", join(l[0], bytes.TrimSuffix(l[1], []byte("\n")), l[2], l[3]), 2, "JSON"},
		{"empty middle line", join(l[0], []byte("\n"), l[1], l[2]), 2, "JSON"},
		{"missing type", join(l[0], l[1], noType, l[3]), 3, "type"},
		{"zero sequence", join(l[0], l[1], zeroSeq, l[3]), 3, "sequence"},
		{"gap", join(l[0], l[1], l[3], l[4]), 3, "sequence 4 after 2"},
		{"repeat", join(l[0], l[1], l[1], l[2]), 3, "sequence 2 after 2"},
		{"gap in the final line", join(l[0], l[1], l[3]), 3, "sequence 4 after 2"},
		{"repeat in the final line", join(l[0], l[1], l[1]), 3, "sequence 2 after 2"},
		{"final line repeats the first", join(l[0], l[1], bytes.TrimSuffix(l[0], []byte("\n")), []byte("\n")), 3, "sequence 1 after 2"},
		{"first line not 1", join(l[1], l[2]), 1, "sequence 2 after 0"},
		{"lines swapped", join(l[0], l[2], l[1], l[3]), 2, "sequence 3 after 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			wantOffset := int64(0)
			for _, line := range bytes.SplitAfter(tt.data, []byte("\n"))[:tt.line-1] {
				wantOffset += int64(len(line))
			}
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, record.ErrCorrupt) {
					t.Fatalf("%s: got %v, want ErrCorrupt", what, err)
				}
				var ce *CorruptError
				if !errors.As(err, &ce) {
					t.Fatalf("%s: got %T, want a *CorruptError", what, err)
				}
				if ce.Line != tt.line || ce.Offset != wantOffset || ce.Path != path {
					t.Errorf("%s: got line %d, offset %d, path %s; want %d, %d, %s", what, ce.Line, ce.Offset, ce.Path, tt.line, wantOffset, path)
				}
				if !strings.Contains(ce.Reason, tt.reason) {
					t.Errorf("%s: got reason %q, want it to mention %q", what, ce.Reason, tt.reason)
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("line %d", tt.line)) {
					t.Errorf("%s: got message %q, want it to name line %d", what, err, tt.line)
				}
			}
			l, err := Open(path, Options{Logger: quietLogger()})
			if err == nil {
				l.Close()
			}
			check("Open", err)
			_, _, err = Check(path)
			check("Check", err)
			var rerr error
			for _, err := range ReadFile(path, 0) {
				if err != nil {
					rerr = err
				}
			}
			check("ReadFile", rerr)
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(after, tt.data) {
				t.Error("the damaged log was changed")
			}
			if torn := tornFiles(t, path); len(torn) != 0 {
				t.Errorf("got torn files %v, want none", torn)
			}
		})
	}
}

// TestEvents reads from every kind of start, on the live log (index built by
// appends) and after a reopen (index built by the scan), across the sparse
// index's 1024-event boundaries.
func TestEvents(t *testing.T) {
	const n = 2*indexEvery + 10
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l := openT(t, path, Options{})
	// Lines of varying length, so offsets are not a multiple of anything.
	for i := range n {
		pad := strings.Repeat("x", i%37)
		if _, err := l.Append(context.Background(), "t", map[string]string{"pad": pad}); err != nil {
			t.Fatal(err)
		}
	}
	froms := []record.Seq{0, 1, 2, 500, indexEvery - 1, indexEvery, indexEvery + 1, indexEvery + 2,
		2*indexEvery - 1, 2 * indexEvery, 2*indexEvery + 1, 2*indexEvery + 2, n - 1, n, n + 1, n + 1000}
	check := func(t *testing.T, l *Log) {
		for _, from := range froms {
			var evs []record.Event
			for ev, err := range l.Events(from) {
				if err != nil {
					t.Fatalf("Events(%d): %v", from, err)
				}
				evs = append(evs, ev)
			}
			checkSeqs(t, evs, max(from, 1), n)
		}
		for _, from := range []record.Seq{0, indexEvery + 1, n, n + 1} {
			checkSeqs(t, readAll(t, path, from), max(from, 1), n)
		}
		// Stopping early works.
		count := 0
		for range l.Events(indexEvery) {
			count++
			if count == 3 {
				break
			}
		}
		if count != 3 {
			t.Errorf("got %d events before break, want 3", count)
		}
	}
	t.Run("live", func(t *testing.T) { check(t, l) })
	live := slices.Clone(l.offsets)
	l.Close()
	l2 := openT(t, path, Options{})
	t.Run("reopened", func(t *testing.T) { check(t, l2) })
	if !slices.Equal(l2.offsets, live) {
		t.Errorf("got index %v from the scan, want %v as built by appends", l2.offsets, live)
	}
	if len(live) != 3 {
		t.Errorf("got %d index entries for %d events, want 3", len(live), n)
	}

	// Events sees the head as of its call, not lines appended later.
	it := l2.Events(n - 1)
	appendN(t, l2, 2)
	var got []record.Event
	for ev, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	checkSeqs(t, got, n-1, n)
}

// TestEventsSkipsByIndex garbles line 10 in place (behind the open Log's
// back): reading from 2*indexEvery never touches it, which shows that Events
// starts at the index and not at the top, and reading from 5 names line 10.
func TestEventsSkipsByIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l := openT(t, path, Options{})
	appendN(t, l, 3*indexEvery)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	start := 0
	for range 9 {
		start += bytes.IndexByte(data[start:], '\n') + 1
	}
	end := start + bytes.IndexByte(data[start:], '\n')
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte("?"), end-start), int64(start)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var evs []record.Event
	for ev, err := range l.Events(2 * indexEvery) {
		if err != nil {
			t.Fatalf("Events(%d): %v", 2*indexEvery, err)
		}
		evs = append(evs, ev)
	}
	checkSeqs(t, evs, 2*indexEvery, 3*indexEvery)
	var ce *CorruptError
	for _, err := range l.Events(5) {
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("got %v, want a *CorruptError", err)
		}
	}
	if ce == nil || ce.Line != 10 || ce.Offset != int64(start) {
		t.Errorf("got %+v, want line 10 at byte %d", ce, start)
	}
}

// TestEventsMemory reads a 12 MiB log and checks that the heap never holds
// more than a few lines of it. (12 MiB is far above the few hundred KiB that
// reading line by line needs, and cheap to parse under -race.)
func TestEventsMemory(t *testing.T) {
	const lines, lineSize = 96, 128 << 10
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l := openT(t, path, Options{})
	pad := strings.Repeat("z", lineSize)
	for range lines {
		if _, err := l.Append(context.Background(), "t", map[string]string{"pad": pad}); err != nil {
			t.Fatal(err)
		}
	}
	pad = ""
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	peak := base
	measure := func() {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
	}
	for name, it := range map[string]func(func(record.Event, error) bool){
		"Events":   l.Events(1),
		"ReadFile": ReadFile(path, 1),
	} {
		n := 0
		for _, err := range it {
			if err != nil {
				t.Fatal(err)
			}
			n++
			if n%8 == 0 {
				measure()
			}
		}
		if n != lines {
			t.Fatalf("%s: got %d events, want %d", name, n, lines)
		}
	}
	const limit = 4 << 20 // a third of the file, far above a few lines
	if grew := peak - base; grew > limit {
		t.Errorf("heap grew by %d MiB reading a %d MiB log, want under %d MiB", grew>>20, lines*lineSize>>20, limit>>20)
	}
	t.Logf("heap grew by %.1f MiB reading a %d MiB log", float64(peak-base)/(1<<20), lines*lineSize>>20)
}

func TestReadFileAndCheckDoNotRepair(t *testing.T) {
	data, lines := golden(t)
	torn := data[:len(data)-len(lines[5])+10]
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(path, torn, 0o600); err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, readAll(t, path, 0), 1, 5)
	checkSeqs(t, readAll(t, path, 4), 4, 5)
	checkSeqs(t, readAll(t, path, 6), 6, 5)
	head, tornBytes, err := Check(path)
	if head != 5 || tornBytes != 10 || err != nil {
		t.Errorf("Check: got %d, %d, %v; want 5, 10, nil", head, tornBytes, err)
	}
	// Beside a running writer, an incomplete last line is one being
	// written: CheckLive leaves it out and reports no torn tail.
	if head, tornBytes, err := CheckLive(path); head != 5 || tornBytes != 0 || err != nil {
		t.Errorf("CheckLive: got %d, %d, %v; want 5, 0, nil", head, tornBytes, err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(after, torn) || len(tornFiles(t, path)) != 0 {
		t.Error("ReadFile or Check changed the log")
	}
	// A torn tail that ends with a newline (zeros where a power cut lost
	// data) ends ReadFile quietly too, as Check sees it.
	zeroed := filepath.Join(t.TempDir(), "events.jsonl")
	zeroTail := append(append(slices.Clip(data[:len(lines[0])+len(lines[1])]), make([]byte, 50)...), "\n\x00\x00"...)
	if err := os.WriteFile(zeroed, zeroTail, 0o600); err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, readAll(t, zeroed, 0), 1, 2)
	if head, tornBytes, err := Check(zeroed); head != 2 || tornBytes != 53 || err != nil {
		t.Errorf("Check: got %d, %d, %v; want 2, 53, nil", head, tornBytes, err)
	}
	// A whole line that does not parse is no line being written: CheckLive
	// reports it as Check does.
	if head, tornBytes, err := CheckLive(zeroed); head != 2 || tornBytes != 53 || err != nil {
		t.Errorf("CheckLive: got %d, %d, %v; want 2, 53, nil", head, tornBytes, err)
	}

	// While a writer holds the log, readers still read it.
	l := openT(t, path, Options{})
	appendN(t, l, 1)
	checkSeqs(t, readAll(t, path, 0), 1, 6)
	if head, _, err := Check(path); head != 6 || err != nil {
		t.Errorf("Check on a held log: got %d, %v; want 6, nil", head, err)
	}

	missing := filepath.Join(t.TempDir(), "missing.jsonl")
	for _, err := range ReadFile(missing, 0) {
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("ReadFile of a missing log: got %v, want os.ErrNotExist", err)
		}
	}
	if _, _, err := Check(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Check of a missing log: got %v, want os.ErrNotExist", err)
	}
}

func TestOpenNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l := openT(t, path, Options{})
	if h := l.Head(); h != 0 {
		t.Errorf("got head %d, want 0", h)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("got mode %v, want 0600", fi.Mode().Perm())
	}
	if l.Path() != path {
		t.Errorf("got path %q, want %q", l.Path(), path)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "no", "such", "dir"), Options{}); err == nil {
		t.Error("Open in a missing directory: got nil, want an error")
	}
}

func TestClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l := openT(t, path, Options{})
	appendN(t, l, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}
	if _, err := l.Append(context.Background(), "t", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close: got %v, want ErrClosed", err)
	}
	if h := l.Head(); h != 3 {
		t.Errorf("got head %d after Close, want 3", h)
	}
	// Close released the lock.
	l2 := openT(t, path, Options{})
	if h := l2.Head(); h != 3 {
		t.Errorf("reopened: got head %d, want 3", h)
	}
}

// TestCloseRacesAppends: appends racing with Close either land (and are in
// the log) or fail with ErrClosed; none is lost.
func TestCloseRacesAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l, err := Open(path, Options{Sync: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var acked []record.Seq
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				ev, err := l.Append(context.Background(), "t", nil)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked = append(acked, ev.Seq)
				mu.Unlock()
			}
		})
	}
	time.Sleep(20 * time.Millisecond) // real time: Close comes while the appenders run
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	head, _, err := Check(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range acked {
		if s > head {
			t.Fatalf("seq %d was acknowledged but the log ends at %d", s, head)
		}
	}
}

// recorder is a slog.Handler that keeps each record as "LEVEL msg k=v ...".
type recorder struct {
	mu   sync.Mutex
	recs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", rec.Level, rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	r.mu.Lock()
	r.recs = append(r.recs, b.String())
	r.mu.Unlock()
	return nil
}

func (r *recorder) records() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recs)
}
