package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/zerofs/zerofs/internal/quote"
)

func main() {
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(os.Stderr, "zerofs: %v\n", err)
		os.Exit(1)
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, cwd))
}

// env is what a command runs with. Commands take it instead of touching the
// process's stdio and working directory, so tests run them in-process.
type env struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// cwd is the directory relative paths and workspace discovery start from.
	cwd string
	// quiet (zerofs -q) turns progress off.
	quiet bool
}

// commands in the order `zerofs --help` lists them (SPEC's order).
var commands []*command

func init() {
	commands = []*command{
		mountCmd, umountCmd, stepCmd, runCmd, logCmd, showCmd, diffCmd,
		rewindCmd, revertCmd, undoCmd, redoCmd, forkCmd, branchCmd, mergeCmd, statusCmd, verifyCmd, gcCmd, mcpCmd, uiCmd, hooksCmd,
		replicateCmd, restoreCmd, bisectCmd, versionCmd, completionCmd,
	}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// usageError is bad usage: exit 2 with the command's usage line.
type usageError struct {
	cmd *command // nil for the top level
	msg string
}

func (e *usageError) Error() string { return e.msg }

func usagef(c *command, format string, args ...any) error {
	return &usageError{cmd: c, msg: fmt.Sprintf(format, args...)}
}

// exitError passes on an exit code without a message (the command that
// `zerofs run` ran already spoke for itself).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// run is main without the process: it returns the exit code instead of
// exiting, so tests call it directly.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, cwd string) int {
	// -q: no progress on stderr, even on a terminal.
	quiet := false
	// -C DIR, as git's: run as if started in DIR (repeatable; each
	// relative to the one before).
	for len(args) > 0 && (args[0] == "-C" || strings.HasPrefix(args[0], "-C=") || args[0] == "-q" || args[0] == "--quiet") {
		if args[0] == "-q" || args[0] == "--quiet" {
			quiet, args = true, args[1:]
			continue
		}
		dir, rest := strings.TrimPrefix(args[0], "-C="), args[1:]
		if args[0] == "-C" {
			if len(rest) == 0 {
				fmt.Fprintf(stderr, "zerofs: -C wants a directory\n")
				printTopUsage(stderr)
				return 2
			}
			dir, rest = rest[0], rest[1:]
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			fmt.Fprintf(stderr, "zerofs: -C %s: not a directory\n", dir)
			return 1
		}
		cwd, args = filepath.Clean(dir), rest
	}
	e := &env{ctx: context.Background(), stdin: stdin, stdout: stdout, stderr: stderr, cwd: cwd, quiet: quiet}
	if len(args) == 0 {
		printTopUsage(stderr)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-version", "--version":
		if err := writeVersion(stdout); err != nil {
			return 1
		}
		return 0
	case "-h", "-help", "--help", "help":
		if name == "help" && len(rest) > 0 {
			c := lookup(rest[0])
			if c == nil {
				fmt.Fprintf(stderr, "zerofs: unknown command %q\n", rest[0])
				printTopUsage(stderr)
				return 2
			}
			writeHelp(stdout, c)
			return 0
		}
		printTopUsage(stdout)
		return 0
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(stderr, "zerofs: unknown command %q\n", name)
		printTopUsage(stderr)
		return 2
	}
	return exitCode(c.run(e, c, rest), c, stdout, stderr)
}

// exitCode reports err the way SPEC's "Exit codes" says: nothing and 0 on
// success, the usage line and 2 for bad usage, one "zerofs: reason" line
// and 1 for a failure.
func exitCode(err error, c *command, stdout, stderr io.Writer) int {
	var ue *usageError
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		writeHelp(stdout, c)
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "zerofs %s: %s\n", c.name, ue.msg)
		fmt.Fprintf(stderr, "usage: zerofs %s\n", c.usage)
		return 2
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintf(stderr, "zerofs: %s\n", oneLine(advise(err)))
		return 1
	}
}

// oneLine keeps the failure report to the single line SPEC promises.
func oneLine(s string) string {
	return quote.Line(s)
}

func printTopUsage(w io.Writer) {
	fmt.Fprintf(w, "zerofs: a time-travel workspace\n\nusage: zerofs [-C DIR] [-q] COMMAND [ARG...]\n")
	for _, c := range commands {
		if len(c.usage) > 40 {
			fmt.Fprintf(w, "    zerofs %s\n    %-47s %s\n", c.usage, "", c.summary)
			continue
		}
		fmt.Fprintf(w, "    zerofs %-40s %s\n", c.usage, c.summary)
	}
	fmt.Fprintf(w, "\n-C DIR runs as if started in DIR. -q shows no progress (long operations show it on stderr when\nit is a terminal). NO_COLOR=1 turns colour off.\n")
	fmt.Fprintf(w, "Run 'zerofs help CMD' for a command's flags. Exit codes: 0 success, 1 failure, 2 bad usage.\n")
}
