package replicate

import (
	"context"
	"errors"
	"io"
)

// Bucket is where a replica's objects live: the seam (STYLE rule 16)
// between replication and the network. S3 (s3.go) is the one real
// implementation; unit tests use an in-memory one. Names are relative to the
// replica's prefix.
type Bucket interface {
	// PutNew writes the object name only if no object has that name
	// (If-None-Match: *); ErrExists if one does.
	PutNew(ctx context.Context, name string, body []byte) error
	// PutNewReader is PutNew of size bytes read from body (rewound and
	// read again when a request is retried): a large object is sent
	// without being held in memory.
	PutNewReader(ctx context.Context, name string, body io.ReadSeeker, size int64) error
	// Get reads the object name; ErrNotFound if there is none.
	Get(ctx context.Context, name string) ([]byte, error)
	// GetReader is Get as a stream, for objects too large to hold in
	// memory (the caller closes it).
	GetReader(ctx context.Context, name string) (io.ReadCloser, error)
	// List names every object whose name starts with prefix, sorted.
	List(ctx context.Context, prefix string) ([]string, error)
	// Delete removes the object name; one that does not exist is no
	// error (a run that died mid-deletion deletes again).
	Delete(ctx context.Context, name string) error
}

// Errors a Bucket returns, for errors.Is.
var (
	ErrExists   = errors.New("replicate: object exists")
	ErrNotFound = errors.New("replicate: object not found")
)
