package hooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// PlanUninstall is what removing zerofs's hooks for a would change, from
// the files as they are; nothing is written. It takes out zerofs's own
// entries (those Install writes) and keeps everything else: an event list
// left empty goes, then a "hooks" object left empty, and a file left
// holding nothing but what an install put there (an empty object, Cursor's
// "version", OpenCode's "$schema") is removed, so an install followed by an
// uninstall leaves the project as it was. With opts.Worktrees only the
// worktree hooks go. OpenCode's user plugin file is removed; its project
// plugin file, outside the project and shared by every project that names
// it, is kept.
func PlanUninstall(a Agent, opts InstallOptions) ([]FileChange, error) {
	path := a.Path(opts)
	before, err := readOptional(path)
	if err != nil || before == nil {
		return nil, err
	}
	if a.kind == kindPlugin {
		if opts.Worktrees {
			return nil, nil
		}
		if opts.Scope == ScopeProject {
			after, err := unmergeOpenCodeConfig(before)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return []FileChange{changeTo(path, before, after)}, nil
		}
		if !bytes.Contains(before, []byte(opencodeMarker)) {
			return nil, nil // not a file zerofs wrote
		}
		return []FileChange{{Path: path, Before: before, Remove: true}}, nil
	}
	after, err := unmergeConfig(a, opts, before)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return []FileChange{changeTo(path, before, after)}, nil
}

// ApplyUninstall applies c, a change PlanUninstall planned, and when it
// removes a file, also the directory holding it if that is left empty and
// lies below opts' project or home (the .claude/ an install made): an
// install followed by an uninstall leaves nothing behind.
func ApplyUninstall(c FileChange, opts InstallOptions) error {
	if err := Apply(c); err != nil || !c.Remove {
		return err
	}
	dir := filepath.Dir(c.Path)
	for _, root := range []string{opts.Project, opts.Home} {
		if root != "" && strings.HasPrefix(dir, filepath.Clean(root)+"/") {
			os.Remove(dir) // fails, as it should, unless empty
			break
		}
	}
	return nil
}

// changeTo is the change from before to after at path; nil after removes
// the file.
func changeTo(path string, before, after []byte) FileChange {
	if after == nil {
		return FileChange{Path: path, Before: before, Remove: true}
	}
	return FileChange{Path: path, Before: before, After: after}
}

// unmergeConfig takes zerofs's entries out of a JSON hook configuration.
// It returns nil when nothing but what an install adds is left.
func unmergeConfig(a Agent, opts InstallOptions, before []byte) ([]byte, error) {
	if len(bytes.TrimSpace(before)) == 0 {
		return before, nil
	}
	cfg, err := parseObject(before)
	if err != nil {
		return nil, err
	}
	raw := cfg.get("hooks")
	if raw == nil {
		return before, nil
	}
	hooks, err := parseObject(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: \"hooks\" is not an object", ErrNotJSON)
	}
	events := a.WorktreeEvents
	if !opts.Worktrees {
		events = append([]string(nil), hooks.keys...)
	}
	for _, ev := range events {
		var entries []json.RawMessage
		if hooks.get(ev) == nil {
			continue
		}
		if err := json.Unmarshal(hooks.get(ev), &entries); err != nil {
			return nil, fmt.Errorf("%w: hooks.%s is not a list", ErrNotJSON, ev)
		}
		kept := entries[:0]
		for _, e := range entries {
			if !isOurs(a, e) {
				kept = append(kept, e)
			}
		}
		if len(kept) == len(entries) {
			continue
		}
		if len(kept) == 0 {
			hooks.del(ev)
			continue
		}
		b, err := json.Marshal(kept)
		if err != nil {
			return nil, err
		}
		hooks.set(ev, b)
	}
	if len(hooks.keys) == 0 {
		cfg.del("hooks")
	} else {
		cfg.set("hooks", hooks.marshal())
	}
	if onlyInstalls(cfg, a) {
		return nil, nil
	}
	return reindent(before, cfg)
}

// unmergeOpenCodeConfig takes the plugins a zerofs install named out of
// an opencode.json. It returns nil when nothing but what an install adds
// is left.
func unmergeOpenCodeConfig(before []byte) ([]byte, error) {
	cfg, err := parseObject(before)
	if err != nil {
		return nil, err
	}
	var plugins []json.RawMessage
	if raw := cfg.get("plugin"); raw != nil {
		if err := json.Unmarshal(raw, &plugins); err != nil {
			return nil, fmt.Errorf("%w: \"plugin\" is not a list", ErrNotJSON)
		}
	}
	kept := plugins[:0]
	for _, p := range plugins {
		if _, ok := isOurOpenCodePlugin(p); !ok {
			kept = append(kept, p)
		}
	}
	if len(kept) == len(plugins) {
		return before, nil
	}
	if len(kept) == 0 {
		cfg.del("plugin")
	} else {
		b, err := json.Marshal(kept)
		if err != nil {
			return nil, err
		}
		cfg.set("plugin", b)
	}
	if len(cfg.keys) == 0 || (len(cfg.keys) == 1 && cfg.keys[0] == "$schema") {
		return nil, nil
	}
	return reindent(before, cfg)
}

// onlyInstalls reports whether cfg holds nothing but what an install of
// a's hooks adds besides them (Cursor's "version": 1).
func onlyInstalls(cfg *object, a Agent) bool {
	switch {
	case len(cfg.keys) == 0:
		return true
	case len(cfg.keys) == 1 && a.Name == "cursor" && cfg.keys[0] == "version":
		return string(normalize(cfg.get("version"))) == "1"
	}
	return false
}

// reindent is cfg as an install writes a file, or before itself when that
// is the same JSON.
func reindent(before []byte, cfg *object) ([]byte, error) {
	var out bytes.Buffer
	if err := json.Indent(&out, cfg.marshal(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	if bytes.Equal(normalize(before), normalize(out.Bytes())) {
		return before, nil
	}
	return out.Bytes(), nil
}

// WorktreesInstalled reports whether the configuration at path holds
// zerofs's worktree hooks for each of a's worktree events (false for an
// agent that has none).
func WorktreesInstalled(a Agent, path string) (bool, error) {
	if len(a.WorktreeEvents) == 0 || a.kind == kindPlugin {
		return false, nil
	}
	b, err := readSmall(path)
	if err != nil {
		return false, err
	}
	cfg, err := parseObject(b)
	if err != nil {
		return false, err
	}
	hooks, err := parseObject(cfg.get("hooks"))
	if err != nil {
		return false, nil
	}
	for _, ev := range a.WorktreeEvents {
		if !holdsOurs(a, hooks, ev) {
			return false, nil
		}
	}
	return true, nil
}

// del removes k, keeping the other keys' order.
func (o *object) del(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	o.keys = slices.DeleteFunc(o.keys, func(x string) bool { return x == k })
}
