//! The `ravel` command line: `fit` (offline), and the service commands.

use clap::{Parser, Subcommand};
use ravel::fit::{self, FitArgs};
use ravel::select::{self, SelectArgs};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "ravel", version, about = "Sparse linear models learned from streams")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Fit a model on a CSV, LIBSVM or NPY file through the streaming statistics; prints JSON.
    Fit(FitArgs),
    /// Stream the columns of a file through online substitution; prints the selected model.
    Select(SelectArgs),
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
    let result = match cli.command {
        Some(Command::Fit(args)) => fit::run(&args).and_then(|json| print_line(&json)),
        Some(Command::Select(args)) => select::run(&args).and_then(|json| print_line(&json)),
        None => Err(anyhow::anyhow!("no command given; try `ravel fit --help`")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
