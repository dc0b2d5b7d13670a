//! `ravel fit`: the offline entry point. Streams a file through the same `RunningStats` the
//! service keeps and prints the model JSON the HTTP API returns, so users can evaluate a
//! method on their data before deploying it. With `--prequential N` it replays the file
//! test-then-train instead (prequential.rs) and prints one JSON line per N rows, so weight
//! schedules (`--alpha`) can be compared before deploying one.

use ravel_core::Task;
use ravel_core::data::{Format, RowReader};
use ravel_core::prequential::Prequential;
use ravel_core::solve::{self, Method, Params};
use ravel_core::stats::{AlphaSchedule, RunningStats, Stats};
use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct FitArgs {
    /// CSV (header row), LIBSVM or NPY (2-D float64) file.
    pub file: PathBuf,
    /// Target column: a header name or a 0-based column index (default: the last column).
    #[arg(long)]
    pub target: Option<String>,
    /// ols, ridge, olsth, fsa, lasso, elastic-net, mcp or scad.
    #[arg(long)]
    pub method: String,
    /// Exactly k nonzero coefficients.
    #[arg(long, conflicts_with_all = ["lambda", "path"])]
    pub k: Option<usize>,
    /// Penalty level lambda (objective (1/2n)||y - b0 - Xb||^2 + P_lambda(b)).
    #[arg(long, conflicts_with = "path", allow_negative_numbers = true)]
    pub lambda: Option<f64>,
    /// The whole warm-started lambda path (penalized methods).
    #[arg(long)]
    pub path: bool,
    /// Elastic-net mixing: 1 is Lasso, towards 0 is ridge (default 0.5).
    #[arg(long, allow_negative_numbers = true)]
    pub l1_ratio: Option<f64>,
    /// MCP / SCAD concavity (defaults 3 and 3.7).
    #[arg(long)]
    pub gamma: Option<f64>,
    /// Refit OLS on the selected support.
    #[arg(long)]
    pub refit: bool,
    /// Fit on raw columns (then lasso/elastic-net equal scikit-learn's on the same rows).
    #[arg(long)]
    pub no_standardize: bool,
    /// regression, or classification on +1/-1 labels (0 counts as -1).
    #[arg(long, default_value = "regression", value_parser = crate::cli::enum_parser::<Task>(Task::ALL.iter().map(|t| t.name())))]
    pub task: Task,
    /// Weight schedule of the running averages: plain, fixed:A, floor:A, adaptive or
    /// adaptive:key=value,... (keys fa, shift, jump, floor, refresh, warmup, ridge, clip;
    /// docs/drift.md).
    #[arg(long, default_value = "plain")]
    pub alpha: String,
    /// Replay the file test-then-train and print one JSON line per N rows,
    /// {"rows","rmse","alpha","alarms"}: the RMSE of those rows, each predicted by the
    /// --method model before the row was folded in (regression only).
    #[arg(long, value_name = "N", conflicts_with = "path")]
    pub prequential: Option<u64>,
    /// With --prequential: re-extract the model every R rows (default max(1, p/4)).
    #[arg(long, value_name = "R", requires = "prequential")]
    pub refit_every: Option<u64>,
    /// Number of points on the lambda path (default 100).
    #[arg(long)]
    pub path_points: Option<usize>,
    /// lambda_min / lambda_max of the path (default 1e-4 when n > p, else 1e-2).
    #[arg(long)]
    pub lambda_min_ratio: Option<f64>,
    /// Classification: weight of the positive and negative class (default 1 each).
    #[arg(long)]
    pub w_pos: Option<f64>,
    #[arg(long)]
    pub w_neg: Option<f64>,
    /// Rows per mini-batch while reading.
    #[arg(long, default_value_t = 1024)]
    pub batch: usize,
    /// Force the file format instead of detecting it from the extension.
    #[arg(long = "file-format", value_name = "FORMAT", value_parser = ["csv", "libsvm", "npy"])]
    pub format: Option<String>,
}

/// Streams a file into running statistics. Returns the feature names too.
pub fn read_stats(
    mut reader: RowReader,
    task: Task,
    schedule: AlphaSchedule,
    batch: usize,
) -> anyhow::Result<(Stats, Option<Vec<String>>)> {
    let file = reader.path.clone();
    let p = reader.p;
    let mut stats = Stats::new(task, p, schedule);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    loop {
        x.clear();
        y.clear();
        let got = reader.next_batch(batch.max(1), &mut x, &mut y)?;
        if got == 0 {
            break;
        }
        let first = reader.rows_read() - got as u64;
        stats
            .update_batch(&x, &y)
            .map_err(|e| rows_error(&file, first, got, e))?;
    }
    Ok((stats, reader.names.clone()))
}

/// Runs `ravel fit` and returns the JSON to print.
pub fn run(args: &FitArgs) -> anyhow::Result<String> {
    let method: Method = args.method.parse()?;
    let schedule: AlphaSchedule = args.alpha.parse().map_err(anyhow::Error::msg)?;
    let params = Params {
        method,
        k: args.k,
        lambda: args.lambda,
        l1_ratio: args.l1_ratio,
        gamma: args.gamma,
        refit: args.refit,
        standardize: !args.no_standardize,
        path_points: args.path_points,
        lambda_min_ratio: args.lambda_min_ratio,
        w_pos: args.w_pos,
        w_neg: args.w_neg,
        ..Params::new(method)
    };
    let format = args.format.as_deref().map(|f| match f {
        "csv" => Format::Csv,
        "npy" => Format::Npy,
        _ => Format::Libsvm,
    });
    if matches!(schedule, AlphaSchedule::Adaptive(_)) && args.task == Task::Classification {
        anyhow::bail!(
            "--alpha adaptive applies to regression: each class of a classification stream has a \
             constant label, so there are no prediction errors to watch"
        );
    }
    let reader = RowReader::open(&args.file, args.target.as_deref(), format)?;
    // Check the request before reading a large file.
    params.check(reader.p, args.path)?;
    if let Some(window) = args.prequential {
        return prequential(reader, args, schedule, params, window);
    }
    let (stats, names) = read_stats(reader, args.task, schedule, args.batch)?;
    let stats = &stats;
    let json = if args.path {
        serde_json::to_string(&solve::path_from_stats(stats, &params, names.as_deref())?)?
    } else {
        serde_json::to_string(&solve::model_from_stats(stats, &params, names.as_deref())?)?
    };
    Ok(json)
}

/// `--prequential N`: the test-then-train trace, one JSON line per window.
fn prequential(
    mut reader: RowReader,
    args: &FitArgs,
    schedule: AlphaSchedule,
    params: solve::Params,
    window: u64,
) -> anyhow::Result<String> {
    if args.task != Task::Regression {
        anyhow::bail!("--prequential evaluates regression streams; drop --task classification");
    }
    if window == 0 || args.refit_every == Some(0) {
        anyhow::bail!("--prequential and --refit-every take a number of rows >= 1");
    }
    let p = reader.p;
    let refit = args
        .refit_every
        .unwrap_or_else(|| Prequential::default_refit(p));
    let mut replay = Prequential::new(RunningStats::new(p, schedule), params, window, refit)?;
    let file = reader.path.clone();
    let (mut x, mut y, mut records) = (Vec::new(), Vec::new(), Vec::new());
    loop {
        x.clear();
        y.clear();
        let got = reader.next_batch(args.batch.max(1), &mut x, &mut y)?;
        if got == 0 {
            break;
        }
        let first = reader.rows_read() - got as u64;
        replay
            .push(&x, &y, &mut records)
            .map_err(|e| rows_error(&file, first, got, e))?;
    }
    records.extend(replay.finish());
    let lines: Result<Vec<String>, _> = records.iter().map(serde_json::to_string).collect();
    Ok(lines?.join("\n"))
}

/// "FILE: rows A..B: reason" for a batch the statistics refused (rows are 1-based).
fn rows_error(
    file: &std::path::Path,
    first: u64,
    got: usize,
    e: impl std::fmt::Display,
) -> anyhow::Error {
    anyhow::anyhow!(
        "{}: rows {}..{}: {e}",
        file.display(),
        first + 1,
        first + got as u64
    )
}
