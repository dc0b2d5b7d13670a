//! `ravel fit`: the offline entry point. Streams a file through the same `RunningStats` the
//! service keeps and prints the model JSON the HTTP API returns, so users can evaluate a
//! method on their data before deploying it.

use crate::data::{Format, RowReader};
use crate::solve::{self, Method, Params, StatsRef};
use crate::stats::{AlphaSchedule, ClassStats, RunningStats};
use std::path::PathBuf;

/// Regression on y, or classification on +1/-1 labels (0 counts as -1).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    Regression,
    Classification,
}

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
    #[arg(long, value_enum, default_value = "regression")]
    pub task: Task,
    /// Weight schedule of the running averages: plain, fixed:A or floor:A.
    #[arg(long, default_value = "plain")]
    pub alpha: String,
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
    #[arg(long, value_parser = ["csv", "libsvm", "npy"])]
    pub format: Option<String>,
}

/// The statistics of a file, whichever the task.
pub enum FileStats {
    Regression(RunningStats),
    Classification(ClassStats),
}

impl FileStats {
    pub fn as_ref(&self) -> StatsRef<'_> {
        match self {
            FileStats::Regression(s) => StatsRef::Regression(s),
            FileStats::Classification(s) => StatsRef::Classification(s),
        }
    }
}

/// Streams a file into running statistics. Returns the feature names too.
pub fn read_stats(
    mut reader: RowReader,
    task: Task,
    schedule: AlphaSchedule,
    batch: usize,
) -> anyhow::Result<(FileStats, Option<Vec<String>>)> {
    let file = reader.path.clone();
    let p = reader.p;
    let mut stats = match task {
        Task::Regression => FileStats::Regression(RunningStats::new(p, schedule)),
        Task::Classification => FileStats::Classification(ClassStats::new(p, schedule)),
    };
    let (mut x, mut y) = (Vec::new(), Vec::new());
    loop {
        x.clear();
        y.clear();
        let got = reader.next_batch(batch.max(1), &mut x, &mut y)?;
        if got == 0 {
            break;
        }
        let first = reader.rows_read() - got as u64;
        let res = match &mut stats {
            FileStats::Regression(s) => s.update_batch(&x, &y),
            FileStats::Classification(s) => s.update_batch(&x, &y),
        };
        res.map_err(|e| {
            anyhow::anyhow!(
                "{}: rows {}..{}: {e}",
                file.display(),
                first + 1,
                first + got as u64
            )
        })?;
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
    let reader = RowReader::open(&args.file, args.target.as_deref(), format)?;
    // Check the request before reading a large file.
    params.check(reader.p, args.path)?;
    let (stats, names) = read_stats(reader, args.task, schedule, args.batch)?;
    let stats = stats.as_ref();
    let json = if args.path {
        serde_json::to_string(&solve::path_from_stats(stats, &params, names.as_deref())?)?
    } else {
        serde_json::to_string(&solve::model_from_stats(stats, &params, names.as_deref())?)?
    };
    Ok(json)
}
