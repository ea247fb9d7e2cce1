//! The configuration file's shape (serde) and its checks, merged over the built-ins.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::{builtin, Config, ConfigError, Provider, RetrySettings, Timeouts};
use crate::api::Api;
use crate::model_ref::ModelRef;
use crate::prices::Price;

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    providers: BTreeMap<String, Spanned<ProviderTable>>,
    #[serde(default)]
    retries: Option<Spanned<RetrySettings>>,
    #[serde(default)]
    timeouts: Option<Spanned<Timeouts>>,
    #[serde(default)]
    prices: BTreeMap<Spanned<String>, Spanned<Price>>,
    #[serde(default)]
    registries: BTreeMap<String, super::Registry>,
    #[serde(default)]
    browser: Option<BrowserTable>,
}

/// The `[browser]` table: the headless browser of `visual` checks.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BrowserTable {
    /// The browser's executable, relative to the configuration file's folder.
    path: PathBuf,
}

/// One `[providers.NAME]` table; every key overrides the built-in of the same name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderTable {
    api: Option<Api>,
    base_url: Option<Spanned<String>>,
    /// An empty string means the provider needs no key.
    key_env: Option<Spanned<String>>,
    max_concurrency: Option<Spanned<i64>>,
    ca_file: Option<PathBuf>,
}

/// What reports an error at a byte offset of the file.
type ErrAt<'a> = &'a dyn Fn(usize, String) -> ConfigError;

/// Parses `text` (the file at `path`) and merges it over the built-in providers.
pub(super) fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
    let file: File = toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        ConfigError::at(path, text, offset, e.message().trim().to_string())
    })?;
    let err = |offset: usize, message: String| ConfigError::at(path, text, offset, message);
    let base_dir = path.parent().unwrap_or(Path::new("."));
    Ok(Config {
        source: Some(path.to_path_buf()),
        providers: providers(file.providers, base_dir, &err)?,
        retries: retries(file.retries, &err)?,
        timeouts: timeouts(file.timeouts, &err)?,
        prices: prices(file.prices, &err)?,
        registries: file.registries,
        browser: file.browser.map(|b| base_dir.join(b.path)),
    })
}

/// The built-in providers with the file's tables laid over them, and the file's own.
fn providers(
    tables: BTreeMap<String, Spanned<ProviderTable>>,
    base_dir: &Path,
    err: ErrAt<'_>,
) -> Result<BTreeMap<String, Provider>, ConfigError> {
    let mut providers = builtin::providers();
    for (name, table) in tables {
        let span = table.span();
        let table = table.into_inner();
        if name.is_empty() || name.contains('/') || name.chars().any(char::is_whitespace) {
            return Err(err(
                span.start,
                format!("provider name `{name}` must be non-empty, without `/` or spaces"),
            ));
        }
        let provider = match providers.remove(&name) {
            Some(builtin) => builtin,
            None => new_provider(&name, &table, span.start, err)?,
        };
        let provider = apply(provider, table, base_dir, err)?;
        providers.insert(name, provider);
    }
    Ok(providers)
}

/// A provider that is not built in, from its table (which must give `api` and `base_url`).
fn new_provider(
    name: &str,
    table: &ProviderTable,
    at: usize,
    err: ErrAt<'_>,
) -> Result<Provider, ConfigError> {
    let Some(api) = table.api else {
        return Err(err(
            at,
            format!("provider `{name}` needs `api` (anthropic-messages, openai-responses, openai-chat or gemini)"),
        ));
    };
    let Some(base_url) = &table.base_url else {
        return Err(err(at, format!("provider `{name}` needs `base_url`")));
    };
    Ok(Provider {
        name: name.to_string(),
        api,
        base_url: base_url.get_ref().clone(),
        key_env: None,
        max_concurrency: builtin::DEFAULT_MAX_CONCURRENCY,
        ca_file: None,
        builtin: false,
    })
}

/// The `[retries]` table, checked.
fn retries(
    table: Option<Spanned<RetrySettings>>,
    err: ErrAt<'_>,
) -> Result<RetrySettings, ConfigError> {
    match table {
        Some(r) if r.get_ref().attempts == 0 => Err(err(
            r.span().start,
            "`retries.attempts` must be at least 1".into(),
        )),
        Some(r) if r.get_ref().base_delay_ms > r.get_ref().max_delay_ms => Err(err(
            r.span().start,
            "`retries.base_delay_ms` must not exceed `retries.max_delay_ms`".into(),
        )),
        Some(r) => Ok(r.into_inner()),
        None => Ok(RetrySettings::default()),
    }
}

/// The `[timeouts]` table, checked.
fn timeouts(table: Option<Spanned<Timeouts>>, err: ErrAt<'_>) -> Result<Timeouts, ConfigError> {
    let Some(t) = table else {
        return Ok(Timeouts::default());
    };
    let v = t.get_ref();
    if v.connect_ms == 0 || v.first_byte_ms == 0 || v.idle_ms == 0 {
        return Err(err(
            t.span().start,
            "every timeout must be at least 1 ms".into(),
        ));
    }
    Ok(t.into_inner())
}

/// The `[prices."PROVIDER/MODEL"]` tables, checked.
fn prices(
    tables: BTreeMap<Spanned<String>, Spanned<Price>>,
    err: ErrAt<'_>,
) -> Result<BTreeMap<ModelRef, Price>, ConfigError> {
    let mut prices = BTreeMap::new();
    for (key, price) in tables {
        let model: ModelRef = key
            .get_ref()
            .parse()
            .map_err(|e| err(key.span().start, format!("price key: {e}")))?;
        if !price.get_ref().is_valid() {
            return Err(err(
                price.span().start,
                format!("prices of `{model}` must be finite numbers, zero or more"),
            ));
        }
        prices.insert(model, price.into_inner());
    }
    Ok(prices)
}

/// Lays a table's keys over a provider and checks the values.
fn apply(
    mut provider: Provider,
    table: ProviderTable,
    base_dir: &Path,
    err: ErrAt<'_>,
) -> Result<Provider, ConfigError> {
    if let Some(api) = table.api {
        provider.api = api;
    }
    if let Some(url) = table.base_url {
        let uri: Result<http::Uri, _> = url.get_ref().parse();
        let ok = uri.is_ok_and(|u| {
            matches!(u.scheme_str(), Some("http" | "https"))
                && u.authority().is_some()
                && u.query().is_none()
        });
        if !ok {
            return Err(err(
                url.span().start,
                format!(
                    "`base_url` of `{}` must be an http:// or https:// URL without a query, got `{}`",
                    provider.name,
                    url.get_ref()
                ),
            ));
        }
        provider.base_url = url.into_inner().trim_end_matches('/').to_string();
    }
    if let Some(key_env) = table.key_env {
        let name = key_env.get_ref();
        if name.contains('=') || name.contains('\0') || name.chars().any(char::is_whitespace) {
            return Err(err(
                key_env.span().start,
                format!("`key_env` must name an environment variable, got `{name}`"),
            ));
        }
        provider.key_env = (!name.is_empty()).then(|| name.clone());
    }
    if let Some(n) = table.max_concurrency {
        let value = *n.get_ref();
        if !(1..=65_536).contains(&value) {
            return Err(err(
                n.span().start,
                format!("`max_concurrency` must be between 1 and 65536, got {value}"),
            ));
        }
        provider.max_concurrency = value as usize;
    }
    if let Some(ca) = table.ca_file {
        provider.ca_file = Some(if ca.is_absolute() {
            ca
        } else {
            base_dir.join(ca)
        });
    }
    Ok(provider)
}
