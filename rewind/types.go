package rewind

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/zerofs/zerofs/eventlog"
)

// Seq is an event sequence.
type Seq = eventlog.Seq

// Kind is what a path was: a regular file, a directory or a symlink.
type Kind string

// The kinds SPEC.md names.
const (
	KindFile    Kind = "file"
	KindDir     Kind = "dir"
	KindSymlink Kind = "symlink"
)

// FileState is one path's before-state: an entry of a checkpoint's "files".
// The JSON keys are SPEC.md's.
//
// UID, GID and MTime are nil in records written before zerofs kept them
// (and for absent paths): the owner is then unknown, which views and
// rewinds treat as root's, with no setuid or setgid bit (see Owned).
type FileState struct {
	Path    string     `json:"path"`
	Kind    Kind       `json:"kind,omitempty"`
	Blob    string     `json:"blob,omitempty"`
	Absent  bool       `json:"absent"`
	Skipped bool       `json:"skipped"`
	Reason  string     `json:"reason,omitempty"`
	Bytes   int64      `json:"bytes"`
	Mode    uint32     `json:"mode"` // permission bits (07777)
	UID     *uint32    `json:"uid,omitempty"`
	GID     *uint32    `json:"gid,omitempty"`
	MTime   *time.Time `json:"mtime,omitempty"` // UTC, nanoseconds
	Target  string     `json:"target,omitempty"`
	PID     int        `json:"pid,omitempty"`
	Comm    string     `json:"comm,omitempty"`
}

// Owned reports whether the record names its owner (uid and gid).
func (s FileState) Owned() bool { return s.UID != nil && s.GID != nil }

// Checkpoint is the payload of a session_checkpoint event.
type Checkpoint struct {
	Tool  string      `json:"tool"`
	Files []FileState `json:"files"`
}

// Report is what a rewind did.
type Report struct {
	Restored int      `json:"restored"`
	Deleted  int      `json:"deleted"`
	Skipped  []string `json:"skipped"`
}

// RewindPayload is the payload of a session_rewind event. CheckpointSequence
// is the checkpoint that holds the before-state of everything the rewind
// changed (0 when it changed nothing): rewinding to CheckpointSequence-1
// undoes the rewind.
//
// A path rewind records its Paths (the state at TargetSequence was restored
// for them only); a revert records RevertOf, the step it reverted (its
// TargetSequence is the state just before that step, restored for the
// paths the step changed), and Force when it overwrote later changes.
// Foreign lists the paths whose changes from outside the agent's steps it
// overwrote.
type RewindPayload struct {
	TargetSequence     Seq       `json:"targetSequence"`
	CheckpointSequence Seq       `json:"checkpointSequence,omitempty"`
	Report             Report    `json:"report"`
	Paths              []string  `json:"paths,omitempty"`
	RevertOf           Seq       `json:"revertOf,omitempty"`
	Force              bool      `json:"force,omitempty"`
	Foreign            []Foreign `json:"foreign,omitempty"`
}

// PrunedPayload is the payload of a history_pruned event: states before
// Before no longer exist.
type PrunedPayload struct {
	Before Seq `json:"before"`
	// Reason is why: "gc" (asked for) or "max-store-size" (the store
	// reached its bound; then StoreBytes and MaxStoreSize say how far).
	Reason       string `json:"reason,omitempty"`
	StoreBytes   int64  `json:"storeBytes,omitempty"`
	MaxStoreSize int64  `json:"maxStoreSize,omitempty"`
	// Steps is how many steps (tool_call events) began between the
	// previous cut and Before: the states this prune dropped.
	Steps int `json:"steps"`
}

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
	ErrReserved = errors.New("rewind: reserved name")
	// ErrUnsafePath: a path that is not clean and relative, or that
	// would lead outside the workspace.
	ErrUnsafePath = errors.New("rewind: unsafe path")
	// ErrSkipped: the before-state was not kept (see the record's reason).
	ErrSkipped = errors.New("rewind: before-state was not kept")
	// ErrUntrustedStore: the store or its log belongs to another user, or
	// others may write it; its records (owners, setuid bits) are not to be
	// trusted by this user's rewinds.
	ErrUntrustedStore = errors.New("rewind: store is not the opening user's")
)

// StoreName is the store's default directory name in the workspace root.
const StoreName = ".zero"

// IsReserved reports whether name, at the workspace root, is reserved: the
// store and control directory ".zero", and "@" followed by one or more
// digits, however many (SPEC): "@007" and "@99999999999999999999" are
// reserved though no view has that name.
func IsReserved(name string) bool {
	return name == StoreName || isAtDigits(name)
}

// isAtDigits reports whether name is "@" followed by one or more digits.
func isAtDigits(name string) bool {
	if len(name) < 2 || name[0] != '@' {
		return false
	}
	for _, c := range name[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ParseView parses a view name "@<digits>" into its sequence. Only the
// canonical decimal form names a view: "@7", never "@007" or "@+7"; a
// number beyond any sequence names none.
func ParseView(name string) (Seq, bool) {
	if !isAtDigits(name) || (name[1] == '0' && len(name) > 2) {
		return 0, false
	}
	n, err := strconv.ParseUint(name[1:], 10, 64)
	if err != nil {
		return 0, false
	}
	return Seq(n), true
}

// CleanPath checks that p is a clean, relative, slash-separated workspace
// path ("" is the root) that does not start with a reserved name.
func CleanPath(p string) error {
	if p == "" {
		return nil
	}
	if strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return ErrUnsafePath
	}
	for i, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." {
			return ErrUnsafePath
		}
		if i == 0 && IsReserved(c) {
			return ErrReserved
		}
	}
	return nil
}
