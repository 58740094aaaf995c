package replicate

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/zerofs/zerofs/record"
)

// A plain replica (no replica key) is not authenticated: anyone who can
// write the bucket can forge a base or a segment that hashes to its name.
// So a restore from one takes no privilege from it unless the person asks
// (RestoreOptions.SameOwner, `restore --same-owner`), as tar does for a
// user who is not root, and grants nobody but the restoring user access:
// every path it writes, and every before-state of the history it writes
// into the new store (a later rewind restores those), is the restoring
// user's, without setuid and setgid bits, without the group and other
// permissions the user's umask withholds (tar's --no-same-permissions),
// without POSIX ACLs (an entry may name any user or group) and with no
// xattr but user.* (security.capability is privilege; trusted.* and
// security.* are the system's). A sealed replica's objects authenticate
// with the key, so they are kept as they are.

// capabilityXattr is the xattr of a file capability: privilege, like a
// setuid bit.
const capabilityXattr = "security.capability"

// The POSIX ACLs' xattrs: an entry may give any user or group access.
const (
	aclAccessXattr  = "system.posix_acl_access"
	aclDefaultXattr = "system.posix_acl_default"
)

// Ownership is what a restore from a plain replica did not take from it:
// the paths (of the written tree and of the restored history's
// before-states) whose owner was another user's and became the restoring
// user's, whose setuid or setgid bit was dropped, and whose file
// capability was dropped, whose group or other permissions the umask
// (Umask) withheld, whose ACLs were dropped, and whose other xattrs
// (trusted.*, security.*) were dropped. Each sorted, each path once.
type Ownership struct {
	Owners       []string `json:"owners"`
	SetID        []string `json:"setid"`
	Capabilities []string `json:"capabilities"`
	Modes        []string `json:"modes"`
	ACLs         []string `json:"acls"`
	Xattrs       []string `json:"xattrs"`
	// Umask is the restoring user's umask, whose group and other bits
	// the paths' modes were masked with.
	Umask uint32 `json:"umask"`
}

// Empty says nothing was dropped.
func (o Ownership) Empty() bool {
	return len(o.Owners) == 0 && len(o.SetID) == 0 && len(o.Capabilities) == 0 &&
		len(o.Modes) == 0 && len(o.ACLs) == 0 && len(o.Xattrs) == 0
}

// disowner makes the states a plain replica gives the restoring user's.
type disowner struct {
	uid, gid uint32
	// mask is the group and other bits of the umask.
	mask                                    uint32
	owners, setid, cap, modes, acls, xattrs map[string]bool
}

func newDisowner() *disowner {
	return &disowner{uid: uint32(os.Geteuid()), gid: uint32(os.Getegid()), mask: umask() & 0o077,
		owners: map[string]bool{}, setid: map[string]bool{}, cap: map[string]bool{},
		modes: map[string]bool{}, acls: map[string]bool{}, xattrs: map[string]bool{}}
}

// umask is this process's umask, read from /proc/self/status (setting it
// to read it would race with files other goroutines create); 022 when
// the kernel does not say.
func umask() uint32 {
	data, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for line := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return uint32(n)
				}
			}
		}
	}
	return 0o022
}

// state makes one path's state the restoring user's, noting what changed.
// A symlink's mode means nothing, and an absent path's is none.
func (d *disowner) state(path string, kind record.Kind, uid, gid **uint32, mode *uint32, xattrs map[string][]byte) map[string][]byte {
	if *uid != nil && **uid != d.uid || *gid != nil && **gid != d.gid {
		d.owners[path] = true
	}
	if *uid != nil {
		u := d.uid
		*uid = &u
	}
	if *gid != nil {
		g := d.gid
		*gid = &g
	}
	if *mode&0o6000 != 0 {
		d.setid[path] = true
		*mode &^= 0o6000
	}
	if kind != record.KindSymlink && *mode&d.mask != 0 {
		d.modes[path] = true
		*mode &^= d.mask
	}
	cloned := false
	for name := range xattrs {
		switch {
		case strings.HasPrefix(name, "user."):
			continue
		case name == capabilityXattr:
			d.cap[path] = true
		case name == aclAccessXattr || name == aclDefaultXattr:
			d.acls[path] = true
		default:
			d.xattrs[path] = true
		}
		if !cloned {
			xattrs, cloned = maps.Clone(xattrs), true
		}
		delete(xattrs, name)
	}
	return xattrs
}

// entry disowns a base's entry.
func (d *disowner) entry(e *BaseEntry) {
	e.Xattrs = d.state(e.name(), e.Kind, &e.UID, &e.GID, &e.Mode, e.Xattrs)
}

// event disowns a checkpoint's before-states: the line (an event of
// events.jsonl) as the new store's log is to hold it. Other events hold
// no owner and are returned as they are. The checkpoint's payload is
// changed only in the keys of its records that say owner, mode and
// xattrs: everything else in it is kept as it was.
func (d *disowner) event(ev record.Event, line []byte) ([]byte, error) {
	if ev.Type != record.TypeCheckpoint {
		return line, nil
	}
	var cp map[string]json.RawMessage
	if err := json.Unmarshal(ev.Payload, &cp); err != nil {
		return nil, err
	}
	var files []map[string]json.RawMessage
	if err := json.Unmarshal(cp["files"], &files); err != nil {
		return nil, err
	}
	changed := false
	for _, f := range files {
		var fs record.FileState
		raw, err := json.Marshal(f)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &fs); err != nil {
			return nil, err
		}
		before := fs
		if fs.Absent {
			continue
		}
		xs := d.state(fs.Path, fs.Kind, &fs.UID, &fs.GID, &fs.Mode, fs.Xattrs)
		same := fs.Mode == before.Mode && len(xs) == len(before.Xattrs) &&
			ptrEq(fs.UID, before.UID) && ptrEq(fs.GID, before.GID)
		if same {
			continue
		}
		changed = true
		set := func(k string, v any) error {
			b, err := json.Marshal(v)
			f[k] = b
			return err
		}
		if err := set("mode", fs.Mode); err != nil {
			return nil, err
		}
		if fs.UID != nil {
			set("uid", *fs.UID)
		}
		if fs.GID != nil {
			set("gid", *fs.GID)
		}
		if before.Xattrs != nil {
			set("xattrs", xs)
		}
	}
	if !changed {
		return line, nil
	}
	b, err := json.Marshal(files)
	if err != nil {
		return nil, err
	}
	cp["files"] = b
	if ev.Payload, err = json.Marshal(cp); err != nil {
		return nil, err
	}
	out, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

func ptrEq(a, b *uint32) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

// result is what was dropped.
func (d *disowner) result() Ownership {
	list := func(m map[string]bool) []string {
		out := make([]string, 0, len(m))
		for p := range m {
			out = append(out, p)
		}
		slices.Sort(out)
		return out
	}
	return Ownership{Owners: list(d.owners), SetID: list(d.setid), Capabilities: list(d.cap),
		Modes: list(d.modes), ACLs: list(d.acls), Xattrs: list(d.xattrs), Umask: d.mask}
}
