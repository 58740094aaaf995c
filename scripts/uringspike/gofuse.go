package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// -server gofuse: go-fuse's own loopback (fs.NewLoopbackRoot, configured as
// scripts/loopmount configures it) over either transport. It answers the
// question the spike's own server cannot: what io_uring would give a
// go-fuse file system such as zerofs, with go-fuse's request handling
// unchanged.
//
// go-fuse's request dispatch (opcode table, request parsing, Server.loop)
// is unexported, but v2.12.1 exports an EXPERIMENTAL fuse.ProtocolServer
// (written for virtio-fs) whose HandleRequest takes a request as byte
// slices and writes the reply into byte slices, over any RawFileSystem.
// So: go-fuse's fuse.Server still owns the connection (it answers INIT,
// asking for FUSE_OVER_IO_URING through ExtraCapabilities; it reads
// FORGET and INTERRUPT from /dev/fuse; its node bridge gets Init(server)
// for notifications and passthrough registration), and the ring threads
// hand each ring entry to a ProtocolServer over the same RawFileSystem,
// primed with a copy of the kernel's INIT so that it negotiates the same
// capabilities.

// goMounted is a go-fuse loopback mounted by the spike.
type goMounted struct {
	mp        string
	fd        int
	srv       *fuse.Server
	transport string
	onRing    ringCounts
	done      chan struct{}

	mu   sync.Mutex // guards errs
	errs []error
	wg   sync.WaitGroup
}

func mountGoFuse(backing, mp string, uring bool) (*goMounted, error) {
	root, err := fusefs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, err
	}
	timeout := time.Hour
	mopts := fuse.MountOptions{
		FsName:             backing,
		Name:               "uringspike",
		MaxWrite:           maxWrite,
		Options:            []string{"default_permissions"},
		DisableReadDirPlus: true,
		EnableAcl:          true,
		ExtraCapabilities:  fuse.CAP_NO_OPENDIR_SUPPORT,
		MaxBackground:      12,
	}
	if uring {
		mopts.ExtraCapabilities |= fuse.CAP_OVER_IO_URING
	}
	raw := fusefs.NewNodeFS(root, &fusefs.Options{
		MountOptions:    mopts,
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &timeout,
		NullPermissions: true,
	})

	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/fuse: %w", err)
	}
	data := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,default_permissions,max_read=%d", fd, maxWrite)
	if err := unix.Mount(backing, mp, "fuse.uringspike", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("mount %s: %w", mp, err)
	}
	// A /dev/fd/N mount point makes go-fuse serve a connection mounted by
	// its caller; NewServer answers INIT before it returns.
	srv, err := fuse.NewServer(raw, fmt.Sprintf("/dev/fd/%d", fd), &mopts)
	if err != nil {
		unix.Unmount(mp, unix.MNT_DETACH)
		unix.Close(fd)
		return nil, err
	}
	m := &goMounted{mp: mp, fd: fd, srv: srv, transport: "classic", done: make(chan struct{})}
	m.wg.Add(1)
	go func() { defer m.wg.Done(); srv.Serve() }()
	go func() { m.wg.Wait(); close(m.done) }()
	// go-fuse's own poll hack file (WaitMount skips it for /dev/fd/N).
	hack := filepath.Join(mp, ".go-fuse-epoll-hack")
	if !uring {
		return m, pollHack(hack)
	}
	kernel := srv.KernelSettings()
	if kernel.Flags64()&fuse.CAP_OVER_IO_URING == 0 {
		return m, errors.New("uringspike: INIT did not agree to FUSE_OVER_IO_URING (enable_uring is N, or the kernel lacks it)")
	}
	ps := fuse.NewProtocolServer(raw, &mopts)
	if err := primeProtocolServer(ps, kernel); err != nil {
		return m, err
	}
	serve := func(hdr, payload []byte, size int) int { return serveGoFuse(ps, hdr, payload, size) }
	if err := startRings(fd, &m.wg, serve, &m.onRing, m.fail); err != nil {
		return m, err
	}
	m.transport = "uring"
	return m, pollHack(hack)
}

// primeProtocolServer hands ps the INIT the kernel sent the connection, so
// that it knows the kernel's settings and negotiates what fuse.Server did.
func primeProtocolServer(ps *fuse.ProtocolServer, kernel *fuse.InitIn) error {
	in := make([]byte, inHeaderSize+64)
	le.PutUint32(in[0:], uint32(len(in)))
	le.PutUint32(in[4:], opInit)
	le.PutUint64(in[8:], 2)
	b := in[inHeaderSize:]
	le.PutUint32(b[0:], kernel.Major)
	le.PutUint32(b[4:], kernel.Minor)
	le.PutUint32(b[8:], kernel.MaxReadAhead)
	le.PutUint32(b[12:], uint32(kernel.Flags64()))
	le.PutUint32(b[16:], uint32(kernel.Flags64()>>32))
	out := make([]byte, outHeaderSize+64)
	if _, st := ps.HandleRequest([][]byte{in}, [][]byte{out}); !st.Ok() {
		return fmt.Errorf("uringspike: ProtocolServer INIT: %v", st)
	}
	if errno := int32(le.Uint32(out[4:])); errno != 0 {
		return fmt.Errorf("uringspike: ProtocolServer INIT: %w", syscall.Errno(-errno))
	}
	return nil
}

// serveGoFuse is the ringServer for go-fuse: the request goes to
// HandleRequest as the byte stream /dev/fuse would have delivered
// (fuse_in_header, the opcode's header, the rest), and the reply comes
// back as fuse_out_header then the body, which is written straight into
// the entry's payload. The payload is both the request's names and the
// reply's buffer, so any input but a WRITE's data is copied aside first
// (a GETXATTR reads its name from where its value goes).
func serveGoFuse(ps *fuse.ProtocolServer, hdr, payload []byte, size int) int {
	opcode := le.Uint32(hdr[4:])
	in := [][]byte{hdr[:inHeaderSize], hdr[ringOpIn : ringOpIn+opHeaderSize[opcode]], payload[:min(size, len(payload))]}
	if opcode != opWrite && size > 0 {
		in[2] = append([]byte(nil), in[2]...)
	}
	var oh [outHeaderSize]byte
	n, st := ps.HandleRequest(in, [][]byte{oh[:], payload})
	if !st.Ok() || n < outHeaderSize {
		putOutHeader(hdr, outHeaderSize, -int32(syscall.EIO), le.Uint64(hdr[8:]))
		return 0
	}
	copy(hdr[:outHeaderSize], oh[:])
	if le.Uint32(oh[4:]) != 0 {
		return 0
	}
	return n - outHeaderSize
}

func (m *goMounted) fail(err error) {
	if err != nil {
		m.mu.Lock()
		m.errs = append(m.errs, err)
		m.mu.Unlock()
	}
}

// unmount unmounts (detaching if still busy) and waits for go-fuse's
// reader and the ring threads to see the connection end.
func (m *goMounted) unmount() error {
	err := unmountOrDetach(m.mp)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return errors.Join(append([]error{err}, m.errs...)...)
}
