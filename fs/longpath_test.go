package fs

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

// chainName is the name of every directory of the deep chain.
var chainName = strings.Repeat("d", 200)

// walkAt opens the chain's directory depth levels below dirfd, one
// component at a time, as a process that chdirs down would: no call sees
// more than one name.
func walkAt(t *testing.T, dirfd, depth int) int {
	t.Helper()
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range depth {
		next, err := unix.Openat(fd, chainName, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatalf("open level %d of the chain: %v", i+1, err)
		}
		fd = next
	}
	return fd
}

// snapAt reads the tree under dirfd the way snapshot does, with *at calls
// only. Directories named chainName are not entered.
func snapAt(t *testing.T, dirfd int) testsupport.Tree {
	t.Helper()
	out := testsupport.Tree{}
	var walk func(fd int, prefix string)
	walk = func(fd int, prefix string) {
		dup, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		f := os.NewFile(uintptr(dup), "dir")
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			t.Fatalf("readdir %q: %v", prefix, err)
		}
		for _, name := range names {
			if name == chainName {
				continue
			}
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				t.Fatalf("stat %s%s: %v", prefix, name, err)
			}
			n := testsupport.Entry{Mode: fs.FileMode(st.Mode & 0o777)}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFREG:
				n.Kind = "file"
				cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
				if err != nil {
					t.Fatalf("open %s%s: %v", prefix, name, err)
				}
				b := make([]byte, 256)
				k, _ := unix.Read(cfd, b)
				unix.Close(cfd)
				n.Content = string(b[:max(k, 0)])
			case unix.S_IFLNK:
				n.Kind = "symlink"
				b := make([]byte, 256)
				k, err := unix.Readlinkat(fd, name, b)
				if err != nil {
					t.Fatalf("readlink %s%s: %v", prefix, name, err)
				}
				n.Content = string(b[:k])
			case unix.S_IFDIR:
				n.Kind = "dir"
				sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err != nil {
					t.Fatalf("open %s%s: %v", prefix, name, err)
				}
				walk(sub, prefix+name+"/")
				unix.Close(sub)
			default:
				n.Kind = "other"
			}
			out[prefix+name] = n
		}
	}
	walk(dirfd, "")
	return out
}

// procAt is the /proc path of name in the directory open at fd: the kernel
// resolves it one name at a time below fd, so calls that take a path
// (truncate, statfs, the xattr calls) reach a node however deep it is.
func procAt(fd int, name string) string {
	p := fmt.Sprintf("/proc/self/fd/%d", fd)
	if name != "" {
		p += "/" + name
	}
	return p
}

// TestPathsPastPathMax: every operation that names a node works on nodes
// whose workspace path is 4090 bytes long and on nodes more than twice
// PATH_MAX deep (the kernel hands the daemon such nodes: a process that
// chdirs down, or uses *at calls, never names the whole path); their
// before-states are captured, @T shows them, and a rewind restores them.
// (On 66d441b each of these failed with ENAMETOOLONG once the node's path
// reached PATH_MAX.)
func TestPathsPastPathMax(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	root, err := unix.Open(mp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(root)

	// The chain: 45 levels of 200-byte names, built one mkdirat at a time.
	const levels = 45
	fd := walkAt(t, root, 0)
	for range levels {
		if err := unix.Mkdirat(fd, chainName, 0o755); err != nil {
			t.Fatalf("mkdirat: %v", err)
		}
		next, err := unix.Openat(fd, chainName, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)

	// Two places: names in the directory 20 levels down (a 4019-byte
	// path) padded so that the file "f" has a 4090-byte path, and names
	// 45 levels down (9044 bytes, far past PATH_MAX).
	type place struct {
		what  string
		depth int
		pad   string
	}
	places := []place{
		{"4090 bytes", 20, strings.Repeat("p", 4090-(20*201-1)-2)},
		{"past PATH_MAX", levels, ""},
	}
	if n := len(strings.Repeat(chainName+"/", 20)) + len(places[0].pad) + 1; n != 4090 {
		t.Fatalf("the 4090-byte path is %d bytes", n)
	}
	created := map[string]testsupport.Tree{}
	for _, pl := range places {
		d := walkAt(t, root, pl.depth)
		n := func(s string) string { return pl.pad + s }
		for name, content := range map[string]string{"f": "before f", "t": "before t", "m": "m", "o": "o", "u": "u", "x": "x", "gone": "gone", "ren": "ren", "src": "src"} {
			cfd, err := unix.Openat(d, n(name), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			if err != nil {
				t.Fatalf("%s: create %s: %v", pl.what, name, err)
			}
			unix.Write(cfd, []byte(content))
			unix.Close(cfd)
		}
		for _, name := range []string{"rmd", "sd"} {
			if err := unix.Mkdirat(d, n(name), 0o755); err != nil {
				t.Fatalf("%s: mkdir %s: %v", pl.what, name, err)
			}
		}
		cfd, err := unix.Openat(d, n("sd")+"/in", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			t.Fatalf("%s: create sd/in: %v", pl.what, err)
		}
		unix.Write(cfd, []byte("in"))
		unix.Close(cfd)
		if err := unix.Symlinkat("target-l", d, n("l")); err != nil {
			t.Fatalf("%s: symlink: %v", pl.what, err)
		}
		created[pl.what] = snapAt(t, d)
		unix.Close(d)
	}

	T := stepT(t, mp, "deep")
	mtime := time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)
	for _, pl := range places {
		d := walkAt(t, root, pl.depth)
		n := func(s string) string { return pl.pad + s }
		check := func(op string, err error) {
			t.Helper()
			if err != nil {
				t.Errorf("%s: %s: %v", pl.what, op, err)
			}
		}
		// open for writing, with O_TRUNC
		ofd, err := unix.Openat(d, n("f"), unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
		check("open", err)
		if err == nil {
			_, err = unix.Write(ofd, []byte("after f"))
			check("write", err)
			unix.Close(ofd)
		}
		check("truncate", unix.Truncate(procAt(d, n("t")), 2))
		check("chmod", unix.Fchmodat(d, n("m"), 0o600, 0))
		check("chown", unix.Fchownat(d, n("o"), 65534, 65534, 0))
		ts, _ := unix.TimeToTimespec(mtime)
		check("utimens", unix.UtimesNanoAt(d, n("u"), []unix.Timespec{ts, ts}, 0))
		var st unix.Stat_t
		if err := unix.Fstatat(d, n("u"), &st, 0); err != nil || !time.Unix(st.Mtim.Unix()).Equal(mtime) {
			t.Errorf("%s: mtime after utimens = %v (%v), want %v", pl.what, time.Unix(st.Mtim.Unix()).UTC(), err, mtime)
		}
		buf := make([]byte, 64)
		k, err := unix.Readlinkat(d, n("l"), buf)
		if check("readlink", err); err == nil && string(buf[:k]) != "target-l" {
			t.Errorf("%s: readlink = %q, want target-l", pl.what, buf[:k])
		}
		x := procAt(d, n("x"))
		check("setxattr", unix.Setxattr(x, "user.zerofs", []byte("v"), 0))
		k, err = unix.Getxattr(x, "user.zerofs", buf)
		if check("getxattr", err); err == nil && string(buf[:k]) != "v" {
			t.Errorf("%s: getxattr = %q, want v", pl.what, buf[:k])
		}
		k, err = unix.Listxattr(x, buf)
		if check("listxattr", err); err == nil && !strings.Contains(string(buf[:k]), "user.zerofs") {
			t.Errorf("%s: listxattr = %q, want user.zerofs in it", pl.what, buf[:k])
		}
		check("removexattr", unix.Removexattr(x, "user.zerofs"))
		var sfs unix.Statfs_t
		check("statfs", unix.Statfs(procAt(d, ""), &sfs))
		check("unlink", unix.Unlinkat(d, n("gone"), 0))
		check("rmdir", unix.Unlinkat(d, n("rmd"), unix.AT_REMOVEDIR))
		check("rename", unix.Renameat(d, n("ren"), d, n("ren2")))
		check("rename a directory", unix.Renameat(d, n("sd"), d, n("sd2")))
		check("link", unix.Linkat(d, n("src"), d, n("lnk"), 0))
		check("mkdir", unix.Mkdirat(d, n("nd"), 0o755))
		check("symlink", unix.Symlinkat("tgt", d, n("ns")))
		cfd, err := unix.Openat(d, n("nf"), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		check("create", err)
		if err == nil {
			unix.Close(cfd)
		}
		// opendir and readdir
		got := snapAt(t, d)
		for _, name := range []string{"f", "ren2", "sd2", "sd2/in", "lnk", "nd", "ns", "nf"} {
			if _, ok := got[n(name)]; !ok {
				t.Errorf("%s: readdir after the changes has no %s", pl.what, name)
			}
		}
		if g := got[n("f")].Content; g != "after f" {
			t.Errorf("%s: f = %q after the write, want after f", pl.what, g)
		}
		unix.Close(d)
	}

	// @T shows every path as it was, deep as it is.
	vfd, err := unix.Openat(root, "@"+fmt.Sprint(T), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(vfd)
	checkBefore := func(what string, base int) {
		t.Helper()
		for _, pl := range places {
			d := walkAt(t, base, pl.depth)
			if diff := diffTrees(snapAt(t, d), created[pl.what]); diff != "" {
				t.Errorf("%s, %s:\n%s", what, pl.what, diff)
			}
			var st unix.Stat_t
			if err := unix.Fstatat(d, pl.pad+"o", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Uid != 0 {
				t.Errorf("%s, %s: o owned by %d (%v), want root's", what, pl.what, st.Uid, err)
			}
			unix.Close(d)
		}
	}
	checkBefore(fmt.Sprintf("@%d", T), vfd)

	rewindT(t, mp, T)
	checkBefore("after the rewind", root)
	var rep struct {
		Report record.Report `json:"report"`
	}
	readJSON(t, ctlRead(t, mp, "rewind"), &rep)
	if len(rep.Report.Skipped) != 0 {
		t.Errorf("the rewind skipped %v", rep.Report.Skipped)
	}
}
