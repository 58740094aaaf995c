package replicate

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
)

// BenchmarkStream: content sealed as a large blob is (sealStream) and
// opened as a restore opens it (openReader), plain and with a key, on
// incompressible data.
func BenchmarkStream(b *testing.B) {
	data := make([]byte, 8<<20)
	rand.NewChaCha8([32]byte{2}).Read(data)
	for _, keyed := range []bool{false, true} {
		name := "plain"
		var c *codec
		if keyed {
			name = "keyed"
			var err error
			if c, err = newCodec(make([]byte, 32)); err != nil {
				b.Fatal(err)
			}
		}
		// The body open reads, made here so that open runs alone too.
		var body bytes.Buffer
		if err := c.sealStream(&body, "blobs/x", bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
		sealed := bytes.Clone(body.Bytes())
		b.Run(name+"/seal", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				body.Reset()
				if err := c.sealStream(&body, "blobs/x", bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/open", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				r, err := c.openReader("blobs/x", "blobs/x", bytes.NewReader(sealed), int64(len(data)))
				if err != nil {
					b.Fatal(err)
				}
				if n, err := io.Copy(io.Discard, r); err != nil || n != int64(len(data)) {
					b.Fatal(n, err)
				}
				r.Close()
			}
		})
	}
}
