package testsupport

import (
	"os"
	"os/exec"
	"testing"
)

// RequireEnv names the variable that makes a missing facility a failure.
const RequireEnv = "ZEROFS_REQUIRE_FUSE"

// Unavailable ends t because reason says the machine cannot run it: a skip
// on a developer's machine, a failure under ZEROFS_REQUIRE_FUSE=1.
func Unavailable(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("cannot run: %s (%s=1)", reason, RequireEnv)
	}
	t.Skipf("cannot run: %s", reason)
}

// RequireRoot ends t (see Unavailable) unless the test runs as root; why
// says what needs it.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unavailable(t, why+" needs root")
	}
}

// RequireFUSE ends t (see Unavailable) unless it can mount: root and
// /dev/fuse.
func RequireFUSE(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unavailable(t, "not root")
	} else if _, err := os.Stat("/dev/fuse"); err != nil {
		Unavailable(t, "no /dev/fuse: "+err.Error())
	}
}

// RequireNobody ends t (see Unavailable) unless it can run commands as a
// second, unprivileged user (nobody, with setpriv): root, and setpriv
// installed.
func RequireNobody(t testing.TB) {
	t.Helper()
	RequireRoot(t, "running as nobody")
	RequireSetpriv(t)
}

// RequireSetpriv ends t (see Unavailable) unless setpriv (util-linux) is
// installed.
func RequireSetpriv(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("setpriv"); err != nil {
		Unavailable(t, "no setpriv (util-linux)")
	}
}
