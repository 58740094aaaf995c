package replicate

import (
	"encoding/json"
	"maps"
	"os"
	"slices"

	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/rewind"
)

// A plain replica (no replica key) is not authenticated: anyone who can
// write the bucket can forge a base or a segment that hashes to its name.
// So a restore from one takes no privilege from it unless the person asks
// (RestoreOptions.SameOwner, `restore --same-owner`), as tar does for a
// user who is not root: every path it writes, and every before-state of
// the history it writes into the new store (a later rewind restores
// those), is the restoring user's, without setuid and setgid bits and
// without a file capability (security.capability). A sealed replica's
// objects authenticate with the key, so its owners are kept.

// capabilityXattr is the xattr of a file capability: privilege, like a
// setuid bit.
const capabilityXattr = "security.capability"

// Ownership is what a restore from a plain replica did not take from it:
// the paths (of the written tree and of the restored history's
// before-states) whose owner was another user's and became the restoring
// user's, whose setuid or setgid bit was dropped, and whose file
// capability was dropped. Each sorted, each path once.
type Ownership struct {
	Owners       []string `json:"owners"`
	SetID        []string `json:"setid"`
	Capabilities []string `json:"capabilities"`
}

// Empty says nothing was dropped.
func (o Ownership) Empty() bool {
	return len(o.Owners) == 0 && len(o.SetID) == 0 && len(o.Capabilities) == 0
}

// disowner makes the states a plain replica gives the restoring user's.
type disowner struct {
	uid, gid           uint32
	owners, setid, cap map[string]bool
}

func newDisowner() *disowner {
	return &disowner{uid: uint32(os.Geteuid()), gid: uint32(os.Getegid()),
		owners: map[string]bool{}, setid: map[string]bool{}, cap: map[string]bool{}}
}

// state makes one path's state the restoring user's, noting what changed.
func (d *disowner) state(path string, uid, gid **uint32, mode *uint32, xattrs map[string][]byte) map[string][]byte {
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
	if _, ok := xattrs[capabilityXattr]; ok {
		d.cap[path] = true
		xattrs = maps.Clone(xattrs)
		delete(xattrs, capabilityXattr)
	}
	return xattrs
}

// entry disowns a base's entry.
func (d *disowner) entry(e *BaseEntry) {
	e.Xattrs = d.state(e.name(), &e.UID, &e.GID, &e.Mode, e.Xattrs)
}

// event disowns a checkpoint's before-states: the line (an event of
// events.jsonl) as the new store's log is to hold it. Other events hold
// no owner and are returned as they are. The checkpoint's payload is
// changed only in the keys of its records that say owner, mode and
// xattrs: everything else in it is kept as it was.
func (d *disowner) event(ev eventlog.Event, line []byte) ([]byte, error) {
	if ev.Type != eventlog.TypeCheckpoint {
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
		var fs rewind.FileState
		raw, err := json.Marshal(f)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &fs); err != nil {
			return nil, err
		}
		before := fs
		xs := d.state(fs.Path, &fs.UID, &fs.GID, &fs.Mode, fs.Xattrs)
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
	return Ownership{Owners: list(d.owners), SetID: list(d.setid), Capabilities: list(d.cap)}
}
