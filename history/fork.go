package history

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"

	"github.com/zerofs/zerofs/internal/ignore"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// A Forker writes the state at a sequence into a new workspace with a store
// of its own (rewind.Fork). Both Sources are one.
type Forker interface {
	Fork(ctx context.Context, t record.Seq, dir string) (rewind.ForkResult, error)
}

// Fork writes src's state at t into the new directory dir.
func Fork(ctx context.Context, src Source, t record.Seq, dir string) (rewind.ForkResult, error) {
	f, ok := src.(Forker)
	if !ok {
		return rewind.ForkResult{}, errors.New("history: this source cannot fork")
	}
	return f.Fork(ctx, t, dir)
}

// Fork reflinks or copies from the store and the workspace, under the
// engine's lock.
func (h *engineSource) Fork(ctx context.Context, t record.Seq, dir string) (rewind.ForkResult, error) {
	return h.eng.Fork(ctx, t, dir, h.root.Name())
}

// Fork copies from the mount's @t/ view, with the caller's permissions (a
// FUSE file cannot be reflinked).
func (m *mountSource) Fork(ctx context.Context, t record.Seq, dir string) (rewind.ForkResult, error) {
	if _, err := m.base(t); err != nil {
		return rewind.ForkResult{}, err
	}
	// What the daemon ignores (.zeroignore and its --ignore) is left out.
	var rules *ignore.Matcher
	if st, ok := ReadStatus(m.root); ok && st.Ignore != nil {
		rules = rewind.IgnoreRules(*st.Ignore)
	}
	return rewind.ForkDirIgnoring(ctx, filepath.Join(m.root, "@"+strconv.FormatUint(uint64(t), 10)), t, dir, m.root, rules)
}
