package main

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// writeIgnoreLines is status's word on ignored paths: a line when anything
// is ignored (or .zeroignore cannot be used), and with --ignored the paths
// present that are.
func writeIgnoreLines(w io.Writer, st history.Status, ignored []string, listed bool) {
	ig := st.Ignore
	if ig.Err != "" {
		fmt.Fprintf(w, "ignoring:  %s not used (%s): everything is recorded", record.IgnoreFile, ig.Err)
		if len(ig.Flags) > 0 {
			fmt.Fprintf(w, " but what --ignore matches (%s)", plural(len(ig.Flags), "pattern"))
		}
		fmt.Fprintln(w)
	} else if ig.Patterns > 0 {
		var from []string
		if n := len(ig.File); n > 0 {
			from = append(from, fmt.Sprintf("%d from %s", n, record.IgnoreFile))
		}
		if n := len(ig.Flags); n > 0 {
			from = append(from, fmt.Sprintf("%d from --ignore", n))
		}
		fmt.Fprintf(w, "ignoring:  on, %s (%s): never captured, never rewound\n", plural(ig.Patterns, "pattern"), strings.Join(from, ", "))
	}
	if !listed {
		return
	}
	if len(ignored) == 0 {
		fmt.Fprintf(w, "ignored:   nothing present\n")
	}
	for _, p := range ignored {
		fmt.Fprintf(w, "ignored:   %s\n", quote.Name(p))
	}
}

// ignoredPresent lists the workspace's paths that st's rules ignore, an
// ignored directory once (with a trailing /) and nothing beneath it.
func ignoredPresent(st history.Status) ([]string, error) {
	if st.Ignore.Patterns == 0 {
		return nil, nil
	}
	m := rewind.IgnoreRules(st.Ignore)
	var out []string
	var walk func(rel string) error
	walk = func(rel string) error {
		ents, err := os.ReadDir(filepath.Join(st.Workspace.Root, rel))
		if err != nil {
			return err
		}
		for _, de := range ents {
			if rel == "" && record.IsReserved(de.Name()) {
				continue
			}
			p := path.Join(rel, de.Name())
			dir := de.IsDir()
			if p != record.IgnoreFile && m.Match(p, dir) {
				if dir {
					p += "/"
				}
				out = append(out, p)
				continue
			}
			if dir {
				if err := walk(p); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return nil, fmt.Errorf("listing ignored paths: %w", err)
	}
	return out, nil
}

// ignoresLine is log's word on an entry that changed .zeroignore: what it
// ignores from then on.
func ignoresLine(patterns []string) string {
	if len(patterns) == 0 {
		return record.IgnoreFile + ": nothing ignored from then on (everything is recorded)"
	}
	q := make([]string, len(patterns))
	for i, p := range patterns {
		q[i] = quote.Name(p)
	}
	return fmt.Sprintf("%s: from then on ignores %s", record.IgnoreFile, strings.Join(q, " "))
}

// warnIgnoreUnused says on stderr, once a mount is ready, that its
// .zeroignore is not used and why (the daemon records everything but what
// --ignore matches; `zerofs status` says the same).
func warnIgnoreUnused(e *env, mountpoint string) {
	st, ok := history.ReadStatus(mountpoint)
	if !ok || st.Ignore == nil || st.Ignore.Err == "" {
		return
	}
	fmt.Fprintf(e.stderr, "zerofs: warning: %s not used (%s): everything is recorded but what --ignore matches\n", record.IgnoreFile, st.Ignore.Err)
}
