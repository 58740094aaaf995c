package main

import (
	"encoding/json"
	"fmt"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/record"
)

var verifyCmd = &command{
	name:    "verify",
	usage:   "verify [--json]",
	summary: "check the log and every blob; exit 1 on damage",
	about: `Checks, without changing anything, that the event log parses with
sequences 1..head, and that every blob a checkpoint still needs exists and
hashes to its name. Prints each damaged thing on its own line and exits 1,
or "ok: N events, M blobs verified". A torn tail (an append cut short by a
crash) counts as damage here; the next mount cuts it off, as it was never
acknowledged. Works mounted (reading the store beside the daemon) and not.
`,
	flags: []flagDef{{name: "json", help: `one JSON object instead: {"ok", "events", "blobs", "findings":
[{"kind", "sequence", "path", "blob", "message"}]}; the exit
status is the same`}},
	run: runVerify,
}

func runVerify(e *env, c *command, args []string) error {
	o, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	asJSON := o.Bool("json")
	if len(pos)+len(rest) > 0 {
		return usagef(c, "unexpected argument %q", append(pos, rest...)[0])
	}
	ws, store, err := findStore(e)
	if err != nil {
		return err
	}
	opts := history.VerifyOptions{Live: ws.Mounted}
	p := startProgress(e, "verify")
	if p != nil {
		begun := false
		opts.Progress = func(done, total int) {
			if !begun {
				p.BeginCounting("verify blobs", "blobs", int64(total), 0)
				begun = true
			}
			if done > 0 {
				p.Add(1, 0)
			}
		}
	}
	res, err := history.Verify(store, opts)
	p.Done()
	if err != nil {
		return err
	}
	if asJSON {
		if err := writeVerifyJSON(e, res); err != nil {
			return err
		}
	} else {
		for _, f := range res.Findings {
			fmt.Fprintln(e.stdout, f.Error())
		}
	}
	if n := len(res.Findings); n > 0 {
		return fmt.Errorf("verify: %d problem(s) in %s", n, ws.StoreName(store))
	}
	if !asJSON {
		fmt.Fprintf(e.stdout, "ok: %d events, %d blobs verified\n", res.Events, res.Blobs)
	}
	return nil
}

// verifyJSON is `zerofs verify --json`: add fields, never rename them.
type verifyJSON struct {
	OK       bool          `json:"ok"`
	Events   record.Seq    `json:"events"`
	Blobs    int           `json:"blobs"`
	Findings []findingJSON `json:"findings"`
}

type findingJSON struct {
	Kind     history.FindingKind `json:"kind"`
	Sequence record.Seq          `json:"sequence,omitempty"`
	Path     string              `json:"path,omitempty"`
	Blob     string              `json:"blob,omitempty"`
	Message  string              `json:"message"`
}

func writeVerifyJSON(e *env, res history.VerifyResult) error {
	out := verifyJSON{OK: len(res.Findings) == 0, Events: res.Events, Blobs: res.Blobs, Findings: []findingJSON{}}
	for _, f := range res.Findings {
		out.Findings = append(out.Findings, findingJSON{Kind: f.Kind, Sequence: f.Seq, Path: f.Path, Blob: f.Blob, Message: f.Error()})
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
