//! OpenAI Chat Completions: `POST /v1/chat/completions`, streaming and not (aider through
//! litellm, opencode's OpenAI-compatible provider, and most other clients).
//!
//! Request: `{"model", "messages", "tools": [{"type": "function", "function": {"name",
//! "parameters"}}], "stream": true, "stream_options": {"include_usage": true}, ...}`.
//!
//! Streaming response: data-only events (`data: JSON`, no `event:` line), ended by
//! `data: [DONE]`. Each chunk is `{"id", "object": "chat.completion.chunk", "created", "model",
//! "choices": [{"index": 0, "delta": {...}, "finish_reason": null}]}`:
//!
//! 1. `delta: {"role": "assistant", "content": ""}`
//! 2. with a text: `delta: {"content": TEXT}`
//! 3. per call `i`: `delta: {"tool_calls": [{"index": i, "id": "call_...", "type": "function",
//!    "function": {"name", "arguments": ""}}]}` then `delta: {"tool_calls": [{"index": i,
//!    "function": {"arguments": "<whole JSON>"}}]}`
//! 4. `delta: {}` with `"finish_reason": "tool_calls" | "stop"`; when the request did not ask for
//!    `include_usage` this chunk also carries `usage`
//! 5. when `stream_options.include_usage` is set: a last chunk with `"choices": []` and `usage`
//!    (`{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details":
//!    {"cached_tokens"}}`) — clients keep the last usage they see, so it is counted once
//! 6. `data: [DONE]`

use serde_json::{json, Value};

use crate::sse;
use crate::tools::ToolSpec;
use crate::wire::{Reply, Side};

/// The tools a Chat Completions request offers (`tools`, or legacy `functions`).
pub fn tools(body: &Value) -> Vec<ToolSpec> {
    let mut out = Vec::new();
    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        for t in tools {
            let f = t.get("function").unwrap_or(t);
            if let Some(name) = f.get("name").and_then(Value::as_str) {
                out.push(ToolSpec {
                    name: name.into(),
                    schema: f.get("parameters").cloned().unwrap_or(Value::Null),
                    namespace: None,
                });
            }
        }
    }
    if let Some(fns) = body.get("functions").and_then(Value::as_array) {
        for f in fns {
            if let Some(name) = f.get("name").and_then(Value::as_str) {
                out.push(ToolSpec {
                    name: name.into(),
                    schema: f.get("parameters").cloned().unwrap_or(Value::Null),
                    namespace: None,
                });
            }
        }
    }
    out
}

/// Whether the request is a side request whatever the script says.
pub fn side(body: &Value) -> Option<Side> {
    let max = body
        .get("max_completion_tokens")
        .or_else(|| body.get("max_tokens"))
        .and_then(Value::as_u64);
    if max.is_some_and(|n| n <= 1) {
        return Some(Side::text("max_tokens <= 1 (a quota probe)"));
    }
    if let Some(f) = body.get("response_format") {
        match f.get("type").and_then(Value::as_str) {
            Some("json_schema") => {
                let schema = f
                    .get("json_schema")
                    .and_then(|s| s.get("schema"))
                    .cloned()
                    .unwrap_or(Value::Null);
                return Some(Side::json("asks for a JSON-schema answer", schema));
            }
            Some("json_object") => return Some(Side::json("asks for a JSON answer", json!({}))),
            _ => {}
        }
    }
    None
}

/// Whether the request asks for a stream.
pub fn streaming(body: &Value) -> bool {
    body.get("stream").and_then(Value::as_bool).unwrap_or(false)
}

fn include_usage(body: &Value) -> bool {
    body.get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn usage(reply: &Reply) -> Value {
    let prompt = reply.usage.prompt_total();
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": reply.usage.output,
        "total_tokens": prompt + reply.usage.output,
        "prompt_tokens_details": { "cached_tokens": reply.usage.cache_read },
        "completion_tokens_details": { "reasoning_tokens": 0 },
    })
}

fn finish_reason(reply: &Reply) -> &'static str {
    if reply.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

fn id(reply: &Reply) -> String {
    format!("chatcmpl-mock{:06}", reply.seq)
}

/// The non-streaming response body.
pub fn completion(reply: &Reply) -> Value {
    let mut message = json!({ "role": "assistant", "content": reply.text });
    if !reply.calls.is_empty() {
        message["tool_calls"] = reply
            .calls
            .iter()
            .map(|c| {
                json!({ "id": c.id("call"), "type": "function",
                        "function": { "name": c.call.name, "arguments": c.call.arguments.to_string() } })
            })
            .collect();
    }
    json!({
        "id": id(reply),
        "object": "chat.completion",
        "created": 0,
        "model": reply.model,
        "choices": [{ "index": 0, "message": message, "finish_reason": finish_reason(reply) }],
        "usage": usage(reply),
    })
}

/// The streaming response body (see the module documentation for the sequence).
pub fn stream(reply: &Reply, request: &Value) -> String {
    let mut out = String::new();
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({
            "id": id(reply), "object": "chat.completion.chunk", "created": 0, "model": reply.model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
        })
    };
    sse::write_event(
        &mut out,
        None,
        &chunk(json!({ "role": "assistant", "content": "" }), None),
    );
    if let Some(text) = &reply.text {
        sse::write_event(&mut out, None, &chunk(json!({ "content": text }), None));
    }
    for c in &reply.calls {
        sse::write_event(
            &mut out,
            None,
            &chunk(
                json!({ "tool_calls": [{ "index": c.index, "id": c.id("call"), "type": "function",
                                         "function": { "name": c.call.name, "arguments": "" } }] }),
                None,
            ),
        );
        sse::write_event(
            &mut out,
            None,
            &chunk(
                json!({ "tool_calls": [{ "index": c.index,
                                         "function": { "arguments": c.call.arguments.to_string() } }] }),
                None,
            ),
        );
    }
    let mut last = chunk(json!({}), Some(finish_reason(reply)));
    if include_usage(request) {
        sse::write_event(&mut out, None, &last);
        let usage_chunk = json!({
            "id": id(reply), "object": "chat.completion.chunk", "created": 0, "model": reply.model,
            "choices": [], "usage": usage(reply),
        });
        sse::write_event(&mut out, None, &usage_chunk);
    } else {
        last["usage"] = usage(reply);
        sse::write_event(&mut out, None, &last);
    }
    sse::write_raw(&mut out, "[DONE]");
    out
}
