//! Token usage read from the wire: incremental parsers for each API's JSON bodies and SSE
//! streams, fed as the bytes pass through the gateway.

mod extract;
mod sse;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use crate::api::Api;
pub use sse::SseDecoder;

/// Tokens of one request or a sum of requests, in Anthropic's categories: `input` excludes
/// cache reads and writes; `output` includes `reasoning`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached input tokens.
    pub input: u64,
    /// Output tokens, reasoning included.
    pub output: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write: u64,
    /// Of `output`, the reasoning ("thinking") tokens, where the API says.
    pub reasoning: u64,
}

impl Usage {
    /// The tokens a `tokens` limit counts: input + output + cache reads + cache writes.
    pub fn total(&self) -> u64 {
        self.input + self.output + self.cache_read + self.cache_write
    }

    /// Adds another usage, category by category.
    pub fn add(&mut self, other: &Usage) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.reasoning += other.reasoning;
    }
}

/// What a parser read from a whole response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageReading {
    /// The response's usage; `None` when it carried none.
    pub usage: Option<Usage>,
    /// An error the stream reported in-band (Anthropic `error` event, Responses
    /// `response.failed`, ...).
    pub stream_error: Option<String>,
    /// A JSON body that was not valid JSON.
    pub malformed: bool,
}

/// The largest non-streamed body kept for reading its usage.
const MAX_JSON_BODY: usize = 256 << 20;

/// Reads usage from a response of one API as it passes, in chunks of any size.
#[derive(Debug)]
pub struct UsageParser {
    api: Api,
    mode: Mode,
    reading: UsageReading,
}

#[derive(Debug)]
enum Mode {
    Json { buf: Vec<u8>, overflow: bool },
    Sse(SseDecoder),
}

impl UsageParser {
    /// A parser for a response of `api`; `streaming` when it is `text/event-stream`.
    pub fn new(api: Api, streaming: bool) -> Self {
        let mode = if streaming {
            Mode::Sse(SseDecoder::new())
        } else {
            Mode::Json {
                buf: Vec::new(),
                overflow: false,
            }
        };
        UsageParser {
            api,
            mode,
            reading: UsageReading::default(),
        }
    }

    /// Feeds the next piece of the body.
    pub fn feed(&mut self, chunk: &[u8]) {
        let api = self.api;
        match &mut self.mode {
            Mode::Json { buf, overflow } => {
                if buf.len() + chunk.len() > MAX_JSON_BODY {
                    *overflow = true;
                } else if !*overflow {
                    buf.extend_from_slice(chunk);
                }
            }
            Mode::Sse(decoder) => {
                let reading = &mut self.reading;
                decoder.feed(chunk, &mut |data| on_event(api, reading, data));
            }
        }
    }

    /// Ends the body and gives what was read.
    pub fn finish(mut self) -> UsageReading {
        let api = self.api;
        match &mut self.mode {
            Mode::Json { buf, overflow } => {
                if !*overflow {
                    match serde_json::from_slice::<serde_json::Value>(buf) {
                        Ok(body) => self.reading.usage = extract::from_body(api, &body),
                        Err(_) => self.reading.malformed = true,
                    }
                }
            }
            Mode::Sse(decoder) => {
                let reading = &mut self.reading;
                decoder.finish(&mut |data| on_event(api, reading, data));
            }
        }
        self.reading
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Applies one SSE event's data. Only events that can carry usage or an error are parsed.
fn on_event(api: Api, reading: &mut UsageReading, data: &[u8]) {
    if !contains(data, b"usage") && !contains(data, b"error") {
        return;
    }
    let Ok(event) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let said = extract::from_event(api, &event);
    if let Some(usage) = said.usage {
        reading.usage = Some(usage);
    }
    if let Some(p) = said.partial {
        let u = reading.usage.get_or_insert_with(Usage::default);
        u.input = p.input.unwrap_or(u.input);
        u.output = p.output.unwrap_or(u.output);
        u.cache_read = p.cache_read.unwrap_or(u.cache_read);
        u.cache_write = p.cache_write.unwrap_or(u.cache_write);
    }
    if said.error.is_some() {
        reading.stream_error = said.error;
    }
}
