package hooks

import (
	"encoding/json"
	"strings"
)

// opencodePlugin is the OpenCode plugin zerofs installs: before each tool
// call it runs `zerofs step --hook` with the call's JSON, and at each
// prompt it sends the prompt's text, so OpenCode is recorded like the
// agents with hooks. It waits for zerofs (synchronously) so the step has
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
