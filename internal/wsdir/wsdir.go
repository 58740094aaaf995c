package wsdir

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrUnclean is returned for a path that is not a clean workspace path.
var ErrUnclean = errors.New("wsdir: not a clean workspace path")

// Resolve is how every path is resolved beneath the root.
const Resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// maxChunk bounds the path given to one openat2 call: half of PATH_MAX, so
// a chunk ending at a name of NAME_MAX bytes still fits.
const maxChunk = 2048

// Dir is the workspace root: a directory descriptor that the caller opened
// (O_RDONLY|O_DIRECTORY) and keeps open while the Dir is used.
type Dir struct {
	fd int
}

// New returns the Dir of root descriptor fd.
func New(fd int) Dir { return Dir{fd: fd} }

// Fd is the root's descriptor. It stays the caller's.
func (d Dir) Fd() int { return d.fd }

// Clean reports ErrUnclean, naming p, unless p is a clean workspace path.
func Clean(p string) error {
	if p == "" {
		return nil
	}
	for c := range strings.SplitSeq(p, "/") {
		if c == "" || c == "." || c == ".." {
			return fmt.Errorf("%w: %q", ErrUnclean, p)
		}
	}
	return nil
}

// Open opens workspace path p with flags (O_CLOEXEC is added); "" opens the
// root again. The descriptor is the caller's to close.
func (d Dir) Open(p string, flags int) (int, error) {
	if err := Clean(p); err != nil {
		return -1, err
	}
	if p == "" {
		p = "."
	}
	fd, owned := d.fd, -1
	for len(p) > maxChunk {
		i := strings.LastIndexByte(p[:maxChunk+1], '/')
		if i <= 0 {
			// A name longer than a chunk: no filesystem has one, so
			// let the kernel say ENAMETOOLONG.
			break
		}
		next, err := openat2(fd, p[:i], unix.O_PATH|unix.O_DIRECTORY)
		if owned >= 0 {
			unix.Close(owned)
		}
		if err != nil {
			return -1, err
		}
		fd, owned, p = next, next, p[i+1:]
	}
	res, err := openat2(fd, p, flags)
	if owned >= 0 {
		unix.Close(owned)
	}
	return res, err
}

// WithParent opens p's parent directory (O_PATH) and calls fn with it and
// p's last name, for the *at calls that act on that name without following
// it. The root itself has no parent: ErrUnclean.
func (d Dir) WithParent(p string, fn func(dirfd int, name string) error) error {
	if p == "" {
		return fmt.Errorf("%w: the workspace root has no parent", ErrUnclean)
	}
	if err := Clean(p); err != nil {
		return err
	}
	dir, name := Split(p)
	if dir == "" {
		return fn(d.fd, name)
	}
	fd, err := d.Open(dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return fn(fd, name)
}

// openat2 opens p beneath dirfd, retrying EINTR and EAGAIN.
func openat2(dirfd int, p string, flags int) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: Resolve}
	for {
		fd, err := unix.Openat2(dirfd, p, &how)
		if err == unix.EINTR || err == unix.EAGAIN {
			// EAGAIN: a rename or mount raced RESOLVE_BENEATH's check.
			continue
		}
		return fd, err
	}
}

// Join is the workspace path of name in directory dir.
func Join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// Split is the inverse of Join: the parent directory ("" for the root) and
// the last name.
func Split(p string) (dir, name string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", p
	}
	return p[:i], p[i+1:]
}
