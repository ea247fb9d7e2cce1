//! Scrubbing the real key from what goes back to the agent. An upstream that echoes request
//! headers (some proxies and self-hosted servers do) would otherwise hand the agent the key it
//! must never see. The gateway knows the key's exact bytes, so it masks them, and their base64
//! and percent-encoded forms, in response headers and in bodies, streamed ones included, with
//! `*` of the same length (a body's length, and so its `content-length`, does not change).
//!
//! A stream is never buffered whole: a chunk is passed on at once, less only its longest tail
//! that could begin a key (a few bytes, and none at all at an SSE event's `\n\n`), which goes
//! out with the next chunk or at the end.

use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderValue};

/// The shortest form of a key that is masked: shorter ones would match ordinary text.
const MIN_NEEDLE: usize = 12;

/// The forms of one secret that are masked.
#[derive(Debug, Clone, Default)]
pub(crate) struct Needles(Vec<Vec<u8>>);

impl Needles {
    /// The forms of `key`: itself, its base64 (standard and URL-safe alphabets, at each of the
    /// three alignments it can take inside a longer encoded string, such as `Basic` credentials)
    /// and its percent-encoding.
    pub fn of(key: &str) -> Needles {
        let key = key.as_bytes();
        let mut forms: Vec<Vec<u8>> = vec![key.to_vec()];
        for engine in [
            &base64::engine::general_purpose::STANDARD_NO_PAD,
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ] {
            for offset in 0..3usize {
                let mut padded = vec![0u8; offset];
                padded.extend_from_slice(key);
                let encoded = engine.encode(&padded);
                // The characters whose six bits all come from the key, whatever surrounds it.
                let start = (8 * offset).div_ceil(6);
                let end = (8 * (offset + key.len())) / 6;
                if let Some(form) = encoded.as_bytes().get(start..end) {
                    forms.push(form.to_vec());
                }
            }
        }
        for upper in [true, false] {
            forms.push(percent_encode(key, upper));
        }
        forms.retain(|f| f.len() >= MIN_NEEDLE);
        forms.sort();
        forms.dedup();
        Needles(forms)
    }

    /// Whether there is nothing to mask.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Masks every form in `bytes`, in place; whether any was found.
    pub fn mask(&self, bytes: &mut [u8]) -> bool {
        let mut found = false;
        for needle in &self.0 {
            let mut from = 0;
            while let Some(at) = memchr::memmem::find(&bytes[from..], needle) {
                let at = from + at;
                bytes[at..at + needle.len()].fill(b'*');
                from = at + needle.len();
                found = true;
            }
        }
        found
    }

    /// The length of the longest tail of `bytes` that is a proper start of some form: what must
    /// wait for the next chunk before it can be passed on.
    fn held_back(&self, bytes: &[u8]) -> usize {
        let mut hold = 0;
        for needle in &self.0 {
            let longest = (needle.len() - 1).min(bytes.len());
            for n in (hold + 1..=longest).rev() {
                if needle.starts_with(&bytes[bytes.len() - n..]) {
                    hold = n;
                    break;
                }
            }
        }
        hold
    }

    /// `headers` with every form masked in every value.
    pub fn mask_headers(&self, headers: &mut HeaderMap) {
        if self.is_empty() {
            return;
        }
        for value in headers.values_mut() {
            let mut bytes = value.as_bytes().to_vec();
            if self.mask(&mut bytes) {
                if let Ok(masked) = HeaderValue::from_bytes(&bytes) {
                    *value = masked;
                }
            }
        }
    }
}

/// `bytes` percent-encoded, every byte but the unreserved ones (`A-Z a-z 0-9 - . _ ~`).
fn percent_encode(bytes: &[u8], upper: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b);
        } else if upper {
            out.extend_from_slice(format!("%{b:02X}").as_bytes());
        } else {
            out.extend_from_slice(format!("%{b:02x}").as_bytes());
        }
    }
    out
}

/// A stream being scrubbed chunk by chunk.
#[derive(Debug, Default)]
pub(crate) struct Scrubber {
    needles: Needles,
    /// Bytes held back from the last chunk: they could begin a form.
    carry: BytesMut,
}

impl Scrubber {
    /// A scrubber of `needles`.
    pub fn new(needles: Needles) -> Scrubber {
        Scrubber {
            needles,
            carry: BytesMut::new(),
        }
    }

    /// What of `chunk` (after what was held back) can be passed on now, masked.
    pub fn push(&mut self, chunk: &Bytes) -> Bytes {
        if self.needles.is_empty() {
            return chunk.clone();
        }
        let mut buf = std::mem::take(&mut self.carry);
        buf.extend_from_slice(chunk);
        self.needles.mask(&mut buf);
        let hold = self.needles.held_back(&buf);
        self.carry = buf.split_off(buf.len() - hold);
        buf.freeze()
    }

    /// What is still held back, at the end of the stream (it began no whole form).
    pub fn finish(&mut self) -> Bytes {
        std::mem::take(&mut self.carry).freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-ant-REAL-key/with+odd=chars-0123456789";

    fn b64(s: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn the_key_and_its_encoded_forms_are_masked_at_their_own_length() {
        let n = Needles::of(KEY);
        let pct = String::from_utf8(percent_encode(KEY.as_bytes(), true)).unwrap();
        // Each text, with how many of its characters carry the key (all but the two or three
        // base64 characters that also hold the bytes around it).
        let b64_len = b64(KEY.as_bytes()).trim_end_matches('=').len();
        for (text, carrying) in [
            (format!("echo: x-api-key: {KEY}\n"), KEY.len()),
            (
                format!(
                    "authorization: Basic {}",
                    b64(format!("user:{KEY}").as_bytes())
                ),
                b64_len - 2,
            ),
            (
                format!("Basic {}", b64(format!("u:{KEY}").as_bytes())),
                b64_len - 2,
            ),
            (format!("Basic {}", b64(KEY.as_bytes())), b64_len - 1),
            (format!("?key={pct}"), pct.len()),
        ] {
            let mut bytes = text.clone().into_bytes();
            assert!(n.mask(&mut bytes), "{text}");
            assert_eq!(bytes.len(), text.len());
            let masked = String::from_utf8(bytes).unwrap();
            let stars = masked.matches('*').count();
            assert!(stars >= carrying, "{stars} < {carrying}: {masked}");
            assert!(!masked.contains(KEY), "{masked}");
        }
        let mut plain = b"nothing secret here".to_vec();
        assert!(!n.mask(&mut plain));
    }

    #[test]
    fn a_key_split_across_chunks_is_masked_and_an_event_end_is_not_held_back() {
        let mut s = Scrubber::new(Needles::of(KEY));
        let (a, b) = KEY.split_at(10);
        let first = s.push(&Bytes::from(format!("data: {{\"echo\":\"{a}")));
        assert!(
            !String::from_utf8_lossy(&first).contains(a),
            "the start of the key waits"
        );
        let second = s.push(&Bytes::from(format!("{b}\"}}\n\n")));
        let whole = [first, second, s.finish()].concat();
        let text = String::from_utf8(whole).unwrap();
        assert!(!text.contains(KEY) && text.ends_with("\"}\n\n"), "{text}");
        assert_eq!(
            text.len(),
            format!("data: {{\"echo\":\"{KEY}\"}}\n\n").len()
        );
        // An event that holds no start of the key goes out whole, at once.
        let out = s.push(&Bytes::from_static(b"data: {\"text\":\"hello\"}\n\n"));
        assert_eq!(&out[..], b"data: {\"text\":\"hello\"}\n\n");
    }

    #[test]
    fn headers_are_masked() {
        let mut h = HeaderMap::new();
        h.insert("x-echo-key", HeaderValue::from_str(KEY).unwrap());
        h.insert("x-other", HeaderValue::from_static("fine"));
        Needles::of(KEY).mask_headers(&mut h);
        assert_eq!(h["x-echo-key"].to_str().unwrap(), "*".repeat(KEY.len()));
        assert_eq!(h["x-other"], "fine");
    }
}
