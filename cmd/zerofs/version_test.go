package main

import (
	"runtime/debug"
	"testing"
)

// TestVersionLine: the commit comes from the build info's VCS stamp, with
// "modified" for a dirty tree; a build that recorded none says so rather
// than print a bare "(devel)".
func TestVersionLine(t *testing.T) {
	stamp := func(kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	for _, tc := range []struct {
		name string
		v    string
		bi   *debug.BuildInfo
		want string
	}{
		{"clean", "v0.0.0-20261205064001-126097d8f547", stamp("vcs", "git", "vcs.revision", "126097d8f547aa11bb22cc33dd44ee55ff667788", "vcs.modified", "false"),
			"zerofs v0.0.0-20261205064001-126097d8f547 (commit 126097d8f547)"},
		{"modified", "(devel)", stamp("vcs.revision", "126097d8f547aa11", "vcs.modified", "true"), "zerofs (devel) (commit 126097d8f547, modified)"},
		{"no stamp", "(devel)", stamp("-buildmode", "exe"), "zerofs (devel) (commit unknown: the build recorded none; 'go build' in a git clone records it)"},
		{"no build info", "(devel)", nil, "zerofs (devel) (commit unknown: the build recorded none; 'go build' in a git clone records it)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionLine(tc.v, tc.bi); got != tc.want {
				t.Errorf("versionLine = %q, want %q", got, tc.want)
			}
		})
	}
	// A release build names its version (-X main.version) and needs no note.
	defer func(v string) { version = v }(version)
	version = "v1.2.3"
	if got := versionLine(releaseVersion(), stamp()); got != "zerofs v1.2.3" {
		t.Errorf("release build: %q", got)
	}
}
