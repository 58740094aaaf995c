package record

import "time"

// A checkpoint's payload and its records, with SPEC.md's JSON keys.

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
	// Xattrs are the extended attributes a rewind may restore (rewind/xattr.go;
	// CheckXattrs bounds them):
	// nil when the record says nothing of them, empty when it records none.
	Xattrs map[string][]byte `json:"xattrs,omitzero"`
	// RenamedTo and RenamedFrom make the record one side of a directory's
	// rename record (rewind/internal/index/renames.go): the directory at Path is about to be
	// renamed to RenamedTo, so what was beneath Path before this checkpoint
	// is what is beneath RenamedTo just after it; or Path is about to be
	// replaced by the directory at RenamedFrom, so nothing that is beneath
	// Path just after this checkpoint was beneath it before. The record's
	// other fields are Path's own before-state, as in any record.
	RenamedTo   string `json:"renamedTo,omitempty"`
	RenamedFrom string `json:"renamedFrom,omitempty"`
	// Kept is a removed file's stash in the store (blobstore/stash.go):
	// linked there unread, so the checkpoint has no Blob; a later
	// stash_named event names its blob (NamedPayload), and the index then
	// gives the record that Blob.
	Kept string `json:"kept,omitempty"`
}

// Owned reports whether the record names its owner (uid and gid).
func (s FileState) Owned() bool { return s.UID != nil && s.GID != nil }

// Checkpoint is the payload of a session_checkpoint event.
type Checkpoint struct {
	Tool  string      `json:"tool"`
	Files []FileState `json:"files"`
	// Step, when not 0, is the step the captures belong to, when that is
	// not the newest step before them: several agent sessions each had a
	// step open at once, and this change was made by a process of the
	// session whose step began earlier (rewind/session.go).
	Step Seq `json:"step,omitempty"`
	// Rewind marks a rewind's own checkpoint (the before-state of what it
	// is about to change): it belongs to the session_rewind that follows
	// it, and begins no step's changes. One that no session_rewind follows
	// (a rewind that failed and was rolled back) belongs to nothing.
	Rewind bool `json:"rewind,omitempty"`
	// Person marks a person's change (SPEC, Whose change it is): made by
	// a process outside every agent's process tree while agent sessions
	// were known. It belongs to no agent's step (Step is then 0): undo,
	// undo of a turn and revert leave it alone, and a whole rewind names
	// it before overwriting it.
	Person bool `json:"person,omitempty"`
}
