package main

import "testing"

func TestParseMountinfo(t *testing.T) {
	for _, tc := range []struct{ line, mp, fstype string }{
		{`36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`, "/mnt2", "ext3"},
		{`80 25 0:48 / /tmp/my\040ws rw,nosuid,nodev,relatime shared:1 - fuse.zerofs zerofs rw,user_id=0`, "/tmp/my ws", "fuse.zerofs"},
		{`81 25 0:49 / /x rw - fuse zerofs rw`, "/x", "fuse"},
	} {
		mp, fstype, ok := parseMountinfo(tc.line)
		if !ok || mp != tc.mp || fstype != tc.fstype {
			t.Errorf("parseMountinfo(%q) = %q, %q, %v; want %q, %q", tc.line, mp, fstype, ok, tc.mp, tc.fstype)
		}
	}
	if _, _, ok := parseMountinfo("garbage"); ok {
		t.Error("parseMountinfo(garbage) ok")
	}
}
