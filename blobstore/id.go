package blobstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/zerofs/zerofs/record"
)

// ID is a blob's sha256.
type ID [sha256.Size]byte

// String is the lower-case hex form used in file names and events.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Short is the first 12 hex digits, for humans.
func (id ID) Short() string { return id.String()[:12] }

// IsZero reports whether id is the zero ID (no blob).
func (id ID) IsZero() bool { return id == ID{} }

// ParseID parses 64 lower-case hex digits (record.IsBlobID: a blob as
// the log names it).
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 2*len(id) {
		return id, fmt.Errorf("blobstore: bad blob id %q: want %d hex digits", s, 2*len(id))
	}
	if !record.IsBlobID(s) {
		return id, fmt.Errorf("blobstore: bad blob id %q: not lower-case hex", s)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("blobstore: bad blob id %q: %w", s, err)
	}
	return id, nil
}

// MarshalText implements encoding.TextMarshaler.
func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *ID) UnmarshalText(b []byte) error {
	p, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = p
	return nil
}

// Sum returns the ID of data.
func Sum(data []byte) ID { return ID(sha256.Sum256(data)) }

// MustParseID is ParseID for IDs known to be good (tests, constants); it
// panics on a bad one.
func MustParseID(s string) ID {
	id, err := ParseID(s)
	if err != nil {
		panic(err)
	}
	return id
}
