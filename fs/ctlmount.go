package fs

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/zerofs/zerofs/record"
)

// The control directory of a mount without OPEN (Options.NoOpen,
// noopen.go). The kernel stops sending OPEN for every file of a connection
// at once, and the control files need their handles: a request is
// everything written through one open file, a step begins at its close, a
// refused request's report is read back on its own descriptor (ctl.go).
// So .zero is served by a second FUSE connection, mounted over the main
// mount's .zero, which is an empty directory there (ctlMountDir). Its
// files behave exactly as on a mount with OPEN.
//
// The control mount is a mount inside the workspace mount: it is
// unmounted first (Unmount), and a lazy unmount of the workspace
// (umount -l, Detach) takes it too. Its type is fuse.zerofs-ctl, so
// nothing that looks for zerofs mounts mistakes it for a workspace.

// ctlFsName is the control mount's subtype (its type is fuse.zerofs-ctl).
const ctlFsName = "zerofs-ctl"

// ctlMountDir is .zero in the main connection of a mount without OPEN: the
// directory the control connection is mounted over. It is empty.
type ctlMountDir struct {
	fusefs.Inode
	fs *fsys
}

var _ fusefs.NodeGetattrer = (*ctlMountDir)(nil)

func (d *ctlMountDir) Getattr(ctx context.Context, f fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fs.fillVirtual(&out.Attr, syscall.S_IFDIR|0o755, 2)
	return 0
}

// mountCtl serves the control directory over mp/.zero with the main
// mount's options, OPEN included.
func mountCtl(mp string, f *fsys, main *fusefs.Options, selfOpens bool) (*fuse.Server, error) {
	opts := *main
	opts.MountOptions.Name = ctlFsName
	opts.MountOptions.ExtraCapabilities = 0
	opts.MountOptions.Options = append([]string(nil), main.MountOptions.Options...)
	// Mounting over mp/.zero looks .zero up through the main mount. The
	// daemon never waits on its own mount (a kill at that moment leaves a
	// thread waiting for an answer that never comes, and the process never
	// exits): fusermount3, a process of its own, mounts it where it is
	// installed, and hands the connection back.
	if _, err := exec.LookPath("fusermount3"); err == nil {
		opts.MountOptions.DirectMount = false
	}
	root := &ctlDir{fs: f}
	server, err := fuse.NewServer(fusefs.NewNodeFS(root, &opts), filepath.Join(mp, record.StoreName), &opts.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("fs: mount the control directory: %w", err)
	}
	go server.Serve()
	if selfOpens { // Options.SelfOpens: see serve
		if err := server.WaitMount(); err != nil {
			server.Unmount()
			return nil, fmt.Errorf("fs: mount the control directory: %w", err)
		}
	}
	return server, nil
}

// unmountCtl unmounts the control connection, if any, and waits (a little)
// for it to stop serving. A control file still open makes it busy; then
// the workspace's unmount detaches both. It runs once (Unmount, and the
// end of serving).
func (m *Mounted) unmountCtl() {
	if m.ctl == nil {
		return
	}
	m.ctlOnce.Do(m.unmountCtlOnce)
}

func (m *Mounted) unmountCtlOnce() {
	if err := m.ctl.Unmount(); err != nil {
		m.fs.log.Debug("zerofs: unmount of the control directory failed", "err", err)
		return
	}
	done := make(chan struct{})
	go func() { m.ctl.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
}
