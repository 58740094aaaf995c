package replicate

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
)

// What a restore reads never has to fit in memory: each object is read as
// a stream, into a temporary file (unlinked at once) or through a
// decoder, a chunk at a time. Nothing read is used as good content before
// all of it is known good:
//
//   - a segment or a base is spooled to a temporary file while its bytes
//     are hashed, and read from there only once they hash to its name (and,
//     sealed, once every chunk authenticates);
//   - a blob is decoded (opened chunk by chunk when sealed) into a
//     temporary file while its plaintext is hashed, and enters the
//     restored store only once that hash is its name: a tampered or
//     truncated blob is refused before any of it is stored.

// maxWindow bounds the zstd window a restore accepts: every object zerofs
// writes uses at most 8 MiB (the encoder's default window; streamed ones
// 1 MiB), and a window is memory the decoder holds.
const maxWindow = 16 << 20

// spool copies object name into a new unlinked file in dir ("" for the
// system's), refusing more than limit bytes, and returns it rewound with
// the sha256 of its bytes.
func spool(ctx context.Context, b Bucket, name, dir string, limit int64) (*os.File, string, error) {
	body, err := b.GetReader(ctx, name)
	if err != nil {
		return nil, "", err
	}
	defer body.Close()
	f, err := tempIn(dir)
	if err != nil {
		return nil, "", err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(body, limit+1))
	if err == nil && n > limit {
		err = &DamageError{Object: name, Why: fmt.Sprintf("larger than %d bytes", limit)}
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, "", fmt.Errorf("replicate: get %s: %w", name, err)
	}
	return f, hex.EncodeToString(h.Sum(nil)), nil
}

// tempIn is a new file in dir, already unlinked.
func tempIn(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "replica-download-*")
	if err != nil {
		return nil, fmt.Errorf("replicate: %w", err)
	}
	os.Remove(f.Name())
	return f, nil
}

// openReader undoes seal and sealStream as a stream: the plaintext of
// body, the object whose logical name is logical, of at most limit bytes.
// A body that is not what the object should hold (not sealed with this
// key, a chunk that does not authenticate, cut short, not zstd, too long)
// ends the stream with a *DamageError; an error reading body ends it with
// that error. A body sealed whole (sealMagic) is read into memory to be
// opened (zerofs seals whole only what it held in memory to write: content
// up to streamAbove, segments, bases); one sealed in chunks never is.
func (c *codec) openReader(object, logical string, body io.Reader, limit int64) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(body, 64<<10)
	head, err := br.Peek(len(sealMagic))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	v1, v2 := bytes.Equal(head, sealMagic), bytes.Equal(head, sealMagic2)
	var z io.Reader = br
	switch {
	case c == nil && (v1 || v2):
		return nil, fmt.Errorf("%w: %s is encrypted; give its --replica-key", ErrKey, object)
	case c == nil:
	case v2:
		br.Discard(len(sealMagic2))
		z = &chunkOpener{c: c, r: br, object: object, ad: []byte(logical)}
	case v1:
		sealed, err := io.ReadAll(io.LimitReader(br, maxObject+1))
		if err != nil {
			return nil, err
		}
		if len(sealed) > maxObject {
			return nil, &DamageError{Object: object, Why: fmt.Sprintf("sealed whole and larger than %d bytes", int64(maxObject))}
		}
		rest := sealed[len(sealMagic):]
		if len(rest) < c.aead.NonceSize() {
			return nil, &DamageError{Object: object, Why: "too short"}
		}
		ct := rest[c.aead.NonceSize():]
		plain, err := c.aead.Open(ct[:0], rest[:c.aead.NonceSize()], ct, []byte(logical)) // in place
		if err != nil {
			return nil, &DamageError{Object: object, Why: "it does not authenticate with this key (tampered, or another object's)"}
		}
		z = bytes.NewReader(plain)
	default:
		return nil, &DamageError{Object: object, Why: "not sealed with a replica key"}
	}
	src := &trackReader{r: z}
	dec, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxWindow), zstd.WithDecoderLowmem(true))
	if err != nil {
		return nil, err
	}
	return &plainReader{dec: dec, src: src, object: object, left: limit, limit: limit}, nil
}

// trackReader keeps the first error other than EOF its reader returned:
// the decoder's error is then that one (a network error, a chunk that did
// not authenticate), not a claim that the body is not zstd.
type trackReader struct {
	r   io.Reader
	err error
}

func (t *trackReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF && t.err == nil {
		t.err = err
	}
	return n, err
}

// plainReader is the decoded stream of openReader.
type plainReader struct {
	dec         *zstd.Decoder
	src         *trackReader
	object      string
	left, limit int64
}

func (p *plainReader) Read(b []byte) (int, error) {
	if p.left <= 0 {
		var one [1]byte
		_, err := io.ReadFull(p.dec, one[:])
		if err == nil {
			return 0, &DamageError{Object: p.object, Why: fmt.Sprintf("decodes to more than %d bytes", p.limit)}
		}
		return 0, p.why(err)
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	n, err := p.dec.Read(b)
	p.left -= int64(n)
	return n, p.why(err)
}

// why is the error to give for the decoder's err.
func (p *plainReader) why(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	if p.src.err != nil {
		return p.src.err
	}
	return &DamageError{Object: p.object, Why: "not zstd: " + err.Error()}
}

func (p *plainReader) Close() error {
	p.dec.Close()
	return nil
}

// chunkOpener reads a body sealed in chunks (sealStream; without its
// magic) and yields each chunk's plaintext only once it authenticates.
type chunkOpener struct {
	c      *codec
	r      io.Reader
	object string
	ad     []byte
	prefix []byte
	n      uint64
	buf    []byte // the chunk being read, and one byte of the next
	have   int
	out    []byte
	off    int
	done   bool
	err    error
}

func (o *chunkOpener) Read(p []byte) (int, error) {
	for o.off == len(o.out) {
		if o.err != nil {
			return 0, o.err
		}
		if o.done {
			return 0, io.EOF
		}
		o.next()
	}
	n := copy(p, o.out[o.off:])
	o.off += n
	return n, nil
}

func (o *chunkOpener) damage(why string) {
	o.err = &DamageError{Object: o.object, Why: why}
}

// next reads and opens one chunk: it is the last one when the body ends
// within a chunk's length.
func (o *chunkOpener) next() {
	if o.prefix == nil {
		o.prefix = make([]byte, 16)
		if _, err := io.ReadFull(o.r, o.prefix); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				o.damage("too short")
			} else {
				o.err = err
			}
			return
		}
	}
	ct := sealChunk + o.c.aead.Overhead()
	if o.buf == nil {
		o.buf = make([]byte, ct+1)
	}
	n, err := io.ReadFull(o.r, o.buf[o.have:])
	o.have += n
	last := false
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		last = true
	case err != nil:
		o.err = err
		return
	}
	chunk := o.buf[:o.have]
	ctr := o.n
	if last {
		ctr |= 1 << 63
	} else {
		chunk = o.buf[:ct]
	}
	nonce := binary.BigEndian.AppendUint64(append([]byte(nil), o.prefix...), ctr)
	out, oerr := o.c.aead.Open(o.out[:0], nonce, chunk, o.ad)
	if oerr != nil {
		o.damage("it does not authenticate with this key (tampered, cut short, or another object's)")
		return
	}
	o.out, o.off = out, 0
	o.n++
	if last {
		o.done = true
		return
	}
	o.buf[0] = o.buf[ct]
	o.have = 1
}

// authenticate reads all of body, sealed (as openReader would), only to
// check that it opens: a segment or a base is then read a second time,
// so that nothing of it is used before all of it is known good.
func (c *codec) authenticate(object, logical string, body io.Reader, limit int64) error {
	r, err := c.openReader(object, logical, body, limit)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(io.Discard, r)
	return err
}

// readChecked spools object ref (whose bytes must hash to hash), checks
// it whole, and returns its plaintext as a stream (from the spooled file,
// closed with it).
func readChecked(ctx context.Context, b Bucket, c *codec, name, hash, logical, dir string) (io.ReadCloser, error) {
	f, got, err := spool(ctx, b, name, dir, maxObject)
	if err != nil {
		return nil, err
	}
	if got != hash {
		f.Close()
		return nil, &DamageError{Object: name, Why: "its bytes do not hash to its name"}
	}
	head := make([]byte, len(sealMagic2))
	if n, _ := f.ReadAt(head, 0); c != nil && n == len(head) && bytes.Equal(head, sealMagic2) {
		// Sealed in chunks: every chunk authenticates before any is
		// used (a body sealed whole is opened whole anyway).
		err := c.authenticate(name, logical, f, maxDecoded)
		if err == nil {
			_, err = f.Seek(0, io.SeekStart)
		}
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	r, err := c.openReader(name, logical, f, maxDecoded)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &fileReader{ReadCloser: r, f: f}, nil
}

type fileReader struct {
	io.ReadCloser
	f *os.File
}

func (r *fileReader) Close() error {
	r.ReadCloser.Close()
	return r.f.Close()
}
