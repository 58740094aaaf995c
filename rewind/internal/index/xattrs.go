package index

import (
	"fmt"
	"strings"
)

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
