//! The command-line grammar.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// proctor runs honest, reproducible evaluations of AI agents and of the interfaces they use.
#[derive(Debug, Parser)]
#[command(name = "proctor", version, about, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a commented starter suite (one task, a scripted oracle, a holdout check).
    Init {
        /// Where to write it; must not exist or be empty.
        #[arg(default_value = "my-suite")]
        dir: PathBuf,
    },
    /// Check a suite and report every problem found.
    Validate {
        /// The suite directory.
        suite: PathBuf,
        /// Print problems as JSON on stdout instead of diagnostics on stderr.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Also run every task with its oracle and with a null agent: the oracle must pass and
        /// the null agent must not. The oracle is the scripted agent in
        /// `agents/oracle/TASK_ID.toml` (whatever the suite's variants are), unless
        /// --oracle-variant names another.
        #[arg(long)]
        oracle: bool,
        /// Use this variant of the suite as the oracle instead of `agents/oracle/`.
        #[arg(long, value_name = "V", requires = "oracle")]
        oracle_variant: Option<String>,
        /// Keep the oracle run in this store (default: a temporary one, kept when a check
        /// fails).
        #[arg(long, value_name = "DIR", requires = "oracle")]
        store: Option<PathBuf>,
        /// With --oracle: how many trials run at once (default: one per CPU).
        #[arg(long, value_name = "N", requires = "oracle", value_parser = clap::value_parser!(u32).range(1..))]
        jobs: Option<u32>,
        /// With --oracle: take up the newest oracle run of this very suite (same content and
        /// oracle) in --store, running only the trials it has not finished (after a crash or
        /// an interruption); a new run when the store has none.
        #[arg(long, requires = "store")]
        resume: bool,
        /// With --oracle: build the image of every task that has a `build` folder from its
        /// Dockerfile, even when the image could be pulled (Harbor's --force-build).
        #[arg(long, requires = "oracle")]
        build: bool,
        /// With --oracle: also write the per-suite summary as JSON to FILE (schema:
        /// schemas/oracle-summary.schema.json).
        #[arg(long, value_name = "FILE", requires = "oracle")]
        json: Option<PathBuf>,
        /// Only these tasks will run (repeatable): the scripted-agent files and model scripts of
        /// other tasks may be missing.
        #[arg(long = "task", value_name = "T", conflicts_with = "oracle")]
        tasks: Vec<String>,
        /// The configuration file of model providers, as for `run`: variants on real models are
        /// checked against it. Default: $PROCTOR_CONFIG, else ~/.config/proctor/config.toml.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The image cache, as for `run`: with it, every image the tasks name is also pulled
        /// and unpacked there (as `run` does before any trial), so a reference that cannot be
        /// pulled is reported now, and --oracle runs in the images it holds. Without it, image
        /// references are checked as text only (--oracle then uses ~/.cache/proctor/images).
        #[arg(long, value_name = "DIR")]
        image_cache: Option<PathBuf>,
    },
    /// List the suites found under a folder.
    Suites {
        /// Where to look.
        #[arg(default_value = ".")]
        dir: PathBuf,
    },
    /// Run a suite's trials (with --dry-run: print the plan and execute nothing).
    Run(RunArgs),
    /// Sit a task yourself: the trial an agent would get (sandbox, workspace, services, shims)
    /// with your shell on a terminal, graded by the same rules and recorded as variant
    /// `human:NAME` in a run of its own (docs/sittings.md).
    Sit(SitArgs),
    /// List the runs in the store, newest first.
    List {
        /// The store folder.
        #[arg(long, value_name = "DIR", default_value = ".proctor")]
        store: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Show a run's trials, or one trial's evidence.
    Show {
        /// A run id, any unique prefix of one, or `latest`.
        run: String,
        /// A trial id (`TASK.VARIANT.INDEX`).
        trial: Option<String>,
        /// List only this task's trials (and cells).
        #[arg(long, value_name = "NAME", conflicts_with = "trial")]
        task: Option<String>,
        /// List only the trials with this outcome (`completed`, `wrong`, `refused-wrongly`,
        /// ...).
        #[arg(long, value_name = "OUTCOME", conflicts_with = "trial")]
        outcome: Option<proctor_records::OutcomeKind>,
        /// The store folder.
        #[arg(long, value_name = "DIR", default_value = ".proctor")]
        store: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Show a page of a file the trial's service left instead, `NAME/FILE` under its
        /// `services/` folder (e.g. `chat/events.jsonl`): for a state or event log too large
        /// for the trial's record.
        #[arg(long, value_name = "NAME/FILE")]
        service: Option<String>,
        /// With --service: where the page starts, in bytes (stderr prints the next page's).
        #[arg(long, value_name = "BYTES", default_value_t = 0, requires = "service")]
        offset: u64,
        /// With --service: the most bytes the page holds (default 65536, at most 1048576).
        #[arg(
            long,
            value_name = "BYTES",
            default_value_t = 0,
            requires = "service",
            hide_default_value = true
        )]
        bytes: u64,
        /// Which scoring of the run to read: `latest` (the last `proctor rescore`, else the
        /// run's own), `original` (the run's own) or a rescore's number (1 is the first).
        #[arg(long, value_name = "latest|original|N", default_value = "latest")]
        scoring: proctor_store::ScoringChoice,
    },
    /// Score a run's saved end states again (no agent runs): with the run's own copy of its
    /// suite, the suite folder it was read from, or another suite folder.
    Rescore {
        /// A run id, any unique prefix of one, or `latest`.
        run: String,
        /// The suite folder to take the rules from (default: the run's own copy of its suite).
        #[arg(long, value_name = "DIR", conflicts_with = "suite_from")]
        suite: Option<PathBuf>,
        /// Where the rules come from without --suite: `run` (the copy of its suite the run
        /// keeps; the default) or `folder` (the suite folder the run was read from, as it is
        /// now).
        #[arg(long, value_enum, value_name = "run|folder")]
        suite_from: Option<SuiteFrom>,
        /// The store folder.
        #[arg(long, value_name = "DIR", default_value = ".proctor")]
        store: PathBuf,
        /// The image cache, for tasks that run in an image (default: ~/.cache/proctor/images).
        #[arg(long, value_name = "DIR")]
        image_cache: Option<PathBuf>,
        /// The configuration file (its `[registries]`); default: $PROCTOR_CONFIG, else
        /// ~/.config/proctor/config.toml.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Compare two runs, or two variants of one run, trial by trial.
    Compare {
        /// Two runs (ids, unique prefixes or `latest`), each optionally `RUN/VARIANT` to pick
        /// one variant of it (a sitting's: `RUN/human:NAME`), or one run with --variants.
        #[arg(required = true, num_args = 1..=2)]
        runs: Vec<String>,
        /// With one run: the two variants to compare, `A,B`.
        #[arg(long, value_name = "A,B")]
        variants: Option<String>,
        /// With two runs: compare only this variant of each.
        #[arg(long, value_name = "V")]
        variant: Option<String>,
        /// Apply the suite's [promotion] gates; exit 4 when one fails.
        #[arg(long)]
        gate: bool,
        /// List pass@k and pass^k for k = 1..K at most (the output says how many values of k
        /// it leaves out).
        #[arg(long, value_name = "K", default_value_t = proctor_report::DEFAULT_PASS_K_SHOWN, value_parser = clap::value_parser!(u32).range(1..))]
        pass_k_max: u32,
        /// Also write the promotion gates as a JUnit XML report, one test case per gate.
        #[arg(long, value_name = "FILE", requires = "gate")]
        junit: Option<PathBuf>,
        /// Let the gates pass a mixed comparison (arms from runs picked among others of the
        /// suite in the store, or scored by different suite versions): it still warns.
        #[arg(long, requires = "gate")]
        allow_mixed_runs: bool,
        /// The store folder.
        #[arg(long, value_name = "DIR", default_value = ".proctor")]
        store: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = CompareFormat::Text)]
        format: CompareFormat,
        /// Which scoring of each run to compare: `latest` (the last `proctor rescore`, else the
        /// run's own), `original` (the run's own) or a rescore's number (1 is the first).
        #[arg(long, value_name = "latest|original|N", default_value = "latest")]
        scoring: proctor_store::ScoringChoice,
    },
    /// Serve scripted model turns over the Anthropic, OpenAI and Gemini wire APIs.
    MockModel {
        /// The script: [[turns]] of tool calls or a final text, each with its usage, or weighted
        /// [[alternatives]] of such turns.
        #[arg(long, value_name = "FILE")]
        script: PathBuf,
        /// The seed that chooses among the script's weighted [[alternatives]] (required when it
        /// has any): alternative k is served when SEED % (sum of weights) falls in its share.
        #[arg(long, value_name = "N")]
        seed: Option<u64>,
        /// Address to listen on.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
        listen: String,
        /// Append every exchange here as JSON lines (default: $PROCTOR_SERVICE_DIR/wire.jsonl).
        #[arg(long, value_name = "FILE")]
        log: Option<PathBuf>,
        /// Inject a fault on a route: ROUTE=credential_loss|rate_limit|timeout|server_error
        /// (repeatable).
        ///
        /// ROUTE is anthropic, responses, chat, gemini or * (all). credential_loss answers 401,
        /// rate_limit 429, server_error 500, each in the route's own error shape; timeout holds
        /// the request open.
        #[arg(long = "fault", value_name = "ROUTE=KIND")]
        faults: Vec<String>,
        /// Require the API key held by the environment variable VAR on every API request.
        ///
        /// The key is read once at start (unset or empty is an error) and must be carried where
        /// the request's API puts it: Anthropic `x-api-key` or `authorization: Bearer`, OpenAI
        /// `authorization: Bearer`, Gemini `x-goog-api-key` or `?key=`. Model requests, token
        /// counts and model listings without it get HTTP 401 in their API's error shape and
        /// are logged with "kind":"auth_rejected"; accepted ones are logged with "key":"ok".
        /// Health and guard requests need no key. The key is never written to the log.
        #[arg(long, value_name = "VAR")]
        require_key_env: Option<String>,
        /// Serve HTTPS with this PEM certificate chain, leaf first (needs --tls-key).
        ///
        /// The printed base URL then starts with https://. The server speaks TLS 1.2 and 1.3
        /// (rustls) and offers ALPN http/1.1.
        #[arg(long, value_name = "PEM", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
        #[arg(long, value_name = "PEM", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
    },
    /// Convert Harbor or Terminal-Bench tasks into a proctor suite (docs/import.md).
    Import {
        /// The task format.
        #[arg(value_enum)]
        format: ImportFormat,
        /// Task folders, or folders of task folders.
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
        /// The suite folder to write (must not exist, or be empty).
        #[arg(long, value_name = "SUITE")]
        out: PathBuf,
        /// The suite's id (default: the output folder's name).
        #[arg(long, value_name = "ID")]
        id: Option<String>,
        /// The suite's human-readable `name` (default: none).
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// Do not build images: a task whose image is only a Dockerfile is skipped, with the
        /// commands that build it (default: it is built, as `proctor images build` does); a
        /// Dockerfile that is only `FROM` with `WORKDIR`/`ENV` needs no build and is imported.
        #[arg(long)]
        no_build: bool,
        /// The image cache builds go into (default: ~/.cache/proctor/images).
        #[arg(long, value_name = "DIR")]
        image_cache: Option<PathBuf>,
        /// The configuration file whose `[registries]` reach the Dockerfiles' FROM images;
        /// default: $PROCTOR_CONFIG, else ~/.config/proctor/config.toml.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Terminal-Bench: prompt each task with its `descriptions` entry KEY (a task without
        /// one is skipped); default: the entry its `instruction` names, else its
        /// `instruction`, else its `base` entry.
        #[arg(long, value_name = "KEY")]
        description: Option<String>,
    },
    /// Pull, build, list and prune the OCI images trials run in (docs/environments.md).
    Images {
        /// What to do.
        #[command(subcommand)]
        action: ImagesAction,
        /// The image cache (default: ~/.cache/proctor/images).
        #[arg(long, value_name = "DIR", global = true)]
        image_cache: Option<PathBuf>,
        /// The configuration file (its `[registries]`); default: $PROCTOR_CONFIG, else
        /// ~/.config/proctor/config.toml.
        #[arg(long, value_name = "FILE", global = true)]
        config: Option<PathBuf>,
    },
    /// Print the JSON Schema of a document proctor writes, or of `suite.toml`.
    Schema {
        /// Which document.
        #[arg(value_enum)]
        document: SchemaDoc,
    },
    /// Browse the store in a web browser: runs, rates, trials and their evidence (a local web
    /// app; docs/viewer.md). Prints the URL; Ctrl-C stops it.
    View {
        /// The store folder.
        #[arg(long, value_name = "DIR", default_value = ".proctor")]
        store: PathBuf,
        /// Where to listen (loopback unless you say otherwise; port 0 picks a free port).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7777")]
        listen: std::net::SocketAddr,
        /// Also answer requests for this host name (repeatable): the viewer answers only its
        /// own address, and `localhost` on loopback, so that no other site's page can read the
        /// store through a name that resolves to it.
        #[arg(long = "allow-host", value_name = "NAME")]
        allow_hosts: Vec<String>,
    },
    /// Write a run as one self-contained HTML page (--html), one ATIF trajectory per trial
    /// (--atif) or a JUnit XML report (--junit); at least one (docs/export.md).
    #[command(group(clap::ArgGroup::new("formats").required(true).multiple(true).args(["html", "atif", "junit"])))]
    Export {
        /// A run id, any unique prefix of one, or `latest`.
        run: String,
        /// The HTML file to write.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// The folder to write one ATIF-v1.8 trajectory per finished trial into, as
        /// `DIR/TRIAL_ID.json` (created when missing).
        #[arg(long, value_name = "DIR")]
        atif: Option<PathBuf>,
        /// The JUnit XML file to write: a test suite per task, a test case per trial.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// The store folder.
        #[arg(long, value_name = "DIR", default_value = ".proctor")]
        store: PathBuf,
        /// Which scoring of the run to export: `latest` (the last `proctor rescore`, else the
        /// run's own), `original` (the run's own) or a rescore's number (1 is the first).
        #[arg(long, value_name = "latest|original|N", default_value = "latest")]
        scoring: proctor_store::ScoringChoice,
    },
    /// Rebuild the store's index from its run folders.
    Reindex {
        /// The store folder.
        #[arg(long, value_name = "DIR", default_value = ".proctor")]
        store: PathBuf,
    },
    /// Run the bundled example suites end to end with their scripted agents.
    Demo {
        /// The store folder.
        #[arg(long, value_name = "DIR", default_value = ".proctor")]
        store: PathBuf,
    },
    /// Run one shard of a run submitted with `run --executor slurm` (what each array task
    /// runs; any other scheduler can run it the same way: docs/scale.md).
    Worker(WorkerArgs),
    /// Show a run's progress: trials finished by outcome and, for a Slurm run, its jobs'
    /// pending, running and failed tasks.
    Status {
        /// A run id, any unique prefix of one, or `latest`.
        run: String,
        /// The store folder.
        #[arg(long, value_name = "DIR", default_value = ".proctor")]
        store: PathBuf,
    },
    /// Write a run's results.json and results.md from the trials its workers wrote, and bring
    /// the store's index up to date with them.
    Collect {
        /// A run id, any unique prefix of one, or `latest`.
        run: String,
        /// The store folder.
        #[arg(long, value_name = "DIR", default_value = ".proctor")]
        store: PathBuf,
        /// Output format of the summary.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Running on a compute node (the job submitted with `--dependency=afterany`): write
        /// the results files only, never index.sqlite nor run.json.
        #[arg(long, hide = true)]
        on_node: bool,
    },
    /// Check every `verify:fileLine(PATH, /REGEX/)` citation in Markdown files: exit 1 when one
    /// no longer holds, 2 when one is malformed (docs/claims.md).
    Verify {
        /// Markdown files, or folders whose `*.md` files are checked (hidden and git-ignored
        /// files skipped).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Output format (text: failures on stderr, the count on stdout).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Print ready-made `verify:fileLine` citations of a run's results.md rows (docs/claims.md).
    Cite {
        /// A run id, any unique prefix of one, or `latest`; or the path of a results.md file
        /// (e.g. a copy kept in the repository).
        run: String,
        /// Only the rows of this task (repeatable; `(all tasks)` is the per-variant total).
        #[arg(long = "task", value_name = "T")]
        tasks: Vec<String>,
        /// Only the rows of this variant (repeatable; `(all variants)` is the overall total).
        #[arg(long = "variant", value_name = "V")]
        variants: Vec<String>,
        /// Which table of results.md to cite.
        #[arg(long, value_enum, default_value_t = CiteTable::Rates)]
        table: CiteTable,
        /// Pin only this column (repeatable), beside the row's variant and task: the citation
        /// then holds while these cells stay the same (default: every cell of the row).
        #[arg(long = "column", value_name = "NAME")]
        columns: Vec<String>,
        /// The folder of the Markdown file the citations will be written in; PATH is written
        /// relative to it (default: the root of the current git repository, which `verify`
        /// also looks in, else the current folder).
        #[arg(long, value_name = "DIR")]
        from: Option<PathBuf>,
        /// The store folder.
        #[arg(long, value_name = "DIR", default_value = ".proctor")]
        store: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Check that this node sees a file the submitting process wrote in the store (run by
    /// `run --executor slurm` as a one-task job before it submits anything).
    #[command(name = "__store-probe", hide = true)]
    StoreProbe {
        /// The probe file.
        file: PathBuf,
    },
}

/// `--jobs N`: a whole number of at least 1 (0 would run nothing and wait forever).
fn jobs_at_least_one(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1 (the trials run at once)".to_string()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("`{text}` is not a whole number: {e}")),
    }
}

/// Arguments of `proctor worker`.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The run (its id, as `run --executor slurm` printed it, or a unique prefix).
    pub run: String,
    /// Which shard of the batch to run: `I/K` (0-based I, K shards).
    #[arg(long, value_name = "I/K")]
    pub shard: String,
    /// The batch (submission) the shard belongs to (default: the run's latest).
    #[arg(long, value_name = "N")]
    pub batch: Option<u32>,
    /// The store folder (on a file system every node sees).
    #[arg(long, value_name = "DIR", default_value = ".proctor")]
    pub store: PathBuf,
    /// Trials run at once, at least 1 (default: the CPUs Slurm gave the task, else 1).
    #[arg(long, short = 'j', value_name = "N", value_parser = jobs_at_least_one)]
    pub jobs: Option<usize>,
    /// Folder for per-trial scratch, on the node (default: /dev/shm when it is a tmpfs with
    /// room, else the temporary folder; never under the shared store).
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// The configuration file of model providers (as for `run`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The image cache (as for `run`; node-local is best).
    #[arg(long, value_name = "DIR")]
    pub image_cache: Option<PathBuf>,
}

/// The executors `run --executor` takes, as the runner lists them, each with its help.
fn executor_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        proctor_runner::executor::EXECUTORS
            .iter()
            .map(|(name, help)| clap::builder::PossibleValue::new(*name).help(*help)),
    )
}

/// Options of `run --executor slurm` (docs/scale.md).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SlurmArgs {
    /// The Slurm partition (default: the cluster's default partition).
    #[arg(long, value_name = "P")]
    pub partition: Option<String>,
    /// The Slurm account to charge.
    #[arg(long, value_name = "A")]
    pub account: Option<String>,
    /// Each array task's time limit, in any form sbatch takes (`30`, `1:00:00`, `1-0`).
    #[arg(long, value_name = "T")]
    pub time: Option<String>,
    /// Array tasks running at once (`--array=0-K%N`).
    #[arg(long, value_name = "N")]
    pub array_throttle: Option<u32>,
    /// Array tasks (shards) at most (default: one per 4 trials).
    #[arg(long, value_name = "K")]
    pub shards: Option<usize>,
    /// Another sbatch option for every job, as one argument: `--slurm-arg=--qos=low`
    /// (repeatable).
    #[arg(long = "slurm-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub slurm_args: Vec<String>,
    /// Print the run id and the job id and return; `proctor status RUN` shows progress and a
    /// dependent job writes the results when the array ends.
    #[arg(long)]
    pub detach: bool,
    /// The proctor binary the nodes run (default: this one); it must be on a file system every
    /// node sees.
    #[arg(long, value_name = "PATH")]
    pub proctor_bin: Option<PathBuf>,
}

/// Arguments of `proctor run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The suite directory.
    pub suite: PathBuf,
    /// Only these variants (repeatable).
    #[arg(long = "variant", value_name = "V")]
    pub variants: Vec<String>,
    /// Only these tasks (repeatable).
    #[arg(long = "task", value_name = "T")]
    pub tasks: Vec<String>,
    /// Trials per (task, variant), overriding the trial mode: 1 to 100000
    /// (`proctor_suite::plan::MAX_TRIALS_PER_CELL`; docs/suite-format.md).
    #[arg(long, value_name = "N", conflicts_with = "trial_mode",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(proctor_suite::plan::MAX_TRIALS_PER_CELL)))]
    pub trials: Option<u32>,
    /// Take the trial count from `development_trials` or `release_trials`.
    #[arg(long, value_enum, default_value_t = TrialModeArg::Dev)]
    pub trial_mode: TrialModeArg,
    /// Print the plan and execute nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Output format of the plan (--dry-run) or of the summary.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Trials run at once, at least 1 (default: the number of cores).
    #[arg(long, short = 'j', value_name = "N", value_parser = jobs_at_least_one)]
    pub jobs: Option<usize>,
    /// Finish an interrupted run: only its unfinished trials are run.
    #[arg(long, value_name = "RUN")]
    pub resume: Option<String>,
    /// The store folder.
    #[arg(long, value_name = "DIR", default_value = ".proctor")]
    pub store: PathBuf,
    /// How trials are isolated: overlay workspaces in namespaces, or copies of the fixture.
    #[arg(long, value_enum, default_value_t = IsolationArg::Auto)]
    pub isolation: IsolationArg,
    /// Folder for per-trial scratch (overlay upper layers, shims, the agent's home). Default:
    /// /dev/shm when it is a tmpfs with 1 GiB free, else STORE/work. Nothing there is evidence.
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// Run the variants that take a model on PROVIDER/MODEL instead of their own (repeatable:
    /// each such variant then runs once per model, its id suffixed `--PROVIDER-MODEL`).
    #[arg(long = "model", value_name = "PROVIDER/MODEL")]
    pub models: Vec<String>,
    /// The configuration file of model providers, keys' variables, retries and prices.
    /// Default: $PROCTOR_CONFIG, else ~/.config/proctor/config.toml (built-in providers only
    /// when it does not exist).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The image cache for tasks that run in an OCI image (default: ~/.cache/proctor/images).
    #[arg(long, value_name = "DIR")]
    pub image_cache: Option<PathBuf>,
    /// Build the image of every task that has a `build` folder from its Dockerfile, even when
    /// the image could be pulled (Harbor's --force-build; docs/environments.md).
    #[arg(long)]
    pub build: bool,
    /// Where the trials run: here, or as a Slurm job array (docs/scale.md).
    #[arg(long, value_parser = executor_names(), default_value = "local")]
    pub executor: String,
    /// Options of `--executor slurm`.
    #[command(flatten, next_help_heading = "Slurm (--executor slurm)")]
    pub slurm: Box<SlurmArgs>,
    /// Also write the run's trials as a JUnit XML report when it ends (docs/export.md).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

/// Arguments of `proctor sit`.
#[derive(Debug, clap::Args)]
pub struct SitArgs {
    /// The suite directory.
    pub suite: PathBuf,
    /// The task to sit.
    #[arg(long, value_name = "T")]
    pub task: String,
    /// Who sits: a short name (letters, digits, `-`, `_`); the sitting's variant is
    /// `human:NAME`.
    #[arg(long = "as", value_name = "NAME")]
    pub person: String,
    /// Your answer to the task; without it you are asked for one line when you leave the shell.
    #[arg(long, value_name = "TEXT")]
    pub answer: Option<String>,
    /// A text file of notes kept with the sitting; without it you may type notes at the end.
    #[arg(long, value_name = "FILE")]
    pub notes: Option<PathBuf>,
    /// Stop the sitting after this many seconds, as an agent's trial is stopped at its wall
    /// timeout (default: no timeout).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=2_592_000))]
    pub timeout: Option<u64>,
    /// The store folder.
    #[arg(long, value_name = "DIR", default_value = ".proctor")]
    pub store: PathBuf,
    /// How the trial is isolated, as for `run`.
    #[arg(long, value_enum, default_value_t = IsolationArg::Auto)]
    pub isolation: IsolationArg,
    /// Folder for the trial's scratch, as for `run`.
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// The image cache, for a task that runs in an OCI image (default: ~/.cache/proctor/images).
    #[arg(long, value_name = "DIR")]
    pub image_cache: Option<PathBuf>,
    /// The configuration file (its `[registries]`), for a task's image; default:
    /// $PROCTOR_CONFIG, else ~/.config/proctor/config.toml.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Isolation on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IsolationArg {
    /// Overlay where the machine allows it, else copy (recorded either way).
    Auto,
    /// Overlay workspace in user, mount, PID, network, IPC and UTS namespaces; fail if unavailable.
    Overlay,
    /// Copy the fixture per trial and diff it against a manifest.
    Copy,
}

/// Trial modes on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TrialModeArg {
    /// The suite's `development_trials`.
    Dev,
    /// The suite's `release_trials`.
    Release,
}

impl From<IsolationArg> for proctor_runner::IsolationChoice {
    fn from(isolation: IsolationArg) -> proctor_runner::IsolationChoice {
        match isolation {
            IsolationArg::Auto => proctor_runner::IsolationChoice::Auto,
            IsolationArg::Overlay => proctor_runner::IsolationChoice::Overlay,
            IsolationArg::Copy => proctor_runner::IsolationChoice::Copy,
        }
    }
}

impl From<TrialModeArg> for proctor_suite::TrialMode {
    fn from(m: TrialModeArg) -> Self {
        match m {
            TrialModeArg::Dev => proctor_suite::TrialMode::Dev,
            TrialModeArg::Release => proctor_suite::TrialMode::Release,
        }
    }
}

/// Output formats for data on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A table for people.
    Text,
    /// JSON for tools.
    Json,
}

/// The tables of a run's results.md that `cite` can cite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CiteTable {
    /// `## Rates`: n, success, completion, failure and each outcome per variant and task.
    Rates,
    /// `## Variants side by side`: one row per task, one column per variant.
    SideBySide,
    /// `## Interface metrics`: medians of calls, wrong turns, errors and time.
    Metrics,
    /// `## Tokens and requests`: medians of tokens and requests.
    Tokens,
    /// `## Cost ledgers`: totals per variant.
    Cost,
}

/// Task formats `proctor import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImportFormat {
    /// Harbor tasks: `task.toml`, `instruction.md`, `environment/`, `tests/test.sh`, `solution/`.
    Harbor,
    /// Terminal-Bench tasks: `task.yaml`, `run-tests.sh`, `tests/`, `solution.sh`.
    TerminalBench,
}

/// `proctor images` actions.
#[derive(Debug, Subcommand)]
pub enum ImagesAction {
    /// Pull and unpack an image (`python:3.12-slim`, `oci-archive:PATH`, `oci:PATH`), or every
    /// image a suite names.
    Pull {
        /// An image reference, or a suite folder.
        target: String,
    },
    /// Build an image from a Dockerfile into the cache, with the first of buildah, podman and
    /// docker on PATH (docs/environments.md).
    ///
    /// Prints `oci-archive:ARCHIVE`, the digest and the unpacked root, as `pull` does; a second
    /// build of the same Dockerfile and context is a cache hit and runs no builder. A Dockerfile
    /// that is only FROM with WORKDIR/ENV is not built: its base image is pulled.
    Build {
        /// The build context: the folder with the Dockerfile and the files it copies.
        #[arg(value_name = "DIR")]
        context: PathBuf,
        /// The Dockerfile (default: DIR/Dockerfile).
        #[arg(short = 'f', long = "file", value_name = "FILE")]
        file: Option<PathBuf>,
    },
    /// List the unpacked images with their references and sizes.
    List,
    /// Remove unpacked images (all, or those not used by the suites given) and unused blobs.
    Prune {
        /// Keep the images these suites name.
        #[arg(long = "keep-suite", value_name = "DIR")]
        keep: Vec<PathBuf>,
    },
}

/// Documents with a JSON Schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaDoc {
    /// `results.json` of a run.
    Results,
    /// `proctor compare --format json`.
    Comparison,
    /// The promotion gates of `compare --gate --format json`.
    Gates,
    /// `suite.toml`, for editors (Taplo, Even Better TOML) to complete and check suites.
    Suite,
}

/// Output formats of `compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    /// Plain text tables.
    Text,
    /// Markdown tables (as in results.md).
    Md,
    /// A stable JSON document (`proctor schema comparison`).
    Json,
}

/// Where `rescore` takes the rules from when no --suite is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SuiteFrom {
    /// The copy of its suite the run keeps in the store.
    Run,
    /// The suite folder the run was read from, as it is now.
    Folder,
}
