package history

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFind(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	deep := filepath.Join(ws, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	// A .zero without a log is not a store (a mount that never started).
	os.MkdirAll(filepath.Join(ws, "a", ".zero"), 0o755)
	if _, err := Find(deep); !errors.Is(err, ErrNoWorkspace) {
		t.Fatalf("before the store exists: got %v, want ErrNoWorkspace", err)
	}
	os.MkdirAll(filepath.Join(ws, ".zero"), 0o755)
	if err := os.WriteFile(filepath.Join(ws, ".zero", "events.jsonl"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{ws, deep, filepath.Join(ws, "a")} {
		got, err := Find(dir)
		if err != nil {
			t.Fatalf("from %s: %v", dir, err)
		}
		if got.Root != ws || got.Mounted || got.Store != filepath.Join(ws, ".zero") {
			t.Errorf("from %s: got %+v, want the unmounted store at %s", dir, got, ws)
		}
	}
	w := &Workspace{Root: ws}
	for _, tc := range []struct{ cwd, arg, want string }{
		{ws, "x.go", "x.go"},
		{deep, "x.go", "a/b/x.go"},
		{deep, "../x.go", "a/x.go"},
		{deep, ".", "a/b"},
		{ws, ".", ""},
		{ws, filepath.Join(ws, "a", "y"), "a/y"},
	} {
		got, err := w.RelPath(tc.cwd, tc.arg)
		if err != nil || got != tc.want {
			t.Errorf("RelPath(%s, %s) = %q, %v; want %q", tc.cwd, tc.arg, got, err, tc.want)
		}
	}
	for _, bad := range []string{"..", "../x", "/etc/passwd"} {
		if got, err := w.RelPath(ws, bad); err == nil {
			t.Errorf("RelPath(%s) = %q, want an error", bad, got)
		}
	}
}
