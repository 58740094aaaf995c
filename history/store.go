package history

import (
	"errors"
	"iter"
	"os"
	"path/filepath"
	"time"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// StoreFigures reads the blob store's figures (read-only, beside a running
// daemon), the log's size and, when keep is not nil, what a gc keeping
// only those blobs would free.
func StoreFigures(store string, keep func(blobstore.ID) bool) (blobstore.Stats, int64, blobstore.PruneResult, error) {
	var logBytes int64
	if fi, err := os.Stat(filepath.Join(store, record.LogName)); err == nil {
		logBytes = fi.Size()
	}
	dir := filepath.Join(store, rewind.BlobsName)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return blobstore.Stats{}, logBytes, blobstore.PruneResult{}, nil
	}
	bs, err := blobstore.Open(dir, blobstore.Options{ReadOnly: true})
	if err != nil {
		return blobstore.Stats{}, 0, blobstore.PruneResult{}, err
	}
	defer bs.Close()
	st, err := bs.Stats()
	if err != nil || keep == nil {
		return st, logBytes, blobstore.PruneResult{}, err
	}
	would, err := bs.Reclaimable(keep)
	return st, logBytes, would, err
}

// StoreEvents reads store's log without taking its lock (beside a daemon).
func StoreEvents(store string) iter.Seq2[record.Event, error] {
	return eventlog.ReadFile(filepath.Join(store, record.LogName), 1)
}

// KeepCut is the gc cut that keeps every state current at some time after
// cutoff: the state at T lasts from event T until event T+1, so it is the
// one just before the first event younger than cutoff (head when there is
// none).
func KeepCut(src Source, cutoff time.Time) (record.Seq, error) {
	for ev, err := range src.Events() {
		if err != nil {
			return 0, err
		}
		if ev.CreatedAt.After(cutoff) {
			return ev.Seq - 1, nil
		}
	}
	return src.Head()
}
