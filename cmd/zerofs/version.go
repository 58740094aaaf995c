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
	about: `Prints zerofs's version, the commit it was built from, and the Go version
that built it. 'go build' in a git clone records the commit (and whether the
tree was modified); go run, go build -buildvcs=false and a build in a git
worktree record none, and version says so.
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

// writeVersion prints "zerofs VERSION (commit REV) GOVERSION OS/ARCH".
func writeVersion(w io.Writer) error {
	bi, _ := debug.ReadBuildInfo()
	_, err := fmt.Fprintf(w, "%s %s %s/%s\n", versionLine(releaseVersion(), bi), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}

// versionLine is "zerofs VERSION (commit REV[, modified])" from the build
// info's VCS stamp (vcs.revision, vcs.modified), or, when the build
// recorded none, says so: go run, -buildvcs=false and a build in a git
// worktree (golang/go#58218) leave the commit out.
func versionLine(v string, bi *debug.BuildInfo) string {
	rev, dirty := "", false
	if bi != nil {
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
	switch {
	case rev != "":
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += ", modified"
		}
		line += " (commit " + rev + ")"
	case version == "":
		line += " (commit unknown: the build recorded none; 'go build' in a git clone records it)"
	}
	return line
}
