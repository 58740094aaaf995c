package hooks

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCodexNeeds reads Codex's config.toml as Codex 0.169 writes it
// (`codex exec --trust` wrote the [projects] table here; the
// [hooks.state] keys are FILE:EVENT:GROUP:INDEX with a trusted_hash) and
// says what is missing: the project's trust, the hooks' review, a hooks
// feature turned off. A file of another shape or of hostile content is
// read as far as it goes and never trusted beyond what it says.
func TestCodexNeeds(t *testing.T) {
	t.Setenv("CODEX_HOME", "")
	project := "/work/app"
	hooksFile := project + "/.codex/hooks.json"
	trusted := "[projects.\"/work/app\"]\ntrust_level = \"trusted\"\n"
	reviewed := "[hooks.state.\"" + hooksFile + ":pre_tool_use:0:0\"]\ntrusted_hash = \"sha256:34637d17\"\nenabled = true\n\n" +
		"[hooks.state.\"" + hooksFile + ":user_prompt_submit:0:0\"]\ntrusted_hash = \"sha256:ab\"\n"
	for _, tc := range []struct {
		name, config string
		want         []string // each a need's distinctive words, in order
	}{
		{"no config", "", []string{"until it trusts the project", "need review"}},
		{"trusted, not reviewed", "model = \"gpt-5.5\"\n\n" + trusted, []string{"need review"}},
		{"trusted and reviewed", trusted + "\n" + reviewed, nil},
		{"another project trusted", "[projects.\"/work/app2\"]\ntrust_level = \"trusted\"\n" + reviewed, []string{"until it trusts the project"}},
		{"untrusted", "[projects.'/work/app']\ntrust_level = \"untrusted\" # by the person\n" + reviewed, []string{`marks the project as "untrusted"`}},
		{"one hook reviewed", trusted + "[hooks.state.\"" + hooksFile + ":pre_tool_use:1:0\"]\ntrusted_hash = \"sha256:x\"\n", []string{"user_prompt_submit"}},
		{"another file's review", trusted + strings.ReplaceAll(reviewed, hooksFile, "/home/ada/.codex/hooks.json"), []string{"pre_tool_use and user_prompt_submit"}},
		{"hooks off", "[features]\nhooks = false\n" + trusted + reviewed, []string{"[features] hooks = false"}},
		{"old flag off", "[features]\ncodex_hooks = false\n" + trusted + reviewed, []string{"now called hooks"}},
		// Hostile or odd content: an unterminated string, a key that
		// only looks like the table, a project named inside a value.
		{"hostile", "[projects.\"/work/app\ntrust_level = \"trusted\"\n" +
			"x = \"[projects.\\\"/work/app\\\"]\"\n" +
			"[projects.\"/work/app\".sub]\ntrust_level = \"trusted\"\n" +
			"[[projects]]\ntrust_level = \"trusted\"\n" +
			"trusted_hash = \"sha256:x\"\n", []string{"until it trusts the project", "need review"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if tc.config != "" {
				os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
				if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			a, _ := Lookup("codex")
			got := Needs(a, InstallOptions{Scope: ScopeProject, Home: home, Project: project})
			if len(got) != len(tc.want) {
				t.Fatalf("needs %q, want %d naming %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("need %d: %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
	// A project inside a git repository: the repository's entry trusts it.
	repo := t.TempDir()
	sub := filepath.Join(repo, "app")
	os.MkdirAll(filepath.Join(repo, ".git"), 0o755)
	os.MkdirAll(sub, 0o755)
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
	os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte("[projects."+strconv.Quote(repo)+"]\ntrust_level = \"trusted\"\n"), 0o600)
	a, _ := Lookup("codex")
	if got := Needs(a, InstallOptions{Scope: ScopeProject, Home: home, Project: sub}); len(got) != 1 || !strings.Contains(got[0], "need review") {
		t.Errorf("a project in a trusted repository: needs %q, want only the review", got)
	}
	// A user-level install: no project trust needed, its own file's review.
	home = t.TempDir()
	os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
	os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(strings.ReplaceAll(reviewed, hooksFile, home+"/.codex/hooks.json")), 0o600)
	if got := Needs(a, InstallOptions{Scope: ScopeUser, Home: home, Project: project}); len(got) != 0 {
		t.Errorf("user install, reviewed: needs %q", got)
	}
	// Unreadable (a directory where the file should be): said, not guessed.
	home = t.TempDir()
	os.MkdirAll(filepath.Join(home, ".codex", "config.toml"), 0o700)
	if got := Needs(a, InstallOptions{Scope: ScopeProject, Home: home, Project: project}); len(got) != 1 || !strings.Contains(got[0], "cannot read") {
		t.Errorf("unreadable config: needs %q", got)
	}
}

// TestGeminiNeeds decides a folder's trust as Gemini CLI 0.61 does from
// trustedFolders.json (the longest rule holding the folder; TRUST_PARENT
// trusts the rule's parent; comments allowed) or from folder trust turned
// off in its settings; an untrusted folder's need names --skip-trust and
// the user-level install.
func TestGeminiNeeds(t *testing.T) {
	for _, v := range []string{"GEMINI_CLI_HOME", "GEMINI_CLI_TRUSTED_FOLDERS_PATH"} {
		t.Setenv(v, "")
	}
	project := "/work/app"
	for _, tc := range []struct {
		name, folders, settings string
		want                    string // "" when trusted
	}{
		{"no file", "", "", "not trusted yet"},
		{"trusted", `{"/work/app": "TRUST_FOLDER"}`, "", ""},
		{"parent trusted", `{"/work": "TRUST_FOLDER"}`, "", ""},
		{"trust parent", `{"/work/other": "TRUST_PARENT"}`, "", ""},
		{"a sibling", `{"/work/app2": "TRUST_FOLDER"}`, "", "not trusted yet"},
		{"longest wins", `{"/work": "TRUST_FOLDER", "/work/app": "DO_NOT_TRUST"}`, "", "DO_NOT_TRUST"},
		{"comments", "{\n  // mine\n  \"/work/app\": \"TRUST_FOLDER\" /* yes */\n}", "", ""},
		{"not JSON", `["/work/app"]`, "", "not the JSON object"},
		{"trust off", "", `{"security": {"folderTrust": {"enabled": false}}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			dir := filepath.Join(home, ".gemini")
			os.MkdirAll(dir, 0o700)
			if tc.folders != "" {
				os.WriteFile(filepath.Join(dir, "trustedFolders.json"), []byte(tc.folders), 0o600)
			}
			if tc.settings != "" {
				os.WriteFile(filepath.Join(dir, "settings.json"), []byte(tc.settings), 0o600)
			}
			a, _ := Lookup("gemini")
			got := Needs(a, InstallOptions{Scope: ScopeProject, Home: home, Project: project})
			if tc.name == "trusted" {
				// The same folder through a symlink: Gemini CLI compares real paths.
				link := filepath.Join(t.TempDir(), "link")
				real := t.TempDir()
				os.Symlink(real, link)
				os.WriteFile(filepath.Join(dir, "trustedFolders.json"), []byte(`{`+strconv.Quote(link)+`: "TRUST_FOLDER"}`), 0o600)
				if n := Needs(a, InstallOptions{Scope: ScopeProject, Home: home, Project: real}); len(n) != 0 {
					t.Errorf("a folder trusted through a symlink to it: needs %q", n)
				}
			}
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("needs %q, want none", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want) || !strings.Contains(got[0], "--skip-trust") || !strings.Contains(got[0], "--user")):
				t.Errorf("needs %q, want one saying %q, naming --skip-trust and --user", got, tc.want)
			}
			if u := Needs(a, InstallOptions{Scope: ScopeUser, Home: home, Project: project}); len(u) != 0 {
				t.Errorf("a user-level install needs %q", u)
			}
		})
	}
}
