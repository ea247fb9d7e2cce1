//! Anthropic Messages: `POST /v1/messages` (Claude Code sends `?beta=true`), streaming and not.
//!
//! Request: `{"model", "max_tokens", "system", "messages", "tools": [{"name", "description",
//! "input_schema"}], "stream": true, ...}`.
//!
//! Streaming response (`Content-Type: text/event-stream`), the exact sequence Claude Code and the
//! Anthropic SDKs accept; each event is `event: TYPE` + `data: JSON` with the same `type`:
//!
//! 1. `message_start` `{"message": {"id", "type": "message", "role": "assistant", "model",
//!    "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens",
//!    "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens": 0}}}`
//! 2. `ping`
//! 3. per content block `i` (text first, then one block per tool call):
//!    `content_block_start` `{"index": i, "content_block": {"type": "text", "text": ""}}` or
//!    `{"type": "tool_use", "id": "toolu_...", "name", "input": {}}`;
//!    `content_block_delta` `{"index": i, "delta": {"type": "text_delta", "text"}}` or
//!    `{"type": "input_json_delta", "partial_json": "<the whole arguments JSON>"}`;
//!    `content_block_stop` `{"index": i}`
//! 4. `message_delta` `{"delta": {"stop_reason": "tool_use" | "end_turn", "stop_sequence": null},
//!    "usage": {"input_tokens", "output_tokens", "cache_creation_input_tokens",
//!    "cache_read_input_tokens"}}` — cumulative counts, which clients take as final (they
//!    overwrite, never add, so the turn's usage is counted once)
//! 5. `message_stop`
//!
//! Non-streaming: the message object itself, with `content` holding the same blocks.
//! `POST /v1/messages/count_tokens` answers `{"input_tokens": N}` with N a size estimate.

use serde_json::{json, Value};

use crate::sse;
use crate::tools::ToolSpec;
use crate::wire::{Reply, Side};

/// The tools a Messages request offers.
pub fn tools(body: &Value) -> Vec<ToolSpec> {
    body.get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| {
                    Some(ToolSpec {
                        name: t.get("name")?.as_str()?.to_string(),
                        schema: t.get("input_schema").cloned().unwrap_or(Value::Null),
                        namespace: None,
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the request is a side request whatever the script says: a one-token quota probe or
/// a structured-output request.
pub fn side(body: &Value) -> Option<Side> {
    if body
        .get("max_tokens")
        .and_then(Value::as_u64)
        .is_some_and(|n| n <= 1)
    {
        return Some(Side::text("max_tokens <= 1 (a quota probe)"));
    }
    if let Some(schema) = body
        .get("output_format")
        .filter(|f| f.get("type").and_then(Value::as_str) == Some("json_schema"))
        .and_then(|f| f.get("schema"))
    {
        return Some(Side::json("asks for a JSON-schema answer", schema.clone()));
    }
    None
}

/// Whether the request asks for a stream.
pub fn streaming(body: &Value) -> bool {
    body.get("stream").and_then(Value::as_bool).unwrap_or(false)
}

fn usage_json(reply: &Reply, output: u64) -> Value {
    json!({
        "input_tokens": reply.usage.input,
        "cache_creation_input_tokens": reply.usage.cache_write,
        "cache_read_input_tokens": reply.usage.cache_read,
        "output_tokens": output,
    })
}

fn stop_reason(reply: &Reply) -> &'static str {
    if reply.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

/// The content blocks of a reply.
fn blocks(reply: &Reply) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(text) = &reply.text {
        out.push(json!({ "type": "text", "text": text }));
    }
    for c in &reply.calls {
        out.push(json!({ "type": "tool_use", "id": c.id("toolu"), "name": c.call.name, "input": c.call.arguments }));
    }
    out
}

/// The non-streaming response body.
pub fn message(reply: &Reply) -> Value {
    json!({
        "id": format!("msg_mock{:06}", reply.seq),
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": blocks(reply),
        "stop_reason": stop_reason(reply),
        "stop_sequence": null,
        "usage": usage_json(reply, reply.usage.output),
    })
}

/// The streaming response body (see the module documentation for the sequence).
pub fn stream(reply: &Reply) -> String {
    let mut out = String::new();
    let mut ev = |name: &str, data: Value| sse::write_event(&mut out, Some(name), &data);
    ev(
        "message_start",
        json!({
            "type": "message_start",
            "message": {
                "id": format!("msg_mock{:06}", reply.seq),
                "type": "message",
                "role": "assistant",
                "model": reply.model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": usage_json(reply, 0),
            }
        }),
    );
    ev("ping", json!({ "type": "ping" }));
    let mut index = 0;
    if let Some(text) = &reply.text {
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        );
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}),
        );
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
        index += 1;
    }
    for c in &reply.calls {
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": c.id("toolu"), "name": c.call.name, "input": {}}}),
        );
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": c.call.arguments.to_string()}}),
        );
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
        index += 1;
    }
    ev(
        "message_delta",
        json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null},
            "usage": usage_json(reply, reply.usage.output),
        }),
    );
    ev("message_stop", json!({ "type": "message_stop" }));
    out
}

/// An error body in the Messages shape.
pub fn error(kind: &str, message: &str) -> Value {
    json!({ "type": "error", "error": { "type": kind, "message": message } })
}
