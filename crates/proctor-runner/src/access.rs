//! The models a run reaches through proctor's model gateway: the user's configuration read,
//! every model checked (a provider that serves the agent's API, a key in the environment)
//! before any trial, and the gateway started. Each problem is a usage error (exit 2) that names
//! what to fix.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::error::RunError;
use crate::gateway::{self, ModelSetupError, RunGateway};
use proctor_gateway::{Config, ConfigLocation, KeyError, ModelRef, ProviderKeys};
use proctor_suite::plan::Plan;
use proctor_suite::Suite;

/// What a run needs to start its gateway.
pub struct Access {
    config: Config,
    keys: ProviderKeys,
    models: BTreeMap<String, ModelRef>,
    user_models: BTreeMap<String, ModelRef>,
}

/// Reads the configuration `--config` names, else `$PROCTOR_CONFIG`, else the default file
/// (built-in providers only when it does not exist).
pub fn load_config(explicit: Option<&Path>) -> Result<Config, RunError> {
    let location = ConfigLocation::from_env(explicit);
    Config::load(&location).map_err(|e| {
        RunError::usage(
            e.to_string(),
            "see docs/models.md for the configuration file's keys",
        )
    })
}

/// Where the `visual` checks of `suite` find their browser: `[browser] path` of the
/// configuration, read only when some task has a `visual` assertion; `None`: the first
/// Chromium on the search path.
pub fn browser_for(
    suite: &Suite,
    config: Option<&Path>,
) -> Result<Option<proctor_browser::BrowserSource>, RunError> {
    let looks = suite.file.tasks.iter().any(|t| !t.visuals().is_empty());
    if !looks {
        return Ok(None);
    }
    let config = load_config(config)?;
    Ok(match (config.browser, config.source) {
        (Some(path), Some(file)) => {
            Some(proctor_browser::BrowserSource::Configured { path, config: file })
        }
        _ => None,
    })
}

/// Checks every model the planned trials reach through the gateway; `None` when none does
/// (the configuration is then not read at all).
pub fn check(
    suite: &Suite,
    plan: &Plan,
    config: Option<&Path>,
) -> Result<Option<Access>, RunError> {
    let planned = gateway::planned_variants(suite, plan);
    let played_users = suite.file.tasks.iter().any(|t| {
        t.user
            .as_ref()
            .is_some_and(|u| u.model_played() && u.model_script.is_none())
    });
    if !played_users && !planned.iter().any(|v| gateway::uses_gateway(v)) {
        return Ok(None);
    }
    let config = load_config(config)?;
    let models = gateway::planned_models(suite, plan, &config).map_err(setup_error)?;
    let user_models = gateway::planned_user_models(suite, plan, &config).map_err(setup_error)?;
    if models.is_empty() && user_models.is_empty() {
        return Ok(None);
    }
    let keys = gateway::keys_for(&config, models.values().chain(user_models.values()))
        .map_err(key_error)?;
    Ok(Some(Access {
        config,
        keys,
        models,
        user_models,
    }))
}

/// Starts the run's gateway.
pub fn start(access: Access) -> Result<Arc<RunGateway>, RunError> {
    let gw = RunGateway::start(
        access.config,
        &access.keys,
        access.models,
        access.user_models,
    )
    .map_err(setup_error)?;
    Ok(Arc::new(gw))
}

/// A setup problem as the user sees it.
pub fn setup_error(e: ModelSetupError) -> RunError {
    let hint = match &e {
        ModelSetupError::Keys(k) => return key_error(k.clone()),
        ModelSetupError::NoModel { .. }
        | ModelSetupError::BadModel { .. }
        | ModelSetupError::BadUserModel { .. } => {
            "models are written PROVIDER/MODEL; providers are anthropic, openai, google, openrouter and those of [providers] in the configuration (docs/models.md)"
        }
        ModelSetupError::ApiMismatch { .. } => {
            "each agent CLI speaks one wire API; docs/models.md lists which, and which providers serve it"
        }
        _ => return RunError::failed(e),
    };
    RunError::usage(e.to_string(), hint)
}

/// A key problem: the variables to set.
fn key_error(e: KeyError) -> RunError {
    RunError::usage(
        e.to_string(),
        "export the variable on the host before `proctor run`; the key stays on the host (agents get a per-trial token)",
    )
}

/// The variants whose model is reached through the model gateway, checked against the user's
/// configuration: a model that is not `PROVIDER/MODEL` of a known provider, and a CLI whose wire
/// API the provider does not serve, are problems at the variant. The configuration (`config`,
/// else the default) is read only when some variant needs it.
pub fn model_problems(
    suite: &Suite,
    config: Option<&Path>,
) -> Result<Vec<proctor_suite::Problem>, RunError> {
    let variants: Vec<_> = suite
        .file
        .variants
        .iter()
        .filter(|v| gateway::uses_gateway(v))
        .collect();
    let users: Vec<&proctor_suite::model::User> = suite
        .file
        .tasks
        .iter()
        .filter_map(|t| t.user.as_ref())
        .filter(|u| {
            u.model_script.is_none() && u.model.as_ref().is_some_and(|m| m.get_ref().contains('/'))
        })
        .collect();
    if variants.is_empty() && users.is_empty() {
        return Ok(Vec::new());
    }
    let config = load_config(config)?;
    let mut problems: Vec<proctor_suite::Problem> = variants
        .into_iter()
        .filter_map(|v| gateway::variant_model(v, &config).err().map(|e| (v, e)))
        .map(|(v, e)| {
            proctor_suite::Problem::at(proctor_suite::ProblemKind::Inconsistent, &suite.source, v.id.span(), e.to_string())
                .with_help("see docs/models.md: models are PROVIDER/MODEL, and each agent CLI needs a provider that serves its wire API")
        })
        .collect();
    for model in users.iter().filter_map(|u| u.model.as_ref()) {
        if let Err(e) = config.model(model.get_ref()) {
            problems.push(
                proctor_suite::Problem::at(proctor_suite::ProblemKind::Inconsistent, &suite.source, model.span(), format!("the user's {e}"))
                    .with_help("see docs/models.md: models are PROVIDER/MODEL of a provider the configuration knows"),
            );
        }
    }
    Ok(problems)
}

/// The key variables of the providers the suite's variants use that are not set here: a run
/// would stop before any trial, naming them.
pub fn key_warnings(suite: &Suite, config: Option<&Path>) -> Vec<String> {
    let Ok(config) = load_config(config) else {
        return Vec::new();
    };
    let models: std::collections::BTreeMap<String, _> = suite
        .file
        .variants
        .iter()
        .filter_map(|v| {
            Some((
                v.id.get_ref().clone(),
                gateway::variant_model(v, &config).ok()??,
            ))
        })
        .collect();
    match gateway::keys_for(&config, models.values()) {
        Err(e) => vec![format!("{e}: `proctor run` would stop before any trial")],
        Ok(_) => Vec::new(),
    }
}
