package history

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/hooks"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

// A hookFile is an agent's project hook configuration as it was before a
// rewind: a rewind to before `hooks install` removes it, and the agent's
// steps and turns then silently stop being recorded.
type hookFile struct {
	agent   hooks.Agent
	rel     string
	content []byte
}

// A HookGuard remembers the workspace's installed hook files before a
// rewind, to say afterwards which it removed or changed (the CLI, the MCP
// server and every front end warn alike).
type HookGuard struct {
	root  string
	files []hookFile
}

// GuardHooks reads the hook files installed in the workspace at root.
func GuardHooks(root string) *HookGuard {
	g := &HookGuard{root: root}
	for _, a := range hooks.Agents {
		for _, rel := range a.ProjectFiles() {
			p := filepath.Join(root, rel)
			if ok, _ := hooks.Installed(a, p); !ok {
				continue
			}
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			g.files = append(g.files, hookFile{agent: a, rel: rel, content: b})
		}
	}
	return g
}

// Warnings says, after a rewind (or its dry run), which installed hook
// files it changes: a dry run from its preview, a real one from the files
// as they are now (nil for a nil guard).
func (g *HookGuard) Warnings(rep control.RewindReport) []string {
	if g == nil {
		return nil
	}
	var out []string
	for _, f := range g.files {
		if rep.DryRun {
			for _, pc := range rep.Preview {
				if pc.Path != f.rel && !strings.HasPrefix(f.rel, pc.Path+"/") {
					continue
				}
				if pc.Action == record.ActionDelete {
					out = append(out, fmt.Sprintf("this would delete %s, which holds zerofs's hooks for %s: %s",
						quote.Name(f.rel), f.agent.Title, afterHooksGone(f.agent)))
				} else {
					out = append(out, fmt.Sprintf("this would change %s, which holds zerofs's hooks for %s: if they go, %s",
						quote.Name(f.rel), f.agent.Title, afterHooksGone(f.agent)))
				}
				break
			}
			continue
		}
		p := filepath.Join(g.root, f.rel)
		now, err := os.ReadFile(p)
		switch ok, _ := hooks.Installed(f.agent, p); {
		case err != nil && os.IsNotExist(err):
			out = append(out, fmt.Sprintf("removed %s, which held zerofs's hooks for %s: %s",
				quote.Name(f.rel), f.agent.Title, afterHooksGone(f.agent)))
		case !ok:
			out = append(out, fmt.Sprintf("%s no longer holds zerofs's hooks for %s: %s",
				quote.Name(f.rel), f.agent.Title, afterHooksGone(f.agent)))
		case !bytes.Equal(now, f.content):
			out = append(out, fmt.Sprintf("changed %s, which holds zerofs's hooks for %s (they are still installed; `zerofs hooks check` says what changed since the install)",
				quote.Name(f.rel), f.agent.Title))
		}
	}
	return out
}

// afterHooksGone is what follows when an agent's hooks are gone.
func afterHooksGone(a hooks.Agent) string {
	return fmt.Sprintf("%s's steps and turns are not recorded after it (zerofs hooks install %s puts them back)", a.Title, a.Name)
}
