package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// fuseMounted reports whether dir is the mount point of a FUSE mount, from
// /proc/self/mountinfo (which, unlike stat, never blocks on a dead daemon).
func fuseMounted(dir string) (bool, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false, err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		mp, fstype, ok := parseMountinfo(sc.Text())
		if ok && mp == abs && (fstype == "fuse" || strings.HasPrefix(fstype, "fuse.")) {
			return true, nil
		}
	}
	return false, sc.Err()
}

// parseMountinfo extracts the mount point and filesystem type from one
// line of /proc/self/mountinfo:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
func parseMountinfo(line string) (mountpoint, fstype string, ok bool) {
	fields := strings.Fields(line)
	sep := -1
	for i, f := range fields {
		if f == "-" && i >= 6 {
			sep = i
			break
		}
	}
	if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
		return "", "", false
	}
	return unescapeOctal(fields[4]), fields[sep+1], true
}

// unescapeOctal undoes the kernel's \ooo escapes of spaces, tabs, newlines
// and backslashes in mountinfo paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
