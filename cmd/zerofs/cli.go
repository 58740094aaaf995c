package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/zerofs/zerofs/record"
)

// command is one subcommand, declared once: its usage line, summary, help,
// flags and arguments. Parsing, `zerofs help CMD`, the shell completions
// (completion.go) and docs/reference.md (reference_test.go) all read the
// declaration, so they cannot drift apart. run returns a *usageError for
// bad arguments (exit 2), an *exitError to pass on an exit code (zerofs
// run), or any other error for a failure (exit 1).
type command struct {
	name    string
	usage   string    // the synopsis after "zerofs " (SPEC's usage line, or more)
	summary string    // one line for the command list
	about   string    // what it does, before its flags in the help
	flags   []flagDef // in the order help and completions list them
	args    []argDef  // its positional arguments, for completion (and help, with help text)
	more    string    // the help after the flags
	// flagsFirst: flags only before the first positional argument, which
	// begins a command line of its own (zerofs run's CMD).
	flagsFirst bool
	run        func(e *env, c *command, args []string) error
}

// flagDef is one flag of a command.
type flagDef struct {
	name  string // without dashes; a one-letter name is written -n
	short string // a one-letter alias (mount's -f), or ""
	arg   string // its value's name in help (DIR, SEQ, always|batch); "" for a switch
	// def is the default, and its type the flag's: bool (a switch, the
	// default when arg is ""), string (the default otherwise), int,
	// time.Duration (written as people do: 7d, 12h; see duration.go) or
	// patternsValue (repeatable).
	def  any
	help string   // lines as they are to read; later lines are indented under the first
	comp compKind // what completes its value
}

// argDef is one positional argument of a command.
type argDef struct {
	name string   // as in the usage line: AGENT, SEQ, PATH...
	help string   // when set, listed with the flags in the help
	comp compKind // what completes it
	// afterDashes: it goes after "--" (PATH... of log, CMD of run).
	afterDashes bool
}

// compKind says what a shell offers for a flag's value or an argument.
type compKind int

const (
	compFile    compKind = iota // a file name (the default)
	compNone                    // nothing to offer: a label, a number, a URL
	compDir                     // a directory name
	compSeq                     // a sequence (42, @42, -1)
	compAgent                   // an agent name (hooks.AgentNames)
	compCommand                 // a command to run (zerofs run's CMD)
	compWords                   // one of the words of arg, split at "|" (always|batch)
)

// label is how help writes the flag: "-f, --foreground", "--store DIR",
// "-n N".
func (f flagDef) label() string {
	s := dashed(f.name)
	if f.short != "" {
		s = dashed(f.short) + ", " + s
	}
	if f.arg != "" {
		s += " " + f.arg
	}
	return s
}

// spellings are the words a shell completes for the flag: -f --foreground;
// a switch on by default also --name=false.
func (f flagDef) spellings() []string {
	var out []string
	if f.short != "" {
		out = append(out, dashed(f.short))
	}
	out = append(out, dashed(f.name))
	if on, ok := f.def.(bool); ok && on {
		out = append(out, dashed(f.name)+"=false")
	}
	return out
}

func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// flagSet is a flag set holding c's flags with their defaults. It reports
// errors to the caller instead of printing and exiting; Go's flag package
// accepts both -name and --name.
func (c *command) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for _, f := range c.flags {
		switch def := f.def.(type) {
		case nil:
			if f.arg == "" {
				fs.Bool(f.name, false, "")
			} else {
				fs.String(f.name, "", "")
			}
		case bool:
			fs.Bool(f.name, def, "")
		case string:
			fs.String(f.name, def, "")
		case int:
			fs.Int(f.name, def, "")
		case time.Duration:
			fs.Var(durationValue{&def}, f.name, "")
		case patternsValue:
			v := append(patternsValue(nil), def...)
			fs.Var(&v, f.name, "")
		default:
			panic(fmt.Sprintf("zerofs %s --%s: no flag of type %T", c.name, f.name, def))
		}
		if f.short != "" {
			fs.Var(fs.Lookup(f.name).Value, f.short, "")
		}
	}
	return fs
}

// opts are a command's flags as parsed: o.Bool("dry-run"). Asking for a
// flag the command does not declare, or as another type, panics: every
// command reads its flags right after parsing, so any test of it finds that.
type opts struct {
	c  *command
	fs *flag.FlagSet
}

func (o opts) get(name string) any {
	f := o.fs.Lookup(name)
	if f == nil {
		panic(fmt.Sprintf("zerofs %s declares no flag --%s", o.c.name, name))
	}
	return f.Value.(flag.Getter).Get()
}

func (o opts) Bool(name string) bool              { return o.get(name).(bool) }
func (o opts) String(name string) string          { return o.get(name).(string) }
func (o opts) Int(name string) int                { return o.get(name).(int) }
func (o opts) Duration(name string) time.Duration { return o.get(name).(time.Duration) }
func (o opts) Patterns(name string) patternsValue { return o.get(name).(patternsValue) }

// Given reports whether the flag was on the command line.
func (o opts) Given(name string) bool {
	given := false
	o.fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// parse parses c's flags anywhere among the positional arguments (so that
// `zerofs mount WS -f` works like `zerofs mount -f WS`), up to a "--" (or,
// with flagsFirst, up to the first positional argument). It returns the
// positional arguments and, separately, everything after the "--". A
// negative number ("-1") that is not a flag's value is a positional
// argument, so that `zerofs rewind -1` can say what is wrong with it. -h
// or --help returns errHelp.
func (c *command) parse(args []string) (o opts, pos, afterDashes []string, err error) {
	fs := c.flagSet()
	o = opts{c: c, fs: fs}
	if c.flagsFirst {
		if err := fs.Parse(args); err != nil {
			return o, nil, nil, c.parseError(err)
		}
		return o, nil, fs.Args(), nil
	}
	for i, a := range args {
		if a == "--" {
			args, afterDashes = args[:i], args[i+1:]
			break
		}
	}
	for {
		if len(args) > 0 && isNegative(args[0]) {
			pos = append(pos, args[0])
			args = args[1:]
			continue
		}
		// Parse up to the next negative number that is no flag's value.
		end := len(args)
		for i := 1; i < len(args); i++ {
			if isNegative(args[i]) && !takesValue(fs, args[i-1]) {
				end = i
				break
			}
		}
		if err := fs.Parse(args[:end]); err != nil {
			return o, nil, nil, c.parseError(err)
		}
		rest := append(fs.Args(), args[end:]...)
		if len(rest) == 0 {
			return o, pos, afterDashes, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func (c *command) parseError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return errHelp
	}
	return usagef(c, "%v", err)
}

// errHelp is -h or --help, which prints the command's help.
var errHelp = flag.ErrHelp

// noArgs parses a command that takes neither flags nor arguments.
func noArgs(c *command, args []string) error {
	_, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos)+len(rest) > 0 {
		return usagef(c, "unexpected argument %q", append(pos, rest...)[0])
	}
	return nil
}

// isNegative reports whether a looks like a negative integer.
func isNegative(a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	for _, c := range a[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// takesValue reports whether a is a flag of fs that takes the next
// argument as its value (not a bool flag, and no "=value" of its own).
func takesValue(fs *flag.FlagSet, a string) bool {
	name := strings.TrimLeft(a, "-")
	if name == a || strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// parseSeq parses a sequence argument: a non-negative decimal integer,
// optionally written "@N" like the views.
func parseSeq(c *command, s string) (record.Seq, error) {
	if isNegative(s) {
		return 0, usagef(c, "sequence %s is negative: sequences count up from 0", s)
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "@"), 10, 64)
	if err != nil {
		return 0, usagef(c, "bad sequence %q: want a number like 42", s)
	}
	return record.Seq(n), nil
}

// writeHelp writes `zerofs help CMD`: the usage line, the summary, what
// the command does, its flags (and the arguments that have help), and the
// rest.
func writeHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: zerofs %s\n\n%s\n", c.usage, c.summary)
	for _, part := range []string{c.about, flagTable(c), c.more} {
		if part = strings.Trim(part, "\n"); part != "" {
			fmt.Fprintf(w, "\n%s\n", part)
		}
	}
}

// flagTable lists c's flags, and its arguments that have help, one entry
// each: the label, then the help from a column 4 spaces right of the
// longest label of at most 19 characters; a longer label stands on a line
// of its own.
func flagTable(c *command) string {
	type row struct{ label, help string }
	var rows []row
	for _, f := range c.flags {
		rows = append(rows, row{f.label(), f.help})
	}
	for _, a := range c.args {
		if a.help != "" {
			rows = append(rows, row{a.name, a.help})
		}
	}
	const maxLabel = 19
	col := 0
	for _, r := range rows {
		if n := len(r.label); n <= maxLabel && n > col {
			col = n
		}
	}
	col += 2 + 4
	pad := strings.Repeat(" ", col)
	var b strings.Builder
	for _, r := range rows {
		lines := strings.Split(strings.Trim(r.help, "\n"), "\n")
		if len(r.label) <= maxLabel {
			fmt.Fprintf(&b, "  %-*s%s\n", col-2, r.label, lines[0])
		} else {
			fmt.Fprintf(&b, "  %s\n%s%s\n", r.label, pad, lines[0])
		}
		for _, l := range lines[1:] {
			fmt.Fprintf(&b, "%s%s\n", pad, l)
		}
	}
	return b.String()
}
