package rewind

import (
	"errors"

	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// The records of the log and the state derived from them are defined in
// rewind/internal/index, which folds the log; these names are the same
// types, for callers outside rewind.
type (
	// Seq is an event sequence.
	Seq = eventlog.Seq
	// Kind is what a path was: a regular file, a directory or a symlink.
	Kind = index.Kind
	// FileState is one path's before-state: an entry of a checkpoint's
	// "files" (SPEC.md's keys).
	FileState = index.FileState
	// Checkpoint is the payload of a session_checkpoint event.
	Checkpoint = index.Checkpoint
	// Report is what a rewind did.
	Report = index.Report
	// RewindPayload is the payload of a session_rewind event.
	RewindPayload = index.RewindPayload
	// PrunedPayload is the payload of a history_pruned event.
	PrunedPayload = index.PrunedPayload
	// ThinnedPayload is the payload of a history_thinned event.
	ThinnedPayload = index.ThinnedPayload
	// ThinInterval is one interval a thin gave up.
	ThinInterval = index.ThinInterval
	// Foreign is a path whose present state was made outside the agent's
	// steps, which a rewind overwrites.
	Foreign = index.Foreign
	// DamageError names a record in the store that zerofs never writes.
	DamageError = index.DamageError
)

// The kinds SPEC.md names.
const (
	KindFile    = index.KindFile
	KindDir     = index.KindDir
	KindSymlink = index.KindSymlink
)

// The forms of a rewind, as its session_rewind records them ("form").
const (
	FormRewind = index.FormRewind
	FormPaths  = index.FormPaths
	FormRevert = index.FormRevert
	FormUndo   = index.FormUndo
	FormRedo   = index.FormRedo
	FormTurn   = index.FormTurn
)

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

// CheckEvent checks one event of the log at logPath the way Open does
// before using it (see index.CheckEvent).
func CheckEvent(logPath string, ev eventlog.Event) error { return index.CheckEvent(logPath, ev) }

// Caller names the process whose request causes a capture.
type Caller struct {
	PID  int
	Comm string
	// Resolve, when set, gives PID and Comm instead. The engine calls it
	// only when it stores a before-state, while the request still waits
	// for it: most changes find their path captured already in the step,
	// and naming a process costs a read of /proc.
	Resolve func() (pid int, comm string)
}

// resolved is c with Resolve called.
func (c Caller) resolved() Caller {
	if c.Resolve != nil {
		c.PID, c.Comm = c.Resolve()
		c.Resolve = nil
	}
	return c
}

// Change is one path about to change.
//
// Tree asks for the whole subtree under a directory to be captured too (a
// directory about to be renamed away: its descendants' paths change with it).
// From names a directory whose subtree is about to appear under Path (the
// source of that rename, seen from its destination): for every path From/x,
// Path/x is captured as it is now, usually absent. Without it, a state
// before the rename in which Path was a different directory would show the
// moved-in names as if they had been there.
//
// Removed says Path's own name is about to go (an unlink, or the victim of
// a rename): a regular file with one link that no handle holds open for
// writing (Options.OpenForWrite) is then kept, its inode hard-linked into
// the store (blobstore.Store.Keep), instead of copied.
type Change struct {
	Path    string
	Tree    bool
	From    string
	Removed bool
}

// Errors callers test with errors.Is.
var (
	// ErrNoSuchSeq: a sequence above head, or below the pruned history.
	ErrNoSuchSeq = errors.New("rewind: no such sequence")
	// ErrReserved: a name reserved at the workspace root.
	ErrReserved = index.ErrReserved
	// ErrUnsafePath: a path that is not clean and relative, or that
	// would lead outside the workspace.
	ErrUnsafePath = index.ErrUnsafePath
	// ErrSkipped: the before-state was not kept (see the record's reason).
	ErrSkipped = errors.New("rewind: before-state was not kept")
	// ErrUntrustedStore: the store or its log belongs to another user, or
	// others may write it; its records (owners, setuid bits) are not to be
	// trusted by this user's rewinds.
	ErrUntrustedStore = errors.New("rewind: store is not the opening user's")
)
