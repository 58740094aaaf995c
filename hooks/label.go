package hooks

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLabel bounds a label, in runes: a label is a line of the log, not a
// copy of the tool's input (which the step's payload keeps whole).
const MaxLabel = 120

// maxCommand bounds the command shown in a label.
const maxCommand = 72

// Label says what a tool call does, for a person reading the log: the
// tool's name and what it acts on. "Edit app.py" (a path relative to the
// agent's directory), "Bash: rm -rf docs" (the command's first line, cut),
// "apply_patch: src/a.go, src/b.go" (the files a patch names). A tool whose
// input names nothing it knows is its bare name. The label is one line of
// at most MaxLabel runes, without control characters.
func Label(c Call) string {
	tool := oneLine(c.Tool)
	if tool == "" {
		tool = oneLine(c.Event)
	}
	if tool == "" {
		tool = "hook"
	}
	in := inputFields(c.Input)
	// A patch names its files; its text is in "command" (Codex), "input",
	// "patch" or "patchText" (OpenCode).
	if patch := in.str("command", "input", "patch", "patchText"); strings.Contains(patch, "*** Begin Patch") {
		if files := patchFiles(patch); len(files) > 0 {
			return cut(tool + ": " + joinPaths(c.Cwd, files))
		}
	}
	if cmd := in.str("command", "cmd", "command_line"); cmd != "" {
		return cut(tool + ": " + cutCommand(cmd))
	}
	if p := in.str(pathKeys...); p != "" {
		return cut(tool + " " + relPath(c.Cwd, p))
	}
	if q := in.str("pattern", "query", "url", "description", "prompt"); q != "" {
		return cut(tool + ": " + cutCommand(q))
	}
	return cut(tool)
}

// pathKeys are the input fields that name the file a tool acts on, in the
// agents' own words: Claude Code's, Codex's, Gemini CLI's and Windsurf's
// file_path, OpenCode's filePath.
var pathKeys = []string{"file_path", "filePath", "notebook_path", "absolute_path", "path"}

// Path is the file a tool call names in its input (an Edit's or a
// write_file's file_path, OpenCode's filePath), as the agent gave it, or ""
// when the input names none.
func Path(c Call) string { return inputFields(c.Input).str(pathKeys...) }

// fields are a tool input's top-level fields; an input that is not a JSON
// object has none.
type fields map[string]json.RawMessage

func inputFields(input json.RawMessage) fields {
	var in fields
	if len(input) > 0 {
		json.Unmarshal(input, &in)
	}
	return in
}

// str is the first of keys that holds a string with more than blanks.
func (in fields) str(keys ...string) string {
	for _, k := range keys {
		var s string
		if json.Unmarshal(in[k], &s) == nil && strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

// patchFiles lists the files an apply_patch envelope adds, updates, deletes
// or moves to, in order, each once.
func patchFiles(patch string) []string {
	var files []string
	seen := map[string]bool{}
	for line := range strings.Lines(patch) {
		line = strings.TrimRight(line, "\r\n")
		for _, prefix := range []string{"*** Update File: ", "*** Add File: ", "*** Delete File: ", "*** Move to: "} {
			if name, ok := strings.CutPrefix(line, prefix); ok {
				name = strings.TrimSpace(name)
				if name != "" && !seen[name] {
					seen[name] = true
					files = append(files, name)
				}
			}
		}
	}
	return files
}

// joinPaths lists paths relative to cwd, "and N more" past a few.
func joinPaths(cwd string, paths []string) string {
	const show = 4
	var parts []string
	for i, p := range paths {
		if i == show {
			parts = append(parts, "and "+strconv.Itoa(len(paths)-show)+" more")
			break
		}
		parts = append(parts, relPath(cwd, p))
	}
	return strings.Join(parts, ", ")
}

// relPath is p relative to cwd when p lies under it, else p as given.
func relPath(cwd, p string) string {
	p = oneLine(p)
	if cwd == "" || !filepath.IsAbs(p) {
		return p
	}
	rel, err := filepath.Rel(filepath.Clean(cwd), filepath.Clean(p))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return p
	}
	return rel
}

// cutCommand is a command's first non-empty line, cut to maxCommand runes.
func cutCommand(cmd string) string {
	lines := strings.Split(strings.TrimSpace(cmd), "\n")
	first := strings.TrimSpace(lines[0])
	s := cutRunes(oneLine(first), maxCommand)
	if len(lines) > 1 && !strings.HasSuffix(s, "…") {
		s += " …"
	}
	return s
}

// cut bounds a whole label.
func cut(s string) string { return cutRunes(oneLine(s), MaxLabel) }

func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:n-1]), " ") + "…"
}

// oneLine replaces control characters (newlines, tabs, escapes) and
// invalid UTF-8 with spaces, so a label is one line that cannot forge
// another, and trims it.
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, " ")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}
