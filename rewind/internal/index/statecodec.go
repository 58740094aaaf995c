package index

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/zerofs/zerofs/record"
)

// The index keeps each record's FileState packed (the path aside: the index
// holds it once per path). The layout, with varints as encoding/binary
// writes them:
//
//	flags    uvarint  stateAbsent | stateSkipped | stateBlobRaw | stateBlobText
//	kind     byte     kindCode, then a string if kindOther
//	blob     32 bytes if stateBlobRaw (a lower-case hex id), a string if stateBlobText
//	bytes    varint
//	mode     uvarint
//	pid      varint
//	reason, target, comm: strings (uvarint length, then the bytes)
//	uid      uvarint if stateUID
//	gid      uvarint if stateGID
//	mtime    varint seconds, uvarint nanoseconds, if stateMTime
//	xattrs   if stateXattrs: uvarint count, then each name and value as
//	         strings, names sorted
//	renamedTo, renamedFrom: a string each, if stateRenamedTo, stateRenamedFrom
//	kept     a string if stateKept (the stash name of a removed file)
//
// A field FileState gains must be carried here too (a test fails until it
// is): extend encodeState and decodeState with it, and bump
// SnapshotVersion, since snapshots hold the same encoding.
const (
	stateAbsent   = 1 << 0
	stateSkipped  = 1 << 1
	stateBlobRaw  = 1 << 2
	stateBlobText = 1 << 3
	stateUID      = 1 << 4
	stateGID      = 1 << 5
	stateMTime    = 1 << 6
	stateXattrs   = 1 << 7
	// A rename record's side (renames.go).
	stateRenamedTo   = 1 << 8
	stateRenamedFrom = 1 << 9
	stateRenamed     = stateRenamedTo | stateRenamedFrom

	// A removed file's stash (named.go).
	stateKept = 1 << 10

	stateFlags = stateAbsent | stateSkipped | stateBlobRaw | stateBlobText | stateUID | stateGID | stateMTime | stateXattrs | stateRenamed | stateKept
)

// Kind codes; kindOther is followed by the kind as a string (a log may
// hold kinds this version does not know).
const (
	kindNone byte = iota
	kindFile
	kindDir
	kindSymlink
	kindOther
)

// encodeState appends f's packed form (without its path) to b.
func encodeState(b []byte, f record.FileState) []byte {
	var flags uint64
	if f.Absent {
		flags |= stateAbsent
	}
	if f.Skipped {
		flags |= stateSkipped
	}
	if f.UID != nil {
		flags |= stateUID
	}
	if f.GID != nil {
		flags |= stateGID
	}
	if f.MTime != nil {
		flags |= stateMTime
	}
	if f.Xattrs != nil {
		flags |= stateXattrs
	}
	if f.RenamedTo != "" {
		flags |= stateRenamedTo
	}
	if f.RenamedFrom != "" {
		flags |= stateRenamedFrom
	}
	if f.Kept != "" {
		flags |= stateKept
	}
	var raw [32]byte
	if f.Blob != "" {
		if len(f.Blob) == 64 && isLowerHex(f.Blob) {
			hex.Decode(raw[:], []byte(f.Blob))
			flags |= stateBlobRaw
		} else {
			flags |= stateBlobText
		}
	}
	b = binary.AppendUvarint(b, flags)
	switch f.Kind {
	case "":
		b = append(b, kindNone)
	case record.KindFile:
		b = append(b, kindFile)
	case record.KindDir:
		b = append(b, kindDir)
	case record.KindSymlink:
		b = append(b, kindSymlink)
	default:
		b = appendString(append(b, kindOther), string(f.Kind))
	}
	switch {
	case flags&stateBlobRaw != 0:
		b = append(b, raw[:]...)
	case flags&stateBlobText != 0:
		b = appendString(b, f.Blob)
	}
	b = binary.AppendVarint(b, f.Bytes)
	b = binary.AppendUvarint(b, uint64(f.Mode))
	b = binary.AppendVarint(b, int64(f.PID))
	b = appendString(b, f.Reason)
	b = appendString(b, f.Target)
	b = appendString(b, f.Comm)
	if f.UID != nil {
		b = binary.AppendUvarint(b, uint64(*f.UID))
	}
	if f.GID != nil {
		b = binary.AppendUvarint(b, uint64(*f.GID))
	}
	if f.MTime != nil {
		b = binary.AppendVarint(b, f.MTime.Unix())
		b = binary.AppendUvarint(b, uint64(f.MTime.Nanosecond()))
	}
	if f.Xattrs != nil {
		b = binary.AppendUvarint(b, uint64(len(f.Xattrs)))
		for _, name := range slices.Sorted(maps.Keys(f.Xattrs)) {
			b = appendString(appendString(b, name), string(f.Xattrs[name]))
		}
	}
	if f.RenamedTo != "" {
		b = appendString(b, f.RenamedTo)
	}
	if f.RenamedFrom != "" {
		b = appendString(b, f.RenamedFrom)
	}
	if f.Kept != "" {
		b = appendString(b, f.Kept)
	}
	return b
}

// decodeState is the inverse of encodeState. b comes from this process's
// own encodeState (the arena) or from a snapshot record whose layout
// stateSize checked (the snapshot's checksum is summed beside the parse),
// so a short or malformed b is a bug: it panics like an index out of range.
func decodeState(b []byte) record.FileState {
	d := stateDecoder{b: b}
	var f record.FileState
	flags := d.uvarint()
	f.Absent = flags&stateAbsent != 0
	f.Skipped = flags&stateSkipped != 0
	switch k := d.byte(); k {
	case kindFile:
		f.Kind = record.KindFile
	case kindDir:
		f.Kind = record.KindDir
	case kindSymlink:
		f.Kind = record.KindSymlink
	case kindOther:
		f.Kind = record.Kind(d.string())
	}
	switch {
	case flags&stateBlobRaw != 0:
		f.Blob = hex.EncodeToString(d.next(32))
	case flags&stateBlobText != 0:
		f.Blob = d.string()
	}
	f.Bytes = d.varint()
	f.Mode = uint32(d.uvarint())
	f.PID = int(d.varint())
	f.Reason = d.string()
	f.Target = d.string()
	f.Comm = d.string()
	if flags&stateUID != 0 {
		uid := uint32(d.uvarint())
		f.UID = &uid
	}
	if flags&stateGID != 0 {
		gid := uint32(d.uvarint())
		f.GID = &gid
	}
	if flags&stateMTime != 0 {
		sec := d.varint()
		t := time.Unix(sec, int64(d.uvarint())).UTC()
		f.MTime = &t
	}
	if flags&stateXattrs != 0 {
		n := d.uvarint()
		f.Xattrs = make(map[string][]byte, n)
		for range n {
			name := d.string()
			f.Xattrs[name] = []byte(d.string())
		}
	}
	if flags&stateRenamedTo != 0 {
		f.RenamedTo = d.string()
	}
	if flags&stateRenamedFrom != 0 {
		f.RenamedFrom = d.string()
	}
	if flags&stateKept != 0 {
		f.Kept = d.string()
	}
	return f
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// stateDecoder reads what encodeState wrote.
type stateDecoder struct{ b []byte }

func (d *stateDecoder) next(n int) []byte {
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *stateDecoder) byte() byte { return d.next(1)[0] }

func (d *stateDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		panic("rewind: malformed packed state")
	}
	d.b = d.b[n:]
	return v
}

func (d *stateDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		panic("rewind: malformed packed state")
	}
	d.b = d.b[n:]
	return v
}

func (d *stateDecoder) string() string {
	n := d.uvarint()
	return string(d.next(int(n)))
}

// arena holds packed states, appended and never moved: chunks of
// arenaChunk bytes (a larger state gets a chunk of its own). An offset is
// the chunk's number in the upper 32 bits and the position in the lower.
// An index read from a snapshot has the file's bytes as chunk 0, and its
// paths are strings pointing into them (readSnapshot): chunk 0 is never
// written (its capacity is its length, so addPacked starts a new chunk).
type arena struct {
	chunks [][]byte
	// scratch is reused to encode one state before it is copied in.
	scratch []byte
}

const arenaChunk = 1 << 20

// add packs f into the arena and returns its offset.
func (a *arena) add(f record.FileState) uint64 {
	a.scratch = encodeState(a.scratch[:0], f)
	return a.addPacked(a.scratch)
}

// addPacked copies an encoded state into the arena.
func (a *arena) addPacked(b []byte) uint64 {
	n := len(a.chunks)
	if n == 0 || len(a.chunks[n-1])+len(b) > cap(a.chunks[n-1]) {
		a.chunks = append(a.chunks, make([]byte, 0, max(arenaChunk, len(b))))
		n++
	}
	c := a.chunks[n-1]
	off := uint64(n-1)<<32 | uint64(len(c))
	a.chunks[n-1] = append(c, b...)
	return off
}

// packed returns the encoded state at off (it runs to the chunk's end or
// the next state; decodeState reads only its own bytes).
func (a *arena) packed(off uint64) []byte {
	return a.chunks[off>>32][uint32(off):]
}

// get decodes the state at off.
func (a *arena) get(off uint64) record.FileState {
	return decodeState(a.packed(off))
}

// checkPacked is record.CheckRecord on a packed state of path p, without
// decoding it: a snapshot's million records are checked as they are read,
// with no garbage. The two give the same verdicts (a test holds them to
// it). b must be a whole packed state (stateSize(b) == len(b)).
func checkPacked(p string, b []byte) string {
	d := stateDecoder{b: b}
	flags := d.uvarint()
	if flags&stateRenamed != 0 {
		// Rename records are few: check the decoded record.
		f := decodeState(b)
		f.Path = p
		return record.CheckRecord(f)
	}
	absent, skipped := flags&stateAbsent != 0, flags&stateSkipped != 0
	kind := d.byte()
	if kind == kindOther {
		d.next(int(d.uvarint()))
	}
	switch {
	case flags&stateBlobRaw != 0:
		d.next(32)
	case flags&stateBlobText != 0:
		d.next(int(d.uvarint()))
	}
	bytes := d.varint()
	mode := d.uvarint()
	d.varint()               // pid
	d.next(int(d.uvarint())) // reason
	target := d.next(int(d.uvarint()))
	xattrs, kept := "", ""
	if flags&(stateXattrs|stateKept) != 0 {
		d.next(int(d.uvarint())) // comm
		if flags&stateUID != 0 {
			d.uvarint()
		}
		if flags&stateGID != 0 {
			d.uvarint()
		}
		if flags&stateMTime != 0 {
			d.varint()
			d.uvarint()
		}
		if flags&stateXattrs != 0 {
			xs := map[string][]byte{}
			for n := d.uvarint(); n > 0; n-- {
				name := d.string()
				xs[name] = d.next(int(d.uvarint()))
			}
			xattrs = record.CheckXattrs(xs)
		}
		if flags&stateKept != 0 {
			kept = d.string()
		}
	}
	switch {
	case mode&^0o7777 != 0:
		return fmt.Sprintf("mode %#o has bits beyond 07777", mode)
	case bytes < 0:
		return fmt.Sprintf("negative size %d", bytes)
	case p == "" && (absent || kind != kindDir):
		return "the workspace root recorded as something other than a directory"
	case xattrs != "":
		return xattrs
	case kept != "" && !record.IsStashName(kept):
		return "a bad stash name"
	case absent || skipped:
		return ""
	}
	switch kind {
	case kindFile:
		if flags&stateBlobRaw == 0 && kept == "" {
			return "file with a bad blob id" // a valid id is always packed raw
		}
		if flags&stateBlobText != 0 {
			return "file with a bad blob id"
		}
	case kindDir:
	case kindSymlink:
		if len(target) == 0 {
			return "symlink without a target"
		}
		if slices.Contains(target, 0) {
			return "symlink target holds a NUL byte"
		}
	default:
		return "unknown kind"
	}
	return ""
}
