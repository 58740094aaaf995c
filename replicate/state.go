package replicate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/record"
)

// Store file names (their one owner, STYLE rule 4).
const (
	// StateName is the replication progress in the store.
	StateName = "replica.json"
	// lockName is flocked by the one replicator of a store.
	lockName = "replica.lock"
)

// State is replica.json: where replication stands. It is written
// atomically after every object that moves the replica forward, and after
// a failed attempt.
type State struct {
	URL string `json:"url"`
	// Store identifies this store to the lease (made at the first
	// replication, kept for the store's life).
	Store string `json:"store"`
	// Logged is the last event uploaded in a segment (0: none).
	Logged record.Seq `json:"logged"`
	// Base is the sequence of the newest base uploaded: states up to it
	// can be restored from the replica.
	Base record.Seq `json:"base"`
	// Based: the replica holds a base (Base 0 is a base too: the
	// workspace before any event).
	Based bool `json:"based"`
	// Head is the local log's head when this was written, Pending the
	// bytes of log and content not yet uploaded then.
	Head    record.Seq `json:"head"`
	Pending int64      `json:"pendingBytes"`
	// Uploaded counts the objects and bytes this store has written to the
	// replica.
	Objects int64 `json:"objects"`
	Bytes   int64 `json:"bytes"`
	// Streamed counts the objects sent from a temporary file (content too
	// large to hold in memory); Deleted the objects deleted because no
	// state the replica offers needs them any more (collect.go).
	Streamed int64 `json:"streamed,omitempty"`
	Deleted  int64 `json:"deleted,omitempty"`
	// LastSuccess is when an attempt last finished with the replica up to
	// date; LastError and LastErrorAt the last failure (cleared by a
	// success).
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	// Stalled is a request that has waited long for an answer right now
	// (request.go; nil when none).
	Stalled *Request `json:"stalled,omitempty"`
	// Final is how the last attempt of a daemon's clean stop went
	// (Replicator.Final): what `zerofs umount` reports.
	Final *FinalReport `json:"final,omitempty"`
	// Shrunk is when this store's writer last found the replica holding
	// less than the store had uploaded to it (nil: never, for this URL):
	// someone put an older copy in its place or deleted objects. The
	// writer uploads what it lacks again; status keeps saying it
	// happened.
	Shrunk *Shrink `json:"shrunk,omitempty"`
}

// Shrink is a replica found holding less than its writer uploaded: the
// log's end and newest base uploaded, and those the bucket held then
// (HeldBased false: no base at all).
type Shrink struct {
	At           time.Time  `json:"at"`
	PID          int        `json:"pid"`
	UploadedLog  record.Seq `json:"uploadedLog"`
	UploadedBase record.Seq `json:"uploadedBase"`
	HeldLog      record.Seq `json:"heldLog"`
	HeldBase     record.Seq `json:"heldBase"`
	HeldBased    bool       `json:"heldBased"`
}

// FinalReport is what a daemon's last attempt, at its unmount, left
// behind: the events and bytes the replica lacks, and why (Error; "" when
// it brought the replica up to date).
type FinalReport struct {
	PID    int       `json:"pid"`
	At     time.Time `json:"at"`
	Events uint64    `json:"events"`
	Bytes  int64     `json:"bytes"`
	Error  string    `json:"error,omitempty"`
}

// ReadState reads the replication state of the store in dir (ErrNotExist
// when it never replicated).
func ReadState(dir string) (State, error) {
	var st State
	data, err := os.ReadFile(filepath.Join(dir, StateName))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("replicate: %s: %w", StateName, err)
	}
	return st, nil
}

// loadState reads dir's state for u, or begins one. A store that
// replicated elsewhere before keeps its identity but starts over for u.
func loadState(dir string, u URL) (State, error) {
	st, err := ReadState(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return st, err
	}
	if st.Store == "" {
		st = State{Store: uuid.NewString()}
	}
	if st.URL != u.String() {
		st = State{URL: u.String(), Store: st.Store}
	}
	st.Stalled = nil // a request of a run that is over
	return st, nil
}

func writeState(dir string, st State) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFileAtomic(dir, StateName, append(data, '\n'), 0o600)
}

// ErrBusy: another replicator runs on this store.
var ErrBusy = errors.New("replicate: another replicator runs on this store")

// lockStore takes the store's replicator lock (released when f closes).
func lockStore(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("replicate: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ErrBusy
		}
		return nil, fmt.Errorf("replicate: lock: %w", err)
	}
	return f, nil
}
