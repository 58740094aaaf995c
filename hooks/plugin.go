package hooks

import (
	"encoding/json"
	"strings"
)

// opencodePlugin is the OpenCode plugin zerofs installs: before each tool
// call it runs `zerofs step --hook` with the call's JSON, after it what came
// of it (the exit code a shell command's metadata gives, the time it took,
// and on failure the output's first line: never the rest of the output),
// and at each prompt it sends the prompt's text, so OpenCode is recorded
// like the agents with hooks. It waits for zerofs (synchronously) so the step has
// begun before the tool runs; zerofs never fails the call.
func opencodePlugin(a Agent, opts InstallOptions) string {
	argv := func(prompt bool) string {
		args := []string{opts.Zerofs, "step", "--hook", "--agent", a.Name}
		if prompt && opts.NoPrompt {
			args = append(args, "--no-prompt")
		}
		b, _ := json.Marshal(args)
		return strings.ReplaceAll(string(b), `","`, `", "`)
	}
	return `// zerofs: records each OpenCode tool call as a zerofs step and each prompt
// as a turn (written by 'zerofs hooks install opencode'; it is rewritten by
// the next install, so edit that command's flags rather than this file).
import { spawnSync } from "node:child_process"

const TOOL = ` + argv(false) + `
const PROMPT = ` + argv(true) + `

export const ZerofsPlugin = async ({ directory }) => {
  const started = new Map()
  const send = (argv, payload) => {
    try {
      spawnSync(argv[0], argv.slice(1), {
        cwd: directory,
        input: JSON.stringify(payload),
        stdio: ["pipe", "ignore", "inherit"],
        timeout: 30000,
      })
    } catch (e) {
      // zerofs never stops OpenCode.
    }
  }
  return {
    "tool.execute.before": async (input, output) => {
      if (started.size > 1000) started.clear()
      started.set(input.callID, Date.now())
      send(TOOL, {
        agent: "opencode",
        hook_event_name: "tool.execute.before",
        session_id: input.sessionID,
        tool_use_id: input.callID,
        tool_name: input.tool,
        tool_input: output.args,
        cwd: directory,
      })
    },
    "tool.execute.after": async (input, output) => {
      const t0 = started.get(input.callID)
      started.delete(input.callID)
      const response = {}
      try {
        const meta = (output && output.metadata) || {}
        if (typeof meta.exit === "number") response.exit = meta.exit
        if (typeof meta.exit === "number" && meta.exit !== 0) {
          const text = String(meta.output || output.output || "")
          const first = text.split("\n").find((l) => l.trim() !== "")
          if (first) response.error = first.slice(0, 512)
        }
      } catch (e) {
        // An output of another shape: the result without its details.
      }
      send(PROMPT, {
        agent: "opencode",
        hook_event_name: "tool.execute.after",
        session_id: input.sessionID,
        tool_use_id: input.callID,
        tool_name: input.tool,
        tool_response: response,
        duration_ms: t0 === undefined ? undefined : Date.now() - t0,
        cwd: directory,
      })
    },
    "chat.message": async (input, output) => {
      const text = (output.parts || [])
        .filter((p) => p.type === "text" && !p.synthetic)
        .map((p) => p.text)
        .join("\n")
      send(PROMPT, {
        agent: "opencode",
        hook_event_name: "chat.message",
        session_id: input.sessionID,
        cwd: directory,
        prompt: text,
        // OpenCode's command line: 'opencode run' quotes a message's
        // words that hold spaces, and zerofs records them as typed.
        argv: process.argv.slice(2),
      })
    },
  }
}
`
}
