package blobstore

import (
	"encoding/binary"
	"fmt"
)

// chunkRef is one chunk of a list.
type chunkRef struct {
	id  ID
	off int64 // where it starts in the blob
	n   int64
}

// parseList decodes a list payload; the chunks must add up to raw bytes.
func parseList(id ID, raw int64, payload []byte) ([]chunkRef, error) {
	refs := make([]chunkRef, 0, len(payload)/listEntry)
	var off int64
	for b := payload; len(b) >= listEntry; b = b[listEntry:] {
		var c chunkRef
		copy(c.id[:], b[:32])
		c.off, c.n = off, int64(binary.LittleEndian.Uint32(b[32:36]))
		if c.n == 0 || (c.n > maxDataRaw && !c.isHole()) {
			return nil, fmt.Errorf("%w: %s: chunk list names a chunk of %d bytes", ErrCorrupt, id.Short(), c.n)
		}
		off += c.n
		refs = append(refs, c)
	}
	if off != raw {
		return nil, fmt.Errorf("%w: %s: chunks add up to %d bytes, want %d", ErrCorrupt, id.Short(), off, raw)
	}
	return refs, nil
}

// Chunks lists the chunks of blob id in order, or nil when it is not
// chunked.
func (s *Store) Chunks(id ID) ([]ID, error) {
	l, ok := s.lookup(id)
	if !ok || l.kind != kindList {
		if !ok && !s.Has(id) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return nil, nil
	}
	refs, err := s.list(id, l)
	if err != nil {
		return nil, err
	}
	out := make([]ID, 0, len(refs))
	for _, r := range refs {
		if !r.isHole() {
			out = append(out, r.id)
		}
	}
	return out, nil
}

func (s *Store) list(id ID, l loc) ([]chunkRef, error) {
	payload, err := readPayload(l)
	if err != nil {
		return nil, fmt.Errorf("%w (blob %s)", err, id.Short())
	}
	return parseList(id, l.raw, payload)
}
