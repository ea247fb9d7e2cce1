//! What a model-played user is asked and how its words are read, in the wire API of its
//! provider: the instructions (a fixed frame around the suite's persona and the task's
//! opening prompt), the conversation so far from the user's side (the agent's answers are what
//! the user hears; the user's own replies are its model's turns), and the text of the answer.
//! Pure: no request is made here.

use proctor_gateway::Api;
use serde_json::{json, Value};

/// The words by which the user's model ends the conversation (as tau-bench's users do).
pub const STOP: &str = "###STOP###";

/// The most tokens the user's model may answer with.
const MAX_TOKENS: u32 = 1024;

/// The frame around the persona: what the model plays and how it ends the conversation.
fn instructions(persona: &str, opening: &str) -> String {
    format!(
        "You are playing the user in a conversation with an AI agent that is doing a task for \
         you. Stay in character as the persona below describes. Reply with only what the user \
         says next, in plain text and briefly; never do the agent's work yourself. When your \
         request is done, or you have nothing more to say, reply with exactly {STOP}.\n\n\
         # Who you are and what you want\n\n{persona}\n\n\
         # Your first message to the agent\n\n{opening}\n"
    )
}

/// The conversation as the user's model sees it: the agent's answers as the other party's
/// messages, the user's own replies as its own turns, ending on the agent's last answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dialogue {
    /// The persona file's text.
    pub persona: String,
    /// The task's prompt: the user's first message.
    pub opening: String,
    /// Each exchange so far: the agent's answer and what the user replied to it.
    pub exchanges: Vec<(String, String)>,
}

impl Dialogue {
    /// The messages ending with `answer`, as (`true` for the agent's, text) pairs.
    fn messages<'a>(&'a self, answer: &'a str) -> Vec<(bool, &'a str)> {
        let heard = |a: &'a str| {
            if a.trim().is_empty() {
                "(the agent said nothing)"
            } else {
                a
            }
        };
        let mut out = Vec::with_capacity(self.exchanges.len() * 2 + 1);
        for (agent, user) in &self.exchanges {
            out.push((true, heard(agent)));
            out.push((false, user.as_str()));
        }
        out.push((true, heard(answer)));
        out
    }

    /// The request to the user's `model` after the agent's `answer`: its path and JSON body
    /// in `api` (an OpenAI Responses provider is asked in Chat Completions, which it serves).
    pub fn request(&self, api: Api, model: &str, answer: &str) -> (String, Value) {
        let system = instructions(&self.persona, &self.opening);
        let messages = self.messages(answer);
        match api {
            Api::AnthropicMessages => {
                let messages: Vec<Value> = messages
                    .iter()
                    .map(|(agent, text)| {
                        json!({"role": if *agent { "user" } else { "assistant" }, "content": text})
                    })
                    .collect();
                let body = json!({"model": model, "max_tokens": MAX_TOKENS, "system": system,
                                  "messages": messages, "stream": false});
                ("/v1/messages".to_string(), body)
            }
            Api::OpenaiChat | Api::OpenaiResponses => {
                let mut all = vec![json!({"role": "system", "content": system})];
                all.extend(messages.iter().map(|(agent, text)| {
                    json!({"role": if *agent { "user" } else { "assistant" }, "content": text})
                }));
                let body = json!({"model": model, "max_tokens": MAX_TOKENS, "messages": all,
                                  "stream": false});
                ("/v1/chat/completions".to_string(), body)
            }
            Api::Gemini => {
                let contents: Vec<Value> = messages
                    .iter()
                    .map(|(agent, text)| {
                        json!({"role": if *agent { "user" } else { "model" }, "parts": [{"text": text}]})
                    })
                    .collect();
                let body = json!({"systemInstruction": {"parts": [{"text": system}]},
                                  "contents": contents,
                                  "generationConfig": {"maxOutputTokens": MAX_TOKENS}});
                (format!("/v1beta/models/{model}:generateContent"), body)
            }
        }
    }
}

/// The wire API a request written for a provider speaking `provider` uses.
pub fn wire_for(provider: Api) -> Api {
    match provider {
        Api::OpenaiResponses => Api::OpenaiChat,
        other => other,
    }
}

/// The headers that carry `key` in `api`.
pub fn key_headers(api: Api, key: &str) -> Vec<(&'static str, String)> {
    match api {
        Api::AnthropicMessages => vec![
            ("x-api-key", key.to_string()),
            ("anthropic-version", "2023-06-01".to_string()),
        ],
        Api::OpenaiChat | Api::OpenaiResponses => {
            vec![("authorization", format!("Bearer {key}"))]
        }
        Api::Gemini => vec![("x-goog-api-key", key.to_string())],
    }
}

/// The text of a response written in `api`, its parts joined; `None` when it holds none.
pub fn answer_text(api: Api, body: &Value) -> Option<String> {
    let texts: Vec<&str> = match api {
        Api::AnthropicMessages => body["content"]
            .as_array()?
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect(),
        Api::OpenaiChat | Api::OpenaiResponses => {
            vec![body["choices"][0]["message"]["content"].as_str()?]
        }
        Api::Gemini => body["candidates"][0]["content"]["parts"]
            .as_array()?
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect(),
    };
    Some(texts.concat())
}

/// What the user says, read from its model's text: `None` when the model ended the
/// conversation (the stop words, or nothing said).
pub fn said(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty() && !text.contains(STOP)).then(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dialogue() -> Dialogue {
        Dialogue {
            persona: "You deploy to production only.".into(),
            opening: "Deploy the app.".into(),
            exchanges: vec![("Which environment?".into(), "Production.".into())],
        }
    }

    #[test]
    fn the_user_s_model_hears_the_agent_as_the_other_party_and_ends_on_its_answer() {
        let (path, body) = dialogue().request(Api::AnthropicMessages, "m", "Done?");
        assert_eq!(path, "/v1/messages");
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(body["messages"][2]["content"], "Done?");
        let system = body["system"].as_str().unwrap();
        assert!(system.contains("You deploy to production only."));
        assert!(system.contains("Deploy the app."));
        assert!(system.contains(STOP));
    }

    #[test]
    fn each_api_gets_its_own_shape_and_its_answer_is_read_back() {
        let d = dialogue();
        let (path, body) = d.request(Api::OpenaiResponses, "gpt", "ok");
        assert_eq!(path, "/v1/chat/completions");
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["messages"].as_array().unwrap().len(), 4);
        let (path, body) = d.request(Api::Gemini, "gem", "ok");
        assert_eq!(path, "/v1beta/models/gem:generateContent");
        assert_eq!(body["contents"][1]["role"], "model");
        let anthropic = json!({"content": [{"type": "text", "text": "Yes, "}, {"type": "tool_use"}, {"type": "text", "text": "go."}]});
        assert_eq!(
            answer_text(Api::AnthropicMessages, &anthropic).as_deref(),
            Some("Yes, go.")
        );
        let chat = json!({"choices": [{"message": {"content": "Prod."}}]});
        assert_eq!(
            answer_text(Api::OpenaiChat, &chat).as_deref(),
            Some("Prod.")
        );
        let gemini =
            json!({"candidates": [{"content": {"parts": [{"text": "a"}, {"text": "b"}]}}]});
        assert_eq!(answer_text(Api::Gemini, &gemini).as_deref(), Some("ab"));
        assert_eq!(answer_text(Api::OpenaiChat, &json!({"error": {}})), None);
    }

    #[test]
    fn the_stop_words_or_silence_end_the_conversation() {
        assert_eq!(
            said("  Production, please. "),
            Some("Production, please.".into())
        );
        assert_eq!(said("Thanks! ###STOP###"), None);
        assert_eq!(said("   "), None);
        let empty = Dialogue::default();
        let (_, body) = empty.request(Api::AnthropicMessages, "m", "");
        assert_eq!(body["messages"][0]["content"], "(the agent said nothing)");
    }
}
