//! `chat-mock`: the deterministic mock backend of `chat`, with made-up fixtures.
//!
//! Usage: chat-mock --fixtures FILE [--listen 127.0.0.1:7070] [--state-dir DIR]
//!
//! It writes `state.json` (atomically, at start and after every change) and appends
//! `events.jsonl` in `--state-dir`, default `$PROCTOR_SERVICE_DIR`; with neither, it writes nothing.
//! The first line on stdout is `chat-mock listening on http://ADDR` (useful with port 0).

use proctor_example_chat::server::{serve, Persist, Shared};
use proctor_example_chat::store::{Fixtures, Store};
use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

const USAGE: &str = "\
Usage: chat-mock --fixtures FILE [--listen ADDR] [--state-dir DIR]

  --fixtures FILE   the made-up people, channels, messages and scripted replies (JSON)
  --listen ADDR     where to listen (default 127.0.0.1:7070; port 0 picks a free port)
  --state-dir DIR   where to write state.json and events.jsonl
                    (default $PROCTOR_SERVICE_DIR; with neither, nothing is written)
";

fn fail(msg: &str) -> ! {
    eprintln!("chat-mock: {msg}");
    std::process::exit(2);
}

fn main() {
    let mut fixtures = None;
    let mut listen = "127.0.0.1:7070".to_string();
    let mut state_dir = std::env::var_os("PROCTOR_SERVICE_DIR")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut value = |n: &str| {
            inline
                .clone()
                .or_else(|| args.next())
                .unwrap_or_else(|| fail(&format!("{n} needs a value")))
        };
        match name.as_str() {
            "--fixtures" => fixtures = Some(PathBuf::from(value("--fixtures"))),
            "--listen" => listen = value("--listen"),
            "--state-dir" => state_dir = Some(PathBuf::from(value("--state-dir"))),
            "--help" | "-h" => {
                print!("{USAGE}");
                return;
            }
            other => fail(&format!("unknown argument '{other}'\n{USAGE}")),
        }
    }
    let Some(fixtures) = fixtures else {
        fail(&format!("--fixtures is required\n{USAGE}"))
    };
    let text = std::fs::read_to_string(&fixtures)
        .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", fixtures.display())));
    let fx = Fixtures::from_json(&text)
        .unwrap_or_else(|e| fail(&format!("{}: {e}", fixtures.display())));
    if let Some(d) = &state_dir {
        std::fs::create_dir_all(d)
            .unwrap_or_else(|e| fail(&format!("cannot create {}: {e}", d.display())));
    }
    let store = Store::new(fx);
    let mut persist = Persist::new(state_dir);
    persist
        .flush(&store)
        .unwrap_or_else(|e| fail(&format!("cannot write state: {e}")));
    let listener = TcpListener::bind(&listen)
        .unwrap_or_else(|e| fail(&format!("cannot listen on {listen}: {e}")));
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or(listen);
    println!("chat-mock listening on http://{addr}");
    let _ = std::io::stdout().flush();
    let shared = Arc::new(Mutex::new(Shared {
        store,
        persist,
        started: Instant::now(),
    }));
    if let Err(e) = serve(listener, shared) {
        fail(&format!("server stopped: {e}"));
    }
}
