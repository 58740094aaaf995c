package main

import (
	"errors"
	"flag"
	"io"
	"strconv"
	"strings"
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
	return fs
}

// parseArgs parses flags anywhere among the positional arguments (so that
// `zerofs mount WS -f` works like `zerofs mount -f WS`), up to a "--".
// It returns the positional arguments and, separately, everything after
// the "--".
func parseArgs(c *command, fs *flag.FlagSet, args []string) (pos, afterDashes []string, err error) {
	for i, a := range args {
		if a == "--" {
			args, afterDashes = args[:i], args[i+1:]
			break
		}
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, nil, err
			}
			return nil, nil, usagef(c, "%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, afterDashes, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseSeq parses a sequence argument: a non-negative decimal integer,
// optionally written "@N" like the views.
func parseSeq(c *command, s string) (Seq, error) {
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "@"), 10, 64)
	if err != nil {
		return 0, usagef(c, "bad sequence %q: want a number like 42", s)
	}
	return Seq(n), nil
}
