package fs

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

func TestCtlStep(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	h := stepT(t, mp, "first label")
	if got, want := ctlRead(t, mp, "step"), strconv.FormatUint(uint64(h), 10)+" first label\n"; got != want {
		t.Errorf(".zero/step = %q, want %q", got, want)
	}
	if err := ctlWrite(mp, "step", `{"name":"Edit","tool_input":{"file":"a.go"}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	h = stepSeqOf(t, mp)
	if got, want := ctlRead(t, mp, "step"), strconv.FormatUint(uint64(h), 10)+" Edit\n"; got != want {
		t.Errorf(".zero/step = %q, want %q", got, want)
	}
	// The tool_call event carries the caller's JSON.
	log := ctlRead(t, mp, "log")
	lines := strings.Split(strings.TrimSpace(log), "\n")
	var ev struct {
		Sequence record.Seq      `json:"sequence"`
		Type     string          `json:"type"`
		Payload  json.RawMessage `json:"payload"`
	}
	readJSON(t, lines[len(lines)-1], &ev)
	if ev.Type != "tool_call" || ev.Sequence != h || !strings.Contains(string(ev.Payload), `"tool_input"`) {
		t.Errorf("last event = %+v (%s), want tool_call %d with tool_input", ev, ev.Payload, h)
	}
	if err := ctlWrite(mp, "step", `{"tool_input":1}`); err != nil {
		t.Fatal(err)
	}
	if got := ctlRead(t, mp, "step"); !strings.HasSuffix(got, " step\n") {
		t.Errorf(".zero/step after a JSON object without a name = %q, want label step", got)
	}
}

func TestCtlReports(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	if got := ctlRead(t, mp, "rewind"); strings.TrimSpace(got) != "{}" {
		t.Errorf(".zero/rewind before any rewind = %q, want {}", got)
	}
	if got := ctlRead(t, mp, "gc"); strings.TrimSpace(got) != "{}" {
		t.Errorf(".zero/gc before any gc = %q, want {}", got)
	}
	var st control.StatusReport
	readJSON(t, ctlRead(t, mp, "status"), &st)
	if st.PID != os.Getpid() || st.Mountpoint != mp || st.Workspace != m.fs.workspace ||
		st.Store != filepath.Join(m.fs.workspace, ".zero") || st.Sync != "batch" || st.Head != headOf(t, mp) {
		t.Errorf(".zero/status = %+v", st)
	}
	names, err := os.ReadDir(filepath.Join(mp, ".zero"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range names {
		got = append(got, n.Name())
	}
	if strings.Join(got, " ") != "gc head log result rewind status step turn" {
		t.Errorf("ls .zero = %v", got)
	}
	// The control directory's names are fixed.
	wantErrno(t, "rm .zero/step", os.Remove(filepath.Join(mp, ".zero/step")), syscall.EPERM)
	wantErrno(t, "create in .zero", os.WriteFile(filepath.Join(mp, ".zero/new"), nil, 0o644), syscall.EPERM)
	wantErrno(t, "rename in .zero", os.Rename(filepath.Join(mp, ".zero/step"), filepath.Join(mp, ".zero/x")), syscall.EPERM)
	// Report-only files refuse writes.
	wantErrno(t, "write .zero/head", ctlWrite(mp, "head", "5"), syscall.EACCES)

	// gc through the control file.
	writeFile(t, filepath.Join(mp, "f"), "1")
	stepT(t, mp, "s")
	writeFile(t, filepath.Join(mp, "f"), "2")
	h := headOf(t, mp)
	wantErrno(t, "gc abc", ctlWrite(mp, "gc", "abc"), syscall.EINVAL)
	wantErrno(t, "gc above head", ctlWrite(mp, "gc", strconv.FormatUint(uint64(h+1), 10)), syscall.EINVAL)
	if err := ctlWrite(mp, "gc", "2\n"); err != nil {
		t.Fatalf("gc 2: %v", err)
	}
	var res record.GCResult
	readJSON(t, ctlRead(t, mp, "gc"), &res)
	if res.Before != 2 {
		t.Errorf(".zero/gc = %+v, want before 2", res)
	}
	if _, err := os.Stat(view(mp, 1)); !os.IsNotExist(err) {
		t.Errorf("@1 after gc before 2: %v, want ENOENT", err)
	}
	if _, err := os.Stat(view(mp, 2)); err != nil {
		t.Errorf("@2 after gc before 2: %v", err)
	}
}

// TestRewindBadInput: a bad sequence fails with EINVAL and changes nothing.
func TestRewindBadInput(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	writeFile(t, filepath.Join(mp, "f"), "1")
	stepT(t, mp, "s")
	writeFile(t, filepath.Join(mp, "f"), "2")
	h := headOf(t, mp)
	for _, in := range []string{"abc", "-1", "", "1.5", strconv.FormatUint(uint64(h+1), 10), "99999999999999999999999"} {
		wantErrno(t, "rewind "+strconv.Quote(in), ctlWrite(mp, "rewind", in+"\n"), syscall.EINVAL)
	}
	if got := readFile(t, filepath.Join(mp, "f")); got != "2" {
		t.Errorf("f = %q after refused rewinds, want 2", got)
	}
	if got := headOf(t, mp); got != h {
		t.Errorf("head = %d after refused rewinds, want %d", got, h)
	}
}

func TestViewsReadOnly(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	if err := os.Mkdir(filepath.Join(mp, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(mp, "d/f"), "f")
	h := headOf(t, mp)
	v := view(mp, h)
	f := filepath.Join(v, "d/f")
	for what, err := range map[string]error{
		"open for write": func() error {
			w, err := os.OpenFile(f, os.O_WRONLY, 0)
			if err != nil || !m.fs.noOpen {
				return err
			}
			// Without OPEN (noopen.go) the daemon never sees the open:
			// the first write is refused.
			defer w.Close()
			_, err = w.Write([]byte("x"))
			return err
		}(),
		"create":     func() error { _, err := os.Create(filepath.Join(v, "d/new")); return err }(),
		"mkdir":      os.Mkdir(filepath.Join(v, "d/dd"), 0o755),
		"unlink":     os.Remove(f),
		"rmdir":      os.Remove(filepath.Join(v, "d")),
		"rename":     os.Rename(f, filepath.Join(v, "d/g")),
		"rename out": os.Rename(f, filepath.Join(mp, "g")),
		"rename in":  os.Rename(filepath.Join(mp, "d/f"), filepath.Join(v, "d/g")),
		"symlink":    os.Symlink("x", filepath.Join(v, "d/l")),
		"link":       os.Link(f, filepath.Join(v, "d/l")),
		"chmod":      os.Chmod(f, 0o600),
		"truncate":   os.Truncate(f, 0),
		"setxattr":   syscall.Setxattr(f, "user.x", []byte("1"), 0),
	} {
		if what == "rename out" || what == "rename in" {
			// Across the view boundary: EXDEV or EROFS are both refusals.
			if err == nil {
				t.Errorf("%s: succeeded", what)
			}
			continue
		}
		wantErrno(t, what+" in @T", err, syscall.EROFS)
	}
	if got := readFile(t, f); got != "f" {
		t.Errorf("%s = %q", f, got)
	}
	_, err := os.Stat(view(mp, h+1))
	wantErrno(t, "stat @head+1", err, syscall.ENOENT)
	_, err = os.Stat(view(mp, h+1000))
	wantErrno(t, "stat @head+1000", err, syscall.ENOENT)
}

func TestReservedNames(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	writeFile(t, filepath.Join(mp, "a"), "a")
	if err := os.Mkdir(filepath.Join(mp, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"create @5":       os.WriteFile(filepath.Join(mp, "@5"), nil, 0o644),
		"mkdir @12":       os.Mkdir(filepath.Join(mp, "@12"), 0o755),
		"symlink @3":      os.Symlink("a", filepath.Join(mp, "@3")),
		"link @9":         os.Link(filepath.Join(mp, "a"), filepath.Join(mp, "@9")),
		"rename to @4":    os.Rename(filepath.Join(mp, "a"), filepath.Join(mp, "@4")),
		"mkfifo @7":       syscall.Mkfifo(filepath.Join(mp, "@7"), 0o644),
		"rmdir .zero":     syscall.Rmdir(filepath.Join(mp, ".zero")),
		"rename .zero":    os.Rename(filepath.Join(mp, ".zero"), filepath.Join(mp, "z")),
		"rename to .zero": os.Rename(filepath.Join(mp, "sub"), filepath.Join(mp, ".zero")),
	} {
		if err == nil {
			t.Errorf("%s at the root: succeeded", what)
			continue
		}
		if what == "create @5" || what == "mkdir @12" || what == "symlink @3" || what == "mkfifo @7" || what == "rename to @4" || what == "link @9" {
			// @5..@12 are above head: they do not exist, so creating
			// them reaches the filesystem, which refuses.
			wantErrno(t, what, err, syscall.EPERM)
		}
	}
	// Allowed below the root.
	for _, name := range []string{"@5", ".zero"} {
		p := filepath.Join(mp, "sub", name)
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Errorf("create sub/%s: %v", name, err)
		} else if got := readFile(t, p); got != name {
			t.Errorf("sub/%s = %q", name, got)
		}
	}
	if _, err := os.Stat(filepath.Join(mp, "a")); err != nil {
		t.Errorf("a after refused renames: %v", err)
	}
}

// TestRootListingHidesReserved: neither the store nor "@N" names, even ones
// created directly in the backing directory, appear at the root.
func TestRootListingHidesReserved(t *testing.T) {
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "@7"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "visible"), "v")
	m := mountT(t, Options{Workspace: ws})
	mp := m.Mountpoint()
	ents, err := os.ReadDir(mp)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "visible" {
		t.Errorf("ls root = %v, want [visible]", names)
	}
	if _, err := os.Stat(filepath.Join(ws, ".zero", "events.jsonl")); err != nil {
		t.Errorf("store not in the backing workspace: %v", err)
	}
	// Through the mount, .zero is the control directory, not the store.
	if _, err := os.Stat(filepath.Join(mp, ".zero", "events.jsonl")); !os.IsNotExist(err) {
		t.Errorf("store reachable through the mount: %v", err)
	}
	// Views do not list reserved names either.
	if d := diffTrees(testsupport.Snapshot(t, view(mp, headOf(t, mp))), testsupport.Tree{"visible": {Kind: "file", Mode: 0o644, Content: "v"}}); d != "" {
		t.Errorf("@head:\n%s", d)
	}
}

// `touch @99999999999999999999` succeeded: a number past any sequence was
// not taken for a reserved name. And "@007" was view 7. Any number of digits
// is reserved at the root; only the canonical decimal form names a view.
func TestReservedNamesAnyDigitsCanonicalViews(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	for i := range 8 {
		stepT(t, mp, "s")
		writeFile(t, filepath.Join(mp, "f"), strings.Repeat("x", i))
	}
	if headOf(t, mp) < 7 {
		t.Fatalf("head %d, want at least 7", headOf(t, mp))
	}
	if _, err := os.Stat(view(mp, 7)); err != nil {
		t.Fatalf("@7: %v", err)
	}
	for _, name := range []string{"@99999999999999999999", "@007", "@00", "@18446744073709551616"} {
		p := filepath.Join(mp, name)
		_, err := os.Stat(p)
		wantErrno(t, "stat "+name, err, syscall.ENOENT)
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644) // touch
		if err == nil {
			f.Close()
		}
		wantErrno(t, "touch "+name, err, syscall.EPERM)
		wantErrno(t, "mkdir "+name, os.Mkdir(p, 0o755), syscall.EPERM)
		wantErrno(t, "rename to "+name, os.Rename(filepath.Join(mp, "f"), p), syscall.EPERM)
	}
	if _, err := os.Stat(filepath.Join(m.fs.workspace, "@99999999999999999999")); !os.IsNotExist(err) {
		t.Fatalf("the backing workspace got the reserved name: %v", err)
	}
}

// ctlRequestRaw writes one request to a control file and reads back, on the
// same open file, that request's own report (control's protocol).
func ctlRequestRaw(t *testing.T, mp, name, req string) (string, error) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(mp, ".zero", name), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte(req)); err != nil {
		return "", err
	}
	b := make([]byte, 1<<16)
	n, err := f.ReadAt(b, 0)
	if err != nil && n == 0 {
		t.Fatalf("read back %s: %v", name, err)
	}
	return string(b[:n]), nil
}

// TestCtlUndoRedo: the JSON forms of .zero/rewind undo and redo, resolved
// by the daemon; each handle reads its own request's report, naming the
// step it undid or brought back; nothing to undo is ENOENT.
func TestCtlUndoRedo(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	f := filepath.Join(mp, "f")
	wantErrno(t, "undo of nothing", ctlWrite(mp, "rewind", `{"undo": true}`), syscall.ENOENT)
	wantErrno(t, "redo of nothing", ctlWrite(mp, "rewind", `{"redo": true}`), syscall.ENOENT)
	stepT(t, mp, "one")
	writeFile(t, f, "1")
	s1 := headOf(t, mp) - 1
	stepT(t, mp, "two")
	writeFile(t, f, "2")
	s2 := headOf(t, mp) - 1
	for _, tc := range []struct {
		req, file string
		undid     *record.StepRef
		redid     *record.StepRef
	}{
		{`{"undo": true}`, "1", &record.StepRef{Kind: "step", Sequence: s2, Label: "two"}, nil},
		{`{"undo": true}`, "<absent>", &record.StepRef{Kind: "step", Sequence: s1, Label: "one"}, nil},
		{`{"redo": true}`, "1", nil, &record.StepRef{Kind: "step", Sequence: s1, Label: "one"}},
		{`{"redo": true}`, "2", nil, &record.StepRef{Kind: "step", Sequence: s2, Label: "two"}},
	} {
		out, err := ctlRequestRaw(t, mp, "rewind", tc.req+"\n")
		if err != nil {
			t.Fatalf("%s: %v", tc.req, err)
		}
		rep, err := control.ParseRewindReport([]byte(out))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(rep.Undid, tc.undid) || !reflect.DeepEqual(rep.Redid, tc.redid) || rep.Sequence != headOf(t, mp) {
			t.Errorf("%s: report %s, want undid %+v redid %+v", tc.req, out, tc.undid, tc.redid)
		}
		got := "<absent>"
		if b, err := os.ReadFile(f); err == nil {
			got = string(b)
		}
		if got != tc.file {
			t.Errorf("after %s: f = %q, want %q", tc.req, got, tc.file)
		}
		// A fresh open reads the same last report.
		if last := ctlRead(t, mp, "rewind"); last != out {
			t.Errorf("%s: .zero/rewind = %s, want %s", tc.req, last, out)
		}
	}
	wantErrno(t, "redo past the end", ctlWrite(mp, "rewind", `{"redo": true}`), syscall.ENOENT)
	for _, bad := range []string{`{"undo": true, "redo": true}`, `{"undo": false}`, `{"target": "x"}`, `{"target": 1, "paths": ["../x"]}`} {
		wantErrno(t, "rewind "+bad, ctlWrite(mp, "rewind", bad), syscall.EINVAL)
	}
}

// TestCtlStepAsksNoAttributes: a shell's "echo label > .zero/step" opens
// with O_TRUNC, a SETATTR of size 0. Its reply's attributes are kept, so
// the steps after the first send no GETATTR (the kernel asked again at
// every step while the reply carried no timeout).
func TestCtlStepAsksNoAttributes(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	if err := ctlWrite(mp, "step", "first\n"); err != nil {
		t.Fatal(err)
	}
	before := m.fs.ctlAttrs.Load()
	for i := range 5 {
		if err := ctlWrite(mp, "step", fmt.Sprintf("step %d\n", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.fs.ctlAttrs.Load() - before; n != 0 {
		t.Errorf("5 steps written with O_TRUNC sent %d GETATTR requests of .zero/step, want 0", n)
	}
}
