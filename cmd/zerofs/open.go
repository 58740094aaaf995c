package main

import (
	"log/slog"

	"github.com/zerofs/zerofs/history"
)

// now stands for the live workspace where a sequence is expected.
const now = history.Now

// logger is where the engine's warnings go when a command opens an
// unmounted store: stderr, warnings and worse only.
func (e *env) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// openHistory finds the workspace around the current directory and opens
// its history; the caller closes it.
func openHistory(e *env) (*history.Workspace, history.Source, error) {
	return history.OpenDir(e.ctx, e.cwd, history.Options{Logger: e.logger()})
}

// withHistory runs fn on the history of the workspace around the current
// directory and closes it.
func withHistory(e *env, fn func(ws *history.Workspace, src history.Source) error) error {
	ws, src, err := openHistory(e)
	if err != nil {
		return err
	}
	ferr := fn(ws, src)
	cerr := src.Close()
	if ferr != nil {
		return ferr
	}
	return cerr
}

// findStore finds the workspace around the current directory and its
// store directory, for the commands that only read the store beside a
// daemon (status, verify).
func findStore(e *env) (*history.Workspace, string, error) {
	ws, err := history.Find(e.cwd)
	if err != nil {
		return nil, "", err
	}
	store, err := ws.StoreDir()
	return ws, store, err
}
