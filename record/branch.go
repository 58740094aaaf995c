package record

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// A branch is a writable copy of the workspace as it was at a sequence
// (its base), made in O(1): a copy-up layer (overlayfs) over the
// workspace's read-only view @BASE/, mounted as a zerofs workspace of its
// own. The engine keeps what it knows of each branch in its store
// (BranchesName/ID/): its record (BranchRecordName), the copy-up layer
// (upper, work) and the branch's own store.

// BranchesName is the store's directory of branches, one directory per
// branch, named by its ID.
const BranchesName = "branches"

// The names in a branch's directory: its record, the overlay's upper and
// work directories, and the branch's own store.
const (
	BranchRecordName = "branch.json"
	BranchUpperName  = "upper"
	BranchWorkName   = "work"
	BranchStoreName  = "store"
)

// BranchRequest asks the engine to make a branch (Request.Branch): a
// record for it, with its base pinned, and the empty directories of its
// copy-up layer and store; or (Delete) to remove one.
type BranchRequest struct {
	// Dir is the branch's directory (absolute, clean), where it is mounted.
	Dir string `json:"dir"`
	// At is its base; nil: the workspace now (the engine ends the
	// step's captures first, so that the state at the base never changes:
	// every later change is captured again).
	At *Seq `json:"at,omitempty"`
	// Delete, when set, removes the branch with this ID and everything
	// it holds (its copy-up layer and its store): the caller has unmounted
	// it first.
	Delete string `json:"delete,omitempty"`
}

// BranchRecord is what the store holds of a branch (BranchRecordName).
type BranchRecord struct {
	ID      string    `json:"id"`
	Dir     string    `json:"dir"`
	Base    Seq       `json:"base"`
	Created time.Time `json:"created"`
	// Merged is the branch's state the last merge brought in (git's rule:
	// the next merge's base), nil until it is merged.
	Merged *BranchMerged `json:"merged,omitempty"`
	// Pending is the state a merge under way brings in, written before
	// the merge changes anything: once the log holds that merge's
	// session_rewind (after Pending.After), it is Merged; if it holds
	// none, the merge never happened (a crash before its intent).
	Pending *BranchMerged `json:"pending,omitempty"`
}

// BranchMerged is a branch's state as a merge brought it in: its log's
// head then, and the state of every path it had changed since its base
// (the content of each file in the workspace's blob store, so that the
// next merge can read it as its base).
type BranchMerged struct {
	// Seq is the session_rewind of the merge in this workspace's log.
	Seq  Seq `json:"seq"`
	Head Seq `json:"head"`
	// After (Pending only) is this workspace's head before the merge.
	After Seq `json:"after,omitempty"`
	// States are the branch's changed paths as merged (Absent: removed).
	States []FileState `json:"states"`
}

// ErrNotBranch: a directory that is not a branch of this workspace.
var ErrNotBranch = errors.New("rewind: not a branch of this workspace")

// CheckBranchID reports whether id is a branch ID zerofs makes: 16
// lower-case hex digits.
func CheckBranchID(id string) error {
	if len(id) != 16 {
		return fmt.Errorf("branch id %q is not 16 hex digits", id)
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("branch id %q is not 16 hex digits", id)
		}
	}
	return nil
}

// Check checks a record read from a store as untrusted input: an ID
// zerofs makes (and the one its directory is named by), an absolute clean
// directory, merged states that are clean paths with kinds, modes and
// blobs zerofs writes.
func (r BranchRecord) Check(id string) error {
	if err := CheckBranchID(r.ID); err != nil {
		return err
	}
	if r.ID != id {
		return fmt.Errorf("branch %s records id %q", id, r.ID)
	}
	if r.Dir == "" || !filepath.IsAbs(r.Dir) || filepath.Clean(r.Dir) != r.Dir {
		return fmt.Errorf("branch %s names directory %q", id, r.Dir)
	}
	for _, m := range []*BranchMerged{r.Merged, r.Pending} {
		if m == nil {
			continue
		}
		for _, st := range m.States {
			if st.Path == "" || CleanPath(st.Path) != nil {
				return fmt.Errorf("branch %s: merged state names path %q", id, st.Path)
			}
			if st.Absent {
				continue
			}
			switch {
			case st.Kind != KindFile && st.Kind != KindDir && st.Kind != KindSymlink:
				return fmt.Errorf("branch %s: merged state names kind %q", id, st.Kind)
			case st.Mode > 0o7777:
				return fmt.Errorf("branch %s: merged state names mode %o", id, st.Mode)
			case st.Kind == KindFile && !IsBlobID(st.Blob):
				return fmt.Errorf("branch %s: merged state names blob %q", id, st.Blob)
			case st.Kind == KindSymlink && st.Target == "":
				return fmt.Errorf("branch %s: merged state names a symlink without a target", id)
			}
			if reason := CheckXattrs(st.Xattrs); reason != "" {
				return fmt.Errorf("branch %s: %q: %s", id, st.Path, reason)
			}
		}
	}
	return nil
}
