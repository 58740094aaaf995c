package replicate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/rewind"
)

// streamAbove: content larger than this is never held in memory whole. It
// is compressed (and sealed, chunk by chunk) into a temporary file in the
// store, unlinked at once so a crash leaves nothing, and sent from there
// with its length known. A variable for tests.
var streamAbove int64 = 8 << 20

// sendStored sends blob id from the store (its content is verified as it
// streams: blobstore.Store.Open), with no note of it in known (several
// run at once: uploadBlobs), and tells the Progress in ctx.
func (r *Replicator) sendStored(ctx context.Context, id blobstore.ID) error {
	rd, err := r.eng.Blobs().Open(id)
	if err != nil {
		return err
	}
	defer rd.Close()
	if err := r.send(ctx, r.codec.blobName(id), rd, rd.Size()); err != nil {
		return err
	}
	rewind.ProgressIn(ctx).Add(1, rd.Size()) // a blob went up
	return nil
}

// send uploads size bytes of content read from src as the blob object
// name, sealed: in memory, or from a temporary file when large. It
// touches nothing of the replicator's but st (under mu), so several may
// run at once.
func (r *Replicator) send(ctx context.Context, name string, src io.Reader, size int64) error {
	if size <= streamAbove {
		data, err := io.ReadAll(src)
		if err != nil {
			return err
		}
		return r.put(ctx, name, r.codec.seal(name, data))
	}
	f, err := r.tempFile()
	if err != nil {
		return err
	}
	defer f.Close()
	if err := r.codec.sealStream(f, name, src); err != nil {
		return err
	}
	n, err := f.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return err
	}
	if err := r.putReader(ctx, name, f, n); err != nil {
		return err
	}
	r.mu.Lock()
	r.st.Streamed++
	r.mu.Unlock()
	return nil
}

// blobsAtOnce is how many blobs go up at once (uploadBlobs): on a link
// with a long round trip one request at a time leaves it idle.
var blobsAtOnce = 4

// uploadBlobs uploads the blobs of ids the replica lacks, blobsAtOnce at
// a time, and returns those gone from the store (a gc removed them) and
// the first other error. The Progress in ctx hears each blob.
func (r *Replicator) uploadBlobs(ctx context.Context, ids []blobstore.ID) (gone []blobstore.ID, err error) {
	var todo []blobstore.ID
	seen := map[blobstore.ID]bool{}
	for _, id := range ids {
		if !seen[id] && !r.known[r.codec.blobName(id)] {
			seen[id] = true
			todo = append(todo, id)
		}
	}
	if len(todo) == 0 {
		return nil, nil
	}
	pr := &lockedProgress{p: rewind.ProgressIn(ctx)}
	wctx, stop := context.WithCancel(rewind.WithProgress(ctx, pr))
	defer stop()
	var (
		mu    sync.Mutex // guards sent, gone, first
		sent  []blobstore.ID
		first error
		wg    sync.WaitGroup
	)
	next := make(chan blobstore.ID)
	for range min(blobsAtOnce, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range next {
				err := r.sendStored(wctx, id)
				mu.Lock()
				switch {
				case err == nil:
					sent = append(sent, id)
				case errors.Is(err, blobstore.ErrNotFound):
					gone = append(gone, id)
				case first == nil:
					first = fmt.Errorf("replicate: blob %s: %w", id.Short(), err)
					stop()
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, id := range todo {
		select {
		case next <- id:
		case <-wctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	for _, id := range sent {
		r.known[r.codec.blobName(id)] = true
	}
	if first == nil {
		first = ctx.Err()
	}
	return gone, first
}

// lockedProgress lets several uploads tell one Progress.
type lockedProgress struct {
	mu sync.Mutex // guards p's calls
	p  rewind.Progress
}

func (l *lockedProgress) Begin(what string, items, bytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.p.Begin(what, items, bytes)
}

func (l *lockedProgress) Add(items, bytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.p.Add(items, bytes)
}

// putLive uploads the content read from f (a file as it is now) unless
// the replica holds it, and returns its blob id and length: a large one
// is copied aside first (its hash, so its object's name, is known only at
// its end).
func (m *baseMaker) putLive(ctx context.Context, f io.Reader, size int64) (blobstore.ID, int64, error) {
	r := m.r
	send := func(id blobstore.ID, src io.Reader, n int64) error {
		name := r.codec.blobName(id)
		if m.known(name) {
			return nil
		}
		if err := r.send(ctx, name, src, n); err != nil {
			return err
		}
		m.noteKnown(name)
		return nil
	}
	if size <= streamAbove {
		data, err := io.ReadAll(f)
		if err != nil {
			return blobstore.ID{}, 0, err
		}
		id := blobstore.ID(sha256.Sum256(data))
		return id, int64(len(data)), send(id, bytes.NewReader(data), int64(len(data)))
	}
	tmp, err := r.tempFile()
	if err != nil {
		return blobstore.ID{}, 0, err
	}
	defer tmp.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), f)
	if err != nil {
		return blobstore.ID{}, 0, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return blobstore.ID{}, 0, err
	}
	id := blobstore.ID(h.Sum(nil))
	return id, n, send(id, tmp, n)
}

// tempFile is a new file in the store, already unlinked.
func (r *Replicator) tempFile() (*os.File, error) {
	f, err := os.CreateTemp(r.dir, "replica-upload-*")
	if err != nil {
		return nil, fmt.Errorf("replicate: %w", err)
	}
	os.Remove(f.Name())
	return f, nil
}

// putReader writes a new object from body (size bytes), as put does.
func (r *Replicator) putReader(ctx context.Context, name string, body io.ReadSeeker, size int64) error {
	err := r.b.PutNewReader(ctx, name, body, size)
	if errors.Is(err, ErrExists) {
		return nil
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.st.Objects++
	r.st.Bytes += size
	r.mu.Unlock()
	return nil
}

// A streamed sealed body (crypt.go) is sealMagic2, a 16-byte random nonce
// prefix, then the compressed content in chunks of sealChunk bytes, each
// sealed on its own with the nonce prefix||counter (big-endian, the top bit
// set on the last chunk) and the object's logical name: chunks cannot be
// reordered, dropped or cut off, and no nonce repeats. Only the last chunk
// is shorter than sealChunk (it may be empty).
var sealMagic2 = []byte("zerofs-sealed-2\n")

const sealChunk = 64 << 10

// sealStream writes what seal makes of src's content to w, holding a
// chunk at a time.
func (c *codec) sealStream(w io.Writer, logical string, src io.Reader) error {
	out := w
	var cw *chunkSealer
	if c != nil {
		cw = &chunkSealer{c: c, w: w, ad: []byte(logical)}
		if err := cw.start(); err != nil {
			return err
		}
		out = cw
	}
	z, err := zstd.NewWriter(out, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(1<<20), zstd.WithLowerEncoderMem(true))
	if err != nil {
		return err
	}
	if _, err := io.Copy(z, src); err != nil {
		z.Close()
		return err
	}
	if err := z.Close(); err != nil {
		return err
	}
	if cw != nil {
		return cw.close()
	}
	return nil
}

type chunkSealer struct {
	c      *codec
	w      io.Writer
	ad     []byte
	prefix []byte
	n      uint64
	buf    []byte
	out    []byte
}

func (s *chunkSealer) start() error {
	s.prefix = make([]byte, 16)
	randRead(s.prefix)
	_, err := s.w.Write(append(append([]byte(nil), sealMagic2...), s.prefix...))
	return err
}

func (s *chunkSealer) nonce(last bool) []byte {
	ctr := s.n
	if last {
		ctr |= 1 << 63
	}
	return binary.BigEndian.AppendUint64(append([]byte(nil), s.prefix...), ctr)
}

// Write seals every full chunk but one: the last chunk is sealed by close.
func (s *chunkSealer) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	off := 0
	for len(s.buf)-off > sealChunk {
		s.out = s.c.aead.Seal(s.out[:0], s.nonce(false), s.buf[off:off+sealChunk], s.ad)
		if _, err := s.w.Write(s.out); err != nil {
			return 0, err
		}
		s.n++
		off += sealChunk
	}
	s.buf = append(s.buf[:0], s.buf[off:]...) // one move per Write, not one per chunk
	return len(p), nil
}

func (s *chunkSealer) close() error {
	_, err := s.w.Write(s.c.aead.Seal(nil, s.nonce(true), s.buf, s.ad))
	return err
}
