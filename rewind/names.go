package rewind

import "github.com/zerofs/zerofs/internal/durable"

// The names the engine owns: the store's files beside the log and the
// temporary names a rewind writes. The names every reader shares (the
// store's and the log's, the reserved names, clean paths) are record's.

// tempName is the name of a temporary file a rewind writes beside name
// before renaming it into place: the one scheme internal/durable defines
// for every temporary file zerofs makes.
func tempName(name string) string { return durable.TempName(name) }

// The store's files beside its log (record.LogName). The engine writes
// them, so their names are here, once; the clients (history, fs, cmd) that
// read a store beside a daemon use them.
const (
	// BlobsName is the blob store's directory.
	BlobsName = "blobs"
	// GitignoreName is the store's .gitignore (see ensureGitignore).
	GitignoreName = ".gitignore"
)
