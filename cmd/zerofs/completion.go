package main

import (
	"fmt"
	"io"
	"strings"
)

var completionCmd = &command{
	name:    "completion",
	usage:   "completion bash|zsh",
	summary: "print a shell completion script",
	help: `Prints a completion script for bash or zsh: command names, each command's
flags, and file names for its arguments. Load it with

  source <(zerofs completion bash)          # in ~/.bashrc
  source <(zerofs completion zsh)           # in ~/.zshrc, after compinit
`,
	run: runCompletion,
}

// flagsOf lists each command's flags, for completion.
var flagsOf = map[string]string{
	"mount":     "-f --foreground --store --auto-step --allow-other --sync --max-store-size --replicate --replica-key --no-open --rename-records --rename-records=false --ignore --debug",
	"umount":    "--lazy",
	"step":      "--hook --agent --no-prompt",
	"run":       "--label",
	"log":       "--json --stat --all --failed -n --replica --replica-key",
	"show":      "",
	"diff":      "--stat",
	"gc":        "--dry-run --before --keep --keep-steps --thin-after",
	"status":    "--json --thin-after --ignored",
	"verify":    "--json",
	"rewind":    "--dry-run --before-turn",
	"revert":    "--dry-run --force",
	"undo":      "--dry-run --turn",
	"redo":      "--dry-run",
	"branch":    "--at --allow-other --list --json --delete --force --hook --agent",
	"merge":     "--dry-run --ours --theirs",
	"mcp":       "--workspace",
	"ui":        "--listen",
	"hooks":     "--user --project --dry-run --no-prompt --zerofs --worktrees",
	"replicate": "--once --replica-key",
	"restore":   "--at --replica-key --same-owner --accept-older",
	"bisect":    "--turns --good --bad --timeout",
}

func runCompletion(e *env, c *command, args []string) error {
	pos, rest, err := parseArgs(c, newFlags(c), args)
	if err != nil {
		return err
	}
	pos = append(pos, rest...)
	if len(pos) != 1 {
		return usagef(c, "want bash or zsh")
	}
	switch pos[0] {
	case "bash":
		return writeBash(e.stdout)
	case "zsh":
		return writeZsh(e.stdout)
	}
	return usagef(c, "no completion for %q: want bash or zsh", pos[0])
}

func commandNames() string {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	return strings.Join(append(names, "help"), " ")
}

func writeBash(w io.Writer) error {
	var cases strings.Builder
	for _, c := range commands {
		if f := flagsOf[c.name]; f != "" {
			fmt.Fprintf(&cases, "\t%s) flags=%q ;;\n", c.name, f+" --help")
		}
	}
	_, err := fmt.Fprintf(w, `# bash completion for zerofs: source <(zerofs completion bash)
_zerofs() {
	local cur=${COMP_WORDS[COMP_CWORD]} flags="--help"
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W %q -- "$cur"))
		return
	fi
	case ${COMP_WORDS[1]} in
	help) COMPREPLY=($(compgen -W %q -- "$cur")); return ;;
	completion) COMPREPLY=($(compgen -W "bash zsh" -- "$cur")); return ;;
%s	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
	else
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}
complete -o filenames -F _zerofs zerofs
`, commandNames()+" --help --version -C -q", commandNames(), cases.String())
	return err
}

func writeZsh(w io.Writer) error {
	var cmds, cases strings.Builder
	for _, c := range commands {
		fmt.Fprintf(&cmds, "\t\t%q\n", c.name+":"+strings.ReplaceAll(c.summary, ":", `\:`))
		var specs []string
		for _, f := range strings.Fields(flagsOf[c.name]) {
			specs = append(specs, fmt.Sprintf("%q", f+"[]"))
		}
		switch c.name {
		case "completion":
			specs = append(specs, `"1:shell:(bash zsh)"`)
		default:
			specs = append(specs, `"*:file:_files"`)
		}
		fmt.Fprintf(&cases, "\t%s) _arguments %s ;;\n", c.name, strings.Join(specs, " "))
	}
	_, err := fmt.Fprintf(w, `#compdef zerofs
# zsh completion for zerofs: source <(zerofs completion zsh), after compinit
_zerofs() {
	local -a cmds
	cmds=(
%s	)
	if (( CURRENT == 2 )); then
		_describe -t commands 'zerofs command' cmds
		return
	fi
	local cmd=${words[2]}
	shift words
	(( CURRENT-- ))
	case $cmd in
	help) _describe -t commands 'zerofs command' cmds ;;
%s	esac
}
compdef _zerofs zerofs
`, cmds.String(), cases.String())
	return err
}
