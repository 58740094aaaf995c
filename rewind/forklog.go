package rewind

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
)

// Reading a fork's own history, for a merge of it (mergefork.go's
// openFork): no engine involved, only the fork's directory. A branch's
// history is read the same way (readEvents), from its store.

// readLog reads the fork's history: its workspace_forked record, checked
// against workspace, and its steps.
func (s *mergeSide) readLog(ws string) error {
	f, err := s.tree.open(record.StoreName+"/"+record.LogName, unix.O_RDONLY|unix.O_NOFOLLOW)
	if err != nil {
		// Mounted: the store is hidden behind its control directory.
		f, err = s.tree.open(record.StoreName+"/log", unix.O_RDONLY|unix.O_NOFOLLOW)
	}
	if err != nil {
		return fmt.Errorf("%w: %s has no zerofs history (%w)", record.ErrNotFork, s.dir, err)
	}
	defer f.Close()
	return s.readEvents(f, ws, 0)
}

// readEvents reads the side's log from r: a fork's begins with its
// workspace_forked record, checked against workspace ws; a branch's
// history is its own from its first event (mergebranch.go's openBranch).
// Steps at or before after (the branch's head its last merge brought in)
// are left out.
func (s *mergeSide) readEvents(r io.Reader, ws string, after record.Seq) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var cur *record.StepRef
	var rewound []string // the paths of a rewind's checkpoint, until its session_rewind
	steps := map[record.Seq]record.StepRef{}
	first := true
	for sc.Scan() {
		var ev record.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("%w: %s: its log does not parse at line %d: %v", record.ErrNotFork, s.dir, s.head+1, err)
		}
		s.head = ev.Seq
		if first && s.branch != nil {
			first = false
		} else if first {
			first = false
			var fp record.ForkPayload
			if ev.Type != record.TypeForked || json.Unmarshal(ev.Payload, &fp) != nil {
				return fmt.Errorf("%w: %s was not made by zerofs fork", record.ErrNotFork, s.dir)
			}
			if !samePath(fp.Source, ws) {
				return fmt.Errorf("%w: %s is a fork of %s", record.ErrNotFork, s.dir, fp.Source)
			}
			s.base = fp.Sequence
			continue
		}
		v, err := record.DecodeEvent(s.dir, ev)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", record.ErrNotFork, s.dir, err)
		}
		switch p := v.(type) {
		case record.Checkpoint:
			ref := cur
			if st, ok := steps[p.Step]; ok && p.Step != 0 {
				ref = &st
			}
			if p.Rewind {
				for _, fs := range p.Files {
					rewound = append(rewound, fs.Path)
				}
				continue
			}
			if ref == nil {
				// Changes made outside any step.
				ref = &record.StepRef{Kind: "step", Sequence: ev.Seq}
			}
			for _, fs := range p.Files {
				s.last[fs.Path] = *ref
			}
		case record.RewindPayload:
			r := record.StepRef{Kind: "rewind", Sequence: ev.Seq, Label: p.Form}
			cur = nil
			for _, path := range rewound {
				s.last[path] = r
			}
			rewound = nil
		default:
			if ev.Type == record.TypeToolCall {
				var tc struct {
					Name string `json:"name"`
				}
				json.Unmarshal(ev.Payload, &tc)
				r := record.StepRef{Kind: "step", Sequence: ev.Seq, Label: tc.Name}
				steps[ev.Seq] = r
				if ev.Seq > after {
					s.steps = append(s.steps, r)
				}
				cur = &r
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %s: reading its log: %w", record.ErrNotFork, s.dir, err)
	}
	if first && s.branch == nil {
		return fmt.Errorf("%w: %s has an empty history", record.ErrNotFork, s.dir)
	}
	return nil
}

// samePath reports whether a and b name the same directory: the same
// path once cleaned, or the same directory on disk.
func samePath(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
