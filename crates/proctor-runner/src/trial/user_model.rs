//! A model-played user (`[tasks.user] model`): when no reply rule matches the agent's answer,
//! proctor asks the user's model, from the host and never from inside the trial, what the
//! user says next. It is reached through the run's model gateway on a seat of its own (so its
//! tokens and cost are its own ledger, never the agent's), or, with the user's `model_script`,
//! through a scripted mock model served in this process. Its wire log is kept in the trial's
//! `user-model/` folder.

use std::path::Path;
use std::time::Duration;

use proctor_gateway::client::{post_json, Endpoint};
use proctor_gateway::{Api, UsageParser};
use proctor_mock_model::{MainRequests, MockHandle, MockModel, MockOptions};
use proctor_score::UserModelLedger;
use proctor_suite::model::User;

use crate::gateway::Seat;
use crate::trial::context::{RunContext, Trial};
use crate::trial::user_wire::{self, Dialogue};

/// The trial folder's sub-folder that keeps the user's model's wire log.
pub const EVIDENCE_DIR: &str = "user-model";

/// How long one answer of the user's model may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

/// What serves the user's model for one trial; dropping it ends the service.
#[derive(Debug)]
enum Backend {
    /// A scripted mock model on this process's loopback.
    Script(MockHandle),
    /// A seat of its own in the run's gateway.
    Gateway(Seat),
}

/// The user's model of one trial: where it is reached, what it has heard, and its ledger.
#[derive(Debug)]
pub struct UserModel {
    model: String,
    api: Api,
    endpoint: Endpoint,
    key: String,
    backend: Backend,
    dialogue: Dialogue,
    ledger: UserModelLedger,
}

impl UserModel {
    /// The user's model of `trial`, started, when its task's user is model-played; `Err` says
    /// why it could not start (the trial cannot be held as its task says).
    pub fn start(
        ctx: &RunContext,
        trial: &Trial,
        user: &User,
        trial_dir: &Path,
    ) -> Result<Option<UserModel>, String> {
        let Some(model) = user.model.as_ref().map(|m| m.get_ref().clone()) else {
            return Ok(None);
        };
        let persona = read_persona(&ctx.suite.root, user)?;
        let dir = trial_dir.join(EVIDENCE_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        let (backend, endpoint, key, api, via) = match &user.model_script {
            Some(script) => {
                let mock = serve_script(&ctx.suite.root.join(script.get_ref()), &dir)?;
                let endpoint = Endpoint::Tcp(mock.addr());
                let backend = Backend::Script(mock);
                (
                    backend,
                    endpoint,
                    "mock".to_string(),
                    Api::AnthropicMessages,
                    "model_script",
                )
            }
            None => {
                let gw = ctx.gateway.as_ref().ok_or("the run has no model gateway")?;
                let task = trial.task.id.get_ref();
                let model_ref = gw
                    .user_model_of(task)
                    .ok_or_else(|| format!("the gateway serves no model for task `{task}`'s user"))?
                    .clone();
                let seat = gw.user_seat(ctx.suite, &model_ref, &dir)?;
                let api = user_wire::wire_for(seat.api().unwrap_or(Api::AnthropicMessages));
                let endpoint = Endpoint::Unix(seat.socket().to_path_buf());
                let key = seat.token().to_string();
                (Backend::Gateway(seat), endpoint, key, api, "gateway")
            }
        };
        let wire_model = match &backend {
            Backend::Gateway(seat) => seat.model.model.clone(),
            Backend::Script(_) => model.clone(),
        };
        Ok(Some(UserModel {
            ledger: UserModelLedger {
                model,
                via: via.to_string(),
                evidence: format!("{EVIDENCE_DIR}/model.jsonl"),
                ..UserModelLedger::default()
            },
            model: wire_model,
            api,
            endpoint,
            key,
            backend,
            dialogue: Dialogue {
                persona,
                opening: ctx.suite.prompt(trial.task, trial.variant),
                exchanges: Vec::new(),
            },
        }))
    }

    /// Keeps an exchange the model did not speak (a reply rule's), so that the model hears
    /// the whole conversation.
    pub fn heard(&mut self, answer: &str, said: &str) {
        self.dialogue
            .exchanges
            .push((answer.to_string(), said.to_string()));
    }

    /// What the user says to the agent's `answer`: `Ok(None)` when the model ends the
    /// conversation; `Err` when it gave no usable answer (kept in the ledger).
    pub fn reply(&mut self, answer: &str) -> Result<Option<String>, String> {
        let result = self.ask(answer);
        match &result {
            Ok(Some(said)) => self.heard(answer, said),
            Ok(None) => {}
            Err(why) => self.ledger.error = Some(why.clone()),
        }
        result
    }

    /// One request to the model and its answer read.
    fn ask(&mut self, answer: &str) -> Result<Option<String>, String> {
        let (path, body) = self.dialogue.request(self.api, &self.model, answer);
        let headers = user_wire::key_headers(self.api, &self.key);
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let body = serde_json::to_vec(&body).map_err(|e| e.to_string())?;
        self.ledger.requests += 1;
        let reply = post_json(&self.endpoint, &path, &headers, body, ANSWER_TIMEOUT)
            .map_err(|e| format!("the user's model: {e}"))?;
        let mut usage = UsageParser::new(self.api, false);
        usage.feed(&reply.body);
        if let Some(u) = usage.finish().usage {
            self.ledger.input_tokens += u.input + u.cache_read + u.cache_write;
            self.ledger.output_tokens += u.output;
        }
        let shown =
            || String::from_utf8_lossy(&reply.body[..reply.body.len().min(300)]).to_string();
        if reply.status != 200 {
            return Err(format!(
                "the user's model answered HTTP {}: {}",
                reply.status,
                shown()
            ));
        }
        let value: serde_json::Value = serde_json::from_slice(&reply.body)
            .map_err(|e| format!("the user's model answered no JSON ({e}): {}", shown()))?;
        let text = user_wire::answer_text(self.api, &value)
            .ok_or_else(|| format!("the user's model answered no text: {}", shown()))?;
        Ok(user_wire::said(&text))
    }

    /// Ends the model's service and gives its ledger (the gateway's cost, when it priced every
    /// request).
    pub fn finish(self) -> UserModelLedger {
        let mut ledger = self.ledger;
        match self.backend {
            Backend::Gateway(mut seat) => {
                if let Some(l) = seat.finish() {
                    ledger.cost_usd = crate::gateway::read_ledger(&l).cost_usd;
                }
            }
            Backend::Script(mock) => mock.stop(),
        }
        ledger
    }
}

/// The persona file's text.
fn read_persona(suite_root: &Path, user: &User) -> Result<String, String> {
    let persona = user
        .persona
        .as_ref()
        .ok_or("a model-played user needs a `persona`")?;
    let path = suite_root.join(persona.get_ref());
    std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// The user's model script served on this process's loopback, its log in `dir`: every request
/// is a main one (the user's model is offered no tools).
fn serve_script(path: &Path, dir: &Path) -> Result<MockHandle, String> {
    let mut script = proctor_mock_model::Script::load(path)
        .map_err(|e| format!("the user's model_script {}: {e}", path.display()))?;
    script.main_requests = MainRequests::All;
    let options = MockOptions {
        log: Some(dir.join("model.jsonl")),
        ..MockOptions::default()
    };
    MockModel::start_with(script, "127.0.0.1:0", options)
        .map_err(|e| format!("cannot serve the user's model_script: {e}"))
}
