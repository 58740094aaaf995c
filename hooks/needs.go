package hooks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Needs says what an agent still needs, beyond its hook configuration,
// before it runs zerofs's hooks in a project: one line each, with what to
// do. It reads what the agent keeps of its own trust decisions (Codex's
// config.toml, Gemini CLI's trustedFolders.json), as untrusted input: a
// file it cannot read or make sense of is said so, never guessed about.
// An empty list means nothing zerofs can see is missing.
func Needs(a Agent, opts InstallOptions) []string {
	switch a.Name {
	case "codex":
		return codexNeeds(opts)
	case "gemini":
		return geminiNeeds(opts)
	}
	return nil
}

// Always says what an agent needs that zerofs cannot check from here: how
// it must be run for its hooks to record anything.
func Always(a Agent) []string {
	switch a.Name {
	case "codex":
		return []string{"`codex exec` runs read-only by default, so the agent changes nothing: give it a writable sandbox (`codex exec --sandbox workspace-write`, or `--full-auto`)."}
	}
	return nil
}

// maxAgentConfig bounds what is read of an agent's own configuration.
const maxAgentConfig = 4 << 20

// readSmall reads at most maxAgentConfig bytes of path.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxAgentConfig+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxAgentConfig {
		return nil, fmt.Errorf("larger than %d MiB", maxAgentConfig>>20)
	}
	return b, nil
}

// codexHome is where Codex keeps its configuration: $CODEX_HOME, or
// ~/.codex.
func codexHome(opts InstallOptions) string {
	if x := os.Getenv("CODEX_HOME"); x != "" && filepath.IsAbs(x) && opts.Home == homeDir() {
		return x
	}
	return filepath.Join(opts.Home, ".codex")
}

// codexNeeds checks what Codex (0.169) keeps in config.toml: the hooks
// feature, the project's trust (a project-level hooks.json is ignored in
// a project that is not trusted: "Untrusted project-local configuration
// is disabled"), and the hooks' review (each hook runs only once the
// person trusted it in /hooks, which records a trusted_hash under
// [hooks.state."FILE:EVENT:GROUP:INDEX"]).
func codexNeeds(opts InstallOptions) []string {
	cfgPath := filepath.Join(codexHome(opts), "config.toml")
	hooksFile := filepath.Join(codexHome(opts), "hooks.json")
	if opts.Scope == ScopeProject {
		hooksFile = filepath.Join(opts.Project, ".codex", "hooks.json")
	}
	b, err := readSmall(cfgPath)
	if err != nil && !os.IsNotExist(err) {
		return []string{fmt.Sprintf("cannot read %s (%v): check in Codex that the project is trusted and the hooks reviewed (/hooks).", cfgPath, err)}
	}
	cfg := parseCodexConfig(b)
	var out []string
	if v, ok := cfg.features["hooks"]; ok && v == "false" {
		out = append(out, fmt.Sprintf("hooks are turned off in %s ([features] hooks = false): set it to true.", cfgPath))
	} else if v, ok := cfg.features["codex_hooks"]; ok && v == "false" && cfg.features["hooks"] == "" {
		out = append(out, fmt.Sprintf("hooks are turned off in %s ([features] codex_hooks = false; the flag is now called hooks): set hooks = true.", cfgPath))
	}
	if opts.Scope == ScopeProject {
		switch codexTrust(cfg, opts.Project) {
		case "trusted":
		case "":
			out = append(out, fmt.Sprintf("Codex ignores %s until it trusts the project (it says \"Untrusted project-local configuration is disabled\"): run `codex exec --trust` once in %s, or start `codex` there and trust it (either adds [projects.%s] trust_level = \"trusted\" to %s).",
				hooksFile, opts.Project, strconv.Quote(opts.Project), cfgPath))
		default:
			out = append(out, fmt.Sprintf("%s marks the project as %s (trust_level): Codex ignores %s until it is \"trusted\".",
				cfgPath, strconv.Quote(codexTrust(cfg, opts.Project)), hooksFile))
		}
	}
	var missing []string
	for _, ev := range []string{"pre_tool_use", "user_prompt_submit"} {
		if !cfg.reviewed(hooksFile, ev) {
			missing = append(missing, ev)
		}
	}
	if len(missing) > 0 {
		out = append(out, fmt.Sprintf("the hooks still need review in Codex (no trusted_hash for %s's %s in %s): start `codex` there, run /hooks and trust them; until then Codex runs none of them (`codex exec --dangerously-bypass-hook-trust` runs them for one invocation).",
			hooksFile, strings.Join(missing, " and "), cfgPath))
	}
	return out
}

// codexTrust is the project's trust_level as Codex finds it: the entry
// for the directory itself, else for the git repository around it.
func codexTrust(cfg codexConfig, project string) string {
	if t, ok := cfg.projects[project]; ok {
		return t
	}
	for dir := project; ; dir = filepath.Dir(dir) {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return cfg.projects[dir]
		}
		if dir == filepath.Dir(dir) {
			return ""
		}
	}
}

// codexConfig is what zerofs reads of Codex's config.toml.
type codexConfig struct {
	// projects maps a project's path to its trust_level.
	projects map[string]string
	// features holds [features]'s values as written (true, false).
	features map[string]string
	// reviewedKeys are the [hooks.state."KEY"] tables with a trusted_hash.
	reviewedKeys []string
}

// reviewed reports whether a hook of file's event (snake case) has a
// trusted_hash.
func (c codexConfig) reviewed(file, event string) bool {
	prefix := file + ":" + event + ":"
	for _, k := range c.reviewedKeys {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// parseCodexConfig reads the few tables of a config.toml that say whether
// Codex runs zerofs's hooks: [projects."PATH"] trust_level, [features]
// hooks, and [hooks.state."KEY"] trusted_hash, as Codex writes them (one
// table header a line). Anything else, and any line it cannot read, is
// passed over: the file is Codex's and may hold what zerofs does not know.
func parseCodexConfig(b []byte) codexConfig {
	c := codexConfig{projects: map[string]string{}, features: map[string]string{}}
	var table []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), maxAgentConfig)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if strings.HasPrefix(line, "[") {
			table = nil
			if strings.HasPrefix(line, "[[") {
				continue
			}
			if keys, rest, ok := tomlKeys(line[1:]); ok && strings.HasPrefix(strings.TrimSpace(rest), "]") {
				table = keys
			}
			continue
		}
		keys, rest, ok := tomlKeys(line)
		rest = strings.TrimSpace(rest)
		if !ok || len(keys) != 1 || !strings.HasPrefix(rest, "=") {
			continue
		}
		key, val := keys[0], tomlValue(strings.TrimSpace(rest[1:]))
		switch {
		case len(table) == 2 && table[0] == "projects" && key == "trust_level":
			c.projects[table[1]] = val
		case len(table) == 1 && table[0] == "features":
			c.features[key] = val
		case len(table) == 3 && table[0] == "hooks" && table[1] == "state" && key == "trusted_hash" && val != "":
			c.reviewedKeys = append(c.reviewedKeys, table[2])
		}
	}
	return c
}

// tomlKeys reads a dotted key (bare, "basic" or 'literal' parts) from the
// start of s, returning the parts and what follows.
func tomlKeys(s string) ([]string, string, bool) {
	var keys []string
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return nil, "", false
		}
		var k string
		switch s[0] {
		case '"':
			end := closingQuote(s)
			if end < 0 {
				return nil, "", false
			}
			v, err := strconv.Unquote(s[:end+1])
			if err != nil {
				return nil, "", false
			}
			k, s = v, s[end+1:]
		case '\'':
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return nil, "", false
			}
			k, s = s[1:end+1], s[end+2:]
		default:
			end := strings.IndexFunc(s, func(r rune) bool {
				return !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
			})
			if end == 0 {
				return nil, "", false
			}
			if end < 0 {
				end = len(s)
			}
			k, s = s[:end], s[end:]
		}
		keys = append(keys, k)
		s = strings.TrimLeft(s, " \t")
		if !strings.HasPrefix(s, ".") {
			return keys, s, true
		}
		s = s[1:]
	}
}

// closingQuote is the index of the quote that ends the basic string at the
// start of s, -1 if none.
func closingQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// tomlValue is a string's value, or a bare value (true, 3) as written;
// "" for anything else.
func tomlValue(s string) string {
	switch {
	case strings.HasPrefix(s, `"`):
		if end := closingQuote(s); end > 0 {
			if v, err := strconv.Unquote(s[:end+1]); err == nil {
				return v
			}
		}
		return ""
	case strings.HasPrefix(s, "'"):
		if end := strings.IndexByte(s[1:], '\''); end >= 0 {
			return s[1 : end+1]
		}
		return ""
	}
	if i := strings.IndexAny(s, " \t#"); i >= 0 {
		s = s[:i]
	}
	return s
}

// geminiDir is Gemini CLI's own directory: $GEMINI_CLI_HOME/.gemini, or
// ~/.gemini.
func geminiDir(opts InstallOptions) string {
	home := opts.Home
	if x := os.Getenv("GEMINI_CLI_HOME"); x != "" && filepath.IsAbs(x) && opts.Home == homeDir() {
		home = x
	}
	return filepath.Join(home, ".gemini")
}

// geminiNeeds checks that Gemini CLI (0.61) trusts the project: it loads a
// project's settings (and so its hooks) only in a trusted folder, decided
// from trustedFolders.json (the longest rule that holds the folder;
// TRUST_PARENT trusts the rule's parent) unless folder trust is off in the
// user's settings (security.folderTrust.enabled: false).
func geminiNeeds(opts InstallOptions) []string {
	if opts.Scope != ScopeProject {
		return nil
	}
	dir := geminiDir(opts)
	if b, err := readSmall(filepath.Join(dir, "settings.json")); err == nil {
		var s struct {
			Security struct {
				FolderTrust struct {
					Enabled *bool `json:"enabled"`
				} `json:"folderTrust"`
			} `json:"security"`
		}
		if json.Unmarshal(b, &s) == nil && s.Security.FolderTrust.Enabled != nil && !*s.Security.FolderTrust.Enabled {
			return nil // every folder is trusted
		}
	}
	path := filepath.Join(dir, "trustedFolders.json")
	if x := os.Getenv("GEMINI_CLI_TRUSTED_FOLDERS_PATH"); x != "" && filepath.IsAbs(x) && opts.Home == homeDir() {
		path = x
	}
	hint := fmt.Sprintf("Gemini CLI loads %s only in a folder it trusts: start `gemini` in %s and trust it (or add %s: \"TRUST_FOLDER\" to %s), or install with --user; `gemini --skip-trust` runs there but loads no project hooks, so nothing is recorded.",
		filepath.Join(opts.Project, ".gemini", "settings.json"), opts.Project, strconv.Quote(opts.Project), path)
	b, err := readSmall(path)
	if os.IsNotExist(err) {
		return []string{"the folder is not trusted yet: " + hint}
	}
	if err != nil {
		return []string{fmt.Sprintf("cannot read %s (%v): %s", path, err, hint)}
	}
	var rules map[string]string
	if err := json.Unmarshal(stripJSONComments(b), &rules); err != nil {
		return []string{fmt.Sprintf("%s is not the JSON object of rules Gemini CLI writes: %s", path, hint)}
	}
	switch geminiTrust(rules, opts.Project) {
	case "TRUST_FOLDER", "TRUST_PARENT":
		return nil
	case "DO_NOT_TRUST":
		return []string{fmt.Sprintf("%s says DO_NOT_TRUST for this folder: %s", path, hint)}
	}
	return []string{"the folder is not trusted yet: " + hint}
}

// geminiTrust is the trust level of the longest rule that holds dir, as
// Gemini CLI decides it ("" when none does).
func geminiTrust(rules map[string]string, dir string) string {
	real := func(p string) string { // as Gemini CLI compares them
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return filepath.Clean(p)
	}
	dir = real(dir)
	best, level := -1, ""
	for rule, l := range rules {
		eff := rule
		if l == "TRUST_PARENT" {
			eff = filepath.Dir(rule)
		}
		eff = real(eff)
		if dir == eff || strings.HasPrefix(dir, strings.TrimSuffix(eff, "/")+"/") {
			if len(rule) > best {
				best, level = len(rule), l
			}
		}
	}
	return level
}

// stripJSONComments blanks // and /* */ comments outside strings, as
// Gemini CLI allows them in its files.
func stripJSONComments(b []byte) []byte {
	out := make([]byte, 0, len(b))
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inStr:
			out = append(out, c)
			if c == '\\' && i+1 < len(b) {
				i++
				out = append(out, b[i])
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
			out = append(out, c)
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				i++
			}
			out = append(out, '\n')
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			end := bytes.Index(b[i+2:], []byte("*/"))
			if end < 0 {
				return out
			}
			i += end + 3
			out = append(out, ' ')
		default:
			out = append(out, c)
		}
	}
	return out
}
