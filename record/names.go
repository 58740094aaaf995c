package record

import (
	"errors"
	"strconv"
	"strings"
)

// The names a workspace reserves, the store's own names, and the paths a
// record may name: what every record read from the store is checked
// against (damage.go).

// Errors of a path a request or record names (errors.Is).
var (
	// ErrReserved: a name reserved at the workspace root.
	ErrReserved = errors.New("rewind: reserved name")
	// ErrUnsafePath: a path that is not clean and relative, or that
	// would lead outside the workspace.
	ErrUnsafePath = errors.New("rewind: unsafe path")
)

// StoreName is the store's default directory name in the workspace root.
const StoreName = ".zero"

// LogName is the event log's file name in the store.
const LogName = "events.jsonl"

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
	// Component by component without splitting (no allocation: every path
	// of a snapshot is checked at load).
	for i, rest, more := 0, p, true; more; i++ {
		var c string
		c, rest, more = strings.Cut(rest, "/")
		if c == "" || c == "." || c == ".." {
			return ErrUnsafePath
		}
		if i == 0 && IsReserved(c) {
			return ErrReserved
		}
	}
	return nil
}

// IsBlobID reports whether s names a blob as a record does: its sha256 in
// 64 lower-case hex digits (SPEC, Words).
func IsBlobID(s string) bool {
	if len(s) != 64 {
		return false
	}
	return isLowerHex(s)
}

// StashPrefix begins the name of every stash: a removed file linked into
// the store unread, which a checkpoint names by it (FileState.Kept).
const StashPrefix = "p-"

// IsStashName reports whether name is a stash's name: StashPrefix and 32
// lower-case hex digits.
func IsStashName(name string) bool {
	rest, ok := strings.CutPrefix(name, StashPrefix)
	return ok && len(rest) == 32 && isLowerHex(rest)
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
