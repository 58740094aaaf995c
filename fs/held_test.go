package fs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// An O_TMPFILE file is in no directory until linkat(2) names it; the new
// name is captured as absent before, so a rewind to before the link removes
// it. One opened with O_EXCL can never be linked.
func TestTmpfileLink(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	T := stepT(t, mp, "tmpfile")
	fd, err := unix.Open(mp, unix.O_TMPFILE|unix.O_RDWR, 0o640)
	if m.fs.noOpen {
		// Without OPEN a tmpfile's handle would never be released: the
		// mount offers no O_TMPFILE (noopen.go).
		if err != unix.EOPNOTSUPP {
			t.Fatalf("open O_TMPFILE without OPEN: %v, want EOPNOTSUPP", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("open O_TMPFILE: %v", err)
	}
	defer unix.Close(fd)
	if _, err := unix.Pwrite(fd, []byte("made in the dark\n"), 0); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(mp); len(ents) != 0 {
		t.Errorf("the mount lists %d names before the link, want none", len(ents))
	}
	if err := unix.Linkat(unix.AT_FDCWD, procPath(fd), unix.AT_FDCWD, filepath.Join(mp, "named"), unix.AT_SYMLINK_FOLLOW); err != nil {
		t.Fatalf("linkat: %v", err)
	}
	if got := readFile(t, filepath.Join(mp, "named")); got != "made in the dark\n" {
		t.Errorf("named: got %q", got)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Nlink != 1 || st.Mode&0o777 != 0o640 {
		t.Errorf("fstat after link: nlink %d, mode %o, err %v; want 1, 640", st.Nlink, st.Mode&0o777, err)
	}
	_, err = os.Lstat(filepath.Join(view(mp, T), "named"))
	wantErrno(t, "@T/named", err, syscall.ENOENT)
	rewindT(t, mp, T)
	_, err = os.Lstat(filepath.Join(mp, "named"))
	wantErrno(t, "named after rewinding to before the link", err, syscall.ENOENT)

	excl, err := unix.Open(mp, unix.O_TMPFILE|unix.O_RDWR|unix.O_EXCL, 0o600)
	if err != nil {
		t.Fatalf("open O_TMPFILE|O_EXCL: %v", err)
	}
	defer unix.Close(excl)
	err = unix.Linkat(unix.AT_FDCWD, procPath(excl), unix.AT_FDCWD, filepath.Join(mp, "never"), unix.AT_SYMLINK_FOLLOW)
	wantErrno(t, "linkat of an O_EXCL tmpfile", err, syscall.ENOENT)
}

// fstat of an open directory renamed over (so it has no name any more)
// still answers, through the directory's own descriptor.
func TestStatOpenDirRenamedOver(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	for _, d := range []string{"over", "keep"} {
		if err := os.Mkdir(filepath.Join(mp, d), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(filepath.Join(mp, "keep"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var before unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &before); err != nil {
		t.Fatal(err)
	}
	// syscall.Rename: os.Rename refuses an existing directory as target.
	if err := syscall.Rename(filepath.Join(mp, "over"), filepath.Join(mp, "keep")); err != nil {
		t.Fatal(err)
	}
	var after unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &after); err != nil {
		t.Fatalf("fstat of the renamed-over directory: %v", err)
	}
	if after.Ino != before.Ino || after.Mode != before.Mode || after.Nlink != 0 && after.Nlink != 1 {
		t.Errorf("fstat: ino %d mode %o nlink %d; want ino %d mode %o, nlink 0 or 1", after.Ino, after.Mode, after.Nlink, before.Ino, before.Mode)
	}
}

// fstat of an open directory that was removed answers as on a local file
// system (nlink 0), and so does stat of a process's working directory
// removed under it; reading the removed directory fails with ENOENT, as
// getdents(2) of a dead directory does.
func TestStatOpenDirRemoved(t *testing.T) {
	m := mountT(t, Options{})
	dir := filepath.Join(m.Mountpoint(), "gone")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var before unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &before); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	var after unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &after); err != nil {
		t.Fatalf("fstat of the removed directory: %v", err)
	}
	if after.Ino != before.Ino || after.Mode != before.Mode || after.Nlink != 0 {
		t.Errorf("fstat: ino %d mode %o nlink %d; want ino %d mode %o nlink 0", after.Ino, after.Mode, after.Nlink, before.Ino, before.Mode)
	}
	_, err = f.Readdirnames(-1)
	wantErrno(t, "reading the removed directory", err, syscall.ENOENT)
}
