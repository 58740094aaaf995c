package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/timeline"
)

var uiCmd = &command{
	name:    "ui",
	usage:   "ui [--listen ADDR]",
	summary: "serve the timeline: a local web page of the history",
	about: `Serves a web page that shows the workspace's history newest first, updating
as steps arrive: each step's label, time and processes, its changed paths
with line counts, their diffs, and rewinds and gcs as entries of their own.
It rewinds to before a step, reverts a step or restores one file, each
previewed first, and undoes what it did. It prints the page's URL, with a
random token in its fragment (#token=) that the page keeps to itself and
sends with every request, never as a cookie; requests naming another Host
or Origin are refused. Stop it with Ctrl-C.
`,
	flags: []flagDef{{name: "listen", arg: "ADDR", def: "127.0.0.1:0", comp: compNone, help: `address to listen on (default 127.0.0.1 and a free port);
requests must name it as their Host`}},
	run: runUI,
}

func runUI(e *env, c *command, args []string) error {
	o, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	listen := o.String("listen")
	if len(pos)+len(rest) > 0 {
		return usagef(c, "unexpected argument %q", append(pos, rest...)[0])
	}
	ws, err := history.Find(e.cwd)
	if err != nil {
		return err
	}
	root := ws.Root
	open := func(ctx context.Context) (history.Source, error) {
		ws, err := history.Find(root)
		if err != nil {
			return nil, err
		}
		return history.Open(ctx, ws, history.Options{Logger: e.logger()})
	}
	// What the page polls: the daemon's head when mounted, else the
	// store's log file as it stands, read without taking the store's lock.
	stamp := func() (string, bool, error) {
		ws, err := history.Find(root)
		if err != nil {
			return "", false, err
		}
		if ws.Mounted {
			return fmt.Sprintf("head %d", ws.Status.Head), true, nil
		}
		fi, err := os.Stat(filepath.Join(ws.Store, record.LogName))
		if err != nil {
			return "", false, err
		}
		return fmt.Sprintf("log %d %d", fi.Size(), fi.ModTime().UnixNano()), false, nil
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	hosts := timeline.Hosts(ln.Addr())
	if h, _, err := net.SplitHostPort(listen); err == nil && h != "" && net.ParseIP(h) == nil {
		// Listening by name: the browser sends the name as Host.
		hosts = append(hosts, net.JoinHostPort(h, fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)))
	}
	token := timeline.NewToken()
	h, err := timeline.New(open, timeline.Options{Token: token, Hosts: hosts, Root: root, Stamp: stamp, Branches: uiBranches(root), Logger: e.logger()})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(e.ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(e.stdout, "zerofs timeline of %s at %s\n", root, timeline.URL(hosts[0], token))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
