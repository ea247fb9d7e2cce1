//! Serves a script until killed: `cargo run -p proctor-mock-model --example serve -- SCRIPT [ADDR] [LOG]`.
//! Prints the base URL on stdout. The `proctor mock-model` command is the supported front end.

use proctor_mock_model::{MockModel, MockOptions, Script};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: serve SCRIPT [ADDR] [LOG]");
        std::process::exit(2);
    };
    let script = match Script::load(std::path::Path::new(path)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let addr = args.get(1).cloned().unwrap_or_else(|| "127.0.0.1:0".into());
    let options = MockOptions {
        log: args.get(2).map(Into::into),
        ..MockOptions::default()
    };
    match MockModel::start_with(script, addr.as_str(), options) {
        Ok(h) => {
            println!("{}", h.base_url());
            h.wait();
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
