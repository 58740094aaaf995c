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
	about: `Prints a completion script for bash or zsh: command names, each command's
flags, and file names for its arguments. Load it with

  source <(zerofs completion bash)          # in ~/.bashrc
  source <(zerofs completion zsh)           # in ~/.zshrc, after compinit
`,
	args: []argDef{{name: "bash|zsh", comp: compWords}},
	run:  runCompletion,
}

func runCompletion(e *env, c *command, args []string) error {
	_, pos, rest, err := c.parse(args)
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

// completedFlags are the words a shell completes for c's flags, in the
// order c declares them.
func completedFlags(c *command) []string {
	var out []string
	for _, f := range c.flags {
		out = append(out, f.spellings()...)
	}
	return out
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
		if f := completedFlags(c); len(f) > 0 {
			fmt.Fprintf(&cases, "\t%s) flags=%q ;;\n", c.name, strings.Join(append(f, "--help"), " "))
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
		for _, f := range completedFlags(c) {
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
