package history

import (
	"github.com/zerofs/zerofs/internal/ignore"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// ignoresAfter is, for a block that changed .zeroignore, the patterns it
// holds just after the block (Entry.Ignores); nil when the block did not
// change it, or that state is no longer in the history. A .zeroignore the
// engine would not use (not a regular file, too large) ignores nothing.
func ignoresAfter(src Source, b *Block) (*[]string, error) {
	changed := false
	for _, f := range b.Files {
		if f.Path == record.IgnoreFile {
			changed = true
			break
		}
	}
	if !changed {
		return nil, nil
	}
	out := []string{}
	n, err := src.Stat(record.IgnoreFile, b.End)
	if err != nil {
		return nil, nil // the state after the block is gone (gc)
	}
	if !n.Exists || n.Kind != record.KindFile || n.Bytes > rewind.MaxIgnoreFile {
		return &out, nil
	}
	data, err := src.Content(record.IgnoreFile, b.End)
	if err != nil {
		return nil, nil
	}
	out = append(out, ignore.Parse(data).Patterns()...)
	return &out, nil
}
