package fs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/internal/proc"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// The control directory ".zero/" at the mount root. It is virtual: nothing
// here is captured, and it hides the store of the same name on the backing
// side. Each file is a command (a write) and a report (a read); package
// control holds the names, the request formats and the reports, shared
// with the clients (package history). A rewind or gc request's report is
// read back on the handle that wrote it, whatever other clients did.
//
// Reads are generated when a handle is opened and served with
// FOPEN_DIRECT_IO, so the size 0 in the attributes never truncates them.
//
// Writes: everything written through one open file is one request, however
// many write(2) calls carry it (a label of a megabyte arrives in many), up
// to maxRequest bytes; more is EINVAL and nothing is done. A label for
// .zero/step is carried out when the file is closed (its close(2) returns
// the error, if any). A request to .zero/rewind or .zero/gc is carried out
// by the write that completes it, so that the write returns when the rewind
// is complete and durable and fails with its error (SPEC): complete means
// ending in a newline (what echo writes) and, for a JSON value, parsing.
// A request never completed that way (printf 5) is carried out at close.
// Once a request was carried out, further writes through the same open
// file fail with EINVAL: two writes are never two rewinds.
//
// Trust (SPEC.md): the control files belong to the user who mounted, 0600
// (head 0644, which anyone may read), and Open refuses anyone else but root
// with EACCES, whatever the kernel's own check (default_permissions) let
// through: the log holds every path and hook payload, and a rewind changes
// files that are not the caller's.

// ctlDir is ".zero/": a persistent node whose children are made once.
type ctlDir struct {
	fusefs.Inode
	fs *fsys
}

var (
	_ fusefs.NodeOnAdder   = (*ctlDir)(nil)
	_ fusefs.NodeGetattrer = (*ctlDir)(nil)
)

func (d *ctlDir) OnAdd(ctx context.Context) {
	for _, name := range control.Names {
		ch := d.NewPersistentInode(ctx, &ctlFile{fs: d.fs, name: name, writable: control.Writable(name)},
			fusefs.StableAttr{Mode: syscall.S_IFREG})
		d.AddChild(name, ch, true)
	}
}

func (d *ctlDir) Getattr(ctx context.Context, f fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fs.fillVirtual(&out.Attr, syscall.S_IFDIR|0o755, 2)
	return 0
}

// fillVirtual fills the attributes of a virtual node: owned by the user
// who mounted, timed like the workspace root at mount.
func (f *fsys) fillVirtual(a *fuse.Attr, mode uint32, nlink uint32) {
	a.Mode = mode
	a.Nlink = nlink
	a.Uid, a.Gid = f.uid, f.gid
	t := f.mtime
	a.Atime, a.Mtime, a.Ctime = uint64(t.Unix()), uint64(t.Unix()), uint64(t.Unix())
	a.Atimensec, a.Mtimensec, a.Ctimensec = uint32(t.Nanosecond()), uint32(t.Nanosecond()), uint32(t.Nanosecond())
}

// ctlFile is one control file.
type ctlFile struct {
	fusefs.Inode
	fs       *fsys
	name     string
	writable bool
}

var (
	_ fusefs.NodeGetattrer = (*ctlFile)(nil)
	_ fusefs.NodeSetattrer = (*ctlFile)(nil)
	_ fusefs.NodeOpener    = (*ctlFile)(nil)
	_ fusefs.NodeReader    = (*ctlFile)(nil)
	_ fusefs.NodeWriter    = (*ctlFile)(nil)
)

func (c *ctlFile) Getattr(ctx context.Context, f fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	c.fs.ctlAttrs.Add(1)
	return c.attr(out)
}

// attr fills a control file's attributes, which never change.
func (c *ctlFile) attr(out *fuse.AttrOut) syscall.Errno {
	mode := uint32(0o600)
	if c.name == control.Head {
		mode = 0o644
	}
	c.fs.fillVirtual(&out.Attr, syscall.S_IFREG|mode, 1)
	return 0
}

// Setattr accepts what a shell's "echo 5 > .zero/rewind" sends before the
// write: a truncation to 0 (there is nothing to truncate), and times.
func (c *ctlFile) Setattr(ctx context.Context, f fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, ok := in.GetMode(); ok {
		return syscall.EPERM
	}
	_, uok := in.GetUID()
	_, gok := in.GetGID()
	if uok || gok {
		return syscall.EPERM
	}
	if _, ok := in.GetSize(); ok && !c.writable {
		return syscall.EACCES
	}
	// The attributes never change, so they are kept as a GETATTR's are:
	// go-fuse sets no timeout on a SETATTR reply, and without one the
	// kernel asked for them again (and then for security.capability)
	// at every "echo label > .zero/step", two round trips of eight.
	out.SetTimeout(wsCacheTimeout)
	return c.attr(out)
}

// ctlHandle is an open control file: the report generated at open (or the
// event log, read in place), and the request being written. A request to
// .zero/rewind replaces content with that request's own result, so a
// client that opened the file for reading and writing reads back what its
// request did, whatever other clients do.
type ctlHandle struct {
	content []byte   // guarded by mu once the handle is open
	log     *os.File // for "log": the events file, read-only

	mu sync.Mutex // guards req, done and content; held while the request runs
	// req is what was written so far: one request.
	req []byte
	// done: the request was carried out or refused; writes are EINVAL.
	done bool
}

// maxRequest bounds one request (SPEC: a label up to 1 MiB).
const maxRequest = control.MaxRequest

var _ fusefs.FileReleaser = (*ctlHandle)(nil)

func (h *ctlHandle) Release(ctx context.Context) syscall.Errno {
	if h.log != nil {
		h.log.Close()
	}
	return 0
}

// mayOpen reports whether the caller may open this control file: head is
// anyone's to read; the rest only the mounting user's and root's.
func (c *ctlFile) mayOpen(ctx context.Context) bool {
	if c.name == control.Head {
		return true
	}
	caller, ok := fuse.FromContext(ctx)
	return ok && (caller.Uid == 0 || caller.Uid == c.fs.uid)
}

func (c *ctlFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if (flags&(syscall.O_WRONLY|syscall.O_RDWR) != 0 && !c.writable) || !c.mayOpen(ctx) {
		return nil, 0, syscall.EACCES
	}
	h := &ctlHandle{}
	if flags&syscall.O_ACCMODE != syscall.O_WRONLY {
		if c.name == control.Log {
			f, err := os.Open(c.fs.eng.Log().Path())
			if err != nil {
				return nil, 0, engineErrno(c.fs.log, "open", ".zero/log", err, seqInvalid)
			}
			h.log = f
		} else {
			b, err := c.fs.report(c.name)
			if err != nil {
				return nil, 0, engineErrno(c.fs.log, "open", ".zero/"+c.name, err, seqInvalid)
			}
			h.content = b
		}
	}
	return h, fuse.FOPEN_DIRECT_IO, 0
}

func (c *ctlFile) Read(ctx context.Context, f fusefs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := f.(*ctlHandle)
	if !ok {
		return nil, syscall.EBADF
	}
	if h.log != nil {
		k, err := h.log.ReadAt(dest, off)
		if err != nil && k == 0 && !isEOF(err) {
			return nil, engineErrno(c.fs.log, "read", ".zero/log", err, seqInvalid)
		}
		return fuse.ReadResultData(dest[:k]), 0
	}
	h.mu.Lock()
	content := h.content
	h.mu.Unlock()
	if off >= int64(len(content)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(content[off:min(int64(len(content)), off+int64(len(dest)))]), 0
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

var _ fusefs.NodeFlusher = (*ctlFile)(nil)

// Write adds data to the open file's request (see the top of this file),
// and carries out a rewind or gc request it completes. The offset is
// ignored: "echo x >>" works too.
func (c *ctlFile) Write(ctx context.Context, f fusefs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h, ok := f.(*ctlHandle)
	if !ok || !c.writable {
		return 0, syscall.EACCES
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return 0, syscall.EINVAL
	}
	if len(h.req)+len(data) > maxRequest {
		h.done, h.req = true, nil
		h.content, _ = control.JSONLine(control.Refusal{Error: string(record.RefusedBadRequest),
			Message: fmt.Sprintf("control: bad request: more than %d bytes written to .zero/%s", maxRequest, c.name)})
		return 0, syscall.EINVAL
	}
	h.req = append(h.req, data...)
	if c.name != control.Step && c.name != control.Turn && c.name != control.Result && requestComplete(h.req) {
		h.done = true
		if errno := c.run(ctx, h, h.req); errno != 0 {
			return 0, errno
		}
	}
	return uint32(len(data)), 0
}

// Flush, at each close(2) of the file, carries out the request written
// through it that has not been carried out yet; close returns its error.
func (c *ctlFile) Flush(ctx context.Context, f fusefs.FileHandle) syscall.Errno {
	h, ok := f.(*ctlHandle)
	if !ok {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done || len(h.req) == 0 {
		return 0
	}
	h.done = true
	return c.run(ctx, h, h.req)
}

// requestComplete reports whether req is a whole rewind or gc request: a
// line, and if it is a JSON value, one that parses.
func requestComplete(req []byte) bool {
	if len(req) == 0 || req[len(req)-1] != '\n' {
		return false
	}
	t := bytes.TrimSpace(req)
	if len(t) > 0 && (t[0] == '{' || t[0] == '[' || t[0] == '"') {
		return json.Valid(t)
	}
	return true
}

// run carries out one whole request written through h (whose mu the
// caller holds).
func (c *ctlFile) run(ctx context.Context, h *ctlHandle, req []byte) syscall.Errno {
	switch c.name {
	case control.Step:
		out, errno := c.fs.doStep(ctx, req)
		if out != nil {
			h.content = out
		}
		return errno
	case control.Turn:
		return c.fs.doTurn(ctx, req)
	case control.Result:
		out, errno := c.fs.doResult(ctx, req)
		if out != nil {
			h.content = out
		}
		return errno
	case control.Rewind:
		out, errno := c.fs.doRewind(ctx, req)
		if out != nil {
			h.content = out
		}
		return errno
	case control.GC:
		out, errno := c.fs.doGC(ctx, req)
		if out != nil {
			h.content = out
		}
		return errno
	}
	return syscall.EACCES
}

// doStep begins a step (control.ParseStep reads the request). A refused
// step's reason is returned for the handle that wrote it (control.Refusal).
func (f *fsys) doStep(ctx context.Context, data []byte) ([]byte, syscall.Errno) {
	req := control.ParseStep(data)
	f.flushMapped()
	if _, err := f.eng.BeginStepAs(engineCtx(ctx), callerOf(ctx), req.Label, req.Payload); err != nil {
		out, _ := control.JSONLine(control.RefusalOf(err))
		return out, engineErrno(f.log, "step", ".zero/step", err, seqInvalid)
	}
	return nil, 0
}

// doTurn begins a turn (control.ParseTurn reads the request): a person's
// prompt to an agent, which ends the current step.
func (f *fsys) doTurn(ctx context.Context, data []byte) syscall.Errno {
	payload, err := control.ParseTurn(data)
	if err != nil {
		return syscall.EINVAL
	}
	f.flushMapped()
	if _, err := f.eng.BeginTurnAs(engineCtx(ctx), callerOf(ctx), payload); err != nil {
		return engineErrno(f.log, "turn", ".zero/turn", err, seqInvalid)
	}
	return 0
}

// doRewind carries out a rewind request (control.ParseRewind: a target,
// paths, a revert, an undo or a redo, or a dry run of one: the engine
// resolves each, undo and redo included, under its workspace lock) and
// returns when it is complete and durable, after telling the kernel to
// forget what it changed. It returns the request's report for the handle
// that wrote it, also when it was refused (control.Refusal: a revert's
// conflicts, nothing to undo, a pruned state, ...). The errno is the one
// the refusal always had: nothing to undo or redo is ENOENT, a sequence
// not in the history or a bad request EINVAL, a conflict EBUSY.
func (f *fsys) doRewind(ctx context.Context, data []byte) ([]byte, syscall.Errno) {
	req, err := control.ParseRewind(data)
	if err != nil {
		out, _ := control.JSONLine(control.RewindReport{Refusal: control.RefusalOf(err), Report: record.Report{Skipped: []string{}}})
		return out, syscall.EINVAL
	}
	if req.Merge != nil {
		// The fork records the workspace by the path it is mounted at.
		req.Merge.Workspace = f.mountpoint
	}
	// Settled once the kernel was told what changed (rewinds.stale).
	defer f.rw.begin()()
	if !req.DryRun {
		f.prog.Start("rewind")
		defer f.prog.Stop()
	}
	if !req.DryRun {
		f.flushMapped()
	}
	err = f.mountInTheWay(engineCtx(ctx), req)
	var res record.RewindResult
	if err == nil {
		res, err = f.eng.Apply(rewind.WithProgress(engineCtx(ctx), &f.prog), req)
	}
	out, _ := control.JSONLine(control.ReportOf(res, err))
	if err != nil {
		return out, engineErrno(f.log, "rewind", ".zero/rewind", err, seqInvalid)
	}
	f.invalidate(res.Changed)
	return out, 0
}

// doGC forgets the states before the requested sequence (and thins the
// history before the requested thinBefore: control.ParseGC) and returns
// the result for the handle that wrote the request, or why it was refused.
func (f *fsys) doGC(ctx context.Context, data []byte) ([]byte, syscall.Errno) {
	req, err := control.ParseGC(data)
	if err != nil {
		out, _ := control.JSONLine(control.GCReport{Refusal: control.RefusalOf(err)})
		return out, syscall.EINVAL
	}
	f.prog.Start("gc")
	defer f.prog.Stop()
	res, err := f.eng.GCWith(rewind.WithProgress(engineCtx(ctx), &f.prog), req)
	if err != nil {
		out, _ := control.JSONLine(control.GCReport{Refusal: control.RefusalOf(err)})
		return out, engineErrno(f.log, "gc", ".zero/gc", err, seqInvalid)
	}
	f.mu.Lock()
	f.lastGC = &res
	f.mu.Unlock()
	f.invalidateViews()
	out, _ := control.JSONLine(res)
	return out, 0
}

// report generates the content of a readable control file.
func (f *fsys) report(name string) ([]byte, error) {
	switch name {
	case control.Step:
		s := f.eng.Step()
		return control.StepReport{Sequence: s.Seq, Label: s.Label}.Format(), nil
	case control.Head:
		return control.FormatSeq(f.eng.Head()), nil
	case control.Turn, control.Result:
		return nil, nil // a request only; the log holds the turns and results
	case control.Rewind:
		p, seq, ok := f.eng.LastRewind()
		if !ok {
			return []byte("{}\n"), nil
		}
		res := record.RewindResult{Seq: seq, Report: p.Report, Foreign: p.Foreign, Record: p, Step: p.Step}
		switch p.Form {
		case record.FormUndo, record.FormTurn:
			res.Undid = p.Step
		case record.FormRedo:
			res.Redid = p.Step
		}
		return control.JSONLine(control.ReportOf(res, nil))
	case control.GC:
		f.mu.Lock()
		res := f.lastGC
		f.mu.Unlock()
		if res == nil {
			return []byte("{}\n"), nil
		}
		return control.JSONLine(res)
	case control.Status:
		s := f.eng.Step()
		sync := "batch"
		if f.sync {
			sync = "always"
		}
		return control.JSONLine(control.StatusReport{
			PID: os.Getpid(), Start: proc.SelfStart(), Workspace: f.workspace, Mountpoint: f.mountpoint, Store: f.store,
			Head: f.eng.Head(), Step: control.StepReport{Sequence: s.Seq, Label: s.Label},
			Sync: sync, AutoStep: f.autoStep.String(), PrunedBefore: f.eng.PrunedBefore(),
			Thinned:  f.eng.Thinned(),
			Captures: f.eng.CaptureMode(),
			Warnings: f.notTsSeen.warnings(),
			Progress: f.prog.Report(),
			Ignore:   ignoreReport(f.eng),
		})
	}
	return nil, unix.ENOENT
}

// The control directory's names are fixed. (go-fuse treats a missing
// Unlink or Rmdir as success and would drop the node from its tree.)

var (
	_ fusefs.NodeUnlinker  = (*ctlDir)(nil)
	_ fusefs.NodeRmdirer   = (*ctlDir)(nil)
	_ fusefs.NodeRenamer   = (*ctlDir)(nil)
	_ fusefs.NodeCreater   = (*ctlDir)(nil)
	_ fusefs.NodeMkdirer   = (*ctlDir)(nil)
	_ fusefs.NodeMknoder   = (*ctlDir)(nil)
	_ fusefs.NodeSymlinker = (*ctlDir)(nil)
	_ fusefs.NodeLinker    = (*ctlDir)(nil)
	_ fusefs.NodeSetattrer = (*ctlDir)(nil)
)

// Setattr refuses chmod, chown, truncate and touch of the control directory
// itself: it is not the user's to change.
func (d *ctlDir) Setattr(context.Context, fusefs.FileHandle, *fuse.SetAttrIn, *fuse.AttrOut) syscall.Errno {
	return syscall.EPERM
}

func (d *ctlDir) Unlink(context.Context, string) syscall.Errno { return syscall.EPERM }
func (d *ctlDir) Rmdir(context.Context, string) syscall.Errno  { return syscall.EPERM }
func (d *ctlDir) Rename(context.Context, string, fusefs.InodeEmbedder, string, uint32) syscall.Errno {
	return syscall.EPERM
}
func (d *ctlDir) Create(context.Context, string, uint32, uint32, *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EPERM
}
func (d *ctlDir) Mkdir(context.Context, string, uint32, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}
func (d *ctlDir) Mknod(context.Context, string, uint32, uint32, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}
func (d *ctlDir) Symlink(context.Context, string, string, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}
func (d *ctlDir) Link(context.Context, fusefs.InodeEmbedder, string, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}
