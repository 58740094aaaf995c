package blobstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/restic/chunker"

	"github.com/zerofs/zerofs/internal/durable"
)

// Put streams r into the store and returns its ID (the sha256 of all of
// it) and size. Content of at most Options.ChunkAbove bytes is one record;
// larger content is cut into content-defined chunks, each stored once by
// its own sha256, and a list record names them. Records already present are
// not written again.
//
// With Options.Sync, when Put returns the blob is durable.
func (s *Store) Put(r io.Reader) (ID, int64, error) {
	if s.opts.ReadOnly {
		return ID{}, 0, ErrReadOnly
	}
	src := r
	if s.opts.MaxSize > 0 {
		src = io.LimitReader(r, s.opts.MaxSize+1)
	}
	limit := s.opts.ChunkAbove
	if limit < 0 {
		limit = maxDataRaw
	}
	if f, size, exts, ok := sparseFile(r, limit); ok {
		id, n, settle, err := s.putFile(f, size, exts)
		if err != nil {
			return ID{}, 0, err
		}
		if s.opts.Sync {
			if err := s.settle(settle); err != nil {
				return ID{}, 0, err
			}
		}
		return id, n, nil
	}
	var head bytes.Buffer
	if _, err := head.ReadFrom(io.LimitReader(src, limit+1)); err != nil {
		return ID{}, 0, fmt.Errorf("blobstore: put: read: %w", err)
	}
	var settle []ID
	var id ID
	var n int64
	if int64(head.Len()) <= limit {
		data := head.Bytes()
		n = int64(len(data))
		if s.opts.MaxSize > 0 && n > s.opts.MaxSize {
			return ID{}, 0, fmt.Errorf("blobstore: put: %w (%d bytes)", ErrTooLarge, s.opts.MaxSize)
		}
		id = Sum(data)
		if err := s.putData(id, data); err != nil {
			return ID{}, 0, err
		}
		settle = append(settle, id)
	} else {
		var err error
		id, n, settle, err = s.putChunked(io.MultiReader(&head, src))
		if err != nil {
			return ID{}, 0, err
		}
	}
	if s.opts.Sync {
		if err := s.settle(settle); err != nil {
			return ID{}, 0, err
		}
	}
	return id, n, nil
}

// putChunked stores r as chunks and a list; it returns what Put must make
// durable (every chunk and the list).
func (s *Store) putChunked(r io.Reader) (ID, int64, []ID, error) {
	h := sha256.New()
	ch := chunker.NewWithBoundaries(io.TeeReader(r, h), chunkPol, minChunk, maxChunk)
	ch.SetAverageBits(averageBits)
	list, ids, n, err := s.putChunks(ch, make([]byte, maxChunk), nil, nil, s.opts.MaxSize)
	if err != nil {
		return ID{}, 0, nil, err
	}
	var id ID
	h.Sum(id[:0])
	if _, ok := s.lookup(id); !ok {
		if err := s.appendRecord(id, kindList, compNone, n, list); err != nil {
			return ID{}, 0, nil, err
		}
	}
	return id, n, append(ids, id), nil
}

// putData stores one data record unless it is present.
func (s *Store) putData(id ID, data []byte) error {
	if _, ok := s.lookup(id); ok {
		return nil
	}
	payload, comp := s.compress(data)
	return s.appendRecord(id, kindData, comp, int64(len(data)), payload)
}

// appendRecord appends a record to the active pack (unless another Put
// added the same ID meanwhile).
func (s *Store) appendRecord(id ID, kind, comp byte, raw int64, payload []byte) error {
	rec := encodeRecord(kind, comp, id, raw, payload)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, ok := s.lookup(id); ok {
		return nil
	}
	p, err := s.activeLocked()
	if err != nil {
		return err
	}
	off := p.size
	if _, err := p.f.WriteAt(rec, off); err != nil {
		// Cut back so the pack ends on a record; if even that fails,
		// leave the pack for recovery and go on in a new one.
		if p.f.Truncate(off) != nil {
			s.retireLocked()
		}
		return fmt.Errorf("blobstore: put %s: %w", id.Short(), err)
	}
	p.size += int64(len(rec))
	hook("pack:appended", p.path(s.packDir))
	s.mu.Lock()
	s.index[id] = loc{p: p, off: off, kind: kind, comp: comp, raw: raw, stored: uint32(len(payload))}
	s.mu.Unlock()
	if p.size >= s.opts.PackSize {
		s.retireLocked()
	}
	return nil
}

// activeLocked returns the pack to append to, creating one if needed.
func (s *Store) activeLocked() (*pack, error) {
	if s.active != nil {
		return s.active, nil
	}
	for range 10 {
		sum := sha256.Sum256([]byte(durable.TempName("pack")))
		n := fmt.Sprintf("%x", sum[:8])
		f, err := os.OpenFile(filepath.Join(s.packDir, n+".pack"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if errors.Is(err, fs.ErrNotExist) { // packs/ removed behind our back
			if err = os.MkdirAll(s.packDir, 0o700); err == nil {
				continue
			}
		}
		if err != nil {
			return nil, fmt.Errorf("blobstore: new pack: %w", err)
		}
		p := &pack{name: n, f: f}
		s.mu.Lock()
		s.packs[n] = p
		s.mu.Unlock()
		s.active = p
		s.retired = append(s.retired, p)
		return p, nil
	}
	return nil, errors.New("blobstore: could not name a new pack")
}

// retireLocked stops appending to the active pack; the next Sync seals it.
func (s *Store) retireLocked() { s.active = nil }

// putChunks stores each chunk ch cuts and appends its id and length to list
// and ids (the list's format: codec.go); it returns them and the bytes
// read. limit, when above 0, is the most it may read (ErrTooLarge past it).
func (s *Store) putChunks(ch *chunker.Chunker, buf []byte, list []byte, ids []ID, limit int64) ([]byte, []ID, int64, error) {
	var n int64
	for {
		c, err := ch.Next(buf)
		if err == io.EOF {
			return list, ids, n, nil
		}
		if err != nil {
			return nil, nil, 0, fmt.Errorf("blobstore: put: read: %w", err)
		}
		n += int64(c.Length)
		if limit > 0 && n > limit {
			return nil, nil, 0, fmt.Errorf("blobstore: put: %w (%d bytes)", ErrTooLarge, limit)
		}
		cid := Sum(c.Data)
		if err := s.putData(cid, c.Data); err != nil {
			return nil, nil, 0, err
		}
		ids = append(ids, cid)
		list = append(list, cid[:]...)
		list = binary.LittleEndian.AppendUint32(list, uint32(c.Length))
	}
}
