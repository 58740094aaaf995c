# For OpenCode: python3 openai_chat.py PORT WORKSPACE (see ../payloads/SOURCES.md).
# A fake OpenAI chat-completions API (streaming) for OpenCode: the main
# agent's calls get the next tool call of a script (by the number of tool
# messages so far), then a closing text; other calls get a short text.
# With ZEROFS_CAPTURE_SCRIPT=results: a command that succeeds and one that
# fails (for the after-tool hook).
import json, os, sys, time, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WS = sys.argv[2]
SCRIPT = [
    ("bash", {"command": "go test ./...", "description": "Runs the tests"}),
    ("edit", {"filePath": WS + "/app.py", "oldString": "hi", "newString": "hello"}),
]
if os.environ.get("ZEROFS_CAPTURE_SCRIPT") == "results":
    SCRIPT = [
        ("bash", {"command": "ls src", "description": "Lists the sources"}),
        ("bash", {"command": "ls missing.txt", "description": "Looks for missing.txt"}),
    ]

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        sys.stderr.write("mock: " + (a[0] % a[1:]) + "\n")
    def reply(self, ctype, b):
        self.send_response(200); self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_GET(self):
        self.reply("application/json", b'{"object":"list","data":[{"id":"m","object":"model"}]}')
    def do_POST(self):
        n = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(n) or b"{}")
        msgs = body.get("messages", [])
        results = sum(1 for m in msgs if m.get("role") == "tool")
        tools = [t.get("function", {}).get("name") for t in body.get("tools", []) or []]
        main = "bash" in tools
        sys.stderr.write("mock: %s tools=%s results=%d stream=%s\n" % (self.path, tools, results, body.get("stream")))
        base = {"id": "chatcmpl-" + uuid.uuid4().hex[:8], "object": "chat.completion.chunk", "created": int(time.time()), "model": body.get("model")}
        chunks = []
        if main and results < len(SCRIPT):
            name, args = SCRIPT[results]
            chunks.append(dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": 0, "id": "call_" + uuid.uuid4().hex[:12], "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}, "finish_reason": None}]))
            chunks.append(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]))
        else:
            chunks.append(dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": "Done."}, "finish_reason": None}]))
            chunks.append(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]))
        chunks.append(dict(base, choices=[], usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}))
        if body.get("stream"):
            data = b"".join(("data: " + json.dumps(c) + "\n\n").encode() for c in chunks) + b"data: [DONE]\n\n"
            return self.reply("text/event-stream", data)
        msg = {"role": "assistant", "content": "Done."}
        self.reply("application/json", json.dumps({"id": base["id"], "object": "chat.completion", "created": base["created"], "model": base["model"], "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}).encode())

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
