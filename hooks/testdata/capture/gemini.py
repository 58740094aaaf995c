# For Gemini CLI: python3 gemini.py PORT WORKSPACE (see ../payloads/SOURCES.md).
# A fake Gemini API: streamGenerateContent answers with the next functionCall
# of a script (by the number of functionResponse parts in the request), then a
# closing text; other calls get a short text.
# With ZEROFS_CAPTURE_SCRIPT=results: a command that succeeds, one that
# fails, and a replace that fails (for the after-tool hooks).
import json, os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WS = sys.argv[2]
SCRIPT = [
    ("run_shell_command", {"command": "npm test -- --watch=false", "description": "Run the tests"}),
    ("write_file", {"file_path": WS + "/app.py", "content": "print('hello')\n"}),
    ("replace", {"file_path": WS + "/app.py", "old_string": "hello", "new_string": "greetings", "instruction": "Say greetings"}),
]
if os.environ.get("ZEROFS_CAPTURE_SCRIPT") == "results":
    SCRIPT = [
        ("run_shell_command", {"command": "ls src", "description": "List the sources"}),
        ("run_shell_command", {"command": "ls missing.txt", "description": "Look for missing.txt"}),
        ("replace", {"file_path": WS + "/app.py", "old_string": "no such text", "new_string": "greetings", "instruction": "Say greetings"}),
    ]

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        sys.stderr.write("mock: " + (a[0] % a[1:]) + "\n")
    def reply(self, ctype, b):
        self.send_response(200); self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_GET(self):
        self.reply("application/json", b"{}")
    def do_POST(self):
        n = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(n) or b"{}")
        if "countTokens" in self.path:
            return self.reply("application/json", b'{"totalTokens": 10}')
        contents = body.get("contents", [])
        results = sum(1 for c in contents for p in c.get("parts", []) if "functionResponse" in p)
        tools = body.get("tools") or []
        decls = [d.get("name") for t in tools for d in t.get("functionDeclarations", [])]
        main = "run_shell_command" in decls
        sys.stderr.write("mock: %s tools=%d results=%d\n" % (self.path, len(decls), results))
        if main and results < len(SCRIPT):
            name, args = SCRIPT[results]
            parts = [{"functionCall": {"name": name, "args": args}}]
        elif "streamGenerateContent" in self.path or main:
            parts = [{"text": "Done."}]
        else:
            # Side calls (routing, next speaker, ...) expect JSON text.
            parts = [{"text": json.dumps({"reasoning": "done", "next_speaker": "user", "model_choice": "flash"})}]
        resp = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}}
        if "alt=sse" in self.path:
            return self.reply("text/event-stream", ("data: " + json.dumps(resp) + "\r\n\r\n").encode())
        if "streamGenerateContent" in self.path:
            return self.reply("application/json", json.dumps([resp]).encode())
        return self.reply("application/json", json.dumps(resp).encode())

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
