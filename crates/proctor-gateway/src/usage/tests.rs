use super::*;

fn read(api: Api, streaming: bool, chunks: &[&[u8]]) -> UsageReading {
    let mut p = UsageParser::new(api, streaming);
    for c in chunks {
        p.feed(c);
    }
    p.finish()
}

/// Reads `body` whole, split in two at every byte offset, in three at every pair of offsets
/// (for short bodies), and one byte at a time; every way must read the same.
fn read_every_split(api: Api, streaming: bool, body: &[u8]) -> UsageReading {
    let whole = read(api, streaming, &[body]);
    for i in 0..=body.len() {
        assert_eq!(
            read(api, streaming, &[&body[..i], &body[i..]]),
            whole,
            "split at {i}"
        );
    }
    if body.len() <= 400 {
        for i in 0..=body.len() {
            for j in i..=body.len() {
                let got = read(api, streaming, &[&body[..i], &body[i..j], &body[j..]]);
                assert_eq!(got, whole, "split at {i},{j}");
            }
        }
    }
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(read(api, streaming, &bytes), whole, "one byte at a time");
    whole
}

const ANTHROPIC_SSE: &str = concat!(
    "event: message_start\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":100,\"cache_read_input_tokens\":2000,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: ping\ndata: {\"type\": \"ping\"}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello usage\"}}\n\n",
    "event: message_delta\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

#[test]
fn anthropic_streams_take_input_from_message_start_and_output_from_message_delta() {
    let r = read_every_split(Api::AnthropicMessages, true, ANTHROPIC_SSE.as_bytes());
    assert_eq!(
        r.usage,
        Some(Usage {
            input: 25,
            output: 15,
            cache_read: 2000,
            cache_write: 100,
            reasoning: 0
        })
    );
    assert_eq!(r.stream_error, None);
    let crlf = ANTHROPIC_SSE.replace('\n', "\r\n");
    assert_eq!(
        read_every_split(Api::AnthropicMessages, true, crlf.as_bytes()),
        r
    );
}

#[test]
fn anthropic_message_delta_may_restate_input() {
    let s = "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\ndata: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":7,\"cache_read_input_tokens\":3,\"output_tokens\":9}}\n\n";
    let r = read(Api::AnthropicMessages, true, &[s.as_bytes()]);
    let u = r.usage.unwrap();
    assert_eq!((u.input, u.cache_read, u.output), (7, 3, 9));
}

#[test]
fn anthropic_error_events_are_reported() {
    let s = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let r = read(Api::AnthropicMessages, true, &[s.as_bytes()]);
    assert_eq!(r.stream_error.as_deref(), Some("Overloaded"));
    assert_eq!(r.usage, None);
}

#[test]
fn anthropic_bodies() {
    let body = br#"{"id":"msg_1","type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":4,"output_tokens":3}}"#;
    let r = read_every_split(Api::AnthropicMessages, false, body);
    assert_eq!(
        r.usage,
        Some(Usage {
            input: 10,
            output: 3,
            cache_read: 4,
            ..Usage::default()
        })
    );
    assert!(!r.malformed);
    let r = read(
        Api::AnthropicMessages,
        false,
        &[b"{\"usage\": {\"input_tok"],
    );
    assert!(r.malformed);
    assert_eq!(r.usage, None);
}

const RESPONSES_SSE: &str = concat!(
    "event: response.created\n",
    "data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"usage\":null}}\n\n",
    "event: response.output_text.delta\n",
    "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"delta\":\"Hi\"}\n\n",
    "event: response.completed\n",
    "data: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":1200,\"input_tokens_details\":{\"cached_tokens\":1000},\"output_tokens\":80,\"output_tokens_details\":{\"reasoning_tokens\":64},\"total_tokens\":1280}}}\n\n",
);

#[test]
fn responses_streams_read_response_completed() {
    let r = read_every_split(Api::OpenaiResponses, true, RESPONSES_SSE.as_bytes());
    assert_eq!(
        r.usage,
        Some(Usage {
            input: 200,
            output: 80,
            cache_read: 1000,
            cache_write: 0,
            reasoning: 64
        })
    );
}

#[test]
fn responses_failures_are_reported() {
    let s = "data: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"server_error\",\"message\":\"boom\"},\"usage\":null}}\n\n";
    let r = read(Api::OpenaiResponses, true, &[s.as_bytes()]);
    assert_eq!(r.stream_error.as_deref(), Some("boom"));
    let body = br#"{"id":"resp_1","output":[],"usage":{"input_tokens":9,"output_tokens":2}}"#;
    let r = read_every_split(Api::OpenaiResponses, false, body);
    assert_eq!(r.usage.map(|u| (u.input, u.output)), Some((9, 2)));
}

const CHAT_SSE: &str = concat!(
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":null}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":7,\"total_tokens\":57,\"prompt_tokens_details\":{\"cached_tokens\":32},\"completion_tokens_details\":{\"reasoning_tokens\":2}}}\n\n",
    "data: [DONE]\n\n",
);

#[test]
fn chat_streams_read_the_include_usage_chunk() {
    let r = read_every_split(Api::OpenaiChat, true, CHAT_SSE.as_bytes());
    assert_eq!(
        r.usage,
        Some(Usage {
            input: 18,
            output: 7,
            cache_read: 32,
            cache_write: 0,
            reasoning: 2
        })
    );
    let no_usage = CHAT_SSE.lines().take(4).collect::<Vec<_>>().join("\n") + "\n";
    assert_eq!(
        read(Api::OpenaiChat, true, &[no_usage.as_bytes()]).usage,
        None
    );
}

#[test]
fn chat_bodies() {
    let body = br#"{"id":"c1","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":11,"completion_tokens":4,"total_tokens":15}}"#;
    let r = read_every_split(Api::OpenaiChat, false, body);
    assert_eq!(
        r.usage.map(|u| (u.input, u.output, u.cache_read)),
        Some((11, 4, 0))
    );
}

const GEMINI_SSE: &str = concat!(
    "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hel\"}],\"role\":\"model\"}}],\"usageMetadata\":{\"promptTokenCount\":100,\"candidatesTokenCount\":2,\"totalTokenCount\":102},\"modelVersion\":\"gemini-2.5-pro\"}\r\n\r\n",
    "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"lo\"}],\"role\":\"model\"},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":100,\"candidatesTokenCount\":5,\"cachedContentTokenCount\":60,\"thoughtsTokenCount\":20,\"totalTokenCount\":125},\"modelVersion\":\"gemini-2.5-pro\"}\r\n\r\n",
);

#[test]
fn gemini_streams_take_the_last_usage_metadata() {
    let r = read_every_split(Api::Gemini, true, GEMINI_SSE.as_bytes());
    assert_eq!(
        r.usage,
        Some(Usage {
            input: 40,
            output: 25,
            cache_read: 60,
            cache_write: 0,
            reasoning: 20
        })
    );
}

#[test]
fn gemini_bodies_and_chunk_arrays() {
    let body =
        br#"{"candidates":[],"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":3}}"#;
    let r = read_every_split(Api::Gemini, false, body);
    assert_eq!(r.usage.map(|u| (u.input, u.output)), Some((8, 3)));
    let array = br#"[{"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":1}},{"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":6}},{"candidates":[]}]"#;
    let r = read(Api::Gemini, false, &[array]);
    assert_eq!(r.usage.map(|u| (u.input, u.output)), Some((8, 6)));
}

#[test]
fn usage_totals_count_every_category_once() {
    let mut u = Usage {
        input: 1,
        output: 2,
        cache_read: 3,
        cache_write: 4,
        reasoning: 1,
    };
    assert_eq!(u.total(), 10);
    u.add(&u.clone());
    assert_eq!((u.total(), u.reasoning), (20, 2));
}
