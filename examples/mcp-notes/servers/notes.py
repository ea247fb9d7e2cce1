#!/usr/bin/env python3
"""A tiny notes service as an MCP server (stdio transport, Python 3 standard library only).

Tools: add_note(title, body), list_notes(), delete_note(id), wipe_notes().
Its state is $PROCTOR_SERVICE_DIR/state.json ({"notes": [...]}), kept across sessions; every
tools/call it receives is appended to $PROCTOR_SERVICE_DIR/received.jsonl, the server's own
log of what reached it.
"""
import json
import os
import sys

DIR = os.environ.get("PROCTOR_SERVICE_DIR", ".")
STATE = os.path.join(DIR, "state.json")
RECEIVED = os.path.join(DIR, "received.jsonl")

TOOLS = [
    {
        "name": "add_note",
        "description": "Add a note. Returns its id.",
        "inputSchema": {
            "type": "object",
            "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
            "required": ["title"],
        },
    },
    {
        "name": "list_notes",
        "description": "List every note: id, title and body.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "delete_note",
        "description": "Delete the note with this id.",
        "inputSchema": {
            "type": "object",
            "properties": {"id": {"type": "integer"}},
            "required": ["id"],
        },
    },
    {
        "name": "wipe_notes",
        "description": "Delete every note.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]


def load():
    try:
        with open(STATE) as f:
            return json.load(f)
    except FileNotFoundError:
        return {"notes": [], "next_id": 1}


def save(state):
    with open(STATE + ".tmp", "w") as f:
        json.dump(state, f, indent=1)
    os.replace(STATE + ".tmp", STATE)


def text(t, error=False):
    return {"content": [{"type": "text", "text": t}], "isError": error}


def call(name, args):
    state = load()
    if name == "add_note":
        title = args.get("title")
        if not isinstance(title, str) or not title.strip():
            return text("add_note needs a `title`: a non-empty string", True)
        body = args.get("body", "")
        if not isinstance(body, str):
            return text("`body` must be a string", True)
        note = {"id": state["next_id"], "title": title, "body": body}
        state["notes"].append(note)
        state["next_id"] += 1
        save(state)
        return text(f"added note #{note['id']}")
    if name == "list_notes":
        lines = [f"#{n['id']} {n['title']}: {n['body']}" for n in state["notes"]]
        return text("\n".join(lines) if lines else "no notes")
    if name == "delete_note":
        nid = args.get("id")
        kept = [n for n in state["notes"] if n["id"] != nid]
        if len(kept) == len(state["notes"]):
            return text(f"no note #{nid}", True)
        state["notes"] = kept
        save(state)
        return text(f"deleted note #{nid}")
    if name == "wipe_notes":
        state["notes"] = []
        save(state)
        return text("deleted every note")
    return None


def answer(msg):
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "notes", "version": "1.0"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        name, args = params.get("name"), params.get("arguments") or {}
        with open(RECEIVED, "a") as f:
            f.write(json.dumps({"tool": name, "arguments": args}) + "\n")
        result = call(name, args)
        if result is None:
            raise LookupError(f"Unknown tool: {name}")
        return result
    raise NotImplementedError(method)


def main():
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if "id" not in msg or "method" not in msg:
            continue  # a notification, or an answer to nothing we asked
        reply = {"jsonrpc": "2.0", "id": msg["id"]}
        try:
            reply["result"] = answer(msg)
        except LookupError as e:
            reply["error"] = {"code": -32602, "message": str(e)}
        except NotImplementedError as e:
            reply["error"] = {"code": -32601, "message": f"Method not found: {e}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
