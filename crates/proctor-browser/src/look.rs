//! Looking at pages: what to look at ([`Job`], [`Look`]), what was seen ([`Seen`]), and the
//! looking itself, one fresh tab per page. A job is run inside the trial's validation sandbox
//! by `proctor __visual JOB`, which prints the [`Report`] as JSON.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::cdp::{Browser, Viewport};
use crate::error::BrowserError;

/// Everything one browser looks at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    /// The browser's executable.
    pub browser: PathBuf,
    /// The window.
    pub viewport: Viewport,
    /// Milliseconds each look may take, page load included.
    pub timeout_ms: u64,
    /// The pages to look at, in order.
    pub looks: Vec<Look>,
}

/// One page to look at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Look {
    /// The page's URL (`file:///workspace/index.html`, `http://127.0.0.1:8080/`).
    pub url: String,
    /// The elements of interest; `None`: the page as a whole.
    pub selector: Option<String>,
    /// Whether to take a screenshot: of the first element matching the selector, or of the
    /// window (without a selector, or when no element matches it).
    pub screenshot: bool,
}

/// One element matching a selector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Element {
    /// Its rendered text (`innerText`), trimmed.
    pub text: String,
    /// Whether it is rendered: it has a layout box, and is neither `display: none` nor
    /// `visibility: hidden` nor fully transparent.
    pub visible: bool,
}

/// What one look saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seen {
    /// How many elements match the selector (`None` without one).
    pub count: Option<u64>,
    /// The first matching elements (at most [`MAX_ELEMENTS`]).
    pub elements: Vec<Element>,
    /// The screenshot, a PNG, base64 in JSON.
    #[serde(default, with = "base64_bytes")]
    pub screenshot: Option<Vec<u8>>,
    /// Why the page did not load (a missing file, a refused connection, a page that never
    /// finished loading): the page's fault, not the browser's.
    pub load_error: Option<String>,
    /// Why the page could not be looked at (the browser failed): nothing was seen.
    pub error: Option<String>,
}

/// What a job saw, look by look.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// One per look, in order.
    pub seen: Vec<Seen>,
}

/// The most elements of a selector reported.
pub const MAX_ELEMENTS: usize = 50;

/// Runs a job: starts the browser (its profile in a temporary folder) and looks at each page
/// in a tab of its own. A browser that cannot start, or that goes away, makes every look still
/// to do carry the reason.
pub fn run_job(job: &Job) -> Report {
    let per_look = Duration::from_millis(job.timeout_ms);
    let mut seen = Vec::with_capacity(job.looks.len());
    let profile = match tempfile::Builder::new().prefix("proctor-browser").tempdir() {
        Ok(p) => p,
        Err(e) => {
            let why = format!("cannot make the browser's profile folder: {e}");
            return Report {
                seen: job.looks.iter().map(|_| failed(&why)).collect(),
            };
        }
    };
    let mut browser = match Browser::launch(
        &job.browser,
        job.viewport,
        &profile.path().join("profile"),
        &profile.path().join("stderr"),
    ) {
        Ok(b) => b,
        Err(e) => {
            let why = e.to_string();
            return Report {
                seen: job.looks.iter().map(|_| failed(&why)).collect(),
            };
        }
    };
    let mut gone: Option<String> = None;
    for look in &job.looks {
        if let Some(why) = &gone {
            seen.push(failed(why));
            continue;
        }
        let deadline = Instant::now() + per_look;
        match look_at(&mut browser, job.viewport, look, deadline) {
            Ok(s) => seen.push(s),
            Err(e) => {
                let why = e.to_string();
                if matches!(
                    e,
                    BrowserError::Closed { .. } | BrowserError::Timeout { .. }
                ) {
                    gone = Some(why.clone());
                }
                seen.push(failed(&why));
            }
        }
    }
    Report { seen }
}

fn failed(why: &str) -> Seen {
    Seen {
        error: Some(why.to_string()),
        ..Seen::default()
    }
}

/// One look, in a new tab that is closed afterwards.
fn look_at(
    browser: &mut Browser,
    viewport: Viewport,
    look: &Look,
    deadline: Instant,
) -> Result<Seen, BrowserError> {
    let target = browser.call(
        None,
        "Target.createTarget",
        json!({ "url": "about:blank" }),
        deadline,
    )?;
    let target_id = target["targetId"].as_str().unwrap_or_default().to_string();
    let attached = browser.call(
        None,
        "Target.attachToTarget",
        json!({ "targetId": target_id, "flatten": true }),
        deadline,
    )?;
    let session = attached["sessionId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let seen = in_tab(browser, &session, viewport, look, deadline);
    // A tab that cannot be closed goes with the browser.
    let _ = browser.call(
        None,
        "Target.closeTarget",
        json!({ "targetId": target_id }),
        Instant::now() + Duration::from_secs(5),
    );
    seen
}

/// Loads the page in the tab of `session` and looks at it.
fn in_tab(
    browser: &mut Browser,
    session: &str,
    viewport: Viewport,
    look: &Look,
    deadline: Instant,
) -> Result<Seen, BrowserError> {
    let s = Some(session);
    browser.call(s, "Page.enable", json!({}), deadline)?;
    browser.call(
        s,
        "Emulation.setDeviceMetricsOverride",
        json!({
            "width": viewport.width,
            "height": viewport.height,
            "deviceScaleFactor": 1,
            "mobile": false,
        }),
        deadline,
    )?;
    let nav = browser.call(s, "Page.navigate", json!({ "url": look.url }), deadline)?;
    if let Some(err) = nav.get("errorText").and_then(Value::as_str) {
        if !err.is_empty() {
            return Ok(Seen {
                load_error: Some(format!("{} did not load: {err}", look.url)),
                ..Seen::default()
            });
        }
    }
    match browser.wait_event(session, "Page.loadEventFired", deadline) {
        Ok(_) => {}
        Err(BrowserError::Timeout { .. }) => {
            return Ok(Seen {
                load_error: Some(format!("{} did not finish loading in time", look.url)),
                ..Seen::default()
            })
        }
        Err(e) => return Err(e),
    }
    // Two frames after the load, what the page's load handlers did is on screen.
    evaluate(
        browser,
        session,
        "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))",
        deadline,
    )?;
    let mut seen = Seen::default();
    let mut clip = None;
    if let Some(selector) = &look.selector {
        let probe = evaluate(browser, session, &probe_js(selector), deadline)?;
        seen.count = probe["count"].as_u64();
        seen.elements = serde_json::from_value(probe["elements"].clone()).unwrap_or_default();
        clip = probe.get("rect").filter(|r| !r.is_null()).cloned();
    }
    if look.screenshot {
        let mut params = json!({ "format": "png" });
        if let Some(rect) = clip {
            params["clip"] = json!({
                "x": rect["x"], "y": rect["y"],
                "width": rect["width"], "height": rect["height"],
                "scale": 1,
            });
            params["captureBeyondViewport"] = json!(true);
        }
        let shot = browser.call(s, "Page.captureScreenshot", params, deadline)?;
        let data = shot["data"].as_str().unwrap_or_default();
        let png = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| BrowserError::Protocol {
                method: "Page.captureScreenshot".into(),
                message: format!("its data is not base64: {e}"),
            })?;
        seen.screenshot = Some(png);
    }
    Ok(seen)
}

/// Evaluates `expression` in the page (awaiting a promise) and gives its value.
fn evaluate(
    browser: &mut Browser,
    session: &str,
    expression: &str,
    deadline: Instant,
) -> Result<Value, BrowserError> {
    let r = browser.call(
        Some(session),
        "Runtime.evaluate",
        json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        deadline,
    )?;
    if let Some(ex) = r.get("exceptionDetails") {
        let text = ex["exception"]["description"]
            .as_str()
            .or_else(|| ex["text"].as_str())
            .unwrap_or("an exception");
        return Err(BrowserError::Protocol {
            method: "Runtime.evaluate".into(),
            message: text.to_string(),
        });
    }
    Ok(r["result"]["value"].clone())
}

/// The expression that reports the elements matching `selector`: how many, the first ones'
/// text and visibility, and the first one's box in page coordinates (for its screenshot).
fn probe_js(selector: &str) -> String {
    let sel = serde_json::to_string(selector).unwrap_or_else(|_| "\"\"".into());
    format!(
        r#"(() => {{
  const all = Array.from(document.querySelectorAll({sel}));
  const visible = (e) => {{
    if (e.getClientRects().length === 0) return false;
    const s = getComputedStyle(e);
    return s.display !== "none" && s.visibility !== "hidden" && s.visibility !== "collapse" && parseFloat(s.opacity) !== 0;
  }};
  const elements = all.slice(0, {MAX_ELEMENTS}).map((e) => ({{
    text: (e.innerText ?? e.textContent ?? "").trim(),
    visible: visible(e),
  }}));
  let rect = null;
  if (all.length > 0) {{
    const r = all[0].getBoundingClientRect();
    if (r.width > 0 && r.height > 0) {{
      rect = {{ x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height }};
    }}
  }}
  return {{ count: all.length, elements, rect }};
}})()"#
    )
}

/// Optional bytes as base64 in JSON.
mod base64_bytes {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(b) => s.serialize_some(&base64::engine::general_purpose::STANDARD.encode(b)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        let text: Option<String> = Option::deserialize(d)?;
        text.map(|t| {
            base64::engine::general_purpose::STANDARD
                .decode(t)
                .map_err(serde::de::Error::custom)
        })
        .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selector_is_quoted_as_a_javascript_string() {
        let js = probe_js(r#"a[title="x"]"#);
        assert!(
            js.contains(r#"document.querySelectorAll("a[title=\"x\"]")"#),
            "{js}"
        );
    }

    #[test]
    fn a_report_round_trips_with_its_screenshot_as_base64() {
        let r = Report {
            seen: vec![Seen {
                count: Some(1),
                elements: vec![Element {
                    text: "Ready".into(),
                    visible: true,
                }],
                screenshot: Some(vec![0x89, b'P', b'N', b'G']),
                load_error: None,
                error: None,
            }],
        };
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"iVBORw==\""), "{text}");
        assert_eq!(serde_json::from_str::<Report>(&text).unwrap(), r);
    }

    #[test]
    fn a_browser_that_cannot_start_makes_every_look_say_why() {
        let job = Job {
            browser: PathBuf::from("/nonexistent/chromium"),
            viewport: Viewport::default(),
            timeout_ms: 1000,
            looks: vec![
                Look {
                    url: "about:blank".into(),
                    selector: None,
                    screenshot: true,
                };
                2
            ],
        };
        let r = run_job(&job);
        assert_eq!(r.seen.len(), 2);
        for s in &r.seen {
            let e = s.error.as_deref().unwrap();
            assert!(
                e.starts_with("cannot start the browser /nonexistent/chromium"),
                "{e}"
            );
        }
    }
}
