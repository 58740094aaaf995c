package index

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"
	"unsafe"

	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/record"
)

// The index snapshot lets a mount start without re-reading the whole log.
// It is a cache of what load derives from the log's first lines, never a
// source of truth: it names the log prefix it was built from (head, size,
// CRC-32C, as eventlog.Resume), and it is used only when the log still
// begins with exactly those bytes, in which case only the lines after them
// are read. Otherwise (missing, damaged, another version, a log that no
// longer matches) the index is rebuilt from the whole log, and a new
// snapshot written.
//
// Layout of index.snapshot in the store (varints as encoding/binary writes
// them):
//
//	magic "zerofs index snapshot\n", version uvarint
//	resume: head, size uvarint; crc uint32 little-endian; n offsets, then
//	        each offset as the delta to the previous one
//	state:  length-prefixed JSON of snapshotState (its marks left out)
//	marks:  the step marks in their binary form (appendMarks)
//	paths:  n, then for each path (in the order first recorded): the path
//	        as a string, n records, then for each a sequence delta and its
//	        packed state (length-prefixed, statecodec.go's encoding)
//	sha256 of everything before it
//
// It is written with durable.CreateTemp and Commit (complete or absent,
// never half); the engine writes it at Close, after gc, and every so many
// events.
//
// SnapshotVersion changes whenever what a snapshot holds changes; a
// snapshot of any other version is not read (the index is rebuilt from
// the log, as for a damaged one).

const (
	// SnapshotName is the snapshot's file in the store.
	SnapshotName = "index.snapshot"
	// SnapshotMagic begins it, and SnapshotVersion follows.
	SnapshotMagic   = "zerofs index snapshot\n"
	SnapshotVersion = 13
)

// snapshotState is what the fold derives from the log besides the index.
// Every field of State must be here, or a mount from a snapshot would lack
// it.
type snapshotState struct {
	LastRewind   record.RewindPayload  `json:"lastRewind"`
	LastRewindAt record.Seq            `json:"lastRewindAt"`
	Pruned       record.Seq            `json:"pruned"`
	Thinned      []record.ThinInterval `json:"thinned,omitempty"`
	// Marks are kept after the JSON in a binary form of their own
	// (appendMarks): a mark per step, and a long history's hundred
	// thousand took a fifth of a mount's time as JSON.
	Marks  []record.Mark `json:"-"`
	First0 record.Seq    `json:"first0,omitempty"`
	Person []record.Seq  `json:"person,omitempty"`
	Redo   []RedoEntry   `json:"redo,omitempty"`
}

// appendMarks appends the marks' snapshot form to b: their count, then per
// mark its seq, kind, label, session, start time (Unix nanoseconds, 0 for
// none), first, target, form and back.
func appendMarks(b []byte, ms []record.Mark) []byte {
	b = binary.AppendUvarint(b, uint64(len(ms)))
	for _, m := range ms {
		b = binary.AppendUvarint(b, uint64(m.Seq))
		b = append(b, byte(m.Kind))
		b = appendString(b, m.Label)
		b = appendString(b, m.Session)
		var at int64
		if !m.At.IsZero() {
			at = m.At.UnixNano()
		}
		b = binary.AppendVarint(b, at)
		b = binary.AppendUvarint(b, uint64(m.First))
		b = binary.AppendUvarint(b, uint64(m.Target))
		b = appendString(b, m.Form)
		back := byte(0)
		if m.Back {
			back = 1
		}
		b = append(b, back)
	}
	return b
}

// marks reads what appendMarks wrote, checking what the fold would have
// made: kinds it knows, sequences in increasing order and none past head.
func (d *snapReader) marks(head record.Seq) ([]record.Mark, string) {
	n := d.count(9) // a mark takes at least 9 bytes
	out := make([]record.Mark, n)
	var prev record.Seq
	for i := range out {
		m := &out[i]
		m.Seq = record.Seq(d.uvarint())
		m.Kind = record.MarkKind(d.byte())
		m.Label = string(d.next(d.count(1)))
		m.Session = string(d.next(d.count(1)))
		if at := d.varint(); at != 0 {
			m.At = time.Unix(0, at).UTC()
		}
		m.First = record.Seq(d.uvarint())
		m.Target = record.Seq(d.uvarint())
		m.Form = string(d.next(d.count(1)))
		back := d.byte()
		m.Back = back == 1
		switch {
		case d.err != nil:
			return nil, "marks cut short"
		case m.Kind > record.MarkTurn || back > 1:
			return nil, fmt.Sprintf("mark %d: not a mark", m.Seq)
		case m.Seq <= prev && i > 0:
			return nil, fmt.Sprintf("mark %d: out of order (after %d)", m.Seq, prev)
		case m.Seq > head, m.First > head, m.Target > head:
			return nil, fmt.Sprintf("mark %d: past the head %d", m.Seq, head)
		}
		prev = m.Seq
	}
	return out, ""
}

// errSnapshot marks a snapshot that cannot be used (it is then rebuilt).
var errSnapshot = errors.New("rewind: index snapshot unusable")

// WriteSnapshot writes s and the log's resume point r as dir's snapshot.
// The caller keeps events from being folded meanwhile, so they agree. The
// file is made durable (fsynced) before it replaces the previous one.
func WriteSnapshot(dir string, r eventlog.Resume, s *State) error {
	p, err := EncodeSnapshot(dir, r, s)
	if err != nil {
		return err
	}
	return p.Commit()
}

// PendingSnapshot is a snapshot written to a temporary file beside dir's
// snapshot, not yet durable and not yet in its place.
type PendingSnapshot struct {
	f   *os.File
	dir string
}

// EncodeSnapshot writes s and the log's resume point r to a temporary file
// in dir, without an fsync; the caller keeps events from being folded
// meanwhile. It is s.Cut(r).Encode(dir).
func EncodeSnapshot(dir string, r eventlog.Resume, s *State) (*PendingSnapshot, error) {
	return s.Cut(r).Encode(dir)
}

// SnapshotCut is what a snapshot of the state at a resume point holds,
// fixed by Cut, for Encode to write without the caller's lock. Cut copies
// only the small parts (the marks, the redo stack, the person list, the
// cut and the thins) and notes the index's extent (how many paths); the
// index is read by Encode, which leaves out what was folded after the
// cut. That is exact because a fold after the cut only appends (a record
// with a later sequence, a path recorded first later, a state in the
// arena, never moved) or names a record unnamed at the cut (which the
// caller rules out), except gc's cut and thinning, which drop records in
// place: Encode then stops with ErrSnapshotStale.
type SnapshotCut struct {
	r        eventlog.Resume
	st       snapshotState
	ix       *Index
	paths    uint32
	rewrites uint64
}

// ErrSnapshotStale is Encode's error when gc dropped records after the
// cut: the cut's snapshot can no longer be read from the index (the gc
// writes a snapshot of its own).
var ErrSnapshotStale = errors.New("rewind: index snapshot overtaken by a gc")

// Cut fixes the snapshot of s at the log's resume point r. The caller
// keeps events from being folded meanwhile (so s and r agree), and no
// record is unnamed (Index.HasUnnamed): naming changes a record in place.
// It copies no record: its cost is the marks' copy, about a millisecond
// at 90k steps (docs/performance.md).
func (s *State) Cut(r eventlog.Resume) *SnapshotCut {
	s.mu.Lock()
	st := snapshotState{LastRewind: s.lastRewind, LastRewindAt: s.lastRewindAt, Pruned: s.Pruned(), Thinned: s.Thinned(), Marks: slices.Clone(s.marks),
		First0: s.first0, Redo: slices.Clone(s.redo), Person: slices.Clone(s.person)}
	s.mu.Unlock()
	s.ix.mu.RLock()
	c := &SnapshotCut{r: r, st: st, ix: s.ix, paths: s.ix.paths.n, rewrites: s.ix.rewrites}
	s.ix.mu.RUnlock()
	return c
}

// Head is the last sequence the cut's snapshot covers.
func (c *SnapshotCut) Head() record.Seq { return c.r.Head }

// encodeBlock is how many paths Encode reads under one hold of the
// index's read lock: a fold (a capture's) waits for at most that many.
const encodeBlock = 256

// Encode writes the cut's snapshot to a temporary file in dir, without an
// fsync; the caller needs no lock (a step, a capture and a fold go on
// meanwhile). It reads the index encodeBlock paths at a time under its
// read lock, leaving out the records with a sequence after the cut's head
// and the paths first recorded after it, so the file is the one an encode
// at the cut would have written. ErrSnapshotStale (and no file) when gc
// dropped records meanwhile.
func (c *SnapshotCut) Encode(dir string) (*PendingSnapshot, error) {
	f, err := durable.CreateTemp(dir, SnapshotName, 0o600)
	if err != nil {
		return nil, fmt.Errorf("rewind: write index snapshot: %w", err)
	}
	h := sha256.New()
	w := bufio.NewWriterSize(io.MultiWriter(f, h), 1<<16)
	err = c.encode(w, f.Name())
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		_, err = f.Write(h.Sum(nil))
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		if errors.Is(err, ErrSnapshotStale) {
			return nil, err
		}
		return nil, fmt.Errorf("rewind: write index snapshot: %w", err)
	}
	return &PendingSnapshot{f: f, dir: dir}, nil
}

// Commit makes the snapshot durable (fsynced) and puts it in place of the
// previous one. A snapshot committed after later events were appended is
// still exact: it covers the log's prefix it names (Open reads the lines
// after it).
func (p *PendingSnapshot) Commit() error {
	if err := durable.Commit(p.f, p.dir, SnapshotName, true); err != nil {
		return fmt.Errorf("rewind: write index snapshot: %w", err)
	}
	return nil
}

// encode writes the cut's snapshot but its checksum to w (tmp is the
// file's name, for the crash tests' hook between blocks).
func (c *SnapshotCut) encode(w *bufio.Writer, tmp string) error {
	r, st, ix := c.r, c.st, c.ix
	var b []byte
	b = append(b, SnapshotMagic...)
	b = binary.AppendUvarint(b, SnapshotVersion)
	b = binary.AppendUvarint(b, uint64(r.Head))
	b = binary.AppendUvarint(b, uint64(r.Size))
	b = binary.LittleEndian.AppendUint32(b, r.CRC)
	b = binary.AppendUvarint(b, uint64(len(r.Offsets)))
	var prev int64
	for _, o := range r.Offsets {
		b = binary.AppendUvarint(b, uint64(o-prev))
		prev = o
	}
	js, err := json.Marshal(st)
	if err != nil {
		return err
	}
	b = appendString(b, string(js))
	b = appendMarks(b, st.Marks)
	b = binary.AppendUvarint(b, uint64(c.paths))
	for lo := uint32(0); lo < c.paths; lo += encodeBlock {
		if _, err := w.Write(b); err != nil {
			return err
		}
		if lo > 0 && durable.TestHook != nil {
			durable.TestHook("snapshot:block", tmp)
		}
		b = b[:0]
		ix.mu.RLock()
		if ix.rewrites != c.rewrites {
			ix.mu.RUnlock()
			return ErrSnapshotStale
		}
		for i := lo; i < min(lo+encodeBlock, c.paths); i++ {
			pr := ix.paths.at(i)
			b = appendString(b, pr.path)
			recs := pr.list()
			recs = recs[:pr.search(r.Head)] // those folded after the cut go
			b = binary.AppendUvarint(b, uint64(len(recs)))
			var prevSeq record.Seq
			for _, r := range recs {
				b = binary.AppendUvarint(b, uint64(r.seq-prevSeq))
				prevSeq = r.seq
				packed := ix.arena.packed(r.off)
				packed = packed[:stateSize(packed)]
				b = binary.AppendUvarint(b, uint64(len(packed)))
				b = append(b, packed...)
			}
		}
		ix.mu.RUnlock()
	}
	_, err = w.Write(b)
	return err
}

// ReadSnapshot reads dir's snapshot into a new State, whose head is the
// resume point's. It is untrusted
// input like the log: the checksum must match, every length must fit, and
// every record must pass the checks a record read from the log gets
// (checkRecord), so a forged snapshot can name nothing outside the
// workspace either.
func ReadSnapshot(dir string) (*State, eventlog.Resume, error) {
	ix, r, st, err := readSnapshot(dir)
	if err != nil {
		return nil, r, err
	}
	s := &State{ix: ix, head: r.Head, marks: st.Marks, lastRewind: st.LastRewind, lastRewindAt: st.LastRewindAt,
		first0: st.First0, redo: st.Redo, person: st.Person}
	s.pruned.Store(uint64(st.Pruned))
	s.setThinned(st.Thinned)
	return s, r, nil
}

// readSnapshot reads the parts of a snapshot.
func readSnapshot(dir string) (*Index, eventlog.Resume, snapshotState, error) {
	var r eventlog.Resume
	var st snapshotState
	data, err := os.ReadFile(filepath.Join(dir, SnapshotName))
	if err != nil {
		return nil, r, st, err
	}
	if len(data) < len(SnapshotMagic)+sha256.Size || string(data[:len(SnapshotMagic)]) != SnapshotMagic {
		return nil, r, st, fmt.Errorf("%w: not a snapshot", errSnapshot)
	}
	if len(data) > math.MaxUint32 {
		return nil, r, st, fmt.Errorf("%w: larger than an arena chunk can address", errSnapshot)
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	// The checksum is computed beside the parse, which checks everything
	// as if there were none (it is no defence against a forged file): a
	// mismatch still wins over whatever the parse found, as it did when
	// the sum came first, and nothing parsed is used without a match.
	// At a million paths the sum is a fifth of the load.
	sumOK := make(chan bool, 1)
	go func() {
		got := sha256.Sum256(body)
		sumOK <- string(got[:]) == string(sum)
	}()
	ix, r, st, err := parseSnapshot(data, body)
	if !<-sumOK {
		return nil, eventlog.Resume{}, snapshotState{}, fmt.Errorf("%w: checksum mismatch", errSnapshot)
	}
	return ix, r, st, err
}

// parseSnapshot reads and checks the parts of a snapshot: data is the
// whole file, body all of it but the checksum.
func parseSnapshot(data, body []byte) (*Index, eventlog.Resume, snapshotState, error) {
	var r eventlog.Resume
	var st snapshotState
	d := snapReader{b: body[len(SnapshotMagic):]}
	if v := d.uvarint(); v != SnapshotVersion {
		return nil, r, st, fmt.Errorf("%w: version %d", errSnapshot, v)
	}
	r.Head = record.Seq(d.uvarint())
	r.Size = int64(d.uvarint())
	r.CRC = binary.LittleEndian.Uint32(d.next(4))
	n := d.count(1)
	var off int64
	if n > 0 {
		r.Offsets = make([]int64, 0, n)
	}
	for range n {
		off += int64(d.uvarint())
		r.Offsets = append(r.Offsets, off)
	}
	if js := d.next(d.count(1)); d.err == nil {
		if err := json.Unmarshal(js, &st); err != nil {
			return nil, r, st, fmt.Errorf("%w: state: %v", errSnapshot, err)
		}
		if why := record.CheckThinned(r.Head+1, record.ThinnedPayload{Intervals: st.Thinned}); why != "" {
			return nil, r, st, fmt.Errorf("%w: %s", errSnapshot, why)
		}
	}
	marks, why := d.marks(r.Head)
	if why != "" {
		return nil, r, st, fmt.Errorf("%w: %s", errSnapshot, why)
	}
	st.Marks = marks
	npaths := d.count(2)
	// The table is sized once from the count (bounded by the file's size
	// like every count): growing it path by path rehashed it again and
	// again.
	ix := &Index{ids: newPathTable(npaths)}
	for range npaths {
		if d.err != nil {
			break
		}
		pb := d.next(d.count(1))
		// The path is not copied: it points into data, which the index
		// keeps for good as its arena's first chunk (below) and which
		// nothing writes to (new states go to chunks of their own), so the
		// string's bytes never change, as a string's must not. A million
		// paths are a million allocations saved.
		p := ""
		if len(pb) > 0 {
			p = unsafe.String(&pb[0], len(pb))
		}
		if why := record.CheckRecordPath(p); why != "" || d.err != nil {
			return nil, r, st, fmt.Errorf("%w: path %q: %s", errSnapshot, p, why)
		}
		id, added := ix.newEntryLocked(p)
		if !added {
			return nil, r, st, fmt.Errorf("%w: path %q twice", errSnapshot, p)
		}
		pr := ix.paths.at(id)
		nrec := d.count(2)
		if nrec == 0 || d.err != nil {
			continue
		}
		var recs []rec
		if nrec > 1 {
			recs = ix.newRecs(nrec)
		} else {
			recs = unsafe.Slice(&pr.one, 1) // a path's one record is kept in its entry
		}
		var seq record.Seq
		for i := range recs {
			delta := record.Seq(d.uvarint())
			n := d.count(1)
			at := len(body) - len(d.b) // d.b is a suffix of body, which starts data: the state is at data[at:]
			packed := d.next(n)
			if d.err != nil {
				break
			}
			if delta == 0 || seq+delta > r.Head || stateSize(packed) != len(packed) {
				return nil, r, st, fmt.Errorf("%w: path %q: bad record", errSnapshot, p)
			}
			// The same check as a record read from the log gets.
			if why := checkPacked(p, packed); why != "" {
				return nil, r, st, fmt.Errorf("%w: path %q: %s", errSnapshot, p, why)
			}
			seq += delta
			recs[i] = rec{seq: seq, off: uint64(at)} // in chunk 0, the file itself
		}
		if nrec > 1 {
			pr.setRecs(recs)
		}
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, r, st, fmt.Errorf("%w: malformed", errSnapshot)
	}
	// The file's bytes become the arena's first chunk, so the packed states
	// are not copied (a million of them are tens of megabytes). Its capacity
	// is cut to its length: new states go to chunks of their own.
	ix.arena.chunks = [][]byte{data[:len(data):len(data)]}
	ix.loadMoves()
	return ix, r, st, nil
}

// snapReader reads a snapshot body; the first overrun sets err and every
// later read returns zero values.
type snapReader struct {
	b   []byte
	err error
}

func (d *snapReader) next(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		d.err = io.ErrUnexpectedEOF
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *snapReader) byte() byte {
	if b := d.next(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *snapReader) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = io.ErrUnexpectedEOF
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *snapReader) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = io.ErrUnexpectedEOF
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length or count whose items take at least min bytes each,
// refusing one larger than what is left (a forged count cannot make us
// allocate more than the file holds).
func (d *snapReader) count(min int) int {
	v := d.uvarint()
	if v > uint64(len(d.b)/min) {
		d.err = io.ErrUnexpectedEOF
		return 0
	}
	return int(v)
}

// stateSize is the length of the packed state at the start of b, or -1 if
// b does not start with a whole one. It checks the layout without
// allocating, so a snapshot's records can be checked as they are read.
func stateSize(b []byte) int {
	d := snapReader{b: b}
	flags := d.uvarint()
	k := d.next(1)
	if d.err != nil || k[0] > kindOther {
		return -1
	}
	if k[0] == kindOther {
		d.next(d.count(1))
	}
	switch {
	case flags&^stateFlags != 0:
		return -1
	case flags&stateBlobRaw != 0 && flags&stateBlobText != 0:
		return -1
	case flags&stateBlobRaw != 0:
		d.next(32)
	case flags&stateBlobText != 0:
		d.next(d.count(1))
	}
	d.varint()
	d.uvarint()
	d.varint()
	for range 3 {
		d.next(d.count(1))
	}
	if flags&stateUID != 0 {
		d.uvarint()
	}
	if flags&stateGID != 0 {
		d.uvarint()
	}
	if flags&stateMTime != 0 {
		d.varint()
		if ns := d.uvarint(); ns >= 1e9 {
			return -1
		}
	}
	if flags&stateXattrs != 0 {
		for n := d.count(2); n > 0 && d.err == nil; n-- {
			d.next(d.count(1))
			d.next(d.count(1))
		}
	}
	if flags&stateRenamedTo != 0 {
		d.next(d.count(1))
	}
	if flags&stateRenamedFrom != 0 {
		d.next(d.count(1))
	}
	if flags&stateKept != 0 {
		d.next(d.count(1))
	}
	if d.err != nil {
		return -1
	}
	return len(b) - len(d.b)
}
