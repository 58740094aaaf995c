package rewind

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/ignore"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// ForkDir forks from a directory that shows a past state (a mount's @T/,
// read with the caller's own permissions): the same result as Fork, made
// by copying, since a FUSE file cannot be reflinked. What the .zeroignore
// beside from (the mounted workspace's, as it is now) ignores is left out.
func ForkDir(ctx context.Context, from string, t record.Seq, dir, source string) (ForkResult, error) {
	return ForkDirIgnoring(ctx, from, t, dir, source, loadIgnoreAt(filepath.Dir(filepath.Clean(from))))
}

// ForkDirIgnoring is ForkDir leaving out what rules ignore (the mount's
// own rules, from its status); nil leaves out nothing.
func ForkDirIgnoring(ctx context.Context, from string, t record.Seq, dir, source string, rules *ignore.Matcher) (ForkResult, error) {
	fi, err := os.Lstat(from)
	if err != nil {
		return ForkResult{}, fmt.Errorf("fork: %w", err)
	}
	w, err := newForkWriter(dir, source, t)
	if err != nil {
		return ForkResult{}, err
	}
	if err := copyForkTree(ctx, w, &dirFork{from: from, ignored: rules}); err != nil {
		return w.abort(err)
	}
	rootState := shownState(fi)
	if rootState.Xattrs, err = viewXattrs(from); err != nil {
		return ForkResult{}, err
	}
	return w.finish(ctx, copyMode(rootState), rootState, "")
}

// dirFork is a directory that shows a past state, read with the caller's
// own permissions.
type dirFork struct {
	from    string
	ignored *ignore.Matcher
}

func (d *dirFork) list(rel string) ([]forkItem, error) {
	ents, err := os.ReadDir(filepath.Join(d.from, rel))
	if err != nil {
		return nil, fmt.Errorf("fork: %w", err)
	}
	var its []forkItem
	for _, de := range ents {
		if rel == "" && record.IsReserved(de.Name()) {
			continue
		}
		p := index.JoinPath(rel, de.Name())
		fi, err := os.Lstat(filepath.Join(d.from, p))
		if err != nil {
			return nil, fmt.Errorf("fork: %w", err)
		}
		if p != record.IgnoreFile && d.ignored.Match(p, fi.IsDir()) {
			continue // never forked (ignore.go)
		}
		it := forkItem{path: p, fi: fi, dir: fi.IsDir()}
		if fi.Mode().IsRegular() {
			it.bytes = fi.Size()
		}
		its = append(its, it)
	}
	return its, nil
}

func (d *dirFork) copy(w *forkWriter, it forkItem) error {
	p, fi := it.path, it.fi
	abs := filepath.Join(d.from, p)
	var err error
	shown := shownState(fi)
	mode := copyMode(shown)
	switch {
	case fi.IsDir():
		if shown.Xattrs, err = viewXattrs(abs); err != nil {
			return err
		}
		return w.mkdir(p, mode, shown)
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(abs)
		if err != nil {
			return fmt.Errorf("fork: %w", err)
		}
		return w.symlink(p, target)
	case fi.Mode().IsRegular():
		f, err := os.Open(abs)
		if err != nil {
			return fmt.Errorf("fork: %w", err)
		}
		defer f.Close()
		if shown.Xattrs, err = readXattrs(int(f.Fd())); err != nil {
			return fmt.Errorf("fork: %q: %w", p, err)
		}
		return w.file(p, f, mode, shown)
	default:
		w.res.Skipped = append(w.res.Skipped, p)
	}
	return nil
}

// viewXattrs reads the kept xattrs of a directory a view shows.
func viewXattrs(p string) (map[string][]byte, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("fork: %w", err)
	}
	defer unix.Close(fd)
	xs, err := readXattrs(fd)
	if err != nil {
		return nil, fmt.Errorf("fork: %s: %w", p, err)
	}
	return xs, nil
}

// modeBits is the setuid, setgid and sticky bits of m as permission bits.
func modeBits(m os.FileMode) uint32 {
	var x uint32
	if m&os.ModeSetuid != 0 {
		x |= unix.S_ISUID
	}
	if m&os.ModeSetgid != 0 {
		x |= unix.S_ISGID
	}
	if m&os.ModeSticky != 0 {
		x |= unix.S_ISVTX
	}
	return x
}
