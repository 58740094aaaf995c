package blobstore

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

var (
	zenc = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			panic(err) // only bad options fail
		}
		return e
	})
	zdec = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxDataRaw))
		if err != nil {
			panic(err)
		}
		return d
	})
)

// compressMin: content shorter than this is stored as it is.
const compressMin = 128

// compress returns the payload for data: zstd when it saves at least an
// eighth, else data itself.
func (s *Store) compress(data []byte) ([]byte, byte) {
	if s.opts.NoCompress || len(data) < compressMin {
		return data, compNone
	}
	out := zenc().EncodeAll(data, make([]byte, 0, len(data)))
	if len(out) > len(data)-len(data)/8 {
		return data, compNone
	}
	return out, compZstd
}

// decode turns a data record's payload into its content and verifies it.
func (s *Store) decode(id ID, l loc, payload []byte) ([]byte, error) {
	data := payload
	if l.comp == compZstd {
		var err error
		data, err = zdec().DecodeAll(payload, make([]byte, 0, l.raw))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: cannot decompress: %v", ErrCorrupt, id.Short(), err)
		}
	}
	if int64(len(data)) != l.raw {
		return nil, fmt.Errorf("%w: %s: %d bytes, want %d", ErrCorrupt, id.Short(), len(data), l.raw)
	}
	if got := Sum(data); got != id {
		return nil, fmt.Errorf("%w: %s (content hashes to %s)", ErrCorrupt, id, got.Short())
	}
	return data, nil
}

// readData reads and verifies data record id.
func (s *Store) readData(id ID) ([]byte, error) {
	l, ok := s.lookup(id)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if l.kind != kindData {
		return nil, fmt.Errorf("%w: %s is a list where a chunk was expected", ErrCorrupt, id.Short())
	}
	payload, err := readPayload(l)
	if err != nil {
		return nil, fmt.Errorf("%w (blob %s)", err, id.Short())
	}
	return s.decode(id, l, payload)
}
