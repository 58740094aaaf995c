package history

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

func (h *engineSource) Xattrs(path string, t record.Seq) (map[string][]byte, error) {
	ent, err := h.entry(path, t)
	if err != nil {
		return nil, err
	}
	return h.eng.Xattrs(ent)
}

func (m *mountSource) Xattrs(path string, t record.Seq) (map[string][]byte, error) {
	var xs map[string][]byte
	err := m.at(path, t, func(dirfd int, name string) error {
		fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		if k := st.Mode & unix.S_IFMT; k != unix.S_IFREG && k != unix.S_IFDIR {
			return nil
		}
		xs, err = rewind.ReadXattrs(fd)
		return err
	})
	if missing(err) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		return nil, nil
	}
	return xs, err
}

// xattrChanges names, sorted, the xattrs that differ between before and
// after (added, removed or changed), when both are known.
func xattrChanges(before, after map[string][]byte) []string {
	if !rewind.XattrsDiffer(before, after) {
		return nil
	}
	var names []string
	for k, v := range before {
		if w, ok := after[k]; rewind.XattrKept(k) && (!ok || string(v) != string(w)) {
			names = append(names, k)
		}
	}
	for k := range after {
		if _, ok := before[k]; rewind.XattrKept(k) && !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}

// The POSIX ACLs' xattr names, and their on-disk tags.
const (
	aclAccess  = "system.posix_acl_access"
	aclDefault = "system.posix_acl_default"
)

// XattrName is how a change names an xattr: the ACLs by what they are.
func XattrName(name string) string {
	switch name {
	case aclAccess:
		return "ACL"
	case aclDefault:
		return "default ACL"
	}
	return quote.Name(name)
}

// xattrValue is an xattr's value for a diff: an ACL as getfacl's short form
// ("u::rw-,u:65534:rw-,g::r--,m::rw-,o::r--"), text quoted when it needs
// it, anything else in hex.
func xattrValue(name string, v []byte) string {
	if v == nil {
		return "(none)"
	}
	if name == aclAccess || name == aclDefault {
		if s, ok := aclText(v); ok {
			return s
		}
	}
	if utf8.Valid(v) && !strings.ContainsRune(string(v), 0) {
		return quote.Name(string(v))
	}
	return fmt.Sprintf("0x%x", v)
}

// aclText decodes a POSIX ACL xattr (version 2: 4 bytes of header, then
// entries of tag u16, perm u16, id u32, little-endian).
func aclText(v []byte) (string, bool) {
	if len(v) < 4 || binary.LittleEndian.Uint32(v) != 2 || (len(v)-4)%8 != 0 {
		return "", false
	}
	var parts []string
	for e := v[4:]; len(e) > 0; e = e[8:] {
		tag, perm, id := binary.LittleEndian.Uint16(e), binary.LittleEndian.Uint16(e[2:]), binary.LittleEndian.Uint32(e[4:])
		rwx := []byte("---")
		for i, c := range "rwx" {
			if perm&(4>>i) != 0 {
				rwx[i] = byte(c)
			}
		}
		var who string
		switch tag {
		case 0x01:
			who = "u:"
		case 0x02:
			who = fmt.Sprintf("u:%d", id)
		case 0x04:
			who = "g:"
		case 0x08:
			who = fmt.Sprintf("g:%d", id)
		case 0x10:
			who = "m:"
		case 0x20:
			who = "o:"
		default:
			return "", false
		}
		parts = append(parts, who+":"+string(rwx))
	}
	return strings.Join(parts, ","), true
}

// xattrLines are a diff's lines for the xattrs that differ between a and b,
// one per name: "xattr user.k \"v0\" -> \"v1\"", "ACL u::rw-,... -> ...".
func xattrLines(a, b map[string][]byte) string {
	names := xattrChanges(a, b)
	if len(names) == 0 {
		return ""
	}
	var out strings.Builder
	for _, n := range names {
		what := XattrName(n)
		if n != aclAccess && n != aclDefault {
			what = "xattr " + what
		}
		fmt.Fprintf(&out, "%s %s -> %s\n", what, xattrValue(n, a[n]), xattrValue(n, b[n]))
	}
	return out.String()
}
