package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/zerofs/zerofs/blobstore"
)

// findStore finds the workspace around the current directory and its
// store directory, for the commands that only read the store.
func findStore(e *env) (*workspace, string, error) {
	ws, err := findWorkspace(e.cwd)
	if err != nil {
		return nil, "", err
	}
	store, err := storeDir(ws)
	return ws, store, err
}

// storeDir is where ws's store is on disk, for the read-only commands
// (status, verify) that look at files the daemon keeps.
func storeDir(ws *workspace) (string, error) {
	if !ws.Mounted {
		return ws.Store, nil
	}
	return mountedStore(ws.Status)
}

// mountedStore finds a mounted workspace's store. A store inside an
// in-place mount is hidden under the mount (its name shows the control
// directory instead), so it is reached through the daemon's own open
// descriptors: /proc/PID/fd/N of the workspace's root directory leads to
// the directory on the backing filesystem, beneath the mount.
func mountedStore(st mountStatus) (string, error) {
	store := st.Store
	if rest, ok := strings.CutPrefix(store, "/proc/self/"); ok {
		store = fmt.Sprintf("/proc/%d/%s", st.PID, rest)
	}
	if isStore(store) {
		return store, nil
	}
	fdDir := fmt.Sprintf("/proc/%d/fd", st.PID)
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		return "", fmt.Errorf("cannot reach the store %s of the mount (daemon pid %d): %w", st.Store, st.PID, err)
	}
	rel, relErr := filepath.Rel(st.Workspace, st.Store)
	for _, e := range ents {
		fd := filepath.Join(fdDir, e.Name())
		target, err := os.Readlink(fd)
		if err != nil {
			continue
		}
		var cand string
		switch {
		case target == st.Store:
			cand = fd
		case target == st.Workspace && relErr == nil && !strings.HasPrefix(rel, ".."):
			cand = filepath.Join(fd, rel)
		default:
			continue
		}
		if isStore(cand) {
			return cand, nil
		}
	}
	return "", fmt.Errorf("cannot reach the store %s of the mount (daemon pid %d)", st.Store, st.PID)
}

// isStore reports whether dir holds an event log (and is not a control
// directory, which has "log" instead).
func isStore(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, "events.jsonl"))
	return err == nil && fi.Mode().IsRegular()
}

// storeUsage is the size of the store's log and blobs, and the blob count.
func storeUsage(store string) (bytes int64, blobs int, err error) {
	if fi, err := os.Stat(filepath.Join(store, "events.jsonl")); err == nil {
		bytes += fi.Size()
	}
	dir := filepath.Join(store, "blobs")
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return bytes, 0, nil
	}
	bs, err := blobstore.Open(dir, blobstore.Options{})
	if err != nil {
		return 0, 0, err
	}
	err = bs.Walk(func(b blobstore.BlobInfo) error {
		bytes += b.Size
		blobs++
		return nil
	})
	return bytes, blobs, err
}
