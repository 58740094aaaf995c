package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Scope is where a configuration applies: the user's (every project) or
// one project's.
type Scope string

const (
	ScopeUser    Scope = "user"
	ScopeProject Scope = "project"
)

// An Agent is a coding agent zerofs writes hooks for.
type Agent struct {
	Name  string // as `zerofs hooks install` takes it
	Title string // as people call it
	// ToolEvents and PromptEvents are the hook events zerofs installs:
	// before each tool call (a step) and at each prompt (a turn);
	// ResultEvents after each tool call (its step's tool_result).
	ToolEvents, PromptEvents, ResultEvents []string
	// WorktreeEvents are the hooks that make and remove a worktree,
	// installed with --worktrees (Claude Code's WorktreeCreate and
	// WorktreeRemove): they run `zerofs branch --hook`.
	WorktreeEvents []string
	// Limits says what the agent's hooks cannot show zerofs.
	Limits string
	// file is the configuration file under the home or project directory.
	userFile, projectFile string
	// kind is the configuration's format.
	kind configKind
}

type configKind int

const (
	// kindNested: {"hooks": {EVENT: [{"matcher", "hooks": [{"type":
	// "command", "command"}]}]}} (Claude Code, Codex, Gemini CLI).
	kindNested configKind = iota
	// kindFlat: {"hooks": {EVENT: [{"command"}]}} (Cursor, Windsurf).
	kindFlat
	// kindPlugin: a plugin file zerofs owns whole (OpenCode).
	kindPlugin
)

// Agents are the agents `zerofs hooks install` knows, in the order the
// agents guide (docs/agents.md) presents them.
var Agents = []Agent{
	{Name: "claude", Title: "Claude Code", ToolEvents: []string{"PreToolUse"}, PromptEvents: []string{"UserPromptSubmit"}, ResultEvents: []string{"PostToolUse", "PostToolUseFailure"},
		WorktreeEvents: []string{EventWorktreeCreate, EventWorktreeRemove},
		userFile:       ".claude/settings.json", projectFile: ".claude/settings.json", kind: kindNested,
		Limits: "Edits by Claude Code's own tools and by the commands it runs are both seen; subagents' tool calls are steps of their own."},
	{Name: "codex", Title: "Codex", ToolEvents: []string{"PreToolUse"}, PromptEvents: []string{"UserPromptSubmit"}, ResultEvents: []string{"PostToolUse"},
		userFile: ".codex/hooks.json", projectFile: ".codex/hooks.json", kind: kindNested,
		Limits: "Codex runs PreToolUse for Bash, apply_patch and MCP tools. Hooks are on by default from Codex 0.124 (the feature flag is now [features] hooks in config.toml; older versions called it codex_hooks)."},
	{Name: "gemini", Title: "Gemini CLI", ToolEvents: []string{"BeforeTool"}, PromptEvents: []string{"BeforeAgent"}, ResultEvents: []string{"AfterTool"},
		userFile: ".gemini/settings.json", projectFile: ".gemini/settings.json", kind: kindNested,
		Limits: "Project settings apply only in a folder Gemini CLI trusts."},
	{Name: "opencode", Title: "OpenCode", ToolEvents: []string{"tool.execute.before"}, PromptEvents: []string{"chat.message"}, ResultEvents: []string{"tool.execute.after"},
		userFile: ".config/opencode/plugins/zerofs.js", projectFile: "opencode.json", kind: kindPlugin,
		Limits: "OpenCode loads the plugin at start: restart it after installing. A project install names the plugin in the project's opencode.json and keeps the plugin file outside the workspace (OpenCode installs its own packages into any .opencode directory it finds)."},
	{Name: "cursor", Title: "Cursor", ToolEvents: []string{"beforeShellExecution"}, PromptEvents: []string{"beforeSubmitPrompt"}, ResultEvents: []string{"afterShellExecution"},
		userFile: ".cursor/hooks.json", projectFile: ".cursor/hooks.json", kind: kindFlat,
		Limits: "zerofs installs no hook before a Cursor file edit (afterFileEdit is too late; Cursor's newer preToolUse is not used yet): Cursor's edits are recorded (every change under the mount is), but they belong to the prompt's turn as one unnamed step, or to the shell command's step before them, not to a step of their own."},
	{Name: "windsurf", Title: "Windsurf", ToolEvents: []string{"pre_run_command", "pre_write_code"}, PromptEvents: []string{"pre_user_prompt"}, ResultEvents: []string{"post_run_command", "post_write_code"},
		userFile: ".codeium/windsurf/hooks.json", projectFile: ".windsurf/hooks.json", kind: kindFlat,
		Limits: "Windsurf's hooks see commands and code writes; a tool that changes files any other way belongs to the step before it."},
}

// AgentNames lists the agents' names.
func AgentNames() []string {
	names := make([]string, len(Agents))
	for i, a := range Agents {
		names[i] = a.Name
	}
	return names
}

// Lookup is the agent named name.
func Lookup(name string) (Agent, bool) {
	for _, a := range Agents {
		if a.Name == name {
			return a, true
		}
	}
	return Agent{}, false
}

// InstallOptions say where and what to install.
type InstallOptions struct {
	Scope Scope
	// Home is the user's home directory; Project the project's root.
	Home, Project string
	// Zerofs is the zerofs binary the hooks run (an absolute path, or
	// "zerofs" to find it on PATH).
	Zerofs string
	// NoPrompt installs the prompt and result hooks with --no-prompt:
	// turns are recorded without the prompt's text, results without the
	// error's first line.
	NoPrompt bool
	// Worktrees installs the agent's worktree hooks too (WorktreeEvents),
	// so that each worktree it makes is a zerofs branch. An install
	// without it keeps worktree hooks an earlier install wrote (pointing
	// them at this zerofs).
	Worktrees bool
}

// A FileChange is one configuration file's content before and after an
// install. Before is nil when the file does not exist yet; Remove says the
// install removes it (a file an earlier install wrote).
type FileChange struct {
	Path          string
	Before, After []byte
	Remove        bool
}

// Changed reports whether the install changes the file.
func (c FileChange) Changed() bool {
	if c.Remove {
		return c.Before != nil
	}
	return c.Before == nil || !bytes.Equal(c.Before, c.After)
}

// ErrNotJSON: an agent's configuration file that is not a JSON object is
// left alone.
var ErrNotJSON = errors.New("hooks: configuration is not a JSON object")

// Path is the configuration file an install for a writes.
func (a Agent) Path(opts InstallOptions) string {
	if opts.Scope == ScopeProject {
		return filepath.Join(opts.Project, a.projectFile)
	}
	if a.kind == kindPlugin {
		if x := os.Getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) && opts.Home == homeDir() {
			return filepath.Join(x, "opencode", "plugins", "zerofs.js")
		}
	}
	return filepath.Join(opts.Home, a.userFile)
}

func homeDir() string {
	h, _ := os.UserHomeDir()
	return h
}

// Command is the hook command installed for a (the prompt and result
// hooks' when prompt is true: they carry a person's words or a tool's
// output, which --no-prompt keeps out of the log).
func (a Agent) Command(opts InstallOptions, prompt bool) string {
	cmd := shellQuote(opts.Zerofs) + " step --hook --agent " + a.Name
	if prompt && opts.NoPrompt {
		cmd += " --no-prompt"
	}
	return cmd
}

// BranchCommand is the worktree hooks' command for a.
func (a Agent) BranchCommand(opts InstallOptions) string {
	return shellQuote(opts.Zerofs) + " branch --hook --agent " + a.Name
}

// Plan is what installing a's hooks would change, computed from the file
// as it is; nothing is written. Installing twice changes nothing the
// second time: zerofs's own entries (commands running "step --hook") are
// replaced in place, and everything else in the file is kept.
func Plan(a Agent, opts InstallOptions) (FileChange, error) {
	if a.kind == kindPlugin && opts.Scope == ScopeProject {
		all, err := planOpenCodeProject(a, opts)
		if err != nil {
			return FileChange{}, err
		}
		return all[1], nil
	}
	path := a.Path(opts)
	before, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		before, err = nil, nil
	}
	if err != nil {
		return FileChange{}, err
	}
	c := FileChange{Path: path, Before: before}
	if a.kind == kindPlugin {
		c.After = []byte(opencodePlugin(a, opts))
		return c, nil
	}
	c.After, err = mergeConfig(a, opts, before)
	if err != nil {
		return FileChange{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// PlanAll is every file installing a's hooks changes: the configuration
// (Plan's), and for OpenCode's project install the plugin file it names
// and an earlier install's plugin file, removed.
func PlanAll(a Agent, opts InstallOptions) ([]FileChange, error) {
	if a.kind == kindPlugin && opts.Scope == ScopeProject {
		return planOpenCodeProject(a, opts)
	}
	c, err := Plan(a, opts)
	if err != nil {
		return nil, err
	}
	return []FileChange{c}, nil
}

// Apply writes c.After to c.Path (creating its directories), through a
// temporary file renamed over it, keeping the file's mode; or removes
// c.Path (c.Remove). An unchanged file is not touched.
func Apply(c FileChange) error {
	if !c.Changed() {
		return nil
	}
	if c.Remove {
		err := os.Remove(c.Path)
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		return err
	}
	dir := filepath.Dir(c.Path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(c.Path); err == nil {
		mode = fi.Mode().Perm()
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(c.Path)+".zerofs-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(c.After)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, c.Path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// Installed reports whether the configuration at path holds zerofs's hook
// for each of a's events.
func Installed(a Agent, path string) (bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	if a.kind == kindPlugin {
		if filepath.Base(path) == "opencode.json" {
			return openCodeProjectInstalled(path)
		}
		return bytes.Contains(b, []byte("step\", \"--hook\"")), nil
	}
	cfg, err := parseObject(b)
	if err != nil {
		return false, err
	}
	hooks, err := parseObject(cfg.get("hooks"))
	if err != nil {
		return false, nil
	}
	for _, ev := range append(slices.Clone(a.ToolEvents), a.PromptEvents...) {
		var entries []json.RawMessage
		json.Unmarshal(hooks.get(ev), &entries)
		if !slices.ContainsFunc(entries, func(e json.RawMessage) bool { return isOurs(a, e) }) {
			return false, nil
		}
	}
	return true, nil
}

// mergeConfig adds zerofs's hooks to a JSON configuration (nil: none yet).
func mergeConfig(a Agent, opts InstallOptions, before []byte) ([]byte, error) {
	cfg := &object{}
	if len(bytes.TrimSpace(before)) > 0 {
		var err error
		if cfg, err = parseObject(before); err != nil {
			return nil, err
		}
	}
	hooks := &object{}
	if raw := cfg.get("hooks"); raw != nil {
		var err error
		if hooks, err = parseObject(raw); err != nil {
			return nil, fmt.Errorf("%w: \"hooks\" is not an object", ErrNotJSON)
		}
	}
	if a.kind == kindFlat && a.Name == "cursor" && cfg.get("version") == nil {
		cfg.set("version", json.RawMessage("1"))
	}
	for _, ev := range a.ToolEvents {
		if err := mergeEvent(a, hooks, ev, entryFor(a, a.Command(opts, false), true)); err != nil {
			return nil, err
		}
	}
	for _, ev := range a.PromptEvents {
		if err := mergeEvent(a, hooks, ev, entryFor(a, a.Command(opts, true), false)); err != nil {
			return nil, err
		}
	}
	for _, ev := range a.ResultEvents {
		if err := mergeEvent(a, hooks, ev, entryFor(a, a.Command(opts, true), true)); err != nil {
			return nil, err
		}
	}
	for _, ev := range a.WorktreeEvents {
		if !opts.Worktrees && !holdsOurs(a, hooks, ev) {
			continue
		}
		if err := mergeEvent(a, hooks, ev, entryFor(a, a.BranchCommand(opts), false)); err != nil {
			return nil, err
		}
	}
	cfg.set("hooks", hooks.marshal())
	var out bytes.Buffer
	if err := json.Indent(&out, cfg.marshal(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	if before != nil && bytes.Equal(normalize(before), normalize(out.Bytes())) {
		return before, nil // the same JSON: keep the file's own layout
	}
	return out.Bytes(), nil
}

// normalize is a JSON text's compact form, for comparing.
func normalize(b []byte) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}

// entryFor is zerofs's entry for one event.
func entryFor(a Agent, command string, tool bool) json.RawMessage {
	var v any
	switch a.kind {
	case kindFlat:
		e := map[string]any{"command": command}
		if a.Name == "windsurf" {
			e["show_output"] = false
		}
		v = e
	default:
		h := map[string]any{"type": "command", "command": command}
		if a.Name == "gemini" {
			h["name"] = "zerofs"
		}
		e := map[string]any{"hooks": []any{h}}
		if tool {
			switch a.Name {
			case "claude":
				e["matcher"] = "*"
			case "gemini":
				e["matcher"] = ".*"
			}
		}
		v = e
	}
	b, _ := json.Marshal(v)
	return b
}

// mergeEvent puts entry in the event's list: in place of zerofs's own
// entry, or at the end.
func mergeEvent(a Agent, hooks *object, ev string, entry json.RawMessage) error {
	var entries []json.RawMessage
	if raw := hooks.get(ev); raw != nil {
		if err := json.Unmarshal(raw, &entries); err != nil {
			return fmt.Errorf("%w: hooks.%s is not a list", ErrNotJSON, ev)
		}
	}
	out := make([]json.RawMessage, 0, len(entries)+1)
	placed := false
	for _, e := range entries {
		if !isOurs(a, e) {
			out = append(out, e)
			continue
		}
		if !placed {
			out = append(out, entry)
			placed = true
		}
	}
	if !placed {
		out = append(out, entry)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	hooks.set(ev, b)
	return nil
}

// isOurs reports whether a configuration entry is zerofs's own: its one
// command runs "zerofs ... step --hook".
func isOurs(a Agent, e json.RawMessage) bool {
	var flat struct {
		Command string `json:"command"`
		Hooks   []struct {
			Command string `json:"command"`
		} `json:"hooks"`
	}
	if json.Unmarshal(e, &flat) != nil {
		return false
	}
	cmd := flat.Command
	if a.kind == kindNested {
		if len(flat.Hooks) != 1 {
			return false
		}
		cmd = flat.Hooks[0].Command
	}
	return isZerofsHook(cmd)
}

// isZerofsHook reports whether a hook command runs zerofs's step hook,
// or its worktree hook.
func isZerofsHook(cmd string) bool {
	return strings.Contains(cmd, "zerofs") && (strings.Contains(cmd, " step --hook") || strings.Contains(cmd, " branch --hook"))
}

// holdsOurs reports whether the event's list in hooks holds an entry of
// zerofs's.
func holdsOurs(a Agent, hooks *object, ev string) bool {
	var entries []json.RawMessage
	json.Unmarshal(hooks.get(ev), &entries)
	return slices.ContainsFunc(entries, func(e json.RawMessage) bool { return isOurs(a, e) })
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// object is a JSON object that keeps its keys' order, so that merging
// into a person's settings file moves nothing they wrote.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

func parseObject(b []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, ErrNotJSON
	}
	o := &object{vals: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, ErrNotJSON
		}
		k, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, ErrNotJSON
		}
		if _, dup := o.vals[k]; !dup {
			o.keys = append(o.keys, k)
		}
		o.vals[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, ErrNotJSON
	}
	if _, err := dec.Token(); err == nil {
		return nil, ErrNotJSON // more after the object
	}
	return o, nil
}

func (o *object) get(k string) json.RawMessage {
	if o.vals == nil {
		return nil
	}
	return o.vals[k]
}

func (o *object) set(k string, v json.RawMessage) {
	if o.vals == nil {
		o.vals = map[string]json.RawMessage{}
	}
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *object) marshal() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}
