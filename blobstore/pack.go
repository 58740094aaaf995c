package blobstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// A pack is an append-only file of records. Each record is
//
//	header (56 bytes):
//	  0  "ZPK1"
//	  4  kind: 'd' data (the content of a small blob or of one chunk),
//	           'l' list (a chunked blob: its chunks, in order)
//	  5  compression: 0 none, 1 zstd
//	  6  2 bytes, zero
//	  8  ID (32 bytes): sha256 of the content (for a list: of the whole blob)
//	 40  content length (uint64, little-endian)
//	 48  stored payload length (uint32)
//	 52  CRC-32C of bytes 0..51
//	payload (stored length bytes): the content, compressed or not; for a
//	  list, 36 bytes per chunk: its ID and its length (uint32)
//	CRC-32C of the payload (4 bytes)
//
// The CRCs find torn and damaged records cheaply; the sha256 in the header
// is what content is verified against when read.
const (
	recMagic    = "ZPK1"
	headerSize  = 56
	trailerSize = 4
	listEntry   = 36

	kindData byte = 'd'
	kindList byte = 'l'

	compNone byte = 0
	compZstd byte = 1

	// maxDataRaw bounds a data record's content (a whole small blob or
	// one chunk): a header claiming more is damage, not a reason to
	// allocate.
	maxDataRaw = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// loc is where a record is.
type loc struct {
	p      *pack
	off    int64 // the header's offset in the pack
	kind   byte
	comp   byte
	raw    int64  // content length
	stored uint32 // payload length
}

// end is the offset just past the record.
func (l loc) end() int64 { return l.off + headerSize + int64(l.stored) + trailerSize }

// pack is one pack file.
type pack struct {
	name string // base name, without ".pack"
	f    *os.File

	// size is the pack's length: where the next record goes (guarded by
	// Store.wmu for the active pack; fixed for others).
	size int64

	// syncMu serialises fdatasyncs of this pack and guards entryDurable;
	// durable and failed change under both syncMu and Store.wmu, so
	// either lock reads them.
	syncMu sync.Mutex
	// durable is the length known to be on stable storage.
	durable int64
	// entryDurable: the pack's name in packs/ is durable.
	entryDurable bool
	// failed: an fdatasync of the pack failed; it is never synced or
	// appended to again.
	failed bool
}

func (p *pack) path(dir string) string { return filepath.Join(dir, p.name+".pack") }

// encodeHeader fills a record header.
func encodeHeader(h []byte, kind, comp byte, id ID, raw int64, stored uint32) {
	copy(h[0:4], recMagic)
	h[4], h[5], h[6], h[7] = kind, comp, 0, 0
	copy(h[8:40], id[:])
	binary.LittleEndian.PutUint64(h[40:48], uint64(raw))
	binary.LittleEndian.PutUint32(h[48:52], stored)
	binary.LittleEndian.PutUint32(h[52:56], crc32.Checksum(h[:52], castagnoli))
}

// decodeHeader parses and checks a record header.
func decodeHeader(h []byte) (kind, comp byte, id ID, raw int64, stored uint32, ok bool) {
	if len(h) < headerSize || string(h[0:4]) != recMagic {
		return
	}
	if crc32.Checksum(h[:52], castagnoli) != binary.LittleEndian.Uint32(h[52:56]) {
		return
	}
	kind, comp = h[4], h[5]
	copy(id[:], h[8:40])
	r := binary.LittleEndian.Uint64(h[40:48])
	stored = binary.LittleEndian.Uint32(h[48:52])
	if r > 1<<62 || (kind != kindData && kind != kindList) || comp > compZstd {
		return
	}
	if kind == kindData && (r > maxDataRaw || (comp == compNone && uint64(stored) != r)) {
		return
	}
	if kind == kindList && (comp != compNone || stored%listEntry != 0) {
		return
	}
	return kind, comp, id, int64(r), stored, true
}

// encodeRecord is the whole record for a payload.
func encodeRecord(kind, comp byte, id ID, raw int64, payload []byte) []byte {
	rec := make([]byte, headerSize+len(payload)+trailerSize)
	encodeHeader(rec, kind, comp, id, raw, uint32(len(payload)))
	copy(rec[headerSize:], payload)
	binary.LittleEndian.PutUint32(rec[headerSize+len(payload):], crc32.Checksum(payload, castagnoli))
	return rec
}

// readPayload reads a record's payload and checks its CRC.
func readPayload(l loc) ([]byte, error) {
	buf := make([]byte, int(l.stored)+trailerSize)
	if _, err := l.p.f.ReadAt(buf, l.off+headerSize); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: record at %s:%d is cut short", ErrCorrupt, l.p.name, l.off)
		}
		return nil, fmt.Errorf("blobstore: read pack %s: %w", l.p.name, err)
	}
	payload := buf[:l.stored]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(buf[l.stored:]) {
		return nil, fmt.Errorf("%w: record at %s:%d fails its checksum", ErrCorrupt, l.p.name, l.off)
	}
	return payload, nil
}

// scanned is one record found by scanPack.
type scanned struct {
	id ID
	l  loc
}

// damage is a range of a pack that holds no valid record.
type damage struct {
	off, end int64
}

// scanPack reads every record of p from the start. It returns the records,
// the damaged ranges between valid records, and where the valid records
// end: bytes after that (a torn tail) are not followed by any valid record.
func scanPack(p *pack) (recs []scanned, bad []damage, validEnd int64, err error) {
	fi, err := p.f.Stat()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("blobstore: scan pack %s: %w", p.name, err)
	}
	size := fi.Size()
	br := bufio.NewReaderSize(io.NewSectionReader(p.f, 0, size), 1<<20)
	off := int64(0)
	hdr := make([]byte, headerSize)
	// recordAt checks a whole record at off by positioned reads (used
	// while resynchronising after damage).
	recordAt := func(off int64) (scanned, bool) {
		if _, err := p.f.ReadAt(hdr, off); err != nil {
			return scanned{}, false
		}
		kind, comp, id, raw, stored, ok := decodeHeader(hdr)
		if !ok {
			return scanned{}, false
		}
		l := loc{p: p, off: off, kind: kind, comp: comp, raw: raw, stored: stored}
		if l.end() > size {
			return scanned{}, false
		}
		if _, err := readPayload(l); err != nil {
			return scanned{}, false
		}
		return scanned{id: id, l: l}, true
	}
	for off < size {
		var rec scanned
		ok := false
		if _, err := io.ReadFull(br, hdr); err == nil {
			kind, comp, id, raw, stored, hok := decodeHeader(hdr)
			l := loc{p: p, off: off, kind: kind, comp: comp, raw: raw, stored: stored}
			if hok && l.end() <= size {
				buf := make([]byte, int(stored)+trailerSize)
				if _, err := io.ReadFull(br, buf); err == nil &&
					crc32.Checksum(buf[:stored], castagnoli) == binary.LittleEndian.Uint32(buf[stored:]) {
					rec, ok = scanned{id: id, l: l}, true
				}
			}
		}
		if ok {
			recs = append(recs, rec)
			off = rec.l.end()
			validEnd = off
			continue
		}
		// Damage at off: look for the next valid record.
		next := int64(-1)
		for cand := nextMagic(p.f, off+1, size); cand >= 0; cand = nextMagic(p.f, cand+1, size) {
			if r, ok := recordAt(cand); ok {
				next, rec = cand, r
				break
			}
		}
		if next < 0 {
			return recs, bad, validEnd, nil // a torn tail
		}
		bad = append(bad, damage{off: off, end: next})
		recs = append(recs, rec)
		off = rec.l.end()
		validEnd = off
		br.Reset(io.NewSectionReader(p.f, off, size-off))
	}
	return recs, bad, validEnd, nil
}

// nextMagic is the offset of the next record magic at or after from, or -1.
func nextMagic(f *os.File, from, size int64) int64 {
	const window = 1 << 20
	buf := make([]byte, window+len(recMagic)-1)
	for off := from; off+headerSize <= size; off += window {
		n, _ := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if i := bytes.Index(buf[:n], []byte(recMagic)); i >= 0 {
			return off + int64(i)
		}
	}
	return -1
}

// The index of a sealed pack, packs/<name>.idx: "ZIX1", the pack's length
// (uint64), the record count (uint32), per record its ID, kind,
// compression, offset (uint64), content length (uint64) and stored length
// (uint32), then the CRC-32C of everything before it. It is a cache: a
// pack without a valid index of its exact length is scanned instead.
const (
	idxMagic = "ZIX1"
	idxEntry = 32 + 1 + 1 + 8 + 8 + 4
)

func encodeIndex(size int64, recs []scanned) []byte {
	b := make([]byte, 0, 16+len(recs)*idxEntry+4)
	b = append(b, idxMagic...)
	b = binary.LittleEndian.AppendUint64(b, uint64(size))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(recs)))
	for _, r := range recs {
		b = append(b, r.id[:]...)
		b = append(b, r.l.kind, r.l.comp)
		b = binary.LittleEndian.AppendUint64(b, uint64(r.l.off))
		b = binary.LittleEndian.AppendUint64(b, uint64(r.l.raw))
		b = binary.LittleEndian.AppendUint32(b, r.l.stored)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeIndex parses an index for p, whose length is size; ok is false
// when the index is damaged or describes another length.
func decodeIndex(b []byte, p *pack, size int64) ([]scanned, bool) {
	if len(b) < 20 || string(b[:4]) != idxMagic {
		return nil, false
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, false
	}
	if int64(binary.LittleEndian.Uint64(body[4:12])) != size {
		return nil, false
	}
	n := int(binary.LittleEndian.Uint32(body[12:16]))
	if len(body) != 16+n*idxEntry {
		return nil, false
	}
	recs := make([]scanned, n)
	for i := range recs {
		e := body[16+i*idxEntry:]
		var r scanned
		copy(r.id[:], e[:32])
		r.l = loc{p: p, kind: e[32], comp: e[33],
			off:    int64(binary.LittleEndian.Uint64(e[34:42])),
			raw:    int64(binary.LittleEndian.Uint64(e[42:50])),
			stored: binary.LittleEndian.Uint32(e[50:54])}
		if r.l.off < 0 || r.l.end() > size || r.l.raw < 0 {
			return nil, false
		}
		recs[i] = r
	}
	return recs, true
}
