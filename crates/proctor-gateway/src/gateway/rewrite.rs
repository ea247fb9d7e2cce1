//! What the gateway reads from, and changes in, a request body before forwarding it: the model
//! (rewritten to the granted one), whether it streams, and for streamed Chat Completions
//! `stream_options.include_usage` (so usage is on the wire). Keys keep their order and every
//! other value its exact bytes.

use std::fmt;

use bytes::Bytes;
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::api::Api;

/// A request body ready to forward.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Prepared {
    /// The body to send upstream.
    pub body: Bytes,
    /// The `model` the agent wrote, if any.
    pub requested_model: Option<String>,
    /// `"stream": true`.
    pub stream: bool,
    /// The gateway turned on `stream_options.include_usage`.
    pub usage_requested: bool,
}

/// A JSON object whose entries keep their order and raw bytes, borrowed from the body it was
/// read from (a large body is not copied to be read); a value set anew is owned.
struct OrderedObject<'a>(Vec<(String, Value<'a>)>);

/// One entry's value: the body's own bytes, or a value put in its place.
enum Value<'a> {
    Borrowed(&'a RawValue),
    Owned(Box<RawValue>),
}

impl Value<'_> {
    fn raw(&self) -> &RawValue {
        match self {
            Value::Borrowed(v) => v,
            Value::Owned(v) => v,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for OrderedObject<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = OrderedObject<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<OrderedObject<'a>, A::Error> {
                let mut entries = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, &'de RawValue>()? {
                    entries.push((k, Value::Borrowed(v)));
                }
                Ok(OrderedObject(entries))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

impl Serialize for OrderedObject<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v.raw())?;
        }
        map.end()
    }
}

impl OrderedObject<'_> {
    fn get(&self, key: &str) -> Option<&RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.raw())
    }

    fn set(&mut self, key: &str, value: Box<RawValue>) {
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = Value::Owned(value),
            None => self.0.push((key.to_string(), Value::Owned(value))),
        }
    }
}

fn raw<T: Serialize>(value: &T) -> Option<Box<RawValue>> {
    serde_json::value::to_raw_value(value).ok()
}

/// Reads and adjusts `body` (see the module doc). `model` is the model id to put in place of
/// the agent's (not for Gemini, whose model is in the path); `ask_stream_usage` turns on
/// `include_usage` for streamed Chat Completions. A body that is not a JSON object is left as
/// it is.
pub(crate) fn prepare(
    api: Api,
    body: Bytes,
    model: Option<&str>,
    ask_stream_usage: bool,
) -> Prepared {
    let unchanged = |body: Bytes| Prepared {
        body,
        requested_model: None,
        stream: false,
        usage_requested: false,
    };
    let Ok(mut obj) = serde_json::from_slice::<OrderedObject>(&body) else {
        return unchanged(body);
    };
    let requested_model = obj
        .get("model")
        .and_then(|v| serde_json::from_str::<String>(v.get()).ok());
    let stream = obj
        .get("stream")
        .and_then(|v| serde_json::from_str::<bool>(v.get()).ok())
        .unwrap_or(false);
    let mut changed = false;
    if let (Some(target), Some(asked)) = (model, &requested_model) {
        if api != Api::Gemini && asked != target {
            if let Some(v) = raw(&target) {
                obj.set("model", v);
                changed = true;
            }
        }
    }
    let mut usage_requested = false;
    if api == Api::OpenaiChat && stream && ask_stream_usage {
        let mut options = match obj.get("stream_options") {
            Some(v) => match serde_json::from_str::<serde_json::Value>(v.get()) {
                Ok(serde_json::Value::Object(m)) => m,
                _ => serde_json::Map::new(),
            },
            None => serde_json::Map::new(),
        };
        if options.get("include_usage") != Some(&serde_json::Value::Bool(true)) {
            options.insert("include_usage".into(), serde_json::Value::Bool(true));
            if let Some(v) = raw(&options) {
                obj.set("stream_options", v);
                changed = true;
                usage_requested = true;
            }
        }
    }
    let body = if changed {
        // One new copy, sized up front (a growing buffer would hold twice the body at times).
        let mut out = Vec::with_capacity(body.len() + 64);
        match serde_json::to_writer(&mut out, &obj) {
            Ok(()) => Bytes::from(out),
            Err(_) => body.clone(),
        }
    } else {
        body.clone()
    };
    Prepared {
        body,
        requested_model,
        stream,
        usage_requested,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(p: &Prepared) -> &str {
        std::str::from_utf8(&p.body).unwrap()
    }

    #[test]
    fn the_model_is_rewritten_in_place() {
        let body = Bytes::from_static(
            br#"{"z":1,"model":"claude-haiku","messages":[{"a": 1.50}],"stream":true}"#,
        );
        let p = prepare(
            Api::AnthropicMessages,
            body,
            Some("claude-sonnet-4-5"),
            true,
        );
        assert_eq!(
            text(&p),
            r#"{"z":1,"model":"claude-sonnet-4-5","messages":[{"a": 1.50}],"stream":true}"#
        );
        assert_eq!(p.requested_model.as_deref(), Some("claude-haiku"));
        assert!(p.stream && !p.usage_requested);
    }

    #[test]
    fn an_unchanged_body_keeps_its_bytes() {
        let body = Bytes::from_static(b"{ \"model\" : \"m\" }");
        let p = prepare(Api::OpenaiResponses, body.clone(), Some("m"), true);
        assert_eq!(p.body, body);
        let p = prepare(Api::OpenaiResponses, body.clone(), None, true);
        assert_eq!(p.body, body);
        let junk = Bytes::from_static(b"not json");
        assert_eq!(
            prepare(Api::OpenaiChat, junk.clone(), Some("x"), true).body,
            junk
        );
        let gem = Bytes::from_static(br#"{"contents":[]}"#);
        assert_eq!(prepare(Api::Gemini, gem.clone(), Some("x"), true).body, gem);
    }

    #[test]
    fn streamed_chat_asks_for_usage() {
        let body = Bytes::from_static(br#"{"model":"m","stream":true,"messages":[]}"#);
        let p = prepare(Api::OpenaiChat, body, None, true);
        assert_eq!(
            text(&p),
            r#"{"model":"m","stream":true,"messages":[],"stream_options":{"include_usage":true}}"#
        );
        assert!(p.usage_requested);
        let body = Bytes::from_static(
            br#"{"model":"m","stream":true,"stream_options":{"include_usage":false,"x":1}}"#,
        );
        let p = prepare(Api::OpenaiChat, body, None, true);
        let v: serde_json::Value = serde_json::from_slice(&p.body).unwrap();
        assert_eq!(
            v["stream_options"],
            serde_json::json!({"include_usage": true, "x": 1})
        );
        let body = Bytes::from_static(
            br#"{"model":"m","stream":true,"stream_options":{"include_usage":true}}"#,
        );
        let p = prepare(Api::OpenaiChat, body.clone(), None, true);
        assert!(!p.usage_requested);
        assert_eq!(p.body, body);
        let off = prepare(
            Api::OpenaiChat,
            Bytes::from_static(br#"{"stream":true}"#),
            None,
            false,
        );
        assert!(!off.usage_requested);
    }
}
