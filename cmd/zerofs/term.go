package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether w is a terminal: colour, pagers and progress
// lines are for people, never for pipes and files.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// useColor reports whether to paint output for w: on a terminal, unless
// the NO_COLOR convention (no-color.org: set and not empty) says not to.
func useColor(w any) bool {
	return os.Getenv("NO_COLOR") == "" && isTerminal(w)
}

// withPager runs fn with its output paged through $PAGER (default
// `less -FRX`, which exits at once when the text fits) when stdout is a
// terminal, and straight to stdout otherwise.
func withPager(e *env, fn func(w io.Writer) error) error {
	if !isTerminal(e.stdout) {
		return fn(e.stdout)
	}
	pager := os.Getenv("PAGER")
	if pager == "" {
		pager = "less -FRX"
	}
	if pager == "cat" {
		return fn(e.stdout)
	}
	cmd := exec.Command("/bin/sh", "-c", pager)
	cmd.Stdout, cmd.Stderr = e.stdout, e.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fn(e.stdout) // no pager: print directly
	}
	ferr := fn(in)
	in.Close()
	werr := cmd.Wait()
	if ferr != nil && !isBrokenPipe(ferr) {
		return ferr
	}
	_ = werr // quitting the pager early is not a failure
	return nil
}

func isBrokenPipe(err error) bool { return errors.Is(err, unix.EPIPE) }

// humanBytes is n in binary units: "812 B", "1.5 KiB", "3.0 GiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// ANSI colours for terminals.
const (
	colorReset = "\x1b[0m"
	colorBold  = "\x1b[1m"
	colorRed   = "\x1b[31m"
	colorGreen = "\x1b[32m"
	colorCyan  = "\x1b[36m"
	colorYel   = "\x1b[33m"
)
