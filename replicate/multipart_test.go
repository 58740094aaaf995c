package replicate

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/zerofs/zerofs/rewind"
)

// TestMultipartUpload: an object larger than multipartAbove goes up in
// parts (S3 takes at most 5 GiB in one PUT), against versitygw with the
// threshold made small. It is immutable as a PUT is: an object of its
// name, even one that appears while its parts go up, is never overwritten
// (If-None-Match: * on CompleteMultipartUpload, which versitygw v1.8.0
// evaluates under its publish lock). An upload that fails is aborted, one
// that a crash left is aborted by the next run, and a blob replicated in
// parts restores byte for byte.
func TestMultipartUpload(t *testing.T) {
	startS3(t)
	defer func(a, p, s int64) { multipartAbove, partSize, streamAbove = a, p, s }(multipartAbove, partSize, streamAbove)
	multipartAbove, partSize, streamAbove = 6<<20, 5<<20, 1<<20
	ctx := context.Background()
	u := URL{Bucket: "replicas", Prefix: "multipart"}
	bk, err := OpenS3(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	b := bk.(*s3Bucket)
	const size = 12 << 20 // three parts: 5, 5 and 2 MiB
	data := make([]byte, size)
	rand.NewChaCha8([32]byte{3}).Read(data)
	file := func(content []byte) *os.File {
		f, err := os.CreateTemp(t.TempDir(), "body")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		if _, err := f.Write(content); err != nil {
			t.Fatal(err)
		}
		f.Seek(0, io.SeekStart)
		return f
	}
	parts := func(name string) int32 {
		h, err := b.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(u.Bucket), Key: aws.String(u.key(name)), PartNumber: aws.Int32(1)})
		if err != nil {
			t.Fatalf("head %s: %v", name, err)
		}
		return aws.ToInt32(h.PartsCount)
	}
	uploads := func() int {
		out, err := b.c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(u.Bucket), Prefix: aws.String(u.key(""))})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Uploads)
	}
	same := func(name string, want []byte) {
		t.Helper()
		got, err := b.Get(ctx, name)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes (%v), want its %d bytes", name, len(got), err, len(want))
		}
	}

	if err := b.PutNewReader(ctx, "a", file(data), size); err != nil {
		t.Fatal(err)
	}
	if n := parts("a"); n != 3 {
		t.Errorf("a %d-byte object went up in %d parts, want 3", size, n)
	}
	same("a", data)

	// Its name taken: refused before anything is sent.
	other := bytes.Repeat([]byte{'o'}, size)
	if err := b.PutNewReader(ctx, "a", file(other), size); !errors.Is(err, ErrExists) {
		t.Errorf("a multipart upload over an existing object: %v, want ErrExists", err)
	}
	same("a", data)

	// Its name taken while its parts go up (another writer, as a crash
	// and a restart could make): the conditional completion refuses,
	// the upload is aborted, the other object stays. (The body hides
	// io.ReaderAt: parts are then read by seeking.)
	racer := &hookReader{r: file(other), hook: func() {
		if err := b.PutNew(ctx, "b", []byte("first")); err != nil {
			t.Error(err)
		}
	}}
	if err := b.PutNewReader(ctx, "b", racer, size); !errors.Is(err, ErrExists) {
		t.Errorf("completing over an object that appeared meanwhile: %v, want ErrExists", err)
	}
	same("b", []byte("first"))
	if n := uploads(); n != 0 {
		t.Errorf("%d multipart uploads left after a refused completion, want none", n)
	}

	// A failure mid-upload (here the context ends as the second part
	// is read, the first one sent): aborted, no object.
	cctx, cancel := context.WithCancel(ctx)
	cut := &hookReader{r: file(data), seek: func(off int64) {
		if off >= partSize {
			cancel()
		}
	}}
	if err := b.PutNewReader(cctx, "c", cut, size); !errors.Is(err, context.Canceled) {
		t.Errorf("an upload whose context ended: %v, want context.Canceled", err)
	}
	if _, err := b.Get(ctx, "c"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a failed multipart upload left an object (%v)", err)
	}
	if n := uploads(); n != 0 {
		t.Errorf("%d multipart uploads left after a failed one, want none", n)
	}

	// End to end: a large file replicated in parts restores byte for
	// byte, and an upload a crash left is aborted by the next run.
	if _, err := b.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(u.Bucket), Key: aws.String(u.key("blobs/left-by-a-crash"))}); err != nil {
		t.Fatal(err)
	}
	// Not the replica's (its prefix, but none of its names): left alone.
	notOurs := &s3.CreateMultipartUploadInput{Bucket: aws.String(u.Bucket), Key: aws.String(u.key("other/upload"))}
	if _, err := b.c.CreateMultipartUpload(ctx, notOurs); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w := openWorkspace(t, dir)
	defer w.close()
	r := replicator(t, w, u, Options{BaseEvery: time.Nanosecond})
	release, _, err := w.eng.Begin(ctx, rewind.Caller{PID: 1}, rewind.Change{Path: "big.bin"})
	if err != nil {
		t.Fatal(err)
	}
	err = os.WriteFile(filepath.Join(dir, "big.bin"), data, 0o644)
	release()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.eng.BeginStep(ctx, "big", nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if n := uploads(); n != 1 {
		t.Errorf("%d multipart uploads left after a run, want one (the crash's aborted, the other left)", n)
	}
	names, err := b.List(ctx, blobsDir)
	if err != nil {
		t.Fatal(err)
	}
	inParts := 0
	for _, n := range names {
		if parts(n) > 1 {
			inParts++
		}
	}
	if inParts != 1 {
		t.Errorf("%d blob objects in parts, want big.bin's", inParts)
	}
	dst := filepath.Join(t.TempDir(), "r")
	if _, err := Restore(ctx, b, u, dst, RestoreOptions{Logger: quiet, SameOwner: true}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, "restore of a blob sent in parts", treeOf(t, dst), stateAt(t, w.eng, r.State().Base))
}

// hookReader is an io.ReadSeeker (not an io.ReaderAt) that calls hook on
// its first Read and seek on every Seek.
type hookReader struct {
	r    io.ReadSeeker
	hook func()
	seek func(off int64)
	done bool
}

func (h *hookReader) Read(p []byte) (int, error) {
	if !h.done && h.hook != nil {
		h.done = true
		h.hook()
	}
	return h.r.Read(p)
}

func (h *hookReader) Seek(off int64, whence int) (int64, error) {
	if h.seek != nil && whence == io.SeekStart {
		h.seek(off)
	}
	return h.r.Seek(off, whence)
}

// partProxy passes requests on to the S3 server, counting the most
// UploadParts in flight at once; until two were, it holds each until
// another arrives (or a while has passed).
type partProxy struct {
	rp      *httputil.ReverseProxy
	mu      sync.Mutex
	now     int
	most    int
	arrived chan struct{}
}

func (p *partProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPut && r.URL.Query().Has("partNumber") {
		p.mu.Lock()
		p.now++
		p.most = max(p.most, p.now)
		hold := p.most < 2
		p.mu.Unlock()
		select {
		case p.arrived <- struct{}{}: // wakes the part held
		default:
		}
		if hold {
			select {
			case <-p.arrived:
			case <-time.After(5 * time.Second):
			}
		}
		defer func() {
			p.mu.Lock()
			p.now--
			p.mu.Unlock()
		}()
	}
	p.rp.ServeHTTP(w, r)
}

// TestPartsAtOnce: the parts of a multipart upload read from a file go
// up several at once (partsAtOnce), not one after another, and the
// object is whole.
func TestPartsAtOnce(t *testing.T) {
	srv := startS3(t)
	defer func(a, p int64) { multipartAbove, partSize = a, p }(multipartAbove, partSize)
	multipartAbove, partSize = 6<<20, 5<<20
	target, _ := url.Parse(srv.Endpoint)
	proxy := &partProxy{rp: httputil.NewSingleHostReverseProxy(target), arrived: make(chan struct{})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: proxy}
	go hs.Serve(l)
	defer hs.Close()
	t.Setenv("AWS_ENDPOINT_URL", "http://"+l.Addr().String())
	ctx := context.Background()
	b, err := OpenS3(ctx, URL{Bucket: "replicas", Prefix: "parts"})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 16<<20) // four parts
	rand.NewChaCha8([32]byte{4}).Read(data)
	f, err := os.CreateTemp(t.TempDir(), "body")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	f.Seek(0, io.SeekStart)
	if err := b.PutNewReader(ctx, "blobs/big", f, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "blobs/big"); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the object: %d bytes (%v), want its %d bytes", len(got), err, len(data))
	}
	proxy.mu.Lock()
	most := proxy.most
	proxy.mu.Unlock()
	if most < 2 {
		t.Errorf("at most %d parts in flight at once, want several", most)
	}
	t.Logf("%d parts in flight at once at most", most)
}
