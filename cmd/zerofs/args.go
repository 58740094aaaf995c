package main

import (
	"errors"
	"flag"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/zerofs/zerofs/record"
)

// errHelp is -h or --help, which prints the command's help.
var errHelp = flag.ErrHelp

// newFlags is a flag set that reports errors to us instead of printing and
// exiting: the caller turns them into a *usageError (exit 2) and -h into
// the command's help. Go's flag package accepts both -name and --name.
func newFlags(c *command) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	flagSets.Lock()
	flagSets.last[c.name] = fs
	flagSets.Unlock()
	return fs
}

// flagSets keeps each command's latest flag set, so that a test can hold
// the shell completions to the flags the commands really define.
var flagSets = struct {
	sync.Mutex
	last map[string]*flag.FlagSet
}{last: map[string]*flag.FlagSet{}}

// parseArgs parses flags anywhere among the positional arguments (so that
// `zerofs mount WS -f` works like `zerofs mount -f WS`), up to a "--".
// It returns the positional arguments and, separately, everything after
// the "--". A negative number ("-1") that is not a flag's value is a
// positional argument, so that `zerofs rewind -1` can say what is wrong
// with it.
func parseArgs(c *command, fs *flag.FlagSet, args []string) (pos, afterDashes []string, err error) {
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
			if errors.Is(err, flag.ErrHelp) {
				return nil, nil, err
			}
			return nil, nil, usagef(c, "%v", err)
		}
		rest := append(fs.Args(), args[end:]...)
		if len(rest) == 0 {
			return pos, afterDashes, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
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
