package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// toolCase is one tool run as one step.
type toolCase struct {
	name string
	// setup fills the workspace through the mount, in a step of its own.
	setup func(t *testing.T, ws string)
	// tool runs the tool and checks that it did its job.
	tool func(t *testing.T, ws string)
	// unchanged: the tool writes nothing in the workspace.
	unchanged bool
	// undo rolls back with `zerofs undo` instead of `zerofs rewind T`.
	undo bool
	// after runs once the tool's step is rolled back: the tool must find a
	// consistent world.
	after func(t *testing.T, ws string)
}

// TestTools runs each tool as a step under its own mount, then checks the
// views of the state before it and that a rewind restores that state
// exactly.
func TestTools(t *testing.T) {
	for _, c := range toolCases(t) {
		t.Run(c.name, func(t *testing.T) {
			ws := mountT(t)
			if c.setup != nil {
				step(t, ws, "setup")
				c.setup(t, ws)
			}
			T := step(t, ws, c.name)
			before := snapshot(t, ws)

			c.tool(t, ws)
			if c.unchanged {
				sameTree(t, "workspace after "+c.name, before, snapshot(t, ws))
			}
			checkViews(t, ws, T, before, !c.unchanged)

			if c.undo {
				zerofsOK(t, ws, "undo")
			} else {
				rewindTo(t, ws, T)
			}
			sameTree(t, "workspace after rolling back "+c.name, before, snapshot(t, ws))
			// The rewind itself is history: @T still shows the same state.
			sameTree(t, "@T after the rewind", before, snapshot(t, view(ws, T)))
			if c.after != nil {
				c.after(t, ws)
			}
		})
	}
}

// checkViews checks @T against the snapshot taken at T, with Go and with
// the tools a user would use: diff -r, ls, cat.
func checkViews(t *testing.T, ws string, T int64, before tree, changed bool) {
	t.Helper()
	at := "@" + itoa(T)
	sameTree(t, at, before, snapshot(t, view(ws, T)))

	cp := filepath.Join(t.TempDir(), "copy")
	os.Mkdir(cp, 0o755)
	materialize(t, cp, before)
	must(t, ws, nil, "diff", "-r", "--no-dereference", at, cp)

	// diff -r @T . differs exactly when the tool changed something; it
	// would also differ if the root listed .zero or @T.
	out, err := runCmd(t, cmdTimeout, ws, nil, "diff", "-r", "--no-dereference", "-q", at, ".")
	if code := exitCode(err); changed && code != 1 || !changed && code != 0 {
		t.Errorf("diff -r %s . : exit %d (%v), want %d\n%.2000s", at, code, err, map[bool]int{true: 1, false: 0}[changed], out)
	}

	var top []string
	for p := range before {
		if !strings.Contains(p, "/") {
			top = append(top, p)
		}
	}
	sort.Strings(top)
	if got, want := strings.Fields(must(t, ws, nil, "ls", "-A", at+"/")), top; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("ls -A %s/: got %q, want %q", at, got, want)
	}
	if first := firstFile(before); first != "" {
		if got := must(t, ws, nil, "cat", at+"/"+first); got != before[first].Content {
			t.Errorf("cat %s/%s: got %d bytes, want %d", at, first, len(got), len(before[first].Content))
		}
	}
	rootHidesControl(t, ws)
}

// rootHidesControl checks that ls of the mount root shows neither .zero nor
// any @T (SPEC: like ZFS's .zfs).
func rootHidesControl(t *testing.T, ws string) {
	t.Helper()
	for _, name := range strings.Fields(must(t, ws, nil, "ls", "-a")) {
		if name == ".zero" || strings.HasPrefix(name, "@") {
			t.Errorf("ls -a of the root lists %q", name)
		}
	}
}

func firstFile(tr tree) string {
	var files []string
	for p, e := range tr {
		if e.Kind == "file" {
			files = append(files, p)
		}
	}
	sort.Strings(files)
	if len(files) == 0 {
		return ""
	}
	return files[0]
}

func toolCases(t *testing.T) []toolCase {
	src := genTree(1, 300)
	goEnv := func(t *testing.T) []string {
		// No network and no module cache: the module needs only the
		// standard library. The build cache lives outside the workspace.
		return []string{"GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local", "GOCACHE=" + goCache(t), "CGO_ENABLED=0"}
	}
	return []toolCase{{
		name:  "tar-extract",
		setup: func(t *testing.T, ws string) { writeFile(t, filepath.Join(ws, "README"), "hello\n", 0o644) },
		tool: func(t *testing.T, ws string) {
			ball := tarball(t, src)
			sh(t, ws, "mkdir vendor && tar -xpf "+ball+" -C vendor")
			sameTree(t, "vendor after tar -x", src, snapshot(t, ws).Sub("vendor"))
		},
		after: func(t *testing.T, ws string) {
			// The rewind left no trace that stops extracting again.
			sh(t, ws, "mkdir vendor && tar -xpf "+tarball(t, src)+" -C vendor")
			sameTree(t, "vendor after a second tar -x", src, snapshot(t, ws).Sub("vendor"))
		},
	}, {
		name:      "tar-create",
		setup:     func(t *testing.T, ws string) { materialize(t, ws, src) },
		unchanged: true,
		tool: func(t *testing.T, ws string) {
			out := t.TempDir()
			must(t, ws, nil, "tar", "-cf", filepath.Join(out, "ws.tar"), ".")
			x := filepath.Join(out, "x")
			os.Mkdir(x, 0o755)
			must(t, x, nil, "tar", "-xpf", filepath.Join(out, "ws.tar"))
			sameTree(t, "tar -c of the workspace, extracted", src, snapshot(t, x))
		},
	}, {
		name:  "sed-in-place",
		undo:  true,
		setup: func(t *testing.T, ws string) { sedSetup(t, ws) },
		tool: func(t *testing.T, ws string) {
			must(t, ws, nil, "sed", "-i", "s/foo/bar/g", "src/a.txt")
			if got, want := readFile(t, filepath.Join(ws, "src/a.txt")), "bar 1\nbar 2\nkeep\n"; got != want {
				t.Errorf("src/a.txt after sed -i: got %q, want %q", got, want)
			}
		},
		after: func(t *testing.T, ws string) {
			must(t, ws, nil, "sed", "-i", "s/keep/kept/", "src/a.txt")
			if got, want := readFile(t, filepath.Join(ws, "src/a.txt")), "foo 1\nfoo 2\nkept\n"; got != want {
				t.Errorf("src/a.txt after a second sed -i: got %q, want %q", got, want)
			}
		},
	}, {
		name: "python-replace",
		setup: func(t *testing.T, ws string) {
			writeFile(t, filepath.Join(ws, "config.json"), `{"v": 1}`+"\n", 0o640)
		},
		tool: func(t *testing.T, ws string) {
			// An editor's save: write a temp file beside the target,
			// fsync it, keep the mode, rename it over the target.
			must(t, ws, nil, "python3", "-c", `
import os
with open(".config.json.swp", "w") as f:
    f.write('{"v": 2}\n')
    f.flush()
    os.fsync(f.fileno())
os.chmod(".config.json.swp", os.stat("config.json").st_mode & 0o7777)
os.replace(".config.json.swp", "config.json")
`)
			fi, err := os.Stat(filepath.Join(ws, "config.json"))
			if got, want := readFile(t, filepath.Join(ws, "config.json")), `{"v": 2}`+"\n"; err != nil || got != want || fi.Mode().Perm() != 0o640 {
				t.Errorf("config.json after os.replace: got %q mode %v (%v), want %q mode 0640", got, fi.Mode(), err, want)
			}
		},
		after: func(t *testing.T, ws string) {
			got := must(t, ws, nil, "python3", "-c", `import json; print(json.load(open("config.json"))["v"])`)
			if strings.TrimSpace(got) != "1" {
				t.Errorf("python3 reads v = %q after the rewind, want 1", got)
			}
		},
	}, {
		name: "cp-a-in",
		tool: func(t *testing.T, ws string) {
			from := filepath.Join(t.TempDir(), "src")
			os.Mkdir(from, 0o755)
			small := genTree(2, 60)
			materialize(t, from, small)
			must(t, ws, nil, "cp", "-a", from, "copied")
			sameTree(t, "copied after cp -a", small, snapshot(t, ws).Sub("copied"))
		},
	}, {
		name:  "rm-rf",
		undo:  true,
		setup: func(t *testing.T, ws string) { materialize(t, ws, deepTree()) },
		tool: func(t *testing.T, ws string) {
			T := head(t, ws)
			must(t, ws, nil, "rm", "-rf", "deep")
			if exists(filepath.Join(ws, "deep")) {
				t.Errorf("deep still exists after rm -rf")
			}
			// cp -a out of the view brings the removed tree back
			// whole, outside the mount.
			out := filepath.Join(t.TempDir(), "x")
			must(t, ws, nil, "cp", "-a", filepath.Join(view(ws, T), "deep"), out)
			sameTree(t, "cp -a @T/deep", deepTree().Sub("deep"), snapshot(t, out))
		},
	}, {
		name: "go-build",
		setup: func(t *testing.T, ws string) {
			writeFile(t, filepath.Join(ws, "go.mod"), "module example.com/hello\n\ngo 1.21\n", 0o644)
			writeFile(t, filepath.Join(ws, "main.go"), "package main\n\nfunc main() { println(\"hello from zerofs\") }\n", 0o644)
		},
		tool: func(t *testing.T, ws string) {
			must(t, ws, goEnv(t), "go", "build", "-o", "hello", ".")
			if out := must(t, ws, nil, "./hello"); !strings.Contains(out, "hello from zerofs") {
				t.Errorf("./hello: got %q, want hello from zerofs", out)
			}
		},
		after: func(t *testing.T, ws string) {
			if exists(filepath.Join(ws, "hello")) {
				t.Errorf("the binary survived the rewind")
			}
			must(t, ws, goEnv(t), "go", "build", "-o", "hello", ".")
			must(t, ws, nil, "./hello")
		},
	}}
}

func sedSetup(t *testing.T, ws string) {
	os.Mkdir(filepath.Join(ws, "src"), 0o755)
	writeFile(t, filepath.Join(ws, "src/a.txt"), "foo 1\nfoo 2\nkeep\n", 0o664)
	writeFile(t, filepath.Join(ws, "src/b.txt"), "foo untouched\n", 0o644)
}

// deepTree is a tree rm -rf has to work hard on: a chain of 25 nested
// directories, files of several modes on the way, symlinks (one to a
// directory, one dangling), empty directories and unusual directory modes.
func deepTree() tree {
	tr := tree{"deep": {Kind: "dir", Mode: 0o755}}
	p := "deep"
	for i := 0; i < 25; i++ {
		p += "/d" + itoa(int64(i))
		tr[p] = entry{Kind: "dir", Mode: []os.FileMode{0o755, 0o700, 0o555, os.ModeSticky | 0o777}[i%4]}
		tr[p+"/file"] = entry{Kind: "file", Mode: []os.FileMode{0o644, 0o755, 0o400, os.ModeSetuid | 0o755}[i%4], Content: strings.Repeat("x", i*97)}
		if i%5 == 0 {
			tr[p+"/empty"] = entry{Kind: "dir", Mode: 0o750}
			tr[p+"/up"] = entry{Kind: "symlink", Content: ".."}
			tr[p+"/nowhere"] = entry{Kind: "symlink", Content: "missing/file"}
		}
	}
	for k, v := range genTree(3, 80) {
		tr["deep/gen/"+k] = v
	}
	tr["deep/gen"] = entry{Kind: "dir", Mode: 0o755}
	tr["other.txt"] = entry{Kind: "file", Mode: 0o644, Content: "not under deep\n"}
	return tr
}

// tarball writes tr to a directory outside any mount and returns the path
// of a tar of it, made with tar itself.
func tarball(t *testing.T, tr tree) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	materialize(t, src, tr)
	ball := filepath.Join(dir, "src.tar")
	must(t, dir, nil, "tar", "-C", src, "-cf", ball, ".")
	return ball
}

// goCache is a build cache outside the workspace, made by TestMain and
// shared by the suite's builds.
func goCache(t *testing.T) string {
	t.Helper()
	if goCacheDir == "" {
		t.Fatal("no build cache directory")
	}
	return goCacheDir
}

func writeFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // umask
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return string(b)
}
