package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/zerofs/zerofs/history"
)

var stepCmd = &command{
	name:    "step",
	usage:   "step LABEL | step --hook",
	summary: "begin a step (same as writing .zero/step)",
	help: `Begins a new step labelled LABEL: changes from now on belong to it, and
'zerofs undo' rolls them back together.

  --hook   read an agent hook's JSON from stdin (Claude Code's PreToolUse
           input: session_id, hook_event_name, tool_name, tool_input, cwd)
           and begin a step labelled with the tool's name, recording
           {"name", "input", "hookEvent", "agentSession"} in the tool_call.
           A hook must never stop the agent: outside any zerofs workspace
           it prints a warning and exits 0, and it never exits 2 (which
           Claude Code takes as "block this tool call") because of what
           it read.
`,
	run: runStep,
}

var runCmd = &command{
	name:    "run",
	usage:   "run [--label L] -- CMD [ARG...]",
	summary: "run one command as its own step",
	help: `Begins a step labelled L (default: the command line), runs CMD with this
terminal's stdin, stdout and stderr, and exits with CMD's exit status
(128+N when a signal N killed it). The workspace must be mounted: outside a
mount nothing would be recorded.
`,
	run: runRun,
}

func runStep(e *env, c *command, args []string) error {
	fs := newFlags(c)
	hook := fs.Bool("hook", false, "")
	pos, rest, err := parseArgs(c, fs, args)
	if err != nil {
		return err
	}
	pos = append(pos, rest...)
	if *hook {
		if len(pos) > 0 {
			return usagef(c, "--hook takes no LABEL: it reads the hook's JSON from stdin")
		}
		return runHook(e)
	}
	label := strings.Join(pos, " ")
	if strings.TrimSpace(label) == "" {
		return usagef(c, "want a LABEL")
	}
	if strings.ContainsAny(label, "\n\r") {
		return usagef(c, "LABEL must be one line")
	}
	ws, err := history.Find(e.cwd)
	if err != nil {
		return err
	}
	return beginStep(e, ws, label, nil)
}

// beginStep begins a step on ws.
func beginStep(e *env, ws *history.Workspace, label string, extra json.RawMessage) error {
	h, err := history.Open(e.ctx, ws, history.Options{Logger: e.logger()})
	if err != nil {
		return err
	}
	err = h.BeginStep(e.ctx, label, extra)
	if cerr := h.Close(); err == nil {
		err = cerr
	}
	return err
}

// hookInput is the part of an agent hook's JSON that zerofs uses.
type hookInput struct {
	SessionID     string          `json:"session_id"`
	HookEventName string          `json:"hook_event_name"`
	ToolName      string          `json:"tool_name"`
	ToolInput     json.RawMessage `json:"tool_input"`
	Cwd           string          `json:"cwd"`
}

// runHook begins a step from a hook's JSON. Failures are exit 1 (Claude
// Code shows them and carries on), never 2 (which blocks the tool call).
func runHook(e *env) error {
	raw, err := io.ReadAll(io.LimitReader(e.stdin, 64<<20))
	if err != nil {
		return fmt.Errorf("step --hook: read stdin: %w", err)
	}
	var in hookInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return fmt.Errorf("step --hook: stdin is not a hook's JSON object: %v", err)
	}
	label := in.ToolName
	if label == "" {
		label = in.HookEventName
	}
	if label == "" {
		label = "hook"
	}
	extra := map[string]any{}
	if len(in.ToolInput) > 0 {
		extra["input"] = in.ToolInput
	}
	if in.HookEventName != "" {
		extra["hookEvent"] = in.HookEventName
	}
	if in.SessionID != "" {
		extra["agentSession"] = in.SessionID
	}
	payload, err := json.Marshal(extra)
	if err != nil {
		return err
	}
	dir := e.cwd
	if filepath.IsAbs(in.Cwd) {
		if fi, err := os.Stat(in.Cwd); err == nil && fi.IsDir() {
			dir = in.Cwd
		}
	}
	ws, err := history.Find(dir)
	if errors.Is(err, history.ErrNoWorkspace) || errors.Is(err, history.ErrNotYours) {
		fmt.Fprintf(e.stderr, "zerofs: warning: %v; step %q not recorded\n", err, label)
		return nil
	}
	if err != nil {
		return err
	}
	return beginStep(e, ws, label, payload)
}

func runRun(e *env, c *command, args []string) error {
	fs := newFlags(c)
	label := fs.String("label", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, errHelp) {
			return err
		}
		return usagef(c, "%v", err)
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return usagef(c, "want a command after --")
	}
	if *label == "" {
		*label = strings.Join(argv, " ")
	}
	if strings.ContainsAny(*label, "\n\r") {
		*label = strings.NewReplacer("\n", " ", "\r", " ").Replace(*label)
	}
	ws, err := history.Find(e.cwd)
	if err != nil {
		return err
	}
	if !ws.Mounted {
		return fmt.Errorf("%s is not mounted, so nothing the command does would be recorded (zerofs mount %s)", ws.Root, ws.Root)
	}
	// A command that cannot run leaves no step: exit 127, as a shell does.
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = e.cwd
	if cmd.Err != nil {
		fmt.Fprintf(e.stderr, "zerofs: run: %s: command not found\n", argv[0])
		return &exitError{code: 127}
	}
	if err := beginStep(e, ws, *label, nil); err != nil {
		return err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, e.stdout, e.stderr
	// Ctrl-C reaches the command through the terminal's process group:
	// zerofs only has to survive it and pass on signals sent to it alone.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-sigs:
				if s != syscall.SIGINT {
					cmd.Process.Signal(s)
				}
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	var xe *exec.ExitError
	if errors.As(err, &xe) {
		if st, ok := xe.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			return &exitError{code: 128 + int(st.Signal())}
		}
		return &exitError{code: xe.ExitCode()}
	}
	return err
}
