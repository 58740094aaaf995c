package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// leaseName is the object that says which store replicates to a prefix.
const leaseName = "lease.json"

// Lease is the content of lease.json: the store that writes the replica.
// It is written once, by a conditional write, when a store first
// replicates to the prefix; the same store (after a restart or a crash)
// finds its own lease and goes on. It does not expire: a prefix belongs to
// one store's history, and a second store's objects would interleave with
// it. To give a prefix to another store, delete the prefix.
type Lease struct {
	Format int       `json:"format"`
	Store  string    `json:"store"`
	Host   string    `json:"host"`
	PID    int       `json:"pid"`
	Since  time.Time `json:"since"`
	// KeyCheck identifies the replica key the objects are sealed with
	// ("" for none: crypt.go).
	KeyCheck string `json:"keyCheck,omitempty"`
}

// LeaseError: the prefix is replicated by another store.
type LeaseError struct {
	URL    URL
	Holder Lease
}

func (e *LeaseError) Error() string {
	return fmt.Sprintf("replicate: %s is the replica of another store (%s, on host %q, pid %d, since %s); one writer per prefix: choose another prefix",
		e.URL, e.Holder.Store, e.Holder.Host, e.Holder.PID, e.Holder.Since.Format(time.RFC3339))
}

// ErrLeased is what a *LeaseError wraps.
var ErrLeased = errors.New("replicate: prefix held by another store")

func (e *LeaseError) Unwrap() error { return ErrLeased }

// errLeaseDamaged: lease.json is not a lease.
var errLeaseDamaged = errors.New("replicate: damaged lease")

// Permanent reports whether err is a refusal that no retry can change: the
// prefix is another store's, the replica key is not the replica's, or
// its lease is damaged. A person must act (choose another prefix, give
// the right key).
func Permanent(err error) bool {
	return errors.Is(err, ErrLeased) || errors.Is(err, ErrKey) || errors.Is(err, errLeaseDamaged)
}

// claim takes the prefix for store, or finds it already taken by store.
func claim(ctx context.Context, b Bucket, u URL, store, keyCheck string) error {
	host, _ := os.Hostname()
	mine := Lease{Format: 1, Store: store, Host: host, PID: os.Getpid(), Since: time.Now().UTC(), KeyCheck: keyCheck}
	body, err := json.Marshal(mine)
	if err != nil {
		return err
	}
	err = b.PutNew(ctx, leaseName, body)
	if err == nil {
		return nil
	}
	if !errors.Is(err, ErrExists) {
		return fmt.Errorf("replicate: take the lease of %s: %w", u, err)
	}
	data, err := b.Get(ctx, leaseName)
	if err != nil {
		return fmt.Errorf("replicate: read the lease of %s: %w", u, err)
	}
	var held Lease
	if err := json.Unmarshal(data, &held); err != nil || held.Store == "" {
		return fmt.Errorf("%w: %s: %s is damaged (%v); refusing to write beside it", errLeaseDamaged, u, leaseName, err)
	}
	if held.Store != store {
		return &LeaseError{URL: u, Holder: held}
	}
	return checkKey(u, held, keyCheck)
}

// checkKey refuses a key that is not the one the replica was written with.
func checkKey(u URL, l Lease, keyCheck string) error {
	switch {
	case l.KeyCheck == keyCheck:
		return nil
	case keyCheck == "":
		return fmt.Errorf("%w: %s is encrypted: give its key (--replica-key FILE)", ErrKey, u)
	case l.KeyCheck == "":
		return fmt.Errorf("%w: %s is not encrypted; it was written without --replica-key", ErrKey, u)
	}
	return fmt.Errorf("%w: %s was written with another replica key", ErrKey, u)
}

// readLease reads a replica's lease (ErrNotFound when it has none).
func readLease(ctx context.Context, b Bucket, u URL) (Lease, error) {
	data, err := b.Get(ctx, leaseName)
	if err != nil {
		return Lease{}, err
	}
	var l Lease
	if err := json.Unmarshal(data, &l); err != nil || l.Store == "" {
		return Lease{}, &DamageError{Object: leaseName, Why: fmt.Sprint("not a lease: ", err)}
	}
	return l, nil
}
