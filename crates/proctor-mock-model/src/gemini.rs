//! Google Gemini API (what Gemini CLI speaks with an API key):
//! `POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`, `...:generateContent` and
//! `...:countTokens`.
//!
//! Request: `{"contents": [{"role", "parts": [...]}], "systemInstruction", "tools":
//! [{"functionDeclarations": [{"name", "description", "parameters" | "parametersJsonSchema"}]}],
//! "generationConfig": {...}}`. A tool result comes back as a `functionResponse` part.
//!
//! Streaming response (`alt=sse`): data-only events (`data: JSON`, blank line), here a single
//! chunk: `{"candidates": [{"content": {"role": "model", "parts": [{"text"}, {"functionCall":
//! {"name", "args"}}]}, "finishReason": "STOP", "index": 0}], "usageMetadata":
//! {"promptTokenCount", "candidatesTokenCount", "totalTokenCount", "cachedContentTokenCount"},
//! "modelVersion", "responseId"}`. Without `alt=sse` the stream is a JSON array of such chunks.
//! `generateContent` answers the chunk itself; `countTokens` answers `{"totalTokens": N}`.
//! `promptTokenCount` is the prompt total (`input + cache_read + cache_write`) and
//! `cachedContentTokenCount` its `cache_read` part.

use serde_json::{json, Value};

use crate::sse;
use crate::tools::ToolSpec;
use crate::wire::{Reply, Side};

/// The function declarations a request offers.
pub fn tools(body: &Value) -> Vec<ToolSpec> {
    let mut out = Vec::new();
    for t in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for f in t
            .get("functionDeclarations")
            .or_else(|| t.get("function_declarations"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = f.get("name").and_then(Value::as_str) {
                let schema = f
                    .get("parametersJsonSchema")
                    .or_else(|| f.get("parameters"))
                    .cloned()
                    .unwrap_or(Value::Null);
                out.push(ToolSpec {
                    name: name.into(),
                    schema,
                    namespace: None,
                });
            }
        }
    }
    out
}

/// Whether the request is a side request whatever the script says.
pub fn side(body: &Value) -> Option<Side> {
    let config = body.get("generationConfig");
    let get = |k: &str| config.and_then(|c| c.get(k));
    if get("maxOutputTokens")
        .and_then(Value::as_u64)
        .is_some_and(|n| n <= 1)
    {
        return Some(Side::text("maxOutputTokens <= 1 (a quota probe)"));
    }
    if get("responseMimeType").and_then(Value::as_str) == Some("application/json") {
        let schema = get("responseJsonSchema")
            .or_else(|| get("responseSchema"))
            .cloned()
            .unwrap_or_else(|| json!({}));
        return Some(Side::json("asks for a JSON answer", schema));
    }
    None
}

fn usage(reply: &Reply) -> Value {
    let prompt = reply.usage.prompt_total();
    json!({
        "promptTokenCount": prompt,
        "candidatesTokenCount": reply.usage.output,
        "totalTokenCount": prompt + reply.usage.output,
        "cachedContentTokenCount": reply.usage.cache_read,
    })
}

/// The whole reply as one `GenerateContentResponse`.
pub fn chunk(reply: &Reply) -> Value {
    let mut parts = Vec::new();
    if let Some(text) = &reply.text {
        parts.push(json!({ "text": text }));
    }
    for c in &reply.calls {
        parts.push(json!({ "functionCall": { "name": c.call.name, "args": c.call.arguments } }));
    }
    json!({
        "candidates": [{
            "content": { "role": "model", "parts": parts },
            "finishReason": "STOP",
            "index": 0,
        }],
        "usageMetadata": usage(reply),
        "modelVersion": reply.model,
        "responseId": format!("mock{:06}", reply.seq),
    })
}

/// The `alt=sse` stream body.
pub fn stream_sse(reply: &Reply) -> String {
    let mut out = String::new();
    sse::write_event(&mut out, None, &chunk(reply));
    out
}

/// An error body in the Google shape.
pub fn error(code: u16, status: &str, message: &str) -> Value {
    json!({ "error": { "code": code, "message": message, "status": status } })
}
