package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/hooks"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

// An installRecord is the last `hooks install` of an agent recorded in
// the workspace's log: its step and the files it wrote.
type installRecord struct {
	seq   record.Seq
	files []installedFile
}

// installOf is the agent and files a `hooks install` step's payload
// names, if ev is one.
func installOf(ev record.Event) (string, installRecord, bool) {
	if ev.Type != record.TypeToolCall || !bytes.Contains(ev.Payload, []byte(`"hooksInstall"`)) {
		return "", installRecord{}, false
	}
	var p struct {
		HooksInstall struct {
			Agent string          `json:"agent"`
			Files []installedFile `json:"files"`
		} `json:"hooksInstall"`
	}
	if json.Unmarshal(ev.Payload, &p) != nil || p.HooksInstall.Agent == "" {
		return "", installRecord{}, false
	}
	return p.HooksInstall.Agent, installRecord{seq: ev.Seq, files: p.HooksInstall.Files}, true
}

// checkInstalledFiles says which files a recorded install wrote are gone
// or changed since (a rewind or undo to before it, or an edit).
func checkInstalledFiles(w io.Writer, ws *history.Workspace, a hooks.Agent, rec installRecord) {
	for _, f := range rec.files {
		rel := filepath.Clean(f.Path)
		if !filepath.IsLocal(rel) {
			continue // not a path in the workspace: the log is not trusted
		}
		b, err := os.ReadFile(filepath.Join(ws.Root, rel))
		switch {
		case os.IsNotExist(err):
			fmt.Fprintf(w, "          %s, which `hooks install %s` wrote at step %d, is gone: nothing of %s is recorded (zerofs hooks install %s)\n",
				quote.Name(rel), a.Name, rec.seq, a.Title, a.Name)
		case err != nil:
			fmt.Fprintf(w, "          %s: %v\n", quote.Name(rel), err)
		default:
			sum := sha256.Sum256(b)
			if hex.EncodeToString(sum[:]) == f.SHA256 {
				continue
			}
			if ok, _ := hooks.Installed(a, filepath.Join(ws.Root, rel)); ok || rel != filepath.Clean(a.ProjectFiles()[0]) {
				fmt.Fprintf(w, "          %s changed since `hooks install %s` wrote it at step %d (zerofs diff %d -- %s)\n",
					quote.Name(rel), a.Name, rec.seq, rec.seq, quote.Name(rel))
			} else {
				fmt.Fprintf(w, "          %s no longer holds zerofs's hooks, which `hooks install %s` wrote at step %d: nothing of %s is recorded (zerofs hooks install %s)\n",
					quote.Name(rel), a.Name, rec.seq, a.Title, a.Name)
			}
		}
	}
}

// writeCheckNeeds prints, under an agent's line, what it still needs
// before its installed hooks record anything.
func writeCheckNeeds(w io.Writer, a hooks.Agent, opts hooks.InstallOptions, scopes []hooks.Scope) {
	for _, scope := range scopes {
		o := opts
		o.Scope = scope
		for _, n := range hooks.Needs(a, o) {
			fmt.Fprintf(w, "          needs (%s): %s\n", scope, n)
		}
	}
	if len(scopes) > 0 {
		for _, n := range hooks.Always(a) {
			fmt.Fprintf(w, "          %s\n", n)
		}
	}
	if a.Name == "opencode" {
		for _, p := range hooks.MissingPlugins(a, opts) {
			fmt.Fprintf(w, "          the project's opencode.json names %s, which is missing: nothing of OpenCode is recorded (zerofs hooks install opencode writes it again)\n", quote.Name(p))
		}
		for _, p := range hooks.LegacyFiles(a, opts) {
			fmt.Fprintf(w, "          %s is an earlier install's plugin (OpenCode installs its packages beside it): zerofs hooks install opencode moves it out\n", quote.Name(p))
		}
	}
}
