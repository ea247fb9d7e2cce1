//! The HTTP server of `proctor view`: the pages and their JSON twins, read from the store on
//! each request (nothing is cached, so a page shows a run as it is now).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Json, Response};
use axum::routing::get;
use axum::Router;

use crate::data::{self, ViewError};
use crate::pages;
use crate::pictures::RunPictures;
use crate::viewer::Viewer;

impl Viewer {
    /// The routes: pages and `/api/...`.
    pub fn router(self) -> Router {
        Router::new()
            .route("/", get(runs_page))
            .route("/runs/{run}", get(run_page))
            .route("/runs/{run}/trials/{trial}", get(trial_page))
            .route("/runs/{run}/{picture}", get(run_picture))
            .route("/compare/pairs.svg", get(pairs_picture))
            .route("/api/runs", get(runs_api))
            .route("/api/runs/{run}", get(run_api))
            .route("/api/runs/{run}/trials/{trial}", get(trial_api))
            .route(
                "/api/runs/{run}/trials/{trial}/transcript",
                get(transcript_api),
            )
            .route(
                "/runs/{run}/trials/{trial}/services/{*path}",
                get(service_file_page),
            )
            .route(
                "/api/runs/{run}/trials/{trial}/services/{*path}",
                get(service_file_api),
            )
            .route("/compare", get(compare_page))
            .route("/api/compare", get(compare_api))
            .fallback(|| async {
                (
                    StatusCode::NOT_FOUND,
                    Html(pages::error("Not found", "No such page.")),
                )
            })
            .with_state(Arc::new(self))
    }
}

/// Serves `viewer` on `listener` until Ctrl-C, answering only requests for its own address
/// (and, on loopback, `localhost`) or a name of `allow_hosts`.
pub async fn serve(
    viewer: Viewer,
    listener: tokio::net::TcpListener,
    allow_hosts: &[String],
) -> std::io::Result<()> {
    let hosts = Arc::new(crate::security::Hosts::new(
        listener.local_addr()?,
        allow_hosts,
    ));
    let app = viewer.router().layer(axum::middleware::from_fn_with_state(
        hosts,
        crate::security::guard,
    ));
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
}

type App = State<Arc<Viewer>>;

/// Runs blocking store reads off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ViewError> + Send + 'static,
) -> Result<T, ViewError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(ViewError::Failed(e.to_string())))
}

/// A page, or its error page with the right status.
fn html(r: Result<String, ViewError>) -> Response {
    match r {
        Ok(page) => Html(page).into_response(),
        Err(e @ ViewError::NotFound(_)) => (
            StatusCode::NOT_FOUND,
            Html(pages::error("Not found", &e.to_string())),
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Html(pages::error("Cannot show this page", &e.to_string())),
        )
            .into_response(),
    }
}

/// JSON, or `{"error": ...}` with the right status.
fn json<T: serde::Serialize>(r: Result<T, ViewError>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => {
            let status = match e {
                ViewError::NotFound(_) => StatusCode::NOT_FOUND,
                ViewError::Store(_) | ViewError::Failed(_) => StatusCode::INTERNAL_SERVER_ERROR,
            };
            (status, Json(serde_json::json!({ "error": e.to_string() }))).into_response()
        }
    }
}

async fn runs_page(State(v): App) -> Response {
    html(blocking(move || data::runs(v.store()).map(|r| pages::runs(&r))).await)
}

async fn run_page(
    State(v): App,
    Path(run): Path<String>,
    Query(q): Query<data::TrialQuery>,
) -> Response {
    html(
        blocking(move || {
            let p = data::run(v.store(), v.sources(), &run, &q)?;
            let pictures = run_pictures(&v, &p)?;
            Ok(pages::run(&p, "", &pictures))
        })
        .await,
    )
}

/// The pictures of the run of page `p`, its trials linked to their pages.
fn run_pictures(v: &Viewer, p: &data::RunPage) -> Result<RunPictures, ViewError> {
    let trials = data::all_trials(v.store(), v.sources(), p)?;
    let run = p.run.clone();
    Ok(RunPictures::of(p, &trials, &move |t| {
        format!("/runs/{run}/trials/{t}")
    }))
}

/// Which picture of a run `/runs/RUN/NAME.svg` asks for.
async fn run_picture(
    State(v): App,
    Path((run, name)): Path<(String, String)>,
    Query(q): Query<data::TrialQuery>,
) -> Response {
    let r = blocking(move || {
        let p = data::run(v.store(), v.sources(), &run, &q)?;
        let pictures = run_pictures(&v, &p)?;
        match name.as_str() {
            "grid.svg" => Ok(pictures.grid),
            "spread.svg" => Ok(pictures.spread),
            "cost.svg" => pictures.cost.ok_or_else(|| {
                ViewError::NotFound(
                    "nothing to draw: the run has no success rates yet, or no trial reported tokens or money".into(),
                )
            }),
            _ => Err(ViewError::NotFound(format!(
                "no picture `{name}`: a run has grid.svg, spread.svg and cost.svg"
            ))),
        }
    })
    .await;
    svg(r)
}

/// An SVG picture, or its error page with the right status.
fn svg(r: Result<String, ViewError>) -> Response {
    match r {
        Ok(svg) => (
            [(
                axum::http::header::CONTENT_TYPE,
                "image/svg+xml; charset=utf-8",
            )],
            svg,
        )
            .into_response(),
        Err(e) => html(Err(e)),
    }
}

async fn trial_page(
    State(v): App,
    Path((run, trial)): Path<(String, String)>,
    Query(q): Query<data::ScoringQuery>,
) -> Response {
    html(
        blocking(move || {
            data::trial(v.store(), &run, &trial, v.sources(), &q.scoring).map(|t| pages::trial(&t))
        })
        .await,
    )
}

async fn runs_api(State(v): App) -> Response {
    json(blocking(move || data::runs(v.store())).await)
}

async fn run_api(
    State(v): App,
    Path(run): Path<String>,
    Query(q): Query<data::TrialQuery>,
) -> Response {
    json(blocking(move || data::run(v.store(), v.sources(), &run, &q)).await)
}

async fn trial_api(
    State(v): App,
    Path((run, trial)): Path<(String, String)>,
    Query(q): Query<data::ScoringQuery>,
) -> Response {
    json(blocking(move || data::trial(v.store(), &run, &trial, v.sources(), &q.scoring)).await)
}

async fn transcript_api(
    State(v): App,
    Path((run, trial)): Path<(String, String)>,
    Query(q): Query<data::SliceQuery>,
) -> Response {
    json(
        blocking(move || data::transcript_slice(v.store(), v.transcripts(), &run, &trial, &q))
            .await,
    )
}

async fn service_file_page(
    State(v): App,
    Path((run, trial, path)): Path<(String, String, String)>,
    Query(q): Query<data::PageQuery>,
) -> Response {
    html(
        blocking(move || {
            data::service_file_page(v.store(), &run, &trial, &path, &q)
                .map(|p| pages::service_file(&p))
        })
        .await,
    )
}

async fn service_file_api(
    State(v): App,
    Path((run, trial, path)): Path<(String, String, String)>,
    Query(q): Query<data::PageQuery>,
) -> Response {
    json(blocking(move || data::service_file_page(v.store(), &run, &trial, &path, &q)).await)
}

/// Binds `addr`, tells `on_listening` the address it got (port 0 picks a free one), and serves
/// `viewer` until Ctrl-C, on a runtime of its own (hosts as [`serve`]).
pub fn run_blocking(
    viewer: Viewer,
    addr: SocketAddr,
    allow_hosts: &[String],
    on_listening: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        on_listening(listener.local_addr()?);
        serve(viewer, listener, allow_hosts).await
    })
}

/// The two arms of `/compare?a=RUN/VARIANT&b=RUN/VARIANT`.
#[derive(Debug, serde::Deserialize)]
struct Arms {
    a: Option<String>,
    b: Option<String>,
}

async fn compare_page(State(v): App, Query(q): Query<Arms>) -> Response {
    html(
        blocking(move || {
            let (a, b) = arms(&q)?;
            data::compare(v.store(), v.sources(), &a, &b).map(|c| pages::compare(&c))
        })
        .await,
    )
}

async fn compare_api(State(v): App, Query(q): Query<Arms>) -> Response {
    json(
        blocking(move || {
            let (a, b) = arms(&q)?;
            data::compare(v.store(), v.sources(), &a, &b)
        })
        .await,
    )
}

async fn pairs_picture(State(v): App, Query(q): Query<Arms>) -> Response {
    svg(blocking(move || {
        let (a, b) = arms(&q)?;
        data::compare(v.store(), v.sources(), &a, &b).map(|c| pages::pairs_svg(&c))
    })
    .await)
}

fn arms(q: &Arms) -> Result<(String, String), ViewError> {
    match (&q.a, &q.b) {
        (Some(a), Some(b)) => Ok((a.clone(), b.clone())),
        _ => Err(ViewError::NotFound(
            "compare needs two arms: /compare?a=RUN/VARIANT&b=RUN/VARIANT".into(),
        )),
    }
}
