//! The `ravel` command line: `serve` (the default, so `ravel --http-addr X` serves too),
//! `broker`, `produce`, `fit`, `select`, `check` and `replay`. Each command is a function of a library module;
//! this file only parses and dispatches.

use clap::{Parser, Subcommand};
use ravel::broker::{self, BrokerArgs};
use ravel::check::{self, CheckArgs};
use ravel::config::{LogConfig, ServeArgs};
use ravel::fit::{self, FitArgs};
use ravel::fit_wide;
use ravel::produce::{self, ProduceArgs};
use ravel::replay::{self, ReplayArgs};
use ravel::select::{self, SelectArgs};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ravel",
    version,
    about = "Sparse linear models learned from streams",
    // `serve` is the default command: `ravel --http-addr X` is `ravel serve --http-addr X`.
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// `serve`'s flags, for `ravel` without a command.
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run the service: Kafka -> running statistics -> HTTP API (the default command). With no
    /// brokers configured it starts an embedded broker and a demo stream.
    Serve(ServeArgs),
    /// Run the embedded Kafka-protocol broker on its own; prints its bootstrap address first.
    Broker(BrokerArgs),
    /// Send rows from a file or a synthetic design to a Kafka topic.
    Produce(ProduceArgs),
    /// Fit a model on a CSV, LIBSVM or NPY file through the streaming statistics; prints JSON.
    Fit(Box<FitArgs>),
    /// Stream the columns of a file through online substitution; prints the selected model.
    Select(SelectArgs),
    /// Check, without writing data or committing offsets, what the service's configuration
    /// needs from the cluster and the Schema Registry, and the declared fields against the
    /// topics' latest messages; each problem with its fix, exit status 1 if any.
    Check(CheckArgs),
    /// Produce a stream's dead-lettered messages again (original key, value and headers) to
    /// their source topic or another, filtered by reason, partition and offsets.
    Replay(ReplayArgs),
}

/// Prints one line to stdout; a closed pipe (`ravel fit ... | head`) is not an error.
fn print_line(s: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{s}").and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let quiet = LogConfig {
        level: "warn".into(),
        ..LogConfig::default()
    };
    let result = match cli.command.unwrap_or(Command::Serve(cli.serve)) {
        Command::Serve(args) => ravel::serve(&args),
        Command::Broker(args) => {
            ravel::init_logging(&LogConfig::default());
            broker::run(&args)
        }
        Command::Produce(args) => {
            ravel::init_logging(&quiet);
            produce::run(&args).and_then(|p| {
                print_line(&format!(
                    "produced {} rows in {} messages ({} bytes) to {}",
                    p.rows, p.messages, p.bytes, args.topic
                ))
            })
        }
        Command::Replay(args) => {
            ravel::init_logging(&quiet);
            replay::run(&args).and_then(|r| {
                let to: Vec<String> = r.replayed.iter().map(|(t, n)| format!("{n} to {t}")).collect();
                print_line(&format!(
                    "{} {} of {} dead letters ({}); {} left out by the filters, {} truncated copies not replayable",
                    if args.dry_run { "would replay" } else { "replayed" },
                    r.total(),
                    r.read,
                    if to.is_empty() { "none".to_string() } else { to.join(", ") },
                    r.filtered,
                    r.truncated
                ))
            })
        }
        Command::Fit(args) if args.wide.wide => {
            fit_wide::run(&args).and_then(|json| print_line(&json))
        }
        Command::Fit(args) => fit::run(&args).and_then(|json| print_line(&json)),
        Command::Select(args) => select::run(&args).and_then(|json| print_line(&json)),
        Command::Check(args) => {
            let report = check::run(&args);
            let printed = print_line(&report.render(args.format == "json"));
            return match printed {
                Ok(()) if report.passed() => ExitCode::SUCCESS,
                _ => ExitCode::FAILURE,
            };
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
