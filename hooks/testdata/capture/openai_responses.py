# For Codex: python3 openai_responses.py PORT (see ../payloads/SOURCES.md).
# A fake OpenAI Responses API for Codex: each POST /v1/responses answers with
# the next tool call of a script (by the number of tool outputs in the input),
# then a closing message.
# With ZEROFS_CAPTURE_SCRIPT=results: a command that succeeds, then one
# that fails (for the after-tool hook), instead of the test run and patch.
import json, os, sys, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PATCH = "*** Begin Patch\n*** Update File: src/a.go\n@@ func A() int {\n-\treturn 1\n+\treturn 2\n*** Add File: src/b.go\n+package src\n*** End Patch\n"

def sse(ev):
    return ("event: %s\ndata: %s\n\n" % (ev["type"], json.dumps(ev))).encode()

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        sys.stderr.write("mock: " + (a[0] % a[1:]) + "\n")
    def reply(self, ctype, b, code=200):
        self.send_response(code); self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_GET(self):
        self.reply("application/json", b'{"object":"list","data":[],"models":[]}')
    def do_POST(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) or b"{}"
        try:
            body = json.loads(raw)
        except Exception:
            body = {}
        items = body.get("input", []) if isinstance(body.get("input"), list) else []
        results = sum(1 for it in items if isinstance(it, dict) and it.get("type") in ("function_call_output", "custom_tool_call_output"))
        tools = {}
        for t in body.get("tools", []) or []:
            nm = t.get("name") or (t.get("function") or {}).get("name")
            tools[nm] = t.get("type")
        sys.stderr.write("mock: %s tools=%s results=%d\n" % (self.path, sorted(k for k in tools if k), results))
        rid = "resp_" + uuid.uuid4().hex[:16]
        evs = [{"type": "response.created", "response": {"id": rid}}]
        cid = "call_" + uuid.uuid4().hex[:16]
        item = None
        if os.environ.get("ZEROFS_CAPTURE_SCRIPT") == "results":
            cmds = ["ls src", "ls missing.txt"]
            if results < len(cmds) and "shell_command" in tools:
                item = {"type": "function_call", "name": "shell_command", "arguments": json.dumps({"command": cmds[results]}), "call_id": cid}
            elif results < len(cmds) and "exec_command" in tools:
                item = {"type": "function_call", "name": "exec_command", "arguments": json.dumps({"cmd": cmds[results]}), "call_id": cid}
        elif results == 0:
            if "shell_command" in tools:
                item = {"type": "function_call", "name": "shell_command", "arguments": json.dumps({"command": "cargo test -p core"}), "call_id": cid}
            elif "exec_command" in tools:
                item = {"type": "function_call", "name": "exec_command", "arguments": json.dumps({"cmd": "cargo test -p core"}), "call_id": cid}
            elif "shell" in tools:
                item = {"type": "function_call", "name": "shell", "arguments": json.dumps({"command": ["bash", "-lc", "cargo test -p core"]}), "call_id": cid}
        elif results == 1 and "apply_patch" in tools:
            if tools["apply_patch"] == "custom":
                item = {"type": "custom_tool_call", "name": "apply_patch", "input": PATCH, "call_id": cid}
            else:
                item = {"type": "function_call", "name": "apply_patch", "arguments": json.dumps({"input": PATCH}), "call_id": cid}
        if item is None:
            item = {"type": "message", "role": "assistant", "id": "msg_" + uuid.uuid4().hex[:8], "content": [{"type": "output_text", "text": "Done."}]}
        item.setdefault("id", "fc_" + uuid.uuid4().hex[:8])
        evs.append({"type": "response.output_item.added", "output_index": 0, "item": item})
        evs.append({"type": "response.output_item.done", "output_index": 0, "item": item})
        evs.append({"type": "response.completed", "response": {"id": rid, "usage": {"input_tokens": 10, "input_tokens_details": None, "output_tokens": 5, "output_tokens_details": None, "total_tokens": 15}}})
        self.reply("text/event-stream", b"".join(sse(e) for e in evs))

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
