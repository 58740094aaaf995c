package rewind

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
)

// Extended attributes: a before-state records the xattrs a rewind may put
// back (SPEC, Events: the record's "xattrs"): user.*, the POSIX ACLs
// (system.posix_acl_access and _default), and, when the daemon runs as
// root, security.capability and trusted.*. Others (security.selinux, ...)
// belong to the system and are neither recorded nor touched.
//
// A record's Xattrs is nil when it says nothing about them (history from
// before they were kept, absent paths, symlinks): a rewind then leaves a
// path's xattrs alone. An empty map records "none".
//
// A capability is privilege like a setuid bit: it comes back only onto a
// file owned by the owner it was recorded with, and never into a directory
// of another user (safeMode's rule, extended by restorePrivileged).
//
// The store is untrusted: record.CheckXattrs bounds what a record may hold.

// isRoot is whether the daemon may read and write the privileged
// namespaces; tests set it with canChown.
func isRoot() bool { return canChown() }

// procFd is the /proc path of descriptor fd: the xattr calls reach any
// descriptor (O_PATH ones too) through it, never by a workspace path.
func procFd(fd int) string { return fmt.Sprintf("/proc/self/fd/%d", fd) }

// noXattrs reports whether err means the filesystem keeps no xattrs (or
// not of that kind): then there are none to record or restore.
func noXattrs(err error) bool {
	return errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP)
}

// readXattrs reads the kept xattrs of the file open at fd: a non-nil map,
// empty when it has none.
func readXattrs(fd int) (map[string][]byte, error) { return readXattrsAt(procFd(fd), true) }

// readXattrsAt is readXattrs of the file at path, followed if it is a
// symlink only with follow (a descriptor's /proc path must be).
func readXattrsAt(path string, follow bool) (map[string][]byte, error) {
	out := map[string][]byte{}
	names, err := listXattrs(path, follow)
	if noXattrs(err) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return out, nil // most files: no geteuid either
	}
	root := isRoot()
	for _, name := range names {
		if !record.XattrKept(name, root) {
			continue
		}
		v, err := getXattr(path, name, follow)
		if errors.Is(err, unix.ENODATA) || noXattrs(err) {
			continue // removed meanwhile, or not readable here
		}
		if err != nil {
			return nil, fmt.Errorf("read xattr %q: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

// fdXattrs is readXattrs for a capture: nil (nothing recorded, so nothing
// restored) where the daemon may not read them (an ordinary user's daemon
// and a file it cannot read) or they are more than a record holds: the
// change goes ahead, as it does for a file larger than the blob size cap.
func fdXattrs(fd int) (map[string][]byte, error) {
	return capturedXattrs(readXattrs(fd))
}

// capturedXattrs is what a capture records of xattrs xs read with err
// (fdXattrs).
func capturedXattrs(xs map[string][]byte, err error) (map[string][]byte, error) {
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || (err == nil && record.CheckXattrs(xs) != "") {
		return nil, nil
	}
	return xs, err
}

// xattrs reads the kept xattrs of workspace path p for a capture (fdXattrs),
// never following a symlink.
func (w *workspace) xattrs(p string) (map[string][]byte, error) {
	f, err := w.open(p, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return fdXattrs(int(f.Fd()))
}

// ReadXattrs reads the kept xattrs of the file open at fd (a view of a
// path served from the present file shows these).
func ReadXattrs(fd int) (map[string][]byte, error) { return readXattrs(fd) }

// RestoreXattrs gives the file or directory open at fd the kept xattrs of
// want as a rewind gives them (a capability only under want's owner), for
// a writer of a tree outside the engine (replicate's restore).
func RestoreXattrs(fd int, want record.FileState) error { return restoreXattrs(fd, want) }

// listXattrs lists the xattr names of path (followed with follow).
func listXattrs(path string, follow bool) ([]string, error) {
	list := unix.Llistxattr
	if follow {
		list = unix.Listxattr
	}
	size := 1024
	for {
		buf := make([]byte, size)
		n, err := list(path, buf)
		if errors.Is(err, unix.ERANGE) && size < 1<<20 {
			size *= 4
			continue
		}
		if err != nil {
			return nil, err
		}
		var names []string
		for _, b := range bytes.Split(buf[:n], []byte{0}) {
			if len(b) > 0 {
				names = append(names, string(b))
			}
		}
		return names, nil
	}
}

// getXattr reads one xattr's value of path (followed with follow).
func getXattr(path, name string, follow bool) ([]byte, error) {
	get := unix.Lgetxattr
	if follow {
		get = unix.Getxattr
	}
	size := 256
	for {
		buf := make([]byte, size)
		n, err := get(path, name, buf)
		if errors.Is(err, unix.ERANGE) && size <= record.MaxXattrValue {
			size *= 4
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

// xattrsDiffer reports whether the file open at fd has other kept xattrs
// than want records (false when want records none: nothing to restore).
func xattrsDiffer(fd int, want record.FileState) (bool, error) {
	if want.Xattrs == nil {
		return false, nil
	}
	have, err := readXattrs(fd)
	if err != nil {
		return false, err
	}
	return !xattrsEqual(have, restorable(want, fd)), nil
}

// xattrsEqual reports whether a and b hold the same names and values.
func xattrsEqual(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// restorable is the part of want's xattrs a rewind may put on the file open
// at fd: the namespaces this daemon keeps, and a capability only where the
// file has the owner it was recorded with and its directory gives no other
// user more than its own (privileged).
func restorable(want record.FileState, fd int) map[string][]byte {
	root := isRoot()
	out := make(map[string][]byte, len(want.Xattrs))
	for name, v := range want.Xattrs {
		if !record.XattrKept(name, root) {
			continue
		}
		if name == record.XattrCapability && !ownerKept(want, fd) {
			continue
		}
		out[name] = v
	}
	return out
}

// ownerKept reports whether the file open at fd has the owner want records
// (a capability, like a setuid bit, is its owner's privilege).
func ownerKept(want record.FileState, fd int) bool {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return false
	}
	return want.UID != nil && *want.UID == st.Uid
}

// restoreXattrs gives the file open at fd exactly the kept xattrs of want
// that it may have (restorable): it removes the others and sets those that
// differ, the capability last. Called after the file has its owner and
// mode, since a chown clears a capability. A filesystem without xattrs,
// or a name the daemon may not set, is left as it is.
func restoreXattrs(fd int, want record.FileState) error {
	if want.Xattrs == nil {
		return nil
	}
	have, err := readXattrs(fd)
	if err != nil {
		return err
	}
	wantX := restorable(want, fd)
	for name := range have {
		if _, ok := wantX[name]; ok {
			continue
		}
		if err := unix.Removexattr(procFd(fd), name); err != nil && !errors.Is(err, unix.ENODATA) && !noXattrs(err) && !cannot(err) {
			return fmt.Errorf("remove xattr %q: %w", name, err)
		}
	}
	names := make([]string, 0, len(wantX))
	for name := range wantX {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		// The capability last: nothing after it may clear it.
		if c := boolCmp(a == record.XattrCapability, b == record.XattrCapability); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	for _, name := range names {
		if v, ok := have[name]; ok && bytes.Equal(v, wantX[name]) {
			continue
		}
		if err := unix.Setxattr(procFd(fd), name, wantX[name], 0); err != nil && !noXattrs(err) && !cannot(err) {
			return fmt.Errorf("set xattr %q: %w", name, err)
		}
	}
	return nil
}

// boolCmp orders false before true.
func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// Xattrs is a file's or directory's kept xattrs at a state: those recorded,
// or for a live one those it has now, read as a capture reads them. nil
// means unknown (a record from before xattrs were kept, a file the daemon
// may not read, a symlink, a path that does not exist): nothing to compare.
func (e *Engine) Xattrs(ent Entry) (map[string][]byte, error) {
	if !ent.Exists || ent.State.Skipped || (ent.State.Kind != record.KindFile && ent.State.Kind != record.KindDir) {
		return nil, nil
	}
	if !ent.Live {
		return ent.State.Xattrs, nil
	}
	xs, err := e.ws.xattrs(ent.State.Path)
	if isMissing(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rewind: xattrs of %q: %w", ent.State.Path, err)
	}
	return xs, nil
}

// XattrsDiffer reports whether two sets of kept xattrs are known and
// differ (nil is unknown) in the names this process may read: a record a
// root daemon made holds trusted.* names an ordinary user never reads.
func XattrsDiffer(a, b map[string][]byte) bool {
	if a == nil || b == nil {
		return false
	}
	root := isRoot()
	seen := 0
	for k, v := range a {
		if !record.XattrKept(k, root) {
			continue
		}
		w, ok := b[k]
		if !ok || !bytes.Equal(v, w) {
			return true
		}
		seen++
	}
	n := 0
	for k := range b {
		if record.XattrKept(k, root) {
			n++
		}
	}
	return n != seen
}

// XattrKept reports whether this process reads and compares xattr name.
func XattrKept(name string) bool { return record.XattrKept(name, isRoot()) }

// sameXattrs reports whether two states of one path have the same kept
// xattrs, or either is unknown.
func (e *Engine) sameXattrs(a, b Entry) (bool, error) {
	xa, err := e.Xattrs(a)
	if err != nil || xa == nil {
		return true, err
	}
	xb, err := e.Xattrs(b)
	if err != nil {
		return true, err
	}
	return !XattrsDiffer(xa, xb), nil
}
