package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/zerofs/zerofs/hooks"
)

var completionCmd = &command{
	name:    "completion",
	usage:   "completion bash|zsh",
	summary: "print a shell completion script",
	about: `Prints a completion script for bash or zsh: command names, each command's
flags, and what each flag's value and argument takes (a directory, an agent,
a command after run's --, files; nothing for a sequence or a label). Load it
with

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

// words are what a shell offers for a value of kind k named name (a
// flag's arg or an argument's name): nil when it is not a list of words.
func (k compKind) words(name string) []string {
	switch k {
	case compAgent:
		return hooks.AgentNames()
	case compWords:
		return strings.Split(strings.TrimSuffix(name, "..."), "|")
	}
	return nil
}

// bashKind is how the bash script names what completes a value: file,
// dir, cmd, none, or its words joined by commas; "+" after it when the
// argument repeats (PATH...).
func bashKind(k compKind, name string) string {
	s := "none"
	switch k {
	case compFile:
		s = "file"
	case compDir:
		s = "dir"
	case compCommand:
		s = "cmd"
	case compAgent, compWords:
		s = strings.Join(k.words(name), ",")
	}
	if strings.HasSuffix(name, "...") {
		s += "+"
	}
	return s
}

func commandNames() string {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	return strings.Join(append(names, "help"), " ")
}

// writeBash writes the bash script: for each command its flags, the kind
// of each flag's value, and the kind of each argument before and after a
// "--".
func writeBash(w io.Writer) error {
	var cases strings.Builder
	for _, c := range commands {
		var vars []string
		if f := completedFlags(c); len(f) > 0 {
			vars = append(vars, fmt.Sprintf("flags=%q", strings.Join(append(f, "--help"), " ")))
		}
		var values, before, after []string
		for _, f := range c.flags {
			if f.arg == "" {
				continue
			}
			for _, sp := range f.spellings() {
				values = append(values, sp+":"+bashKind(f.comp, f.arg))
			}
		}
		for _, a := range c.args {
			if a.afterDashes {
				after = append(after, bashKind(a.comp, a.name))
			} else {
				before = append(before, bashKind(a.comp, a.name))
			}
		}
		vars = append(vars, fmt.Sprintf("values=%q", strings.Join(values, " ")),
			fmt.Sprintf("args=%q", strings.Join(before, " ")), fmt.Sprintf("after=%q", strings.Join(after, " ")))
		fmt.Fprintf(&cases, "\t%s) %s ;;\n", c.name, strings.Join(vars, " "))
	}
	_, err := fmt.Fprintf(w, `# bash completion for zerofs: source <(zerofs completion bash)
_zerofs() {
	local cur=${COMP_WORDS[COMP_CWORD]} flags="--help" values="" args="" after=""
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W %q -- "$cur"))
		return
	fi
	case ${COMP_WORDS[1]} in
	help) COMPREPLY=($(compgen -W %q -- "$cur")); return ;;
%s	esac
	# The word is a flag's value, a flag, or the Nth argument before or
	# after "--": count the arguments before it.
	local prev=${COMP_WORDS[COMP_CWORD-1]} kind="" w i n=0 dashes=""
	for ((i = 2; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		if [ -z "$dashes" ] && [ "$w" = -- ]; then
			dashes=1 n=0
		elif [ -z "$dashes" ] && [[ $w == -[!0-9]* ]]; then
			case " $values " in *" $w:"*) ((i++)) ;; esac
		else
			((n++))
		fi
	done
	if [ -z "$dashes" ] && [[ " $values " == *" $prev:"* ]]; then
		kind=" $values" kind=${kind#*" $prev:"} kind=${kind%%%% *}
	elif [ -z "$dashes" ] && [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
		return
	else
		local -a kinds
		if [ -n "$dashes" ]; then kinds=($after); else kinds=($args); fi
		kind=${kinds[n]}
		if [ -z "$kind" ] && [ ${#kinds[@]} -gt 0 ] && [[ ${kinds[${#kinds[@]}-1]} == *+ ]]; then
			kind=${kinds[${#kinds[@]}-1]}
		fi
	fi
	case ${kind%%+} in
	file) COMPREPLY=($(compgen -f -- "$cur")) ;;
	dir) COMPREPLY=($(compgen -d -- "$cur")) ;;
	cmd) COMPREPLY=($(compgen -c -- "$cur")) ;;
	none | "") COMPREPLY=() ;;
	*) COMPREPLY=($(compgen -W "${kind//,/ }" -- "$cur")) ;;
	esac
}
complete -o filenames -F _zerofs zerofs
`, commandNames()+" --help --version -C -q", commandNames(), cases.String())
	return err
}

// zshAction is the _arguments action for a value of kind k named name.
func zshAction(k compKind, name string) string {
	switch k {
	case compFile:
		return "_files"
	case compDir:
		return "_files -/"
	case compCommand:
		return "_command_names -e"
	case compAgent, compWords:
		return "(" + strings.Join(k.words(name), " ") + ")"
	}
	return " "
}

// writeZsh writes the zsh script: for each command an _arguments call with
// its flags (a value of a listed kind completed after those that take one)
// and its arguments by position (files for every argument, as before, for
// a command with arguments after "--", which _arguments does not count).
func writeZsh(w io.Writer) error {
	var cmds, cases strings.Builder
	for _, c := range commands {
		fmt.Fprintf(&cmds, "\t\t%q\n", c.name+":"+strings.ReplaceAll(c.summary, ":", `\:`))
		dashed := false
		for _, a := range c.args {
			dashed = dashed || a.afterDashes
		}
		var specs []string
		for _, f := range c.flags {
			// A flag's value: its kind's action; one with nothing to
			// offer is left a switch where every argument is a file
			// anyway (after "--"), so the value is offered files.
			value := ""
			if f.arg != "" && (!dashed || f.comp == compFile || f.comp == compDir || f.comp.words(f.arg) != nil) {
				value = ":" + strings.ToLower(f.arg) + ":" + zshAction(f.comp, f.arg)
			}
			for _, sp := range f.spellings() {
				specs = append(specs, fmt.Sprintf("%q", sp+"[]"+value))
			}
		}
		switch {
		case dashed:
			specs = append(specs, `"*:file:_files"`)
		default:
			for i, a := range c.args {
				pos := fmt.Sprint(i + 1)
				if strings.HasSuffix(a.name, "...") {
					pos = "*"
				}
				label := strings.ToLower(strings.TrimSuffix(a.name, "..."))
				if a.comp == compWords {
					label = "word"
				}
				specs = append(specs, fmt.Sprintf("%q", pos+":"+label+":"+zshAction(a.comp, a.name)))
			}
		}
		if len(specs) == 0 {
			fmt.Fprintf(&cases, "\t%s) ;;\n", c.name)
			continue
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
