package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/zerofs/zerofs/hooks"
)

var completionCmd = &command{
	name:    "completion",
	usage:   "completion bash|zsh|fish",
	summary: "print a shell completion script",
	about: `Prints a completion script for bash, zsh or fish: command names, each command's
flags, and what each flag's value and argument takes (a directory, an agent,
a command after run's --, files; nothing for a sequence or a label). Load it
with

  source <(zerofs completion bash)          # in ~/.bashrc
  source <(zerofs completion zsh)           # in ~/.zshrc, after compinit
  zerofs completion fish | source           # in ~/.config/fish/config.fish
`,
	args: []argDef{{name: "bash|zsh|fish", comp: compWords}},
	run:  runCompletion,
}

func runCompletion(e *env, c *command, args []string) error {
	_, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	pos = append(pos, rest...)
	if len(pos) != 1 {
		return usagef(c, "want bash or zsh or fish")
	}
	switch pos[0] {
	case "bash":
		return writeBash(e.stdout)
	case "zsh":
		return writeZsh(e.stdout)
	case "fish":
		return writeFish(e.stdout)
	}
	return usagef(c, "no completion for %q: want bash or zsh or fish", pos[0])
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

// fishQuote quotes s for fish: in single quotes, with \\ and \' escaped.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

// writeFish writes the fish script: each command and its summary, each
// flag with the first line of its help and what completes its value, and
// a function that completes an argument by its kind, counting the
// arguments before it as the bash script does.
func writeFish(w io.Writer) error {
	var b strings.Builder
	b.WriteString(`# fish completion for zerofs: zerofs completion fish | source
function __zerofs_cmd --description 'whether the zerofs command being completed is $argv[1]'
	set -l words (commandline -opc)
	test (count $words) -ge 2; and test "$words[2]" = "$argv[1]"
end
function __zerofs_args --description 'what an argument of a zerofs command can be'
	set -l words (commandline -opc)
	set -l cur (commandline -ct)
	test (count $words) -ge 2; or return
	set -l values
	set -l before
	set -l after
	switch $words[2]
`)
	for _, c := range commands {
		var values, before, after []string
		for _, f := range c.flags {
			if f.arg != "" {
				values = append(values, f.spellings()...)
			}
		}
		for _, a := range c.args {
			if a.afterDashes {
				after = append(after, bashKind(a.comp, a.name))
			} else {
				before = append(before, bashKind(a.comp, a.name))
			}
		}
		fmt.Fprintf(&b, "\tcase %s\n", fishQuote(c.name))
		for _, v := range []struct {
			name  string
			words []string
		}{{"values", values}, {"before", before}, {"after", after}} {
			if len(v.words) > 0 {
				fmt.Fprintf(&b, "\t\tset %s %s\n", v.name, strings.Join(v.words, " "))
			}
		}
	}
	b.WriteString(`	case '*'
		return
	end
	set -e words[1..2]
	set -l n 1
	set -l dashes 0
	set -l skip 0
	for w in $words
		if test $skip = 1
			set skip 0
		else if test $dashes = 0; and test "x$w" = x--
			set dashes 1
			set n 1
		else if test $dashes = 0; and string match -qr -- '^-[^0-9]' $w
			contains -- $w $values; and set skip 1
		else
			set n (math $n + 1)
		end
	end
	# A flag's value: the flag's own completion offers it.
	test $skip = 1; and return
	set -l kinds $before
	test $dashes = 1; and set kinds $after
	set -l kind
	if test $n -le (count $kinds)
		set kind $kinds[$n]
	else if test (count $kinds) -gt 0; and string match -q -- '*+' $kinds[-1]
		set kind $kinds[-1]
	end
	set kind (string replace -r -- '\\+$' '' "$kind")
	switch "$kind"
	case file
		__fish_complete_path $cur
	case dir
		__fish_complete_directories $cur
	case cmd
		__fish_complete_command $cur
	case none ''
	case '*'
		string split , -- $kind
	end
end
complete -c zerofs -f
complete -c zerofs -n __fish_use_subcommand -l help -d 'list the commands'
complete -c zerofs -n __fish_use_subcommand -l version -d 'the version'
complete -c zerofs -n __fish_use_subcommand -s C -x -a '(__fish_complete_directories (commandline -ct))' -d 'run as if started in DIR'
complete -c zerofs -n __fish_use_subcommand -s q -d 'show no progress'
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "complete -c zerofs -n __fish_use_subcommand -a %s -d %s\n", fishQuote(c.name), fishQuote(c.summary))
	}
	fmt.Fprintf(&b, "complete -c zerofs -n __fish_use_subcommand -a help -d %s\n", fishQuote("a command's usage and flags"))
	for _, c := range commands {
		fmt.Fprintf(&b, "complete -c zerofs -n '__zerofs_cmd help' -a %s -d %s\n", fishQuote(c.name), fishQuote(c.summary))
	}
	for _, c := range commands {
		cond := fmt.Sprintf("-n %s", fishQuote("__zerofs_cmd "+c.name))
		for _, f := range c.flags {
			spec := "-l " + f.name
			if len(f.name) == 1 {
				spec = "-s " + f.name
			}
			if f.short != "" {
				spec = "-s " + f.short + " " + spec
			}
			if f.arg != "" {
				switch {
				case f.comp == compFile:
					spec += " -r -F"
				case f.comp == compDir:
					spec += " -x -a '(__fish_complete_directories (commandline -ct))'"
				case f.comp.words(f.arg) != nil:
					spec += " -x -a " + fishQuote(strings.Join(f.comp.words(f.arg), " "))
				default:
					spec += " -x"
				}
			}
			help, _, _ := strings.Cut(strings.TrimSpace(f.help), "\n")
			fmt.Fprintf(&b, "complete -c zerofs %s %s -d %s\n", cond, spec, fishQuote(help))
		}
		fmt.Fprintf(&b, "complete -c zerofs %s -l help -d %s\n", cond, fishQuote("the command's usage and flags"))
	}
	b.WriteString("complete -c zerofs -n 'not __fish_use_subcommand; and not __zerofs_cmd help' -a '(__zerofs_args)'\n")
	_, err := io.WriteString(w, b.String())
	return err
}
