package branch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// Options is how a branch is mounted and unmounted.
type Options struct {
	// Exe is the zerofs program that mounts and unmounts a branch's own
	// daemon (default: this program, os.Executable).
	Exe string
	// AllowOther mounts the branch with --allow-other (other users may
	// use it; their permissions still apply).
	AllowOther bool
	// Lazy unmounts a branch that processes still use anyway (umount
	// --lazy).
	Lazy bool
	// Stderr takes what the branch's zerofs mount and umount say.
	Stderr io.Writer
}

// Info is one branch of a workspace.
type Info struct {
	ID  string `json:"id"`
	Dir string `json:"dir"`
	// Base is the workspace's sequence the branch began from.
	Base    record.Seq `json:"base"`
	Created time.Time  `json:"created"`
	// Mounted: a zerofs mount answers at Dir.
	Mounted bool `json:"mounted"`
	// Changed counts the paths its copy-up layer holds (each path it
	// changed, and the directories above them).
	Changed int `json:"changed"`
	// Merged is the sequence of its last merge into the workspace (0:
	// never merged); Unmerged says it changed something since (or ever,
	// when never merged).
	Merged   record.Seq `json:"merged,omitempty"`
	Unmerged bool       `json:"unmerged"`
}

// overlaySource names the overlay mounts this package makes, in the
// mount table.
const overlaySource = "zerofs-branch"

// ErrNeedsMount: a branch reads its base through the workspace's mount.
var ErrNeedsMount = errors.New("branch: the workspace is not mounted (a branch reads its base through the mount's @SEQ/): mount it first")

// UnmergedError refuses to delete a branch that holds changes no merge
// brought in.
type UnmergedError struct{ Info Info }

func (e *UnmergedError) Error() string {
	return fmt.Sprintf("branch %s holds changes not merged into the workspace (%d changed paths): merge it first, or delete it with --force", e.Info.Dir, e.Info.Changed)
}

// Create makes dir a mounted branch of the workspace ws at sequence at
// (history.Now: as it is now), or, when dir is a branch of ws already,
// mounts it again (at must then be history.Now or its base). dir must be
// absolute, outside the workspace, and missing or an empty directory.
func Create(ctx context.Context, ws *history.Workspace, dir string, at record.Seq, opts Options) (Info, error) {
	if !ws.Mounted {
		return Info{}, ErrNeedsMount
	}
	if os.Geteuid() != 0 {
		return Info{}, errors.New("branch: branches need root (each is an overlayfs mount)")
	}
	dir, err := checkDir(ws, dir)
	if err != nil {
		return Info{}, err
	}
	store, err := ws.StoreDir()
	if err != nil {
		return Info{}, err
	}
	recs, err := rewind.ReadBranches(store)
	if err != nil {
		return Info{}, err
	}
	for _, r := range recs {
		if r.Dir == dir {
			if at != history.Now && at != r.Base {
				return Info{}, fmt.Errorf("branch: %s is a branch at %d already", dir, r.Base)
			}
			return mountExisting(ctx, ws, store, r, opts)
		}
	}
	if err := checkEmpty(dir); err != nil {
		return Info{}, err
	}
	req := &record.BranchRequest{Dir: dir}
	if at != history.Now {
		req.At = &at
	}
	src, err := history.Open(ctx, ws, history.Options{})
	if err != nil {
		return Info{}, err
	}
	rep, err := src.Rewind(ctx, record.Request{Branch: req})
	src.Close()
	if err != nil {
		return Info{}, err
	}
	if rep.Branch == nil {
		return Info{}, errors.New("branch: the daemon did not answer the branch request (is it older than this zerofs?)")
	}
	rec := *rep.Branch
	made := false
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return Info{}, err
		}
		made = true
	}
	info, err := mount(ctx, ws, store, rec, opts)
	if err != nil {
		// Nothing of it stays: its record, and the directory made for it.
		if src, oerr := history.Open(ctx, ws, history.Options{}); oerr == nil {
			src.Rewind(ctx, record.Request{Branch: &record.BranchRequest{Delete: rec.ID}})
			src.Close()
		}
		if made {
			os.Remove(dir)
		}
		return Info{}, err
	}
	return info, nil
}

// mountExisting mounts the branch rec again, after taking off what is
// left at its directory (a dead mount, an overlay over a workspace mount
// that is gone). A branch that is mounted and whole is refused.
func mountExisting(ctx context.Context, ws *history.Workspace, store string, rec record.BranchRecord, opts Options) (Info, error) {
	if live(rec.Dir) && !stale(ws, rec.Dir) {
		return Info{}, fmt.Errorf("branch: %s is mounted already", rec.Dir)
	}
	if err := unmount(rec.Dir, opts); err != nil {
		return Info{}, err
	}
	return mount(ctx, ws, store, rec, opts)
}

// mount mounts the copy-up layer of rec over @BASE/ at its directory,
// then the branch's own zerofs over it.
func mount(ctx context.Context, ws *history.Workspace, store string, rec record.BranchRecord, opts Options) (Info, error) {
	bdir := rewind.BranchDir(store, rec.ID)
	lower := filepath.Join(mountName(ws.Root), "@"+strconv.FormatUint(uint64(rec.Base), 10))
	upper := filepath.Join(bdir, record.BranchUpperName)
	work := filepath.Join(bdir, record.BranchWorkName)
	for _, p := range []string{lower, upper, work, rec.Dir} {
		if strings.ContainsAny(p, ",:\\") {
			return Info{}, fmt.Errorf("branch: %q holds a character overlayfs options cannot carry (',', ':' or '\\')", p)
		}
	}
	// The branch's root is the upper directory's: give it the base's
	// owner and mode.
	var st unix.Stat_t
	if err := unix.Stat(lower, &st); err != nil {
		return Info{}, fmt.Errorf("branch: the workspace's state %d: %w", rec.Base, err)
	}
	if err := os.Lchown(upper, int(st.Uid), int(st.Gid)); err != nil {
		return Info{}, fmt.Errorf("branch: %w", err)
	}
	if err := unix.Chmod(upper, st.Mode&0o7777); err != nil {
		return Info{}, fmt.Errorf("branch: %w", err)
	}
	// No redirects, index or metacopy: a rename of a directory the base
	// holds is EXDEV (mv copies it), and every copied-up file holds its
	// whole content, which is what the merge reads.
	data := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work + ",redirect_dir=off,index=off,metacopy=off"
	if err := unix.Mount(overlaySource, rec.Dir, "overlay", 0, data); err != nil {
		return Info{}, fmt.Errorf("branch: mounting the copy-up layer at %s: %w", rec.Dir, err)
	}
	args := []string{"mount", "--store", filepath.Join(bdir, record.BranchStoreName)}
	if opts.AllowOther {
		args = append(args, "--allow-other")
	}
	args = append(args, rec.Dir)
	if err := run(ctx, opts, args...); err != nil {
		unix.Unmount(rec.Dir, 0)
		return Info{}, fmt.Errorf("branch: mounting %s: %w", rec.Dir, err)
	}
	return info(store, rec)
}

// run runs the zerofs program with args.
func run(ctx context.Context, opts Options, args ...string) error {
	exe := opts.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return err
		}
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir = "/"
	var errb bytes.Buffer
	cmd.Stdout = io.Discard
	cmd.Stderr = &errb
	err := cmd.Run()
	if opts.Stderr != nil && err == nil {
		opts.Stderr.Write(errb.Bytes())
	}
	if err != nil {
		msg := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(errb.String()), "zerofs: "))
		if msg == "" {
			return err
		}
		return errors.New(msg)
	}
	return nil
}

// checkDir makes dir absolute, clean and free of symlinks (the name its
// record keeps, which zerofs merge resolves the same way: Resolve) and
// refuses one inside the workspace (or holding it).
func checkDir(ws *history.Workspace, dir string) (string, error) {
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("branch: %q is not an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	real := resolved(dir)
	dir = real
	for _, w := range []string{ws.Root, resolved(ws.Root)} {
		if inside(dir, w) || inside(real, w) || inside(w, dir) || inside(w, real) {
			return "", fmt.Errorf("branch: %s is inside the workspace %s (or holds it): a branch lives outside it", dir, ws.Root)
		}
	}
	return dir, nil
}

// Resolve is the name a branch at dir (absolute) is recorded by: every
// symlink on the way resolved, as far as the path exists.
func Resolve(dir string) string { return resolved(filepath.Clean(dir)) }

// resolved is p with every symlink resolved, as far as it exists.
func resolved(p string) string {
	rest := ""
	for q := p; ; q = filepath.Dir(q) {
		if r, err := filepath.EvalSymlinks(q); err == nil {
			return filepath.Join(r, rest)
		}
		if q == "/" || q == "." {
			return p
		}
		rest = filepath.Join(filepath.Base(q), rest)
	}
}

func inside(p, w string) bool { return p == w || strings.HasPrefix(p, w+"/") }

// checkEmpty refuses a dir that exists and is not an empty directory.
func checkEmpty(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("branch: %s exists and is not a directory", dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return fmt.Errorf("branch: %s is not empty", dir)
	}
	return nil
}

// List lists the branches of ws, by directory.
func List(ctx context.Context, ws *history.Workspace) ([]Info, error) {
	store, err := ws.StoreDir()
	if err != nil {
		return nil, err
	}
	recs, err := rewind.ReadBranches(store)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(recs))
	for _, r := range recs {
		in, err := info(store, r)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

// Find is the branch of ws at dir.
func Find(ctx context.Context, ws *history.Workspace, dir string) (Info, error) {
	infos, err := List(ctx, ws)
	if err != nil {
		return Info{}, err
	}
	clean := filepath.Clean(dir)
	for _, in := range infos {
		if in.Dir == clean || in.Dir == resolved(clean) {
			return in, nil
		}
	}
	return Info{}, fmt.Errorf("%w: %s", record.ErrNotBranch, dir)
}

// info is what List says of rec.
func info(store string, rec record.BranchRecord) (Info, error) {
	in := Info{ID: rec.ID, Dir: rec.Dir, Base: rec.Base, Created: rec.Created, Mounted: live(rec.Dir)}
	bdir := rewind.BranchDir(store, rec.ID)
	paths, err := rewind.UpperPaths(filepath.Join(bdir, record.BranchUpperName))
	if err != nil {
		return in, err
	}
	in.Changed = len(paths)
	last := lastChange(filepath.Join(bdir, record.BranchStoreName, record.LogName))
	if rec.Merged != nil {
		in.Merged = rec.Merged.Seq // 0: merged with nothing to bring in
		in.Unmerged = in.Changed > 0 && last > rec.Merged.Head
	} else {
		in.Unmerged = in.Changed > 0
	}
	return in, nil
}

// lastChange is the sequence of the last checkpoint or rewind in the log
// at p (0: none, or no log).
func lastChange(p string) record.Seq {
	f, err := os.Open(p)
	if err != nil {
		return 0
	}
	defer f.Close()
	var last record.Seq
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var ev struct {
			Seq  record.Seq `json:"sequence"`
			Type string     `json:"type"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if ev.Type == record.TypeCheckpoint || ev.Type == record.TypeRewind {
			last = ev.Seq
		}
	}
	return last
}

// Delete unmounts the branch of ws at dir and removes it: its copy-up
// layer and its store. A branch holding changes no merge brought in is
// refused (*UnmergedError) unless force.
func Delete(ctx context.Context, ws *history.Workspace, dir string, force bool, opts Options) (Info, error) {
	in, err := Find(ctx, ws, dir)
	if err != nil {
		return Info{}, err
	}
	if in.Unmerged && !force {
		return in, &UnmergedError{Info: in}
	}
	if err := unmount(in.Dir, opts); err != nil {
		return in, err
	}
	src, err := history.Open(ctx, ws, history.Options{})
	if err != nil {
		return in, err
	}
	defer src.Close()
	if _, err := src.Rewind(ctx, record.Request{Branch: &record.BranchRequest{Delete: in.ID}}); err != nil {
		return in, err
	}
	os.Remove(in.Dir) // the empty directory it was mounted at
	in.Mounted = false
	return in, nil
}

// Unmount takes the branch at dir off: its zerofs, then its copy-up
// layer.
func Unmount(ctx context.Context, dir string, opts Options) error { return unmount(dir, opts) }

// UnmountAll unmounts every mounted branch of ws (before ws itself is
// unmounted: each reads its base through ws's mount) and returns those it
// unmounted (UnmountAt).
func UnmountAll(ctx context.Context, ws *history.Workspace, opts Options) ([]Info, error) {
	dirs, err := UnmountAt(ctx, ws.Root, opts)
	infos := make([]Info, len(dirs))
	for i, d := range dirs {
		infos[i] = Info{Dir: d}
		if in, err := Find(ctx, ws, d); err == nil {
			infos[i] = in
			infos[i].Mounted = false
		}
	}
	return infos, err
}

// UnmountAt unmounts every branch whose copy-up layer reads its base
// through the mount at mp (found in the mount table alone: it never
// touches the mount, which may be dead or hung) and returns their
// directories: first each branch's zerofs (and, through its umount, the
// branches of that branch), then its copy-up layer.
func UnmountAt(ctx context.Context, mp string, opts Options) ([]string, error) {
	mp = mountName(mp)
	ms, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return m.FSType != "overlay" || m.Source != overlaySource, false
	})
	if err != nil {
		return nil, err
	}
	var done []string
	seen := map[string]bool{}
	for _, m := range ms {
		if seen[m.Mountpoint] || !lowerIn(m.VFSOptions, mp) {
			continue
		}
		seen[m.Mountpoint] = true
		if err := unmount(m.Mountpoint, opts); err != nil {
			return done, err
		}
		done = append(done, m.Mountpoint)
	}
	return done, nil
}

// mountName is mp as a branch's overlay names its workspace's mount:
// clean, its parent's symlinks resolved (never the mount itself, which
// may not answer).
func mountName(mp string) string {
	mp = filepath.Clean(mp)
	return filepath.Join(resolved(filepath.Dir(mp)), filepath.Base(mp))
}

// lowerIn reports whether an overlay's options name a lower layer that
// is a view (@SEQ) of the mount at mp.
func lowerIn(opts, mp string) bool {
	for _, o := range strings.Split(opts, ",") {
		if v, ok := strings.CutPrefix(o, "lowerdir="); ok {
			rest, ok := strings.CutPrefix(v, mp+"/@")
			_, err := strconv.ParseUint(rest, 10, 64)
			return ok && err == nil
		}
	}
	return false
}

// unmount takes off the zerofs mounts at dir (live or dead: zerofs
// umount), then the overlays this package mounted there.
func unmount(dir string, opts Options) error {
	if zerofsAt(dir) {
		args := []string{"umount"}
		if opts.Lazy {
			args = append(args, "--lazy")
		}
		if err := run(context.Background(), opts, append(args, dir)...); err != nil {
			return fmt.Errorf("branch: unmounting %s: %w", dir, err)
		}
	}
	for range 16 {
		if !overlaid(dir) {
			return nil
		}
		flags := 0
		if opts.Lazy {
			flags = unix.MNT_DETACH
		}
		if err := unix.Unmount(dir, flags); err != nil {
			return fmt.Errorf("branch: unmounting the copy-up layer at %s: %w", dir, err)
		}
	}
	return nil
}

// mountsAt lists the mounts at dir, in mount order.
func mountsAt(dir string) []*mountinfo.Info {
	ms, _ := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) { return m.Mountpoint != dir, false })
	return ms
}

// zerofsAt reports whether a zerofs mount (live or dead) is at dir.
func zerofsAt(dir string) bool {
	for _, m := range mountsAt(dir) {
		if m.FSType == "fuse.zerofs" {
			return true
		}
	}
	return false
}

// overlaid reports whether the topmost mount at dir is a branch's
// copy-up layer.
func overlaid(dir string) bool {
	ms := mountsAt(dir)
	return len(ms) > 0 && ms[len(ms)-1].FSType == "overlay" && ms[len(ms)-1].Source == overlaySource
}

// live reports whether a zerofs mount answers at dir.
func live(dir string) bool {
	if !zerofsAt(dir) {
		return false
	}
	_, ok := history.ReadStatus(dir)
	return ok
}

// stale reports whether the branch at dir cannot read its base: a listing
// of its root fails, or its copy-up layer reads its base through a
// workspace daemon other than the one serving ws now (its upper directory
// was reached through that daemon's /proc/PID/fd): the workspace was
// mounted again since.
func stale(ws *history.Workspace, dir string) bool {
	// A base that no longer answers (its daemon gone) fails a listing of
	// the branch's root, which merges it with the upper directory.
	if _, err := os.ReadDir(dir); err != nil {
		return true
	}
	for _, m := range mountsAt(dir) {
		if m.FSType != "overlay" || m.Source != overlaySource {
			continue
		}
		for _, o := range strings.Split(m.VFSOptions, ",") {
			if v, ok := strings.CutPrefix(o, "upperdir=/proc/"); ok {
				pid, _, _ := strings.Cut(v, "/")
				return pid != strconv.Itoa(ws.Status.PID)
			}
		}
	}
	return false
}
