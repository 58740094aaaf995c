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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/hooks"
	"github.com/zerofs/zerofs/internal/quote"
)

var stepCmd = &command{
	name:    "step",
	usage:   "step LABEL | step --hook [--agent AGENT] [--no-prompt]",
	summary: "begin a step (same as writing .zero/step)",
	about: `Begins a new step labelled LABEL: changes from now on belong to it, and
'zerofs undo' rolls them back together.
`,
	flags: []flagDef{
		{name: "hook", help: `read an agent hook's JSON from stdin and record it: a tool call
(Claude Code and Codex PreToolUse, Gemini CLI BeforeTool, Cursor
beforeShellExecution, Windsurf pre_run_command and
pre_write_code, OpenCode's tool.execute.before) begins a step
labelled with what it does ("Edit app.py", "Bash: rm -rf docs"),
recording {"name", "tool", "input", "hookEvent", "agent",
"agentSession"} in the tool_call; a prompt (UserPromptSubmit,
BeforeAgent, beforeSubmitPrompt, pre_user_prompt, chat.message)
begins a turn; the end of a tool call (PostToolUse,
PostToolUseFailure, AfterTool, tool.execute.after,
afterShellExecution, post_run_command, post_write_code) records
a tool_result in the step the call began (by its tool call id,
else the session's newest step): ok or error, the exit code and
duration where the agent says, and an error's first line, never
more of the output. Other events are ignored. 'zerofs hooks
install' writes this command into each agent's configuration.
The workspace is the one the payload's cwd is in (else the
hook's own directory's); a cwd that is not an absolute path
records nothing. A tool input over 256 KiB is kept cut
("inputCut": true, "inputBytes": N). A hook must never stop
the agent: whatever goes wrong (no workspace, an unmounted one,
no JSON on stdin within 5 s, JSON that is no hook's, a bad
flag, a failing daemon) it prints one "zerofs: warning:" line
on stderr and exits 0, since agents take exit 2 as "block this
tool call" and show other codes as a failed hook.`},
		{name: "agent", arg: "AGENT", comp: compAgent, help: `the agent that runs the hook (claude, codex, gemini,
opencode, cursor, windsurf); by default the JSON's shape tells`},
		{name: "no-prompt", help: `record a turn without the prompt's text, a result
without the error's first line`},
	},
	args: []argDef{{name: "LABEL", comp: compNone}},
	run:  runStep,
}

var runCmd = &command{
	name:    "run",
	usage:   "run [--label L] -- CMD [ARG...]",
	summary: "run one command as its own step",
	about: `Begins a step labelled L (default: the command line), runs CMD with this
terminal's stdin, stdout and stderr, and exits with CMD's exit status
(128+N when a signal N killed it), which it records in the step with how
long CMD ran (a tool_result: 'zerofs log' marks the step failed when it was
not 0). The workspace must be mounted: outside a mount nothing would be
recorded.
`,
	flags: []flagDef{{name: "label", arg: "L", comp: compNone, help: "the step's label (default: the command line)"}},
	args: []argDef{
		{name: "CMD", comp: compCommand, afterDashes: true},
		{name: "ARG...", afterDashes: true},
	},
	flagsFirst: true,
	run:        runRun,
}

func runStep(e *env, c *command, args []string) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--hook" || a == "-hook" {
			return neverBlock(e, func() error { return stepArgs(e, c, args) })
		}
	}
	return stepArgs(e, c, args)
}

func stepArgs(e *env, c *command, args []string) error {
	o, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	hook := o.Bool("hook")
	agent := o.String("agent")
	noPrompt := o.Bool("no-prompt")
	pos = append(pos, rest...)
	if hook {
		if len(pos) > 0 {
			return usagef(c, "--hook takes no LABEL: it reads the hook's JSON from stdin")
		}
		return runHook(e, agent, noPrompt)
	}
	if agent != "" || noPrompt {
		return usagef(c, "--agent and --no-prompt go with --hook")
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
	if !ws.Mounted {
		return notMounted(ws, "nothing would be recorded in the step")
	}
	warnBacking(e)
	return beginStep(e, ws, label, nil)
}

// neverBlock runs `step --hook` so that it always exits 0: whatever goes
// wrong (a bad flag, a payload that does not parse, a failing daemon, a
// panic) is one warning on stderr. Claude Code, Codex, Gemini CLI, Cursor
// and Windsurf take exit 2 (which Go's runtime uses for a panic, and zerofs
// for bad usage) as "block this tool call", and show any other non-zero
// code to the person as a failed hook.
func neverBlock(e *env, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
		if err != nil && !errors.Is(err, errHelp) {
			fmt.Fprintf(e.stderr, "zerofs: warning: step --hook: %s; nothing recorded\n", quote.Line(err.Error()))
			err = nil
		}
	}()
	return f()
}

// notMounted is the failure of step and run on an unmounted workspace:
// nothing there would fill the step.
func notMounted(ws *history.Workspace, why string) error {
	return fmt.Errorf("%s is not mounted, so %s (zerofs mount %s)", quote.Name(ws.Root), why, quote.Name(ws.Root))
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

// hookReadTimeout bounds the wait for a hook's JSON on stdin: agents
// write it at once, and a hook must never hold up the agent.
const hookReadTimeout = 5 * time.Second

// readHook reads one JSON value from r: the hook's payload. It does not
// wait for the end of stdin past that value, and waits at most
// hookReadTimeout for it.
func readHook(r io.Reader) (json.RawMessage, error) {
	type result struct {
		raw json.RawMessage
		err error
	}
	done := make(chan result, 1)
	go func() {
		var raw json.RawMessage
		err := json.NewDecoder(io.LimitReader(r, 64<<20)).Decode(&raw)
		done <- result{raw, err}
	}()
	select {
	case res := <-done:
		if errors.Is(res.err, io.EOF) {
			return nil, errors.New("stdin is empty: want the hook's JSON")
		}
		if res.err != nil {
			return nil, fmt.Errorf("stdin is not a hook's JSON object: %v", res.err)
		}
		return res.raw, nil
	case <-time.After(hookReadTimeout):
		return nil, fmt.Errorf("no JSON on stdin within %v", hookReadTimeout)
	}
}

// runHook begins a step (or, for a prompt, a turn) from an agent hook's
// JSON on stdin. It never fails (neverBlock makes every error a warning):
// what it cannot record, it says on stderr.
func runHook(e *env, agent string, noPrompt bool) error {
	// Cursor and Gemini CLI read a JSON answer from every hook, also one
	// that records nothing; an empty object lets the call or prompt go on
	// as it would have.
	answer := agent == "cursor" || agent == "gemini"
	defer func() {
		if answer {
			fmt.Fprintln(e.stdout, "{}")
		}
	}()
	raw, err := readHook(e.stdin)
	if err != nil {
		return err
	}
	call, err := hooks.Parse(raw, agent)
	if err != nil {
		return fmt.Errorf("stdin is not a hook's JSON object: %v", err)
	}
	answer = answer || call.Agent == "cursor" || call.Agent == "gemini"
	if call.Kind == hooks.KindOther {
		return nil
	}
	what := "step"
	switch call.Kind {
	case hooks.KindPrompt:
		what = "turn"
	case hooks.KindResult:
		what = "result"
	}
	// Only the workspace the payload names may record its call: a cwd that
	// is not an absolute path (relative, or ending in a newline or NUL) is
	// no directory of the agent's, and the hook's own directory may be
	// another workspace. A cwd that does not exist (any more) is looked for
	// from its nearest existing ancestor, as Find walks up.
	dir := e.cwd
	if call.Cwd != "" {
		if !filepath.IsAbs(call.Cwd) || strings.ContainsAny(call.Cwd, "\x00\n\r") {
			fmt.Fprintf(e.stderr, "zerofs: warning: the hook's cwd %s is not an absolute path; %s not recorded\n", quote.Name(call.Cwd), what)
			return nil
		}
		dir = filepath.Clean(call.Cwd)
	}
	ws, err := history.Find(dir)
	if p := hooks.Path(call); call.Cwd == "" && filepath.IsAbs(p) &&
		(errors.Is(err, history.ErrNoWorkspace) || errors.Is(err, history.ErrNotYours)) {
		// The payload says nowhere where the agent works (Windsurf's
		// pre_write_code) and the hook runs outside the workspace: the
		// file the tool writes is in it (which may not exist yet: Find
		// walks up past missing directories).
		if w, ferr := history.Find(filepath.Dir(filepath.Clean(p))); ferr == nil {
			ws, err = w, nil
		}
	}
	if errors.Is(err, history.ErrNoWorkspace) || errors.Is(err, history.ErrNotYours) {
		fmt.Fprintf(e.stderr, "zerofs: warning: %v; %s not recorded\n", err, what)
		return nil
	}
	if err != nil {
		return err
	}
	if !ws.Mounted {
		// Nothing would fill the step: say so, and let the agent go on.
		if call.Kind == hooks.KindTool {
			lc := call
			lc.Cwd = ws.Root
			what = "step " + strconv.Quote(hooks.Label(lc))
		}
		fmt.Fprintf(e.stderr, "zerofs: warning: %s is not mounted; %s not recorded (zerofs mount %s)\n", quote.Name(ws.Root), what, quote.Name(ws.Root))
		return nil
	}
	if call.Kind == hooks.KindPrompt {
		return beginTurn(e, ws, call, noPrompt)
	}
	if call.Kind == hooks.KindResult {
		return recordHookResult(e, ws, call, noPrompt)
	}
	// Paths in the label are relative to the workspace, as in the log.
	lc := call
	lc.Cwd = ws.Root
	label := hooks.Label(lc)
	payload, err := json.Marshal(hookPayload(call))
	if err != nil {
		return err
	}
	return beginStep(e, ws, label, payload)
}

// hookPayload is what a hook's tool_call records besides its label: the
// tool and its input, the hook event, the agent and its session.
func hookPayload(c hooks.Call) map[string]any {
	extra := map[string]any{}
	if c.Tool != "" {
		extra["tool"] = c.Tool
	}
	if len(c.Input) > 0 && json.Valid(c.Input) {
		if in, cut := cutInput(c.Input); cut {
			// The step is what matters; a tool input this large (a
			// whole file in a Write) is kept cut, and says so.
			if in != nil {
				extra["input"] = in
			}
			extra["inputCut"] = true
			extra["inputBytes"] = len(c.Input)
		} else {
			extra["input"] = c.Input
		}
	}
	if c.Event != "" {
		extra["hookEvent"] = c.Event
	}
	if c.Agent != "" {
		extra["agent"] = c.Agent
	}
	if c.Session != "" {
		extra["agentSession"] = c.Session
	}
	if c.ToolUseID != "" {
		extra["toolUseId"] = c.ToolUseID
	}
	return extra
}

// maxInput bounds the tool input a step's tool_call keeps whole; a request
// to .zero/step is at most control.MaxRequest.
const maxInput = 256 << 10

// maxInputString bounds each string of a tool input that is cut.
const maxInputString = 4 << 10

// cutInput is a tool input (valid JSON) as the tool_call keeps it: in
// itself when it is at most maxInput bytes, else (cut true) with every
// string cut to maxInputString bytes and every array to its first 64
// elements, or nil when even that is over maxInput.
func cutInput(in json.RawMessage) (json.RawMessage, bool) {
	if len(in) <= maxInput {
		return in, false
	}
	var v any
	if json.Unmarshal(in, &v) != nil {
		return nil, true
	}
	b, err := json.Marshal(cutValue(v))
	if err != nil || len(b) > maxInput {
		return nil, true
	}
	return b, true
}

func cutValue(v any) any {
	switch v := v.(type) {
	case string:
		if len(v) > maxInputString {
			return strings.ToValidUTF8(v[:maxInputString], "") + "…"
		}
	case []any:
		if len(v) > 64 {
			v = v[:64]
		}
		for i := range v {
			v[i] = cutValue(v[i])
		}
		return v
	case map[string]any:
		for k := range v {
			v[k] = cutValue(v[k])
		}
	}
	return v
}

func runRun(e *env, c *command, args []string) error {
	o, _, argv, err := c.parse(args)
	if err != nil {
		return err
	}
	label := o.String("label")
	if len(argv) == 0 {
		return usagef(c, "want a command after --")
	}
	if label == "" {
		label = strings.Join(argv, " ")
	}
	if strings.ContainsAny(label, "\n\r") {
		label = strings.NewReplacer("\n", " ", "\r", " ").Replace(label)
	}
	ws, err := history.Find(e.cwd)
	if err != nil {
		return err
	}
	if !ws.Mounted {
		return notMounted(ws, "nothing the command does would be recorded")
	}
	warnBacking(e)
	// A command that cannot run leaves no step: exit 127, as a shell does.
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = e.cwd
	if cmd.Err != nil {
		fmt.Fprintf(e.stderr, "zerofs: run: %s: command not found\n", argv[0])
		return &exitError{code: 127}
	}
	id := runID()
	if err := beginStep(e, ws, label, []byte(`{"toolUseId":"`+id+`"}`)); err != nil {
		return err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, e.stdout, e.stderr
	// Ctrl-C reaches the command through the terminal's process group:
	// zerofs only has to survive it and pass on signals sent to it alone.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	start := time.Now()
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
	took := time.Since(start)
	var xe *exec.ExitError
	if errors.As(err, &xe) {
		if st, ok := xe.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			recordRunResult(e, ws, id, 128+int(st.Signal()), took, "killed by signal "+st.Signal().String())
			return &exitError{code: 128 + int(st.Signal())}
		}
		recordRunResult(e, ws, id, xe.ExitCode(), took, "")
		return &exitError{code: xe.ExitCode()}
	}
	if err == nil {
		recordRunResult(e, ws, id, 0, took, "")
	}
	return err
}

// maxPrompt bounds the prompt text a turn keeps: the log is not a
// transcript (the agent keeps that), and a pasted file must not bloat it.
const maxPrompt = 16 << 10

// beginTurn records a turn from a prompt hook: the prompt's text (unless
// noPrompt), the agent and its session.
func beginTurn(e *env, ws *history.Workspace, c hooks.Call, noPrompt bool) error {
	payload := map[string]any{}
	if !noPrompt {
		p := strings.ToValidUTF8(c.Prompt, "\uFFFD")
		if len(p) > maxPrompt {
			p = strings.ToValidUTF8(p[:maxPrompt], "") + "…"
		}
		payload["prompt"] = p
	}
	if c.Session != "" {
		payload["agentSession"] = c.Session
	}
	if c.Agent != "" {
		payload["agent"] = c.Agent
	}
	if c.Event != "" {
		payload["hookEvent"] = c.Event
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	h, err := history.Open(e.ctx, ws, history.Options{Logger: e.logger()})
	if err != nil {
		return err
	}
	err = h.BeginTurn(e.ctx, raw)
	if cerr := h.Close(); err == nil {
		err = cerr
	}
	return err
}
