package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// OpenCode installs @opencode-ai/plugin (package.json, its lock, a
// .gitignore and node_modules: thousands of files) into every `.opencode`
// directory it finds, each time it starts, whatever that directory holds
// (its config loader, 1.18.33). A plugin in the project's
// `.opencode/plugins/` would bring all of that into the workspace and its
// history. So a project install writes no `.opencode`: it names the plugin
// in the project's `opencode.json` (`"plugin": ["file:///…/zerofs.js"]`,
// which OpenCode loads from the project root without installing anything),
// and the plugin file itself lives outside the workspace, in the user's
// data directory, where OpenCode does not look for plugins on its own.

// opencodeLegacyFile is where installs before this one put the project's
// plugin; an install moves it out (OpenCode would load both).
const opencodeLegacyFile = ".opencode/plugins/zerofs.js"

// opencodeMarker is in every plugin file zerofs writes, and in no other.
const opencodeMarker = "written by 'zerofs hooks install opencode'"

// opencodeProjectPlugin is the plugin file a project install names: one
// per variant (with and without the prompt's text), shared by the
// projects that use it.
func opencodeProjectPlugin(opts InstallOptions) string {
	data := filepath.Join(opts.Home, ".local", "share")
	if x := os.Getenv("XDG_DATA_HOME"); x != "" && filepath.IsAbs(x) && opts.Home == homeDir() {
		data = x
	}
	name := "zerofs.js"
	if opts.NoPrompt {
		name = "zerofs-no-prompt.js"
	}
	return filepath.Join(data, "zerofs", "opencode", name)
}

// fileURL is path as a file: URL, as OpenCode takes a plugin.
func fileURL(path string) string {
	return (&url.URL{Scheme: "file", Path: path}).String()
}

// isOurOpenCodePlugin reports whether a plugin entry of opencode.json is
// one a zerofs install wrote: a file: URL of a zerofs/opencode/zerofs*.js.
func isOurOpenCodePlugin(entry json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(entry, &s) != nil || !strings.HasPrefix(s, "file://") {
		return "", false
	}
	u, err := url.Parse(s)
	if err != nil || u.Path == "" {
		return "", false
	}
	base := filepath.Base(u.Path)
	dir := filepath.Dir(u.Path)
	if filepath.Base(dir) != "opencode" || filepath.Base(filepath.Dir(dir)) != "zerofs" ||
		(base != "zerofs.js" && base != "zerofs-no-prompt.js") {
		return "", false
	}
	return u.Path, true
}

// mergeOpenCodeConfig names pluginPath in an opencode.json (nil: none
// yet), in place of any plugin an earlier zerofs install named there,
// keeping everything else.
func mergeOpenCodeConfig(before []byte, pluginPath string) ([]byte, error) {
	cfg := &object{}
	if len(bytes.TrimSpace(before)) > 0 {
		var err error
		if cfg, err = parseObject(before); err != nil {
			return nil, err
		}
	} else {
		cfg.set("$schema", json.RawMessage(`"https://opencode.ai/config.json"`))
	}
	var plugins []json.RawMessage
	if raw := cfg.get("plugin"); raw != nil {
		if err := json.Unmarshal(raw, &plugins); err != nil {
			return nil, fmt.Errorf("%w: \"plugin\" is not a list", ErrNotJSON)
		}
	}
	ours, _ := json.Marshal(fileURL(pluginPath))
	out := make([]json.RawMessage, 0, len(plugins)+1)
	placed := false
	for _, p := range plugins {
		if _, ok := isOurOpenCodePlugin(p); !ok {
			out = append(out, p)
			continue
		}
		if !placed {
			out = append(out, ours)
			placed = true
		}
	}
	if !placed {
		out = append(out, ours)
	}
	list, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	cfg.set("plugin", list)
	var buf bytes.Buffer
	if err := json.Indent(&buf, cfg.marshal(), "", "  "); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	if before != nil && bytes.Equal(normalize(before), normalize(buf.Bytes())) {
		return before, nil
	}
	return buf.Bytes(), nil
}

// planOpenCodeProject is a project install for OpenCode: the plugin file
// (outside the workspace), the project's opencode.json naming it, and the
// removal of an earlier install's .opencode/plugins/zerofs.js.
func planOpenCodeProject(a Agent, opts InstallOptions) ([]FileChange, error) {
	plugin := opencodeProjectPlugin(opts)
	pc, err := planWhole(plugin, []byte(opencodePlugin(a, opts)))
	if err != nil {
		return nil, err
	}
	cfgPath := a.Path(opts)
	before, err := readOptional(cfgPath)
	if err != nil {
		return nil, err
	}
	after, err := mergeOpenCodeConfig(before, plugin)
	if err != nil {
		// OpenCode also reads JSON with comments here, which zerofs does
		// not rewrite: say what else to do.
		return nil, fmt.Errorf("%s: %w (zerofs rewrites only plain JSON, and would add %q to its \"plugin\" list: make it plain JSON and install again, or install with --user)",
			cfgPath, err, fileURL(plugin))
	}
	changes := []FileChange{pc, {Path: cfgPath, Before: before, After: after}}
	legacy := filepath.Join(opts.Project, opencodeLegacyFile)
	if old, err := readOptional(legacy); err != nil {
		return nil, err
	} else if old != nil && bytes.Contains(old, []byte(opencodeMarker)) {
		changes = append(changes, FileChange{Path: legacy, Before: old, Remove: true})
	}
	return changes, nil
}

// planWhole is a change that makes path hold content (a file zerofs owns
// whole).
func planWhole(path string, content []byte) (FileChange, error) {
	before, err := readOptional(path)
	if err != nil {
		return FileChange{}, err
	}
	return FileChange{Path: path, Before: before, After: content}, nil
}

// readOptional is path's content, nil when it does not exist.
func readOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// openCodeProjectInstalled reports whether the opencode.json at path names
// a zerofs plugin file that exists and is zerofs's.
func openCodeProjectInstalled(path string) (bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	cfg, err := parseObject(b)
	if err != nil {
		return false, err
	}
	var plugins []json.RawMessage
	if json.Unmarshal(cfg.get("plugin"), &plugins) != nil {
		return false, nil
	}
	for _, p := range plugins {
		if file, ok := isOurOpenCodePlugin(p); ok {
			content, err := os.ReadFile(file)
			if err == nil && bytes.Contains(content, []byte(opencodeMarker)) {
				return true, nil
			}
		}
	}
	return false, nil
}

// LegacyFiles are the files an earlier zerofs install wrote for a in the
// project that this one no longer writes, and that are still there.
func LegacyFiles(a Agent, opts InstallOptions) []string {
	if a.kind != kindPlugin {
		return nil
	}
	p := filepath.Join(opts.Project, opencodeLegacyFile)
	if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(opencodeMarker)) {
		return []string{p}
	}
	return nil
}

// unquoteRunPrompt undoes what `opencode run` does to its message: it
// joins the message's arguments with spaces, each argument that holds a
// space put in double quotes (its own quotes escaped), and appends what
// came on stdin after a newline. args are OpenCode's own command-line
// arguments (after the executable): when text is exactly that, made from
// arguments after "run", the prompt is the arguments as they were typed,
// joined by spaces; otherwise (OpenCode's terminal UI, any other text)
// text is the prompt as it is.
func unquoteRunPrompt(text string, args []string) string {
	run := -1
	for i, a := range args {
		if a == "run" {
			run = i
			break
		}
	}
	if run < 0 {
		return text
	}
	quote := func(a string) string {
		if !strings.Contains(a, " ") {
			return a
		}
		return `"` + strings.ReplaceAll(a, `"`, `\"`) + `"`
	}
	pos, quoted := 0, false
	var plain []string
	for _, a := range args[run+1:] {
		at := pos
		if len(plain) > 0 {
			if !strings.HasPrefix(text[pos:], " ") {
				break
			}
			at++
		}
		q := quote(a)
		end := at + len(q)
		if a == "" || !strings.HasPrefix(text[at:], q) || (end < len(text) && text[end] != ' ' && text[end] != '\n') {
			continue // a flag or its value, not part of the message
		}
		plain = append(plain, a)
		quoted = quoted || q != a
		pos = end
	}
	if !quoted || (pos < len(text) && text[pos] != '\n') {
		return text
	}
	return strings.Join(plain, " ") + text[pos:]
}

// MissingPlugins are the zerofs plugin files the project's opencode.json
// names that are not there (or not zerofs's): OpenCode then loads no
// plugin of zerofs's, and nothing is recorded.
func MissingPlugins(a Agent, opts InstallOptions) []string {
	if a.kind != kindPlugin {
		return nil
	}
	o := opts
	o.Scope = ScopeProject
	b, err := readSmall(a.Path(o))
	if err != nil {
		return nil
	}
	cfg, err := parseObject(b)
	if err != nil {
		return nil
	}
	var plugins []json.RawMessage
	if json.Unmarshal(cfg.get("plugin"), &plugins) != nil {
		return nil
	}
	var out []string
	for _, p := range plugins {
		if file, ok := isOurOpenCodePlugin(p); ok {
			content, err := readSmall(file)
			if err != nil || !bytes.Contains(content, []byte(opencodeMarker)) {
				out = append(out, file)
			}
		}
	}
	return out
}
