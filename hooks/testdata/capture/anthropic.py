# A fake Anthropic Messages API for capturing Claude Code's hook payloads
# (see ../payloads/SOURCES.md): python3 anthropic.py PORT WORKSPACE [sub].
# Each /v1/messages call gets the next tool_use of a script, by the number of
# tool_result blocks already in the conversation, then a closing text. With
# "sub", the main agent (the one with the Agent tool) starts a subagent,
# which runs one Bash command. With "worktree", the main agent starts two
# subagents with worktree isolation, one after the other: the first writes
# greet.py in its worktree, the second only lists the files; then the main
# agent runs `zerofs merge` of the first one's worktree (the path its
# result names) when ZEROFS_CAPTURE_MERGE is set. With
# "enter", the main agent enters a worktree of its own (EnterWorktree),
# writes greet.py there, and leaves it with ExitWorktree "remove" (then, if
# that was refused, again with discard_changes). With
# ZEROFS_CAPTURE_SCRIPT=results, a command that succeeds and one that
# fails (for the after-tool hooks).
import json, os, re, sys, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WS = sys.argv[2]
MAIN_SCRIPT = [
    ("Bash", {"command": "rm -rf docs\nmkdir docs && echo rebuilt > docs/index.md", "description": "Remove and recreate the docs directory"}),
    ("Edit", {"file_path": WS + "/app.py", "old_string": "print('hi')", "new_string": "print('hello')"}),
    ("Write", {"file_path": WS + "/src/util.py", "content": "def util():\n    return 42\n"}),
]

if os.environ.get("ZEROFS_CAPTURE_SCRIPT") == "results":
    MAIN_SCRIPT = [
        ("Bash", {"command": "ls src", "description": "List the sources"}),
        ("Bash", {"command": "ls missing.txt", "description": "Look for missing.txt"}),
    ]

def sse(ev, data):
    return ("event: %s\ndata: %s\n\n" % (ev, json.dumps(data))).encode()

MAIN = [("Agent", {"description": "Check the docs", "prompt": "List the docs directory.", "subagent_type": "general-purpose"})]
SUB = [("Bash", {"command": "ls docs", "description": "List the docs directory"})]

WT_MAIN = [
    ("Agent", {"description": "Write greet.py", "prompt": "Write greet.py with a greet function.", "subagent_type": "general-purpose", "isolation": "worktree"}),
    ("Agent", {"description": "List the files", "prompt": "List the files.", "subagent_type": "general-purpose", "isolation": "worktree"}),
]
WT_WRITE = [("Bash", {"command": "printf 'def greet():\\n    return 1\\n' > greet.py", "description": "Write greet.py"})]
WT_ENTER = [
    ("EnterWorktree", {"name": "greet"}),
    ("Bash", {"command": "printf 'def greet():\\n    return 1\\n' > greet.py", "description": "Write greet.py"}),
    ("ExitWorktree", {"action": "remove"}),
    ("ExitWorktree", {"action": "remove", "discard_changes": True}),
]
WT_LIST = [("Bash", {"command": "ls", "description": "List the files"})]

def text_of(m):
    c = m.get("content")
    if isinstance(c, str):
        return c
    out = []
    for b in c or []:
        if b.get("type") == "text":
            out.append(b.get("text", ""))
        elif b.get("type") == "tool_result":
            r = b.get("content")
            out.append(r if isinstance(r, str) else " ".join(x.get("text", "") for x in r or [] if isinstance(x, dict)))
    return "\n".join(out)

def worktree_script(msgs, tools):
    """The worktree mode's script for this conversation."""
    # Subagents may start agents too: only the person's prompt is the main agent's.
    first = text_of(msgs[0]) if msgs else ""
    if "Write greet.py" in first:
        return WT_WRITE
    if "List the files" in first:
        return WT_LIST
    script = list(WT_MAIN)
    if os.environ.get("ZEROFS_CAPTURE_MERGE"):
        # The first subagent's result (or, for a background agent, the
        # notification that it finished) names its worktree: merge it.
        for m in msgs:
            t = text_of(m)
            if "greet" not in t:
                continue
            found = re.search(r"worktreePath(?:: |>)([^<\s]+)", t)
            if found:
                script.insert(2, ("Bash", {"command": os.environ["ZEROFS_CAPTURE_MERGE"] + " merge " + found.group(1), "description": "Merge the worktree"}))
                return script
    return script

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        sys.stderr.write("mock: " + (a[0] % a[1:]) + "\n")
    def do_GET(self):
        self.send_response(200); self.send_header("content-type","application/json"); b=b"{}"
        self.send_header("content-length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_HEAD(self):
        self.send_response(200); self.send_header("content-length","0"); self.end_headers()
    def do_POST(self):
        n = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(n) or b"{}")
        if "count_tokens" in self.path:
            b = json.dumps({"input_tokens": 10}).encode()
            self.send_response(200); self.send_header("content-type","application/json")
            self.send_header("content-length", str(len(b))); self.end_headers(); self.wfile.write(b); return
        if not self.path.startswith("/v1/messages"):
            b = b"{}"
            self.send_response(200); self.send_header("content-type","application/json")
            self.send_header("content-length", str(len(b))); self.end_headers(); self.wfile.write(b); return
        msgs = body.get("messages", [])
        results = sum(1 for m in msgs if isinstance(m.get("content"), list) for c in m["content"] if c.get("type") == "tool_result")
        tools = [t.get("name") for t in body.get("tools", [])]
        main = "Bash" in tools
        SCRIPT = MAIN_SCRIPT
        if len(sys.argv) > 3 and sys.argv[3] == "worktree":
            SCRIPT = worktree_script(msgs, tools)
        elif len(sys.argv) > 3 and sys.argv[3] == "enter":
            SCRIPT = WT_ENTER
        elif len(sys.argv) > 3:
            SCRIPT = MAIN if "Agent" in tools else SUB
        sys.stderr.write("mock: model=%s tools=%d results=%d stream=%s\n" % (body.get("model"), len(tools), results, body.get("stream")))
        mid = "msg_" + uuid.uuid4().hex[:24]
        out = [sse("message_start", {"type": "message_start", "message": {"id": mid, "type": "message", "role": "assistant", "model": body.get("model"), "content": [], "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}})]
        if main and results < len(SCRIPT):
            name, inp = SCRIPT[results]
            tid = "toolu_01" + uuid.uuid4().hex[:22]
            out.append(sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": tid, "name": name, "input": {}}}))
            out.append(sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": json.dumps(inp)}}))
            out.append(sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
            stop = "tool_use"
        else:
            out.append(sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))
            out.append(sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done."}}))
            out.append(sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
            stop = "end_turn"
        out.append(sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}}))
        out.append(sse("message_stop", {"type": "message_stop"}))
        if body.get("stream"):
            data = b"".join(out)
            self.send_response(200); self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(data))); self.end_headers(); self.wfile.write(data)
        else:
            # Non-streaming: a plain message.
            if main and results < len(SCRIPT):
                name, inp = SCRIPT[results]
                content = [{"type": "tool_use", "id": "toolu_01" + uuid.uuid4().hex[:22], "name": name, "input": inp}]
            else:
                content = [{"type": "text", "text": "Done."}]; stop = "end_turn"
            b = json.dumps({"id": mid, "type": "message", "role": "assistant", "model": body.get("model"), "content": content, "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}).encode()
            self.send_response(200); self.send_header("content-type","application/json")
            self.send_header("content-length", str(len(b))); self.end_headers(); self.wfile.write(b)

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
