//! What every wire API renders: one model reply, independent of the API's shape.

use serde_json::Value;

use crate::script::Usage;
use crate::tools::ResolvedCall;

/// One tool call of a reply, with its position for stable ids.
#[derive(Debug, Clone)]
pub struct ReplyCall {
    /// The reply's sequence number.
    pub seq: u64,
    /// The call's 0-based index within the reply.
    pub index: usize,
    /// The tool and its arguments.
    pub call: ResolvedCall,
}

impl ReplyCall {
    /// A stable id with this prefix: `toolu_mock000003_0`.
    pub fn id(&self, prefix: &str) -> String {
        format!("{prefix}_mock{:06}_{}", self.seq, self.index)
    }
}

/// One model reply.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The server's sequence number of this exchange (for ids).
    pub seq: u64,
    /// The model name reported.
    pub model: String,
    /// The text, said before any calls.
    pub text: Option<String>,
    /// Tool calls.
    pub calls: Vec<ReplyCall>,
    /// The usage reported.
    pub usage: Usage,
}

/// A side request's answer: a short text, or a JSON value when a schema was asked for.
#[derive(Debug, Clone)]
pub struct Side {
    /// Why the request is a side request (logged).
    pub reason: String,
    /// The schema of the structured answer, if one was asked for.
    pub schema: Option<Value>,
}

impl Side {
    /// A side request answered with a short text.
    pub fn text(reason: &str) -> Side {
        Side {
            reason: reason.into(),
            schema: None,
        }
    }

    /// A side request answered with a JSON instance of `schema`.
    pub fn json(reason: &str, schema: Value) -> Side {
        Side {
            reason: reason.into(),
            schema: Some(schema),
        }
    }
}
