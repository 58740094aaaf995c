package replicate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/record"
)

// TestStreamedRestoreRefusesTampering: a restore reads a blob as a stream
// (fetchBlob), and a blob sealed in chunks that was tampered with, cut
// short, reordered or lengthened is refused with a *DamageError naming it,
// before anything of it enters the store; so is a plain blob whose content
// is not its name's, or longer than its state says. A segment sealed in
// chunks is checked whole before any line of it is used.
func TestStreamedRestoreRefusesTampering(t *testing.T) {
	ctx := context.Background()
	key := bytes.Repeat([]byte{9}, 32)
	c, err := newCodec(key)
	if err != nil {
		t.Fatal(err)
	}
	content := make([]byte, 5*sealChunk+1234) // several chunks, incompressible
	rand.NewChaCha8([32]byte{2}).Read(content)
	id := blobstore.ID(sha256.Sum256(content))
	sealed := func(c *codec, logical string, plain []byte) []byte {
		var buf bytes.Buffer
		if err := c.sealStream(&buf, logical, bytes.NewReader(plain)); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	ct := sealChunk + c.aead.Overhead()
	head := len(sealMagic2) + 16
	chunks := func(body []byte) [][]byte {
		var out [][]byte
		for rest := body[head:]; len(rest) > 0; {
			n := min(ct, len(rest))
			out = append(out, rest[:n])
			rest = rest[n:]
		}
		return out
	}
	join := func(body []byte, cs ...[]byte) []byte {
		out := append([]byte(nil), body[:head]...)
		for _, ch := range cs {
			out = append(out, ch...)
		}
		return out
	}
	fetch := func(c *codec, body []byte, size int64) (*blobstore.Store, error) {
		b := newMemBucket()
		b.objs[c.blobName(id)] = body
		dir := t.TempDir()
		blobs, err := blobstore.Open(filepath.Join(dir, "blobs"), blobstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { blobs.Close() })
		return blobs, fetchBlob(ctx, b, c, blobs, id, size, dir)
	}
	good := sealed(c, c.blobName(id), content)
	if n := len(chunks(good)); n < 3 {
		t.Fatalf("the sealed blob has %d chunks, want several", n)
	}
	blobs, err := fetch(c, good, int64(len(content)))
	if err != nil {
		t.Fatalf("an intact streamed blob: %v", err)
	}
	if got, err := blobs.Get(id); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("the blob stored is not its content (%v)", err)
	}

	flip := func(i int) []byte {
		b := append([]byte(nil), good...)
		b[i] ^= 1
		return b
	}
	cs := chunks(good)
	n := len(cs)
	for _, tc := range []struct {
		name string
		c    *codec
		body []byte
		size int64
	}{
		{"first chunk changed", c, flip(head + 10), 0},
		{"middle chunk changed", c, flip(head + 2*ct + 10), 0},
		{"last chunk changed", c, flip(len(good) - 1), 0},
		{"nonce prefix changed", c, flip(len(sealMagic2) + 3), 0},
		{"cut after a chunk", c, join(good, cs[:n-1]...), 0},
		{"cut within a chunk", c, good[:len(good)-ct/2], 0},
		{"a chunk dropped", c, join(good, append(append([][]byte{}, cs[:1]...), cs[2:]...)...), 0},
		{"two chunks swapped", c, join(good, append([][]byte{cs[1], cs[0]}, cs[2:]...)...), 0},
		{"a chunk repeated", c, join(good, append([][]byte{cs[0]}, cs...)...), 0},
		{"another object's", c, sealed(c, "blobs/other", content), 0},
		{"plain content not its name's", nil, compress(append([]byte("x"), content...)), int64(len(content)) + 1},
		{"plain content longer than its state", nil, compress(content), int64(len(content)) - 1},
		{"plain, not zstd", nil, flip(0)[:100], 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size := tc.size
			if size == 0 {
				size = int64(len(content))
			}
			blobs, err := fetch(tc.c, tc.body, size)
			var de *DamageError
			if !errors.As(err, &de) || !errors.Is(err, record.ErrCorrupt) || !strings.Contains(err.Error(), tc.c.blobName(id)) {
				t.Fatalf("got %v, want a *DamageError naming %s", err, tc.c.blobName(id))
			}
			stored := 0
			blobs.Walk(func(blobstore.BlobInfo) error { stored++; return nil })
			if blobs.Has(id) || stored != 0 {
				t.Errorf("a refused blob left %d blobs in the store (has it: %v)", stored, blobs.Has(id))
			}
			t.Logf("%v", err)
		})
	}

	// A segment sealed in chunks whose last chunk was changed (and named
	// by its new hash, as anyone who can write the bucket can): no line
	// of it reaches the caller.
	var lines bytes.Buffer
	for i := 1; lines.Len() < 3*sealChunk; i++ {
		fmt.Fprintf(&lines, `{"sequence":%d,"type":"x","pad":"%x"}`+"\n", i, sha256.Sum256([]byte{byte(i)}))
	}
	seg := sealed(c, segmentLogical(1, 2), lines.Bytes())
	seg[len(seg)-1] ^= 1
	b := newMemBucket()
	s := segment{Name: segmentName(1, 2, 0, seg), First: 1, Last: 2, Hash: hashHex(seg)}
	b.objs[s.Name] = seg
	used := 0
	err = eachLine(ctx, b, c, s, t.TempDir(), func([]byte) error { used++; return nil })
	var de *DamageError
	if !errors.As(err, &de) || used != 0 {
		t.Errorf("a tampered segment sealed in chunks: %v after %d lines used, want a *DamageError before any", err, used)
	}
}
