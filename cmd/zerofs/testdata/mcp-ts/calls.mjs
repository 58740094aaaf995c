// A scripted MCP session with the official TypeScript SDK's client,
// against the real `zerofs mcp` binary over stdio (runTSCalls runs it): it
// reads a JSON list of calls ({name, args, wantError}) on stdin, makes
// each, checks each structured result against the tool's output schema
// (the SDK's client does too) with ajv, and prints one JSON line per call
// ({text, structured, isError}) for the Go test to check. It exits 1 on a
// schema failure or a protocol error.
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import Ajv from "ajv"

const [zerofs, dir] = process.argv.slice(2)
let input = ""
for await (const chunk of process.stdin) input += chunk
const calls = JSON.parse(input)

const transport = new StdioClientTransport({ command: zerofs, args: ["mcp"], cwd: dir, stderr: "ignore" })
const client = new Client({ name: "zerofs-ts-calls", version: "0" })
await client.connect(transport)
const { tools } = await client.listTools()
const ajv = new Ajv({ strict: false })
const validators = {}
for (const t of tools) validators[t.name] = ajv.compile(t.outputSchema)

for (const c of calls) {
  const res = await client.callTool({ name: c.name, arguments: c.args })
  if (!res.isError && !validators[c.name](res.structuredContent)) {
    console.error(`${c.name} ${JSON.stringify(c.args)}: ${ajv.errorsText(validators[c.name].errors)}`)
    process.exit(1)
  }
  console.log(JSON.stringify({ text: res.content?.[0]?.text ?? "", structured: res.structuredContent ?? null, isError: !!res.isError }))
}
await client.close()
