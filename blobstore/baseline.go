package blobstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrBeforeBaseline: the store holds blobs in the layout from before packs
// (one file each, DIR/ab/<sha256>), which is older than the store format
// this version reads (docs/design.md, The store).
var ErrBeforeBaseline = errors.New("blobstore: blobs in the layout from before packs")

// checkBaseline refuses a store in dir that holds a blob in the layout
// from before packs: a file named by its sha256 in a directory named by
// its first two hex digits. An empty such directory (its blobs pruned) is
// no obstacle.
func checkBaseline(dir string) error {
	fans, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("blobstore: %w", err)
	}
	for _, fan := range fans {
		if !fan.IsDir() || len(fan.Name()) != 2 {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(dir, fan.Name()))
		if err != nil {
			return fmt.Errorf("blobstore: %w", err)
		}
		for _, e := range ents {
			if _, err := ParseID(e.Name()); err == nil && e.Name()[:2] == fan.Name() {
				return fmt.Errorf("%w (%s): written by a zerofs older than the store format this version reads (see docs/design.md, The store)",
					ErrBeforeBaseline, filepath.Join(dir, fan.Name(), e.Name()))
			}
		}
	}
	return nil
}
