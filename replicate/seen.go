package replicate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/record"
)

// What a replica already promised: a bucket cannot prove it is not an
// older complete copy of itself swapped in (every object of that copy is
// genuine, sealed or not), so a restore compares what it finds with what
// this user last saw of the replica: the newest base and the log's end,
// and the store that writes it. The writer notes them after each base it
// uploads, and a restore or `log --replica` after each read. Seeing less
// (or another store) is refused until the person says to take it
// (RestoreOptions.AcceptOlder): SPEC, Trust ("a restore never takes less
// history than the replica already promised without saying so").
//
// The notes live in one file per user (SeenFile, 0600 in a directory of
// 0700), keyed by the endpoint and the URL, so a replica seen through one
// endpoint says nothing of another's.

// Promise is what a replica offered when it was last seen.
type Promise struct {
	Store  string     `json:"store"`
	Logged record.Seq `json:"logged"`
	Base   record.Seq `json:"base"`
	At     time.Time  `json:"at"`
}

// RollbackError: a replica offers less than it already promised, or is
// another store's.
type RollbackError struct {
	URL      URL
	Promised Promise
	Found    Promise
}

// ErrRolledBack is what a *RollbackError wraps.
var ErrRolledBack = errors.New("replicate: the replica offers less than it promised")

func (e *RollbackError) Unwrap() error { return ErrRolledBack }

func (e *RollbackError) Error() string {
	when := e.Promised.At.Local().Format(time.DateTime)
	if e.Found.Store != e.Promised.Store {
		return fmt.Sprintf("replicate: %s was the replica of store %s (states up to %d, seen %s) and is now store %s's (up to %d): another history was put in its place; nothing restored (restore --accept-older takes it if you know why)",
			e.URL, e.Promised.Store, e.Promised.Base, when, e.Found.Store, e.Found.Base)
	}
	return fmt.Sprintf("replicate: %s offers states up to %d with its log at %d, but it already offered up to %d with its log at %d (seen %s): an older copy was put in its place, or its newer objects were deleted; nothing restored (restore --accept-older takes what it offers now if you know why)",
		e.URL, e.Found.Base, e.Found.Logged, e.Promised.Base, e.Promised.Logged, when)
}

// SeenFile is where this user's notes of what replicas promised are kept:
// $XDG_STATE_HOME/zerofs/replicas.json, else ~/.local/state/zerofs/.
func SeenFile() string {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "zerofs", "replicas.json")
}

// seenKey is a replica's key in the notes: its endpoint and URL.
func seenKey(b Bucket, u URL) string {
	ep := ""
	if e, ok := b.(interface{ endpoint() string }); ok {
		ep = e.endpoint()
	}
	return ep + " " + u.String()
}

// readSeen reads the notes (none when the file does not exist).
func readSeen(path string) (map[string]Promise, error) {
	out := map[string]Promise{}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replicate: %w", err)
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("replicate: %s: %w", path, err)
	}
	return out, nil
}

// checkSeen refuses found when the notes at path say the replica promised
// more (or was another store's).
func checkSeen(path string, b Bucket, u URL, found Promise) error {
	if path == "" {
		return nil
	}
	seen, err := readSeen(path)
	if err != nil {
		return err
	}
	p, ok := seen[seenKey(b, u)]
	if !ok {
		return nil
	}
	if p.Store != found.Store || found.Base < p.Base || found.Logged < p.Logged {
		return &RollbackError{URL: u, Promised: p, Found: found}
	}
	return nil
}

// noteSeen notes in the file at path what the replica offers now: the
// most it has offered, or exactly found when replace (a person took less).
func noteSeen(path string, b Bucket, u URL, found Promise, replace bool) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("replicate: %w", err)
	}
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("replicate: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("replicate: %w", err)
	}
	seen, err := readSeen(path)
	if err != nil {
		return err
	}
	key := seenKey(b, u)
	p, ok := seen[key]
	found.At = time.Now().UTC()
	if ok && !replace && p.Store == found.Store {
		found.Base, found.Logged = max(found.Base, p.Base), max(found.Logged, p.Logged)
	}
	seen[key] = found
	data, err := json.MarshalIndent(seen, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFileAtomic(dir, filepath.Base(path), append(data, '\n'), 0o600)
}

// Offers is what the replica a summary describes offers, as the notes of
// what replicas promised keep it.
func (s Summary) Offers() Promise {
	p := Promise{Store: s.Lease.Store, Logged: s.Logged}
	if n := len(s.Bases); n > 0 {
		p.Base = s.Bases[n-1]
	}
	return p
}

// CheckPromise returns a *RollbackError when the notes at path say the
// replica u (in b) promised more than offers (or was another store's),
// and otherwise notes offers there. For a reader that only looks (log
// --replica): a restore checks and notes by itself (RestoreOptions.Seen).
func CheckPromise(path string, b Bucket, u URL, offers Promise) error {
	if err := checkSeen(path, b, u, offers); err != nil {
		return err
	}
	return noteSeen(path, b, u, offers, false)
}
