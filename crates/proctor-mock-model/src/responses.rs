//! OpenAI Responses: `POST /v1/responses`, streaming (what Codex sends) and not.
//!
//! Request: `{"model", "instructions", "input": [...], "tools": [{"type": "function", "name",
//! "parameters"}, {"type": "custom", "name", ...}], "stream": true, ...}`. After a tool call the
//! next request's `input` carries a `{"type": "function_call_output", "call_id", "output"}` item.
//!
//! Streaming response: data-bearing events, each `event: TYPE` + `data: JSON` whose `type` is the
//! same and which carries a growing `sequence_number`. Codex needs every `output_item.done` (it
//! acts on finished items) and the closing `response.completed` (without it the turn fails with
//! "stream closed before response.completed"); the other events are sent as the API sends them:
//!
//! 1. `response.created` and `response.in_progress`, `{"response": {"id", "object": "response",
//!    "status": "in_progress", "model", "output": [], "usage": null, ...}}`
//! 2. for a text, item `k`: `response.output_item.added` `{"output_index": k, "item": {"id":
//!    "msg_...", "type": "message", "status": "in_progress", "role": "assistant", "content": []}}`,
//!    `response.content_part.added` `{"item_id", "output_index", "content_index": 0, "part":
//!    {"type": "output_text", "text": "", "annotations": []}}`, `response.output_text.delta`
//!    `{"item_id", "output_index", "content_index", "delta"}`, `response.output_text.done`
//!    `{..., "text"}`, `response.content_part.done` `{..., "part"}`, `response.output_item.done`
//!    `{"output_index", "item": <the completed message>}`
//! 3. for each call, item `k`: `response.output_item.added` `{"item": {"id": "fc_...", "type":
//!    "function_call", "status": "in_progress", "call_id": "call_...", "name", "arguments": ""}}`,
//!    `response.function_call_arguments.delta` `{"item_id", "output_index", "delta"}`,
//!    `response.function_call_arguments.done` `{"item_id", "output_index", "arguments"}`,
//!    `response.output_item.done` `{"item": <the completed call>}`
//! 4. `response.completed` `{"response": {... "status": "completed", "output": [items], "usage":
//!    {"input_tokens", "input_tokens_details": {"cached_tokens"}, "output_tokens",
//!    "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens"}}}`
//!
//! `input_tokens` is the prompt total (`input + cache_read + cache_write` of the script) and
//! `cached_tokens` its `cache_read` part.

use serde_json::{json, Value};

use crate::sse;
use crate::tools::ToolSpec;
use crate::wire::{Reply, Side};

/// The tools a Responses request offers: function and custom tools in `tools`, and those of
/// `additional_tools` input items (Codex's "code mode" lists its tools there, grouped in
/// `namespace` entries).
pub fn tools(body: &Value) -> Vec<ToolSpec> {
    let mut out = Vec::new();
    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        collect(tools, &mut out);
    }
    for item in body
        .get("input")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(tools) = item.get("tools").and_then(Value::as_array) {
            collect(tools, &mut out);
        }
    }
    out
}

fn collect(tools: &[Value], out: &mut Vec<ToolSpec>) {
    for t in tools {
        if t.get("type").and_then(Value::as_str) == Some("namespace") {
            if let Some(inner) = t.get("tools").and_then(Value::as_array) {
                let from = out.len();
                collect(inner, out);
                let ns = t.get("name").and_then(Value::as_str).map(str::to_string);
                for spec in &mut out[from..] {
                    spec.namespace = spec.namespace.take().or_else(|| ns.clone());
                }
            }
            continue;
        }
        let Some(name) = t.get("name").and_then(Value::as_str) else {
            continue;
        };
        out.push(ToolSpec {
            name: name.to_string(),
            schema: t.get("parameters").cloned().unwrap_or(Value::Null),
            namespace: None,
        });
    }
}

/// Whether the request is a side request whatever the script says.
pub fn side(body: &Value) -> Option<Side> {
    if body
        .get("max_output_tokens")
        .and_then(Value::as_u64)
        .is_some_and(|n| n <= 1)
    {
        return Some(Side::text("max_output_tokens <= 1 (a quota probe)"));
    }
    let format = body.get("text").and_then(|t| t.get("format"));
    if let Some(f) = format {
        match f.get("type").and_then(Value::as_str) {
            Some("json_schema") => {
                let schema = f.get("schema").cloned().unwrap_or(Value::Null);
                return Some(Side::json("asks for a JSON-schema answer", schema));
            }
            Some("json_object") => {
                return Some(Side::json("asks for a JSON answer", json!({})));
            }
            _ => {}
        }
    }
    None
}

/// Whether the request asks for a stream.
pub fn streaming(body: &Value) -> bool {
    body.get("stream").and_then(Value::as_bool).unwrap_or(false)
}

fn usage(reply: &Reply) -> Value {
    let prompt = reply.usage.prompt_total();
    json!({
        "input_tokens": prompt,
        "input_tokens_details": { "cached_tokens": reply.usage.cache_read },
        "output_tokens": reply.usage.output,
        "output_tokens_details": { "reasoning_tokens": 0 },
        "total_tokens": prompt + reply.usage.output,
    })
}

fn message_item(reply: &Reply, text: &str, done: bool) -> Value {
    json!({
        "id": format!("msg_mock{:06}", reply.seq),
        "type": "message",
        "status": if done { "completed" } else { "in_progress" },
        "role": "assistant",
        "content": if done {
            json!([{ "type": "output_text", "text": text, "annotations": [] }])
        } else {
            json!([])
        },
    })
}

/// The output items of a reply, completed.
fn items(reply: &Reply) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(text) = &reply.text {
        out.push(message_item(reply, text, true));
    }
    for c in &reply.calls {
        out.push(call_item(c, &c.call.arguments.to_string(), "completed"));
    }
    out
}

/// A call's `function_call` output item.
fn call_item(c: &crate::wire::ReplyCall, arguments: &str, status: &str) -> Value {
    let mut item = json!({
        "id": c.id("fc"), "type": "function_call", "status": status,
        "call_id": c.id("call"), "name": c.call.name, "arguments": arguments,
    });
    // A tool of a `namespace` is called by both names, as the API answers for one.
    if let Some(ns) = &c.call.namespace {
        item["namespace"] = json!(ns);
    }
    item
}

fn response_object(reply: &Reply, done: bool) -> Value {
    json!({
        "id": format!("resp_mock{:06}", reply.seq),
        "object": "response",
        "created_at": 0,
        "status": if done { "completed" } else { "in_progress" },
        "error": null,
        "incomplete_details": null,
        "model": reply.model,
        "output": if done { json!(items(reply)) } else { json!([]) },
        "parallel_tool_calls": true,
        "usage": if done { usage(reply) } else { Value::Null },
    })
}

/// The non-streaming response body.
pub fn response(reply: &Reply) -> Value {
    response_object(reply, true)
}

/// The streaming response body (see the module documentation for the sequence).
pub fn stream(reply: &Reply) -> String {
    let mut out = String::new();
    let mut seq = 0u64;
    let mut ev = |name: &str, mut data: Value| {
        if let Some(obj) = data.as_object_mut() {
            obj.insert("type".into(), Value::String(name.into()));
            obj.insert("sequence_number".into(), Value::from(seq));
        }
        seq += 1;
        sse::write_event(&mut out, Some(name), &data);
    };
    ev(
        "response.created",
        json!({ "response": response_object(reply, false) }),
    );
    ev(
        "response.in_progress",
        json!({ "response": response_object(reply, false) }),
    );
    let mut k = 0;
    if let Some(text) = &reply.text {
        let item_id = format!("msg_mock{:06}", reply.seq);
        let part = json!({ "type": "output_text", "text": text, "annotations": [] });
        ev(
            "response.output_item.added",
            json!({ "output_index": k, "item": message_item(reply, text, false) }),
        );
        ev(
            "response.content_part.added",
            json!({ "item_id": item_id, "output_index": k, "content_index": 0,
                    "part": { "type": "output_text", "text": "", "annotations": [] } }),
        );
        ev(
            "response.output_text.delta",
            json!({ "item_id": item_id, "output_index": k, "content_index": 0, "delta": text, "logprobs": [] }),
        );
        ev(
            "response.output_text.done",
            json!({ "item_id": item_id, "output_index": k, "content_index": 0, "text": text, "logprobs": [] }),
        );
        ev(
            "response.content_part.done",
            json!({ "item_id": item_id, "output_index": k, "content_index": 0, "part": part }),
        );
        ev(
            "response.output_item.done",
            json!({ "output_index": k, "item": message_item(reply, text, true) }),
        );
        k += 1;
    }
    for c in &reply.calls {
        let args = c.call.arguments.to_string();
        ev(
            "response.output_item.added",
            json!({ "output_index": k, "item": call_item(c, "", "in_progress") }),
        );
        ev(
            "response.function_call_arguments.delta",
            json!({ "item_id": c.id("fc"), "output_index": k, "delta": args }),
        );
        ev(
            "response.function_call_arguments.done",
            json!({ "item_id": c.id("fc"), "output_index": k, "arguments": args }),
        );
        ev(
            "response.output_item.done",
            json!({ "output_index": k, "item": call_item(c, &args, "completed") }),
        );
        k += 1;
    }
    ev(
        "response.completed",
        json!({ "response": response_object(reply, true) }),
    );
    out
}

/// An error body in the OpenAI shape.
pub fn error(kind: &str, message: &str) -> Value {
    json!({ "error": { "type": kind, "code": kind, "message": message, "param": null } })
}
