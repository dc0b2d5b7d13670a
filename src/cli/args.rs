//! Helpers the subcommands' clap arguments share. The core types (`Task`, `Loss`, `Method`)
//! know nothing of clap; here they become argument parsers that list their values in `--help`.
//! `WideArgs`, the flags of `ravel fit --wide`, live here too: `fit` takes them and
//! `fit_wide` reads them.

use clap::builder::{PossibleValuesParser, TypedValueParser};
use std::fmt::Display;
use std::path::PathBuf;
use std::str::FromStr;

/// A parser for a core enum: `names` are the values `--help` lists and the shell completes;
/// parsing itself is the type's `FromStr`, so the CLI and the config file accept the same text.
pub fn enum_parser<T>(
    names: impl IntoIterator<Item = &'static str>,
) -> impl TypedValueParser<Value = T>
where
    T: FromStr + Clone + Send + Sync + 'static,
    T::Err: Display,
{
    PossibleValuesParser::new(names).try_map(|s| s.parse::<T>().map_err(|e| e.to_string()))
}

/// The flags of the raw-data path.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct WideArgs {
    /// The Lasso path by paper 004's Frank-Wolfe on the raw sparse columns (no statistics:
    /// memory in the nonzeros), for files with far more features than rows. Prints the path
    /// (delta, objective, gap, nonzeros, dot products). Takes --variant (default randomized),
    /// --kappa or --sample-fraction, --seed, --tol, --max-iterations, --path-points,
    /// --delta-min-ratio, --lambda-min-ratio, --no-away-steps (docs/wide.md).
    #[arg(long)]
    pub wide: bool,
    /// --wide randomized: the columns sampled per iteration as a fraction of the used columns
    /// (those with a nonzero, among which the sample is drawn; default 0.01, 004's Table 3);
    /// --kappa gives the number instead.
    #[arg(long, value_name = "F", requires = "wide")]
    pub sample_fraction: Option<f64>,
    /// --wide: the largest delta of the path (default: found, the l1 norm of the Lasso
    /// solution at lambda_max times --lambda-min-ratio, as 004 takes it from glmnet's).
    #[arg(long, value_name = "D", requires = "wide")]
    pub delta_max: Option<f64>,
    /// --wide: a test file (same format and columns): the test MSE at every point of the path
    /// and the best point.
    #[arg(long, value_name = "FILE", requires = "wide")]
    pub test: Option<PathBuf>,
    /// --wide: the number of features the file declares; an index above it is an error
    /// (default: the largest index in the file).
    #[arg(long, value_name = "P", requires = "wide")]
    pub features: Option<usize>,
    /// --wide: paper 004's stopping rule besides the gap: a point ends when an iteration
    /// moves no coefficient by more than EPS (default 1e-3, with which 004 times every
    /// solver: glmnet's rule). Each point still reports its exact gap, and `converged`
    /// whether it met --tol.
    #[arg(
        long,
        value_name = "EPS",
        requires = "wide",
        conflicts_with = "gap_rule"
    )]
    pub step_tol: Option<f64>,
    /// --wide: stop each point by the duality gap alone (--tol), without 004's step rule:
    /// every point within --tol of its optimum, often many times slower on correlated
    /// columns (docs/wide.md).
    #[arg(long, requires = "wide")]
    pub gap_rule: bool,
}
