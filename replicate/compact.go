package replicate

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"

	"github.com/zerofs/zerofs/record"
)

// compactEvery is how many segments of one level compaction merges into
// one of the next level (a variable for tests).
var compactEvery = 16

// compact merges, as litestream's levels do, the newest segments of the
// log when compactEvery of them in a row have the same level: a new
// segment of the next level covers them all. Restore follows the segment
// that reaches furthest from each point (chain), so reading the log up to
// any state takes at most compactEvery-1 segments per level, a number that
// grows with the log's logarithm, not its length, while each event is
// uploaded once per level. The merged segments are deleted afterwards
// (collect.go): objects are never overwritten, and a restore that listed
// them and finds one gone lists again.
func (r *Replicator) compact(ctx context.Context) error {
	for {
		run, _ := chain(r.segs)
		n := len(run)
		if n == 0 {
			return nil
		}
		level := run[n-1].Level
		i := n - 1
		for i > 0 && run[i-1].Level == level {
			i--
		}
		if n-i < compactEvery {
			return nil
		}
		first, last := run[i].First, run[n-1].Last
		name, hash, err := r.putMerged(ctx, first, last, level+1)
		if err != nil {
			return err
		}
		r.segs = append(r.segs, segment{Name: name, First: first, Last: last, Hash: hash, Level: level + 1})
		r.collectDue = true // the merged segments are superseded
	}
}

// putMerged uploads the segment of events first..last at level. It may
// be large (a level covers compactEvery times the one below): its lines
// are compressed (and sealed, in chunks) as they are read from the log
// into an unlinked temporary file, hashed on the way, and sent from
// there, so it is never held in memory.
func (r *Replicator) putMerged(ctx context.Context, first, last record.Seq, level int) (name, hash string, err error) {
	f, err := r.tempFile()
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		bw := bufio.NewWriterSize(pw, 64<<10)
		var err error
		for ev, rerr := range r.eng.Log().Events(first) {
			if err = rerr; err != nil {
				break
			}
			if ev.Seq > last {
				break
			}
			var line []byte
			if line, err = json.Marshal(ev); err != nil {
				break
			}
			if _, err = bw.Write(append(line, '\n')); err != nil {
				break
			}
		}
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	h := sha256.New()
	err = r.codec.sealStream(io.MultiWriter(f, h), segmentLogical(first, last), pr)
	pr.CloseWithError(errors.New("replicate: compaction stopped")) // ends the reader if sealing failed
	<-done
	if err != nil {
		return "", "", err
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return "", "", err
	}
	hash = hex.EncodeToString(h.Sum(nil))
	name = segmentNameHashed(first, last, level, hash)
	return name, hash, r.putReader(ctx, name, f, size)
}
