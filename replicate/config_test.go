package replicate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestSharedConfigFiles: with none of the AWS variables but AWS_PROFILE
// and the files' paths, the credentials, region and endpoint come from the
// shared credentials and config files (as the aws CLI reads them), and a
// replica is written and restored through them.
func TestSharedConfigFiles(t *testing.T) {
	srv := startS3(t)
	access, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	conf := filepath.Join(dir, "config")
	if err := os.WriteFile(creds, []byte("[replica]\naws_access_key_id = "+access+"\naws_secret_access_key = "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("[profile replica]\nregion = us-east-1\nendpoint_url = "+srv.Endpoint+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_CONFIG_FILE", conf)
	t.Setenv("AWS_PROFILE", "replica")

	w := openWorkspace(t, t.TempDir())
	defer w.close()
	if err := os.WriteFile(filepath.Join(w.dir, "f"), []byte("from the files\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := w.eng.BeginStep(context.Background(), "s", nil); err != nil {
		t.Fatal(err)
	}
	u := URL{Bucket: "replicas", Prefix: "profile"}
	r := replicator(t, w, u, Options{Logger: quiet})
	if err := r.Once(context.Background()); err != nil {
		t.Fatalf("replicating with the shared files' credentials and endpoint: %v", err)
	}
	if got := countBucket(t, u); got.blobs == 0 || got.segs == 0 || got.bases == 0 {
		t.Fatalf("the replica holds %+v", got)
	}
	at := r.State().Base
	sameTree(t, "restore through the shared files", treeOf(t, restoreAt(t, u, at)), stateAt(t, w.eng, at))
}

// TestPutNeverOverwrites: a plain PUT (below the multipart threshold) is
// conditional on the real server too: an object of that name is never
// replaced, and the refusal is ErrExists.
func TestPutNeverOverwrites(t *testing.T) {
	startS3(t)
	ctx := context.Background()
	b, err := OpenS3(ctx, URL{Bucket: "replicas", Prefix: "immutable"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutNew(ctx, "blobs/x", []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutNew(ctx, "blobs/x", []byte("second")); !errors.Is(err, ErrExists) {
		t.Errorf("a PUT over an existing object: %v, want ErrExists", err)
	}
	if got, err := b.Get(ctx, "blobs/x"); err != nil || string(got) != "first" {
		t.Errorf("the object holds %q (%v), want the first PUT's", got, err)
	}
}
