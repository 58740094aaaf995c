package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at build time (go build -ldflags "-X main.version=v1.2.3");
// otherwise the module's version from the build info is shown.
var version = ""

var versionCmd = &command{
	name:    "version",
	usage:   "version",
	summary: "the version (also --version)",
	help: `Prints zerofs's version, the commit it was built from when known, and the Go
version that built it.
`,
	run: func(e *env, c *command, args []string) error {
		if err := noArgs(c, args); err != nil {
			return err
		}
		return writeVersion(e.stdout)
	},
}

// releaseVersion is the version alone: -X main.version, else the module's.
func releaseVersion() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "" {
		v = bi.Main.Version
	}
	if v == "" {
		v = "(devel)"
	}
	return v
}

// writeVersion prints "zerofs VERSION (commit REV) GOVERSION".
func writeVersion(w io.Writer) error {
	v, rev, dirty := releaseVersion(), "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	line := "zerofs " + v
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += ", modified"
		}
		line += " (commit " + rev + ")"
	}
	_, err := fmt.Fprintf(w, "%s %s %s/%s\n", line, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}
