package replicate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/zerofs/zerofs/record"
)

// Object name prefixes (see doc.go).
const (
	blobsDir = "blobs/"
	logDir   = "log/"
	basesDir = "bases/"
)

var (
	encoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
)

func compress(b []byte) []byte { return encoder.EncodeAll(b, nil) }

// DamageError is an object of the replica that is not what its name says.
type DamageError struct {
	Object string
	Why    string
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("replicate: damaged object %s: %s; refusing to restore from it", e.Object, e.Why)
}

func (e *DamageError) Unwrap() error { return record.ErrCorrupt }

func hashHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// segment is a log segment object: events First..Last.
type segment struct {
	Name        string
	First, Last record.Seq
	Hash        string
	// Level is 0 for a segment an attempt wrote, n+1 for one compaction
	// merged from segments of level n (compact.go).
	Level int
}

// segmentLogical and baseLogical are the names a sealed segment or base
// is bound to (crypt.go): the object name without its hash.
func segmentLogical(first, last record.Seq) string {
	return fmt.Sprintf("%s%020d-%020d", logDir, first, last)
}

func baseLogical(seq record.Seq) string { return fmt.Sprintf("%s%020d", basesDir, seq) }

func segmentName(first, last record.Seq, level int, body []byte) string {
	return segmentNameHashed(first, last, level, hashHex(body))
}

// segmentNameHashed is segmentName of a body whose sha256 is hash (hex).
func segmentNameHashed(first, last record.Seq, level int, hash string) string {
	if level > 0 {
		return fmt.Sprintf("%s%020d-%020d-L%d-%s.jsonl.zst", logDir, first, last, level, hash)
	}
	return fmt.Sprintf("%s%020d-%020d-%s.jsonl.zst", logDir, first, last, hash)
}

// parseSegment parses a segment's name; ok is false for any other name.
func parseSegment(name string) (segment, bool) {
	rest, ok := strings.CutPrefix(name, logDir)
	if !ok {
		return segment{}, false
	}
	rest, ok = strings.CutSuffix(rest, ".jsonl.zst")
	parts := strings.Split(rest, "-")
	level := 0
	if len(parts) == 4 {
		n, err := strconv.Atoi(strings.TrimPrefix(parts[2], "L"))
		if err != nil || !strings.HasPrefix(parts[2], "L") || n <= 0 || n > 64 {
			return segment{}, false
		}
		level, parts = n, []string{parts[0], parts[1], parts[3]}
	}
	if !ok || len(parts) != 3 || len(parts[0]) != 20 || len(parts[1]) != 20 || len(parts[2]) != 64 {
		return segment{}, false
	}
	first, err1 := strconv.ParseUint(parts[0], 10, 64)
	last, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil || first == 0 || last < first {
		return segment{}, false
	}
	return segment{Name: name, First: record.Seq(first), Last: record.Seq(last), Hash: parts[2], Level: level}, true
}

// baseRef is a base object: the whole workspace at Seq.
type baseRef struct {
	Name string
	Seq  record.Seq
	Hash string
}

func baseName(seq record.Seq, body []byte) string {
	return fmt.Sprintf("%s%020d-%s.json.zst", basesDir, seq, hashHex(body))
}

func parseBase(name string) (baseRef, bool) {
	rest, ok := strings.CutPrefix(name, basesDir)
	if !ok {
		return baseRef{}, false
	}
	rest, ok = strings.CutSuffix(rest, ".json.zst")
	seq, hash, ok2 := strings.Cut(rest, "-")
	if !ok || !ok2 || len(seq) != 20 || len(hash) != 64 {
		return baseRef{}, false
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return baseRef{}, false
	}
	return baseRef{Name: name, Seq: record.Seq(n), Hash: hash}, true
}

// chain picks, from the segments listed, a run that covers 1..n without a
// gap, and returns it with n (0 and nil when segment 1 is missing).
// Overlaps (a run that crashed after writing a segment and wrote a longer
// one after) are allowed; the one reaching furthest wins at each step.
func chain(segs []segment) ([]segment, record.Seq) {
	var out []segment
	var end record.Seq
	for {
		// The segment starting at or before end+1 that reaches furthest.
		best, found := segment{}, false
		for _, s := range segs {
			if s.First <= end+1 && s.Last > end && (!found || s.Last > best.Last) {
				best, found = s, true
			}
		}
		if !found {
			return out, end
		}
		out = append(out, best)
		end = best.Last
	}
}

// gap is the damage of a replica whose log chain (chain: it ends at end)
// stops short of a segment or a base the replica holds past it: events
// are missing in between (nil when nothing lies past end). A writer
// uploads segments in order and a base only after the segments up to it,
// and deletes only what a longer segment covers, so no run of its ever
// leaves such a gap: it is damage (or tampering), not a replica that has
// no base yet.
func gap(segs []segment, bases []baseRef, end record.Seq) error {
	var next *segment
	for i, s := range segs {
		if s.First > end+1 && (next == nil || s.First < next.First) {
			next = &segs[i]
		}
	}
	if next != nil {
		return &DamageError{Object: logDir, Why: fmt.Sprintf("events %d..%d are missing: the log's segments reach %d, then %s begins at %d", end+1, next.First-1, end, next.Name, next.First)}
	}
	for _, b := range bases {
		if b.Seq > end {
			return &DamageError{Object: b.Name, Why: fmt.Sprintf("it is the state at %d, but the log's segments reach only %d: events %d..%d are missing", b.Seq, end, end+1, b.Seq)}
		}
	}
	return nil
}
