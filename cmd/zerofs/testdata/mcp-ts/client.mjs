// An MCP client written with the official TypeScript SDK, driving the real
// `zerofs mcp` binary over stdio (TestMCPTypeScriptClient runs it). The
// SDK's client validates every structured result against the tool's
// output schema itself, and so does this script, with ajv, the validator
// the SDK uses. It prints one JSON line per check and exits 1 on the first
// failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import Ajv from "ajv"

const [zerofs, dir] = process.argv.slice(2)
const fail = (msg) => {
  console.log(JSON.stringify({ ok: false, msg }))
  process.exit(1)
}
const transport = new StdioClientTransport({ command: zerofs, args: ["mcp"], cwd: dir, stderr: "ignore" })
const client = new Client({ name: "zerofs-ts-test", version: "0" })
await client.connect(transport)
if (!client.getInstructions()?.includes("zerofs_status")) fail("no server instructions")

const { tools } = await client.listTools()
const ajv = new Ajv({ strict: false })
const validators = {}
for (const t of tools) {
  if (!t.outputSchema) fail(`${t.name} has no output schema`)
  if (JSON.stringify(t.inputSchema).includes("null")) fail(`${t.name}'s input schema names null`)
  if (!t.annotations) fail(`${t.name} has no annotations`)
  validators[t.name] = ajv.compile(t.outputSchema)
}

const call = async (name, args, wantError) => {
  const res = await client.callTool({ name, arguments: args })
  if (!!res.isError !== !!wantError) fail(`${name} ${JSON.stringify(args)}: isError ${res.isError}: ${JSON.stringify(res.content)}`)
  if (!res.isError) {
    if (!res.structuredContent) fail(`${name}: no structuredContent`)
    if (!validators[name](res.structuredContent)) fail(`${name}: ${ajv.errorsText(validators[name].errors)}`)
  }
  console.log(JSON.stringify({ ok: true, name, args, isError: !!res.isError, text: res.content?.[0]?.text, structured: res.structuredContent }))
  return res
}

await call("zerofs_status", {})
// Unmounted: nothing would record the step, so it is refused, as `zerofs step` is.
await call("zerofs_step", { label: "--help" }, true)
await call("zerofs_log", {})
await call("zerofs_log", { n: 2, all: true, details: true })
await call("zerofs_log", { n: -1 }, true)
await call("zerofs_log", { n: 1e30 }, true)
await call("zerofs_diff", { from: 0 })
await call("zerofs_diff", { from: 0, to: 1 })
await call("zerofs_show", { seq: 0, path: "a.txt" })
await call("zerofs_rewind", { seq: 0, dry_run: true })
await call("zerofs_rewind", { seq: 0, paths: ["a.txt"], dry_run: true })
await call("zerofs_rewind", { seq: 1e20 }, true)
await call("zerofs_undo", { dry_run: true })
await call("zerofs_redo", {}, true)
await call("zerofs_revert", { seq: 1, dry_run: true })
await client.close()
console.log(JSON.stringify({ ok: true, done: true }))
