package rewind

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// ErrSkipped: the before-state was not kept (see the record's reason).
var ErrSkipped = errors.New("rewind: before-state was not kept")

// checkSeq refuses sequences above head, below the pruned history, or
// strictly inside a thinned interval, with a *RefusedError.
func (e *Engine) checkSeq(t record.Seq) error {
	if r := e.refuseSeq(t); r != nil {
		return r
	}
	return nil
}

// StateAt is the state of path at sequence t, ancestors included: a path
// under an ancestor that did not exist at t does not exist.
func (e *Engine) StateAt(p string, t record.Seq) (Entry, error) {
	if err := record.CleanPath(p); err != nil {
		return Entry{}, fmt.Errorf("%w: %q", err, p)
	}
	if err := e.checkSeq(t); err != nil {
		return Entry{}, err
	}
	return e.stateAt(p, t, ^record.Seq(0))
}

// stateAt resolves p at t using only records below limit (a recovering
// rewind ignores its own checkpoint).
func (e *Engine) stateAt(p string, t, limit record.Seq) (Entry, error) {
	if p == "" {
		return e.childAt("", t, limit)
	}
	dir := ""
	for _, name := range strings.Split(p, "/") {
		ent, err := e.childAt(index.JoinPath(dir, name), t, limit)
		if err != nil || !ent.Exists {
			return Entry{}, err
		}
		dir = index.JoinPath(dir, name)
		if dir != p && ent.State.Kind != record.KindDir {
			return Entry{}, nil
		}
		if dir == p {
			return ent, nil
		}
	}
	return Entry{}, nil
}

// ChildAt is the state of name in directory dir at t, given that dir existed
// as a directory at t (what a FUSE lookup needs: O(log n), no ancestor walk).
func (e *Engine) ChildAt(dir, name string, t record.Seq) (Entry, error) {
	p := index.JoinPath(dir, name)
	if err := record.CleanPath(p); err != nil {
		return Entry{}, fmt.Errorf("%w: %q", err, p)
	}
	if err := e.checkSeq(t); err != nil {
		return Entry{}, err
	}
	return e.childAt(p, t, ^record.Seq(0))
}

// childAt is p's own state at t: the first record after t below limit
// that decides it (p's own, or one found through the rename records of
// p's ancestors: index.Resolve), or the live state of the path p's content
// is at now (p, or where renames took it: then State.Path is that path).
//
// A change is recorded before it reaches the workspace, so the live state
// is the state at t only if no record of p came in while the workspace was
// read: the index is asked again afterwards, and a record found then is
// the answer (a view read while writers run must not show their change).
func (e *Engine) childAt(p string, t, limit record.Seq) (Entry, error) {
	for {
		rec, ok, at := e.index.Resolve(p, t, limit)
		if !ok && at != p && e.recovering != 0 {
			rec, ok = e.index.At(at, e.recovering-1, e.recovering+1)
		}
		if ok {
			rec, err := e.named(rec)
			if err != nil {
				return Entry{}, err
			}
			return Entry{Exists: !rec.State.Absent, State: rec.State, From: rec.Seq}, nil
		}
		if beforeLive != nil {
			beforeLive(at)
		}
		ent, err := e.live(at)
		if err != nil {
			return Entry{}, err
		}
		if _, ok, again := e.index.Resolve(p, t, limit); !ok && again == at {
			return ent, nil
		}
	}
}

// beforeLive, when set (by tests), runs just before the workspace is read
// for a state that has no record (p: the path, or the directory listed):
// a change made there is what the read's check must catch.
var beforeLive func(p string)

// live is p as it is now in the workspace.
func (e *Engine) live(p string) (Entry, error) {
	st, err := e.ws.lstat(p)
	if isMissing(err) {
		return Entry{Live: true, State: record.FileState{Path: p, Absent: true}}, nil
	}
	if err != nil {
		return Entry{}, fmt.Errorf("rewind: stat %q: %w", p, err)
	}
	fs := record.FileState{Path: p, Mode: st.Mode & 0o7777, Bytes: st.Size}
	setMeta(&fs, &st)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		fs.Kind = record.KindDir
	case unix.S_IFLNK:
		fs.Kind = record.KindSymlink
	case unix.S_IFREG:
		fs.Kind = record.KindFile
	default:
		fs.Skipped, fs.Reason = true, "unsupported file type "+fileType(st.Mode)
	}
	return Entry{Exists: true, Live: true, State: fs}, nil
}

// ReadDirAt lists directory dir as it was at t, sorted by name. dir must
// have existed at t as a directory. Reserved names at the root are left out.
func (e *Engine) ReadDirAt(dir string, t record.Seq) ([]DirEntry, error) {
	if err := record.CleanPath(dir); err != nil {
		return nil, fmt.Errorf("%w: %q", err, dir)
	}
	if err := e.checkSeq(t); err != nil {
		return nil, err
	}
	return e.readDirAt(dir, t, ^record.Seq(0))
}

func (e *Engine) readDirAt(dir string, t, limit record.Seq) ([]DirEntry, error) {
	// The names recorded under dir, and under where renames after t took
	// its content, and those directories' names now: each is resolved.
	//
	// A name removed while the directories are read is recorded before it
	// goes, so the index is asked again after reading them: a name gone
	// from a listing meanwhile is in the second answer.
	names, liveDirs := e.index.NamesAt(dir, t, limit)
	for {
		for _, d := range liveDirs {
			if beforeLive != nil {
				beforeLive(d)
			}
			liveNames, err := e.ws.readDirNames(d)
			if err != nil && !isMissing(err) {
				return nil, fmt.Errorf("rewind: read directory %q: %w", d, err)
			}
			for _, n := range liveNames {
				names[n] = true
			}
		}
		again, dirs := e.index.NamesAt(dir, t, limit)
		maps.Copy(names, again)
		if slices.Equal(dirs, liveDirs) {
			break
		}
		liveDirs = dirs
	}
	var out []DirEntry
	for n := range names {
		if dir == "" && record.IsReserved(n) {
			continue
		}
		ent, err := e.childAt(index.JoinPath(dir, n), t, limit)
		if err != nil {
			return nil, err
		}
		if ent.Exists {
			out = append(out, DirEntry{Name: n, Entry: ent})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Content is an open file's content at some sequence: a blob from the
// store, or for a live entry the workspace file.
type Content interface {
	io.Reader
	io.ReaderAt
	io.Closer
}

// OpenContent opens the content of a file state: the blob (verified before
// random access; a chunked blob chunk by chunk, as reads touch them, so a
// read at an offset does not read the file from its start), or for a live
// entry the workspace file, read-only, never following a symlink.
func (e *Engine) OpenContent(ent Entry) (Content, error) {
	if !ent.Exists || ent.State.Kind != record.KindFile {
		return nil, fmt.Errorf("rewind: %q is not a file at that sequence", ent.State.Path)
	}
	if ent.Live {
		f, err := e.ws.openFile(ent.State.Path)
		if err != nil {
			return nil, fmt.Errorf("rewind: open %q: %w", ent.State.Path, err)
		}
		return f, nil
	}
	if ent.State.Skipped {
		return nil, fmt.Errorf("%w: %q: %s", ErrSkipped, ent.State.Path, ent.State.Reason)
	}
	id, err := blobstore.ParseID(ent.State.Blob)
	if err != nil {
		return nil, fmt.Errorf("rewind: %q at checkpoint %d: %w", ent.State.Path, ent.From, err)
	}
	f, err := e.blobs.OpenVerified(id)
	if err != nil {
		return nil, fmt.Errorf("rewind: %q at checkpoint %d: %w", ent.State.Path, ent.From, err)
	}
	return f, nil
}

// DirXattrs is a directory's kept xattrs at a state: those recorded, or
// for a live one those it has now, read as a capture reads them (nil
// where they cannot be read).
func (e *Engine) DirXattrs(ent Entry) (map[string][]byte, error) {
	if !ent.Exists || ent.State.Kind != record.KindDir {
		return nil, fmt.Errorf("rewind: %q is not a directory at that sequence", ent.State.Path)
	}
	if !ent.Live {
		return ent.State.Xattrs, nil
	}
	xs, err := e.ws.xattrs(ent.State.Path)
	if err != nil {
		return nil, fmt.Errorf("rewind: xattrs of %q: %w", ent.State.Path, err)
	}
	return xs, nil
}

// ReadLink is a symlink's target at a state (recorded or live).
func (e *Engine) ReadLink(ent Entry) (string, error) {
	if !ent.Exists || ent.State.Kind != record.KindSymlink {
		return "", fmt.Errorf("rewind: %q is not a symlink at that sequence", ent.State.Path)
	}
	if !ent.Live {
		return ent.State.Target, nil
	}
	t, err := e.ws.readlink(ent.State.Path)
	if err != nil {
		return "", fmt.Errorf("rewind: readlink %q: %w", ent.State.Path, err)
	}
	return t, nil
}
