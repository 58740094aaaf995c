package testsupport

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The integration tests run a real S3 server on 127.0.0.1: versitygw
// (Apache-2.0) with its posix backend on a temporary directory. It is
// built from the Go module proxy once per machine, into the user's cache
// (ZEROFS_VERSITYGW names a binary to use instead). v1.8.0 honours
// If-None-Match on PutObject (versitygw PR 1727).
const versitygwModule = "github.com/versity/versitygw/cmd/versitygw@v1.8.0"

var (
	vgwOnce sync.Once
	vgwPath string
	vgwErr  error
)

// versitygw returns the server's binary, building it if need be.
func versitygw(t testing.TB) string {
	t.Helper()
	vgwOnce.Do(func() {
		if p := os.Getenv("ZEROFS_VERSITYGW"); p != "" {
			vgwPath = p
			return
		}
		cache, err := os.UserCacheDir()
		if err != nil {
			vgwErr = err
			return
		}
		dir := filepath.Join(cache, "zerofs-test", "versitygw-v1.8.0")
		vgwPath = filepath.Join(dir, "versitygw")
		if _, err := os.Stat(vgwPath); err == nil {
			return
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			vgwErr = err
			return
		}
		// One build at a time across test processes.
		lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			vgwErr = err
			return
		}
		defer lock.Close()
		unix.Flock(int(lock.Fd()), unix.LOCK_EX)
		if _, err := os.Stat(vgwPath); err == nil {
			return
		}
		cmd := exec.Command("go", "install", versitygwModule)
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			vgwErr = fmt.Errorf("go install %s: %v\n%s", versitygwModule, err, out)
		}
	})
	if vgwErr != nil {
		t.Fatalf("building the S3 server for the tests: %v", vgwErr)
	}
	return vgwPath
}

// S3Server is a running versitygw.
type S3Server struct {
	Endpoint string
	Root     string
}

const (
	s3Access = "zerofs-test-access"
	s3Secret = "zerofs-test-secret-key"
)

// StartS3 starts versitygw on a free port of 127.0.0.1 with an empty
// bucket "replicas" (a directory of the posix backend), and points the AWS variables at it (for this test:
// endpoint, credentials, region; no shared files).
func StartS3(t *testing.T) *S3Server {
	t.Helper()
	bin := versitygw(t)
	root := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--port", addr, "--access", s3Access, "--secret", s3Secret, "posix", root)
	logf, err := os.Create(filepath.Join(t.TempDir(), "versitygw.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
	})
	srv := &S3Server{Endpoint: "http://" + addr, Root: root}
	if err := Poll(20*time.Second, func() bool {
		resp, err := http.Get(srv.Endpoint)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}); err != nil {
		t.Fatalf("versitygw did not answer on %s", addr)
	}
	setAWSEnv(t, srv.Endpoint)
	if err := os.Mkdir(filepath.Join(root, "replicas"), 0o755); err != nil {
		t.Fatal(err)
	}
	return srv
}

// setAWSEnv points the standard AWS variables at endpoint.
func setAWSEnv(t *testing.T, endpoint string) {
	none := filepath.Join(t.TempDir(), "none")
	t.Setenv("AWS_ENDPOINT_URL", endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", s3Access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3Secret)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_CONFIG_FILE", none)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", none)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_MAX_ATTEMPTS", "1")
	// What replicas promised (replicate.SeenFile) is noted per test.
	t.Setenv("XDG_STATE_HOME", t.TempDir())
}
