package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The store is untrusted input (SPEC, Trust): anyone with write access to
// it can put any line in the log and any JSON in the intent record. Every
// record is checked where it is read, before the index or a rewind can use
// it: a path that is not clean and relative could lead a rewind out of the
// workspace ("..", "/etc"), a kind or mode zerofs never writes could make a
// rewind create something no capture saw.

// DamageError names a record in the store that zerofs never writes: the log
// line (which is the event's sequence) or the intent record, the recorded
// path concerned and what is wrong. errors.Is(err, ErrCorrupt)
// holds (ErrCorrupt), so a mount refuses such a store and `zerofs verify` reports it.
type DamageError struct {
	File   string // the store file: the event log or the intent record
	Line   int    // the log line, which is the event's sequence; 0 for the intent
	Path   string // the recorded path, when the damage is in one file's record
	Reason string
}

func (e *DamageError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rewind: damaged store: %s", e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ": line %d (sequence %d)", e.Line, e.Line)
	}
	if e.Path != "" {
		fmt.Fprintf(&b, ": path %q", e.Path)
	}
	fmt.Fprintf(&b, ": %s", e.Reason)
	return b.String()
}

func (e *DamageError) Unwrap() error { return ErrCorrupt }

// CheckRecordPath checks a path read from the store: the workspace root
// ("", whose own before-state a chmod of the root records) or a clean
// relative path (SPEC, Events: no "." or ".." component, no leading,
// trailing or doubled "/", no NUL, never a reserved name at the root).
func CheckRecordPath(p string) string {
	if strings.IndexByte(p, 0) >= 0 {
		return "holds a NUL byte"
	}
	switch err := CleanPath(p); {
	case errors.Is(err, ErrReserved):
		return "a name reserved at the workspace root"
	case err != nil:
		return "not a clean relative path"
	}
	return ""
}

// CheckRecord checks one file's before-state read from a checkpoint and
// returns what is wrong with it ("" when nothing is). Absent records carry
// only their path; skipped ones keep no content, so only their path and mode
// matter; a present one must be a file with a valid blob id, a directory, or
// a symlink with a target. The root can only have been a directory.
func CheckRecord(f FileState) string {
	if r := CheckRecordPath(f.Path); r != "" {
		return r
	}
	if f.Mode&^0o7777 != 0 {
		return fmt.Sprintf("mode %#o has bits beyond 07777", f.Mode)
	}
	if f.Bytes < 0 {
		return fmt.Sprintf("negative size %d", f.Bytes)
	}
	if f.Path == "" && (f.Absent || f.Kind != KindDir) {
		return "the workspace root recorded as something other than a directory"
	}
	if r := CheckXattrs(f.Xattrs); r != "" {
		return r
	}
	if r := checkRenamed(f); r != "" {
		return r
	}
	if f.Kept != "" && !IsStashName(f.Kept) {
		return fmt.Sprintf("a bad stash name %q", f.Kept)
	}
	if f.Absent || f.Skipped {
		return ""
	}
	switch f.Kind {
	case KindFile:
		if f.Kept != "" && f.Blob == "" {
			break // named by a later stash_named event
		}
		if !IsBlobID(f.Blob) {
			return fmt.Sprintf("file with a bad blob id %q", f.Blob)
		}
	case KindDir:
	case KindSymlink:
		if f.Target == "" {
			return "symlink without a target"
		}
		if strings.IndexByte(f.Target, 0) >= 0 {
			return "symlink target holds a NUL byte"
		}
	default:
		return fmt.Sprintf("unknown kind %q", f.Kind)
	}
	return ""
}

// CheckFiles checks every record of the checkpoint at seq. The error is a
// *DamageError whose File the caller fills in.
func CheckFiles(seq Seq, files []FileState) error {
	for _, f := range files {
		if r := CheckRecord(f); r != "" {
			return &DamageError{Line: int(seq), Path: f.Path, Reason: r}
		}
	}
	return nil
}

// InFile names the store file of a *DamageError that has none yet.
func InFile(err error, file string) error {
	var de *DamageError
	if errors.As(err, &de) && de.File == "" {
		de.File = file
	}
	return err
}

// CheckEvent checks one event of the log at logPath the way the engine does
// before using it: a payload zerofs reads (checkpoint, rewind, history
// pruned) must parse, and every record of a checkpoint must be one zerofs
// could have written. It returns a *DamageError naming the line (a
// *BaselineError for a record in a format from before the store-format
// baseline), or nil. Events of types zerofs does not read are not checked.
func CheckEvent(logPath string, ev Event) error {
	v, err := DecodeEvent(logPath, ev)
	if cp, ok := v.(Checkpoint); ok && err == nil {
		err = InFile(CheckFiles(ev.Seq, cp.Files), logPath)
	}
	return err
}

// DecodeEvent parses the payload of an event zerofs reads and checks what
// the payload says of the log itself (a checkpoint's records are checked by
// the index as they are added). It returns a Checkpoint, RewindPayload,
// PrunedPayload, ThinnedPayload or NamedPayload, or nil for other types.
func DecodeEvent(logPath string, ev Event) (any, error) {
	bad := func(what string, err error) error {
		return &DamageError{File: logPath, Line: int(ev.Seq), Reason: fmt.Sprintf("bad %s payload: %v", what, err)}
	}
	switch ev.Type {
	case TypeCheckpoint:
		var cp Checkpoint
		if err := json.Unmarshal(ev.Payload, &cp); err != nil {
			return nil, bad("checkpoint", err)
		}
		return cp, nil
	case TypeRewind:
		var rp RewindPayload
		if err := json.Unmarshal(ev.Payload, &rp); err != nil {
			return nil, bad("session_rewind", err)
		}
		if rp.TargetSequence >= ev.Seq || rp.CheckpointSequence >= ev.Seq {
			return nil, &DamageError{File: logPath, Line: int(ev.Seq),
				Reason: fmt.Sprintf("session_rewind names sequences %d and %d, not before it", rp.TargetSequence, rp.CheckpointSequence)}
		}
		if rp.Form == "" {
			return nil, &BaselineError{File: logPath, Line: int(ev.Seq), What: `a session_rewind with no "form"`}
		}
		return rp, nil
	case TypeHistoryPruned:
		var pp PrunedPayload
		if err := json.Unmarshal(ev.Payload, &pp); err != nil {
			return nil, bad("history_pruned", err)
		}
		if pp.Before >= ev.Seq {
			return nil, &DamageError{File: logPath, Line: int(ev.Seq),
				Reason: fmt.Sprintf("history_pruned cuts at %d, after itself", pp.Before)}
		}
		return pp, nil
	case TypeHistoryThinned:
		return decodeThinned(logPath, ev)
	case TypeStashNamed:
		return decodeNamed(logPath, ev)
	}
	return nil, nil
}

// checkRenamed checks a record's rename side: a clean path other than the
// record's own and not beneath or above it, on one side only.
func checkRenamed(f FileState) string {
	other := f.RenamedTo
	if f.RenamedFrom != "" {
		if other != "" {
			return "a rename record with both renamedTo and renamedFrom"
		}
		other = f.RenamedFrom
	}
	if other == "" {
		return ""
	}
	if r := CheckRecordPath(other); r != "" {
		return "rename to or from a path that is " + r
	}
	if f.Path == "" || other == f.Path || strings.HasPrefix(other, f.Path+"/") || strings.HasPrefix(f.Path, other+"/") {
		return "a rename of a directory onto itself, its root, or into its own subtree"
	}
	return ""
}

// The extended attributes a record may hold (FileState.Xattrs; SPEC,
// Events): user.*, the POSIX ACLs, and, recorded by a root daemon,
// security.capability and trusted.*. The log is untrusted input:
// CheckXattrs bounds a record's xattrs by the kernel's own limits on names
// and values and by a total, so a forged log can neither name an attribute
// outside these namespaces nor make a rewind or a view allocate without
// bound.
const (
	XattrCapability = "security.capability"
	XattrACLAccess  = "system.posix_acl_access"
	XattrACLDefault = "system.posix_acl_default"

	// MaxXattrName and MaxXattrValue are Linux's XATTR_NAME_MAX and
	// XATTR_SIZE_MAX; MaxXattrTotal bounds one record's xattrs (names,
	// with their NUL, and values).
	MaxXattrName  = 255
	MaxXattrValue = 64 << 10
	MaxXattrTotal = 64 << 10
)

// XattrKept reports whether name is an xattr a before-state records, for a
// daemon that is root or not.
func XattrKept(name string, root bool) bool {
	switch {
	case strings.HasPrefix(name, "user."), name == XattrACLAccess, name == XattrACLDefault:
		return true
	case name == XattrCapability, strings.HasPrefix(name, "trusted."):
		return root
	}
	return false
}

// CheckXattrs says what is wrong with a record's xattrs ("" when nothing):
// a name outside the kept namespaces (as a root daemon would keep them),
// an overlong name, one holding a NUL or ending in its namespace's dot, a
// value beyond the kernel's limit, or more than MaxXattrTotal in all.
func CheckXattrs(xs map[string][]byte) string {
	total := 0
	for name, v := range xs {
		switch {
		case !XattrKept(name, true):
			return fmt.Sprintf("xattr %q is not one zerofs records", name)
		case len(name) > MaxXattrName || strings.IndexByte(name, 0) >= 0 || strings.HasSuffix(name, "."):
			return fmt.Sprintf("bad xattr name %q", name)
		case len(v) > MaxXattrValue:
			return fmt.Sprintf("xattr %q of %d bytes is larger than %d", name, len(v), MaxXattrValue)
		}
		total += len(name) + 1 + len(v)
	}
	if total > MaxXattrTotal {
		return fmt.Sprintf("xattrs of %d bytes in all, more than %d", total, MaxXattrTotal)
	}
	return ""
}
