package rewind

import (
	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// The names zerofs owns: the store's files, the names reserved at the
// workspace root, what makes a workspace path clean, and the temporary
// names a rewind writes.

// tempName is the name of a temporary file a rewind writes beside name
// before renaming it into place: the one scheme internal/durable defines
// for every temporary file zerofs makes.
func tempName(name string) string { return durable.TempName(name) }

// StoreName is the store's default directory name in the workspace root.
const StoreName = index.StoreName

// The store's files. The engine writes them, so their names are here, once;
// the clients (history, fs, cmd) that read a store beside a daemon use them.
const (
	// LogName is the event log.
	LogName = index.LogName
	// BlobsName is the blob store's directory.
	BlobsName = "blobs"
	// GitignoreName is the store's .gitignore (see ensureGitignore).
	GitignoreName = ".gitignore"
)

// IsReserved reports whether name, at the workspace root, is reserved (see
// index.IsReserved).
func IsReserved(name string) bool { return index.IsReserved(name) }

// ParseView parses a view name "@<digits>" into its sequence (see
// index.ParseView).
func ParseView(name string) (Seq, bool) { return index.ParseView(name) }

// CleanPath checks that p is a clean, relative, slash-separated workspace
// path ("" is the root) that does not start with a reserved name.
func CleanPath(p string) error { return index.CleanPath(p) }

// Errors of a path a request or record names (errors.Is).
var (
	// ErrReserved: a name reserved at the workspace root.
	ErrReserved = index.ErrReserved
	// ErrUnsafePath: a path that is not clean and relative, or that
	// would lead outside the workspace.
	ErrUnsafePath = index.ErrUnsafePath
)
