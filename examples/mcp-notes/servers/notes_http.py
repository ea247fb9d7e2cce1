#!/usr/bin/env python3
"""The notes server of notes.py over MCP's streamable HTTP transport (Python 3 standard
library only): `python3 notes_http.py [PORT]` listens on 127.0.0.1:PORT (default 8765).

POST /mcp takes one JSON-RPC message: `initialize` opens a session (its id in the
`Mcp-Session-Id` header of the answer), which every later message must name; a notification
is answered 202; a `tools/call` is answered as a `text/event-stream` of one event, anything else
as JSON. DELETE /mcp ends the session. GET /health answers `ok`. Each message's method and
session are appended to $PROCTOR_SERVICE_DIR/sessions.txt, the server's own log of what
reached it (with notes.py's received.jsonl of the tool calls).
"""
import itertools
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import notes  # noqa: E402

LOG = os.path.join(os.environ.get("PROCTOR_SERVICE_DIR", "."), "sessions.txt")
SESSIONS, NEXT, LOCK = set(), itertools.count(1), threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, code, body=b"", ctype="application/json", headers=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def note(self, what):
        with LOCK, open(LOG, "a") as f:
            f.write(what + "\n")

    def do_GET(self):
        if self.path == "/health":
            return self.reply(200, b"ok", "text/plain")
        self.reply(404)

    def do_DELETE(self):
        session = self.headers.get("Mcp-Session-Id")
        self.note("DELETE %s" % session)
        with LOCK:
            SESSIONS.discard(session)
        self.reply(200)

    def do_POST(self):
        if self.path != "/mcp":
            return self.reply(404)
        msg = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        session = self.headers.get("Mcp-Session-Id")
        self.note("%s %s" % (msg.get("method"), session))
        headers = []
        if msg.get("method") == "initialize":
            with LOCK:
                session = "s%d" % next(NEXT)
                SESSIONS.add(session)
            headers.append(("Mcp-Session-Id", session))
        elif session not in SESSIONS:
            return self.reply(400, b'{"error": "no such session"}')
        if "id" not in msg:
            return self.reply(202)
        reply = {"jsonrpc": "2.0", "id": msg["id"]}
        try:
            reply["result"] = notes.answer(msg)
        except LookupError as e:
            reply["error"] = {"code": -32602, "message": str(e)}
        except NotImplementedError as e:
            reply["error"] = {"code": -32601, "message": "Method not found: %s" % e}
        body = json.dumps(reply).encode()
        if msg["method"] == "tools/call":
            event = b"event: message\ndata: " + body + b"\n\n"
            return self.reply(200, event, "text/event-stream", headers)
        self.reply(200, body, headers=headers)


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8765
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
