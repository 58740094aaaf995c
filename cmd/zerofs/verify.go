package main

import (
	"fmt"
	"time"

	"github.com/zerofs/zerofs/history"
)

var verifyCmd = &command{
	name:    "verify",
	usage:   "verify",
	summary: "check the log and every blob; exit 1 on damage",
	help: `Checks, without changing anything, that the event log parses with
sequences 1..head, and that every blob a checkpoint still needs exists and
hashes to its name. Prints each damaged thing on its own line and exits 1,
or "ok: N events, M blobs verified". A torn tail (an append cut short by a
crash) counts as damage here; the next mount cuts it off, as it was never
acknowledged. Works mounted (reading the store beside the daemon) and not.
`,
	run: runVerify,
}

func runVerify(e *env, c *command, args []string) error {
	if err := noArgs(c, args); err != nil {
		return err
	}
	ws, store, err := findStore(e)
	if err != nil {
		return err
	}
	opts := history.VerifyOptions{Live: ws.Mounted}
	if isTerminal(e.stderr) {
		last := time.Now()
		opts.Progress = func(done, total int) {
			switch {
			case done == total && total > 0:
				fmt.Fprintf(e.stderr, "\r%*s\r", 40, "")
			case time.Since(last) > 100*time.Millisecond:
				fmt.Fprintf(e.stderr, "\rverifying blobs: %d/%d", done, total)
				last = time.Now()
			}
		}
	}
	res, err := history.Verify(store, opts)
	if err != nil {
		return err
	}
	for _, f := range res.Findings {
		fmt.Fprintln(e.stdout, f.Error())
	}
	if n := len(res.Findings); n > 0 {
		return fmt.Errorf("verify: %d problem(s) in %s", n, ws.StoreName(store))
	}
	fmt.Fprintf(e.stdout, "ok: %d events, %d blobs verified\n", res.Events, res.Blobs)
	return nil
}
