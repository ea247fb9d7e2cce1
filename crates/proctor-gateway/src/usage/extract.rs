//! Reading usage from each API's JSON: whole response bodies and single stream events.
//!
//! Every API's figures are normalised to Anthropic's categories: `input` excludes cache reads
//! and writes, `output` includes reasoning.

use serde_json::Value;

use super::Usage;
use crate::api::Api;

/// What one stream event says.
#[derive(Debug, Default, PartialEq)]
pub(super) struct EventUsage {
    /// Usage figures the event sets (later events override earlier ones, field by field for
    /// Anthropic's `message_delta`).
    pub usage: Option<Usage>,
    /// For `message_delta`: only the fields present override.
    pub partial: Option<PartialUsage>,
    /// An error the stream reported in-band.
    pub error: Option<String>,
}

/// Fields of an Anthropic `message_delta` usage, each present or not.
#[derive(Debug, Default, PartialEq)]
pub(super) struct PartialUsage {
    pub input: Option<u64>,
    pub output: Option<u64>,
    pub cache_read: Option<u64>,
    pub cache_write: Option<u64>,
}

fn num(v: &Value, pointer: &str) -> Option<u64> {
    v.pointer(pointer).and_then(Value::as_u64)
}

fn n(v: &Value, pointer: &str) -> u64 {
    num(v, pointer).unwrap_or(0)
}

/// Anthropic `usage`: `input_tokens` (uncached), `output_tokens`,
/// `cache_read_input_tokens`, `cache_creation_input_tokens`.
fn anthropic(u: &Value) -> Usage {
    Usage {
        input: n(u, "/input_tokens"),
        output: n(u, "/output_tokens"),
        cache_read: n(u, "/cache_read_input_tokens"),
        cache_write: n(u, "/cache_creation_input_tokens"),
        reasoning: 0,
    }
}

/// OpenAI Responses `usage`: `input_tokens` (cached included), `output_tokens`,
/// `input_tokens_details.cached_tokens`, `output_tokens_details.reasoning_tokens`.
fn responses(u: &Value) -> Usage {
    let cached = n(u, "/input_tokens_details/cached_tokens");
    Usage {
        input: n(u, "/input_tokens").saturating_sub(cached),
        output: n(u, "/output_tokens"),
        cache_read: cached,
        cache_write: 0,
        reasoning: n(u, "/output_tokens_details/reasoning_tokens"),
    }
}

/// Chat Completions `usage`: `prompt_tokens` (cached included), `completion_tokens`,
/// `prompt_tokens_details.cached_tokens`, `completion_tokens_details.reasoning_tokens`.
fn chat(u: &Value) -> Usage {
    let cached = n(u, "/prompt_tokens_details/cached_tokens");
    Usage {
        input: n(u, "/prompt_tokens").saturating_sub(cached),
        output: n(u, "/completion_tokens"),
        cache_read: cached,
        cache_write: 0,
        reasoning: n(u, "/completion_tokens_details/reasoning_tokens"),
    }
}

/// Gemini `usageMetadata`: `promptTokenCount` (cached included), `candidatesTokenCount`,
/// `cachedContentTokenCount`, `thoughtsTokenCount` (not in candidates), and
/// `toolUsePromptTokenCount` (input).
fn gemini(u: &Value) -> Usage {
    let cached = n(u, "/cachedContentTokenCount");
    let thoughts = n(u, "/thoughtsTokenCount");
    Usage {
        input: (n(u, "/promptTokenCount") + n(u, "/toolUsePromptTokenCount"))
            .saturating_sub(cached),
        output: n(u, "/candidatesTokenCount") + thoughts,
        cache_read: cached,
        cache_write: 0,
        reasoning: thoughts,
    }
}

fn object(v: Option<&Value>) -> Option<&Value> {
    v.filter(|u| u.is_object())
}

/// The usage of a whole (non-streamed) response body of `api`. A Gemini body may be a JSON
/// array of chunks (`streamGenerateContent` without `alt=sse`): the last usage counts.
pub(super) fn from_body(api: Api, body: &Value) -> Option<Usage> {
    match api {
        Api::AnthropicMessages => object(body.get("usage")).map(anthropic),
        Api::OpenaiResponses => object(body.get("usage")).map(responses),
        Api::OpenaiChat => object(body.get("usage")).map(chat),
        Api::Gemini => match body {
            Value::Array(items) => items
                .iter()
                .rev()
                .find_map(|i| object(i.get("usageMetadata")))
                .map(gemini),
            _ => object(body.get("usageMetadata")).map(gemini),
        },
    }
}

fn error_message(v: &Value) -> String {
    v.pointer("/error/message")
        .or_else(|| v.get("message"))
        .and_then(Value::as_str)
        .map_or_else(|| v.to_string(), str::to_string)
}

/// What one stream event (its `data` as JSON) of `api` says.
pub(super) fn from_event(api: Api, event: &Value) -> EventUsage {
    let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
    let mut out = EventUsage::default();
    match api {
        Api::AnthropicMessages => match kind {
            "message_start" => out.usage = object(event.pointer("/message/usage")).map(anthropic),
            "message_delta" => {
                out.partial = object(event.get("usage")).map(|u| PartialUsage {
                    input: num(u, "/input_tokens"),
                    output: num(u, "/output_tokens"),
                    cache_read: num(u, "/cache_read_input_tokens"),
                    cache_write: num(u, "/cache_creation_input_tokens"),
                })
            }
            "error" => out.error = Some(error_message(event)),
            _ => {}
        },
        Api::OpenaiResponses => match kind {
            "response.completed" | "response.incomplete" | "response.failed" => {
                out.usage = object(event.pointer("/response/usage")).map(responses);
                if kind == "response.failed" {
                    out.error = Some(
                        event
                            .pointer("/response/error/message")
                            .and_then(Value::as_str)
                            .unwrap_or("response.failed")
                            .to_string(),
                    );
                }
            }
            "error" => out.error = Some(error_message(event)),
            _ => {}
        },
        Api::OpenaiChat => {
            out.usage = object(event.get("usage")).map(chat);
            if let Some(e) = object(event.get("error")) {
                out.error = Some(error_message(&serde_json::json!({ "error": e })));
            }
        }
        Api::Gemini => {
            out.usage = object(event.get("usageMetadata")).map(gemini);
            if let Some(e) = object(event.get("error")) {
                out.error = Some(error_message(&serde_json::json!({ "error": e })));
            }
        }
    }
    out
}
