package archtest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/zerofs/zerofs"

// allowed lists, for each of our packages, the packages of ours it may
// import (directly or not). Imports point one way, cmd/zerofs → daemon
// (the mount's lifecycle) → the front ends at the top. At the bottom, record
// holds the contract's words (events and their payloads, sequences, kinds,
// forms, requests and refusals, name rules, the damage check) and imports
// none of ours: everything above speaks them without importing another
// floor to do so. Then the log and the blob store (eventlog, blobstore, on
// internal/durable); the state derived from the log, folded once
// (rewind/internal/index); the engine (rewind). The control protocol
// stands on record alone, beside the engine, not on it: the daemon (fs)
// and the clients (history) share it, and the engine resolves every
// request, undo and redo included, so fs never imports history (nor
// history fs), and nothing imports cmd. The timeline (zerofs ui) stands on
// history like the CLI, and so does the MCP server (mcpserver, zerofs
// mcp; and on branch, for zerofs_branch): never fs, never cmd, never each
// other. internal/wsdir (the workspace
// path resolver), internal/quote (how a name is printed for a person) and
// internal/proc (a process's identity: pid and start time, from /proc) are
// leaves like internal/durable.
var allowed = map[string][]string{
	"record":           {},
	"internal/durable": {},
	"internal/wsdir":   {},
	"internal/quote":   {},
	"internal/ignore":  {},
	"internal/proc":    {},
	// internal/testsupport is imported by tests only, and imports none of
	// ours: every package's tests may use it.
	"internal/testsupport": {},
	"hooks":                {},
	// merge is the three-way merge of trees and text, the standard
	// library only: the engine merges with it.
	"merge":                 {},
	"eventlog":              {"record", "internal/durable"},
	"blobstore":             {"record", "internal/durable"},
	"rewind/internal/index": {"record", "eventlog", "blobstore", "internal/durable"},
	"rewind":                {"record", "merge", "rewind/internal/index", "eventlog", "blobstore", "internal/durable", "internal/wsdir", "internal/quote", "internal/ignore"},
	"control":               {"record"},
	"history":               {"record", "hooks", "control", "rewind", "merge", "rewind/internal/index", "eventlog", "blobstore", "internal/durable", "internal/wsdir", "internal/quote", "internal/ignore", "internal/proc"},
	"fs":                    {"record", "control", "rewind", "merge", "rewind/internal/index", "eventlog", "blobstore", "internal/durable", "internal/wsdir", "internal/quote", "internal/ignore", "internal/proc"},
	// replicate copies a store to S3 and restores from it: it stands on
	// the engine (rewind) like history, below cmd, beside the front ends.
	"replicate": {"record", "rewind", "merge", "rewind/internal/index", "eventlog", "blobstore", "internal/durable", "internal/wsdir", "internal/quote", "internal/ignore"},
	"timeline":  {"record", "hooks", "history", "control", "rewind", "merge", "rewind/internal/index", "eventlog", "blobstore", "internal/durable", "internal/wsdir", "internal/quote", "internal/ignore", "internal/proc"},
	// bisect searches the history for the step that broke a command: it
	// stands on history like the front ends, and serves the CLI and MCP.
	"bisect":    {"record", "hooks", "history", "control", "rewind", "merge", "rewind/internal/index", "eventlog", "blobstore", "internal/durable", "internal/wsdir", "internal/quote", "internal/ignore", "internal/proc"},
	"mcpserver": {"record", "branch", "history", "bisect", "hooks", "control", "rewind", "merge", "rewind/internal/index", "eventlog", "blobstore", "internal/durable", "internal/wsdir", "internal/quote", "internal/ignore", "internal/proc"},
	// branch makes, mounts, lists and deletes a workspace's branches
	// (an overlay over @BASE/ and a zerofs of their own): it stands on
	// history like the front ends, which use it (the CLI, the MCP server,
	// the agents' worktree hooks), and runs this program to mount a branch.
	"branch": {"record", "hooks", "history", "control", "rewind", "merge", "rewind/internal/index", "eventlog", "blobstore", "internal/durable", "internal/wsdir", "internal/quote", "internal/ignore", "internal/proc"},
	// daemon is the mount's lifecycle (mount, umount, the daemon, its pid
	// file, signals and replication), below cmd and above the front end it
	// serves (fs), the client library (history) and replicate.
	"daemon":     {"record", "hooks", "fs", "history", "replicate", "control", "rewind", "merge", "rewind/internal/index", "eventlog", "blobstore", "internal/durable", "internal/wsdir", "internal/quote", "internal/ignore", "internal/proc"},
	"cmd/zerofs": {"record", "branch", "daemon", "fs", "history", "timeline", "mcpserver", "bisect", "replicate", "hooks", "control", "rewind", "merge", "rewind/internal/index", "eventlog", "blobstore", "internal/durable", "internal/wsdir", "internal/quote", "internal/ignore", "internal/proc"},
	// scripts/profmount is a developer's tool, a main like cmd/zerofs:
	// it serves a mount under the profiler (scripts/bench.sh).
	"scripts/profmount": {"record", "hooks", "fs", "history", "control", "rewind", "merge", "rewind/internal/index", "eventlog", "blobstore", "internal/durable", "internal/wsdir", "internal/quote", "internal/ignore", "internal/proc"},
	// scripts/loopmount is the benchmark's floor: go-fuse's plain loopback
	// with zerofs's mount settings and none of zerofs's code, so it
	// imports none of ours and, like cmd, may use go-fuse directly.
	"scripts/loopmount": {},
	// scripts/uringspike measures FUSE over io_uring with a server of its
	// own (the raw protocol) and with go-fuse's loopback: it imports none
	// of ours and, like loopmount, may use go-fuse directly.
	"scripts/uringspike": {},
}

// storeModules are what the blob store may use beyond x/sys: restic's
// chunker and zstd (issue 10 names both).
var storeModules = []string{"github.com/restic/chunker", "github.com/klauspost/compress"}

// outside lists, for each package, the outside modules it may reach.
// Only fs (and cmd, through it) may use go-fuse.
var outside = map[string][]string{
	"record":                {},
	"internal/durable":      {},
	"internal/wsdir":        {"golang.org/x/sys"},
	"hooks":                 {},
	"internal/testsupport":  {"golang.org/x/sys", "github.com/moby/sys/mountinfo"},
	"internal/quote":        {},
	"internal/ignore":       {},
	"internal/proc":         {},
	"scripts/uringspike":    {"golang.org/x/sys", "github.com/hanwen/go-fuse/v2"},
	"merge":                 {},
	"eventlog":              {"github.com/google/uuid", "golang.org/x/sys"},
	"blobstore":             append([]string{"golang.org/x/sys"}, storeModules...),
	"rewind/internal/index": append([]string{"github.com/google/uuid", "golang.org/x/sys"}, storeModules...),
	"rewind":                append([]string{"github.com/google/uuid", "golang.org/x/sys"}, storeModules...),
	"control":               {},
	"history":               append([]string{"github.com/google/uuid", "golang.org/x/sys", "github.com/aymanbagabas/go-udiff"}, storeModules...),
	"timeline":              append([]string{"github.com/google/uuid", "golang.org/x/sys", "github.com/aymanbagabas/go-udiff"}, storeModules...),
	// mcpserver speaks MCP (the SDK and its JSON schema package) and
	// nothing else beyond what history and branch (the mount table) use.
	"mcpserver": append([]string{"github.com/google/uuid", "golang.org/x/sys", "github.com/aymanbagabas/go-udiff", "github.com/moby/sys/mountinfo",
		"github.com/modelcontextprotocol/go-sdk", "github.com/google/jsonschema-go", "github.com/yosida95/uritemplate", "github.com/segmentio",
		"golang.org/x/oauth2", "golang.org/x/sync", "golang.org/x/time"}, storeModules...),
	"bisect": append([]string{"github.com/google/uuid", "golang.org/x/sys", "github.com/aymanbagabas/go-udiff"}, storeModules...),
}

type pkg struct {
	ImportPath string
	Deps       []string
	Standard   bool
}

func TestImportGraph(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps=false", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := map[string]bool{}
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		seen[rel] = true
		ok, known := allowed[rel]
		if !known {
			if !strings.HasPrefix(rel, "internal/") && rel != "e2e" {
				t.Errorf("package %s is not in the import rules; add it to allowed", rel)
			}
			continue
		}
		for _, d := range p.Deps {
			if d == "C" || !strings.Contains(strings.SplitN(d, "/", 2)[0], ".") {
				continue // standard library
			}
			if strings.HasPrefix(d, module+"/") {
				dr := strings.TrimPrefix(d, module+"/")
				if !contains(ok, dr) {
					t.Errorf("%s imports %s (directly or not); allowed: %v", rel, dr, ok)
				}
				continue
			}
			mods, limited := outside[rel]
			if limited && !hasPrefix(d, mods) {
				t.Errorf("%s reaches outside package %s; allowed modules: %v", rel, d, mods)
			}
		}
	}
	for rel := range allowed {
		if !seen[rel] {
			t.Errorf("package %s named in the rules does not exist", rel)
		}
	}
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if s == p || strings.HasPrefix(s, p+"/") {
			return true
		}
	}
	return false
}
