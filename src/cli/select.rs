//! `ravel select`: the offline form of a feature stream. The columns of a file go one at a
//! time, for several passes, through online substitution (OS, or Asy-OS with `--workers`),
//! and the selected features come out as the model JSON of `ravel fit`, so a user can see
//! what a feature stream would keep on their data before deploying one.
//!
//! Reading: CSV, LIBSVM and NPY files are row-oriented, so the file is read once into memory
//! (n x p values; feature streams have few samples, n small) and each column is then gathered
//! and streamed. The selection itself holds only s columns; the in-memory copy of the file is
//! this command's, not the algorithm's.

use crate::config::limits::MemoryArgs;
use ravel_core::data::{Format, OpenOptions, Plan, RowReader};
use ravel_core::features::{FeatureError, Labels, Loss, OsParams, Outcome, Substitution};
use ravel_core::solve::Model;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

#[derive(Debug, Clone, clap::Args)]
pub struct SelectArgs {
    /// CSV (header row), LIBSVM or NPY (2-D float64) file: rows are samples.
    pub file: PathBuf,
    /// Target column: a header name or a 0-based column index (default: the last column).
    #[arg(long)]
    pub target: Option<String>,
    /// Budget: the number of features to keep.
    #[arg(long)]
    pub s: usize,
    /// Scans over the columns. 000 section 5 uses two; on its design (s = 100, p = 2000 and
    /// 4000) two trail batch IHT's recall by 1-2 points and three match it
    /// (crates/ravel-core/tests/features_os.rs), hence the default.
    #[arg(long, default_value_t = 3)]
    pub passes: usize,
    /// squared (regression), squared-hinge or logistic (labels +1/-1, 0 counts as -1).
    #[arg(long, default_value = "squared", value_parser = crate::cli::args::enum_parser::<Loss>(Loss::ALL.iter().map(|l| l.name())))]
    pub loss: Loss,
    /// Asy-OS with this many worker threads, each keeping s/workers features (default: OS).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Step size eta (default 1 / the loss's curvature, lowered whenever a step meets more
    /// curvature than 1/eta).
    #[arg(long, allow_negative_numbers = true)]
    pub eta: Option<f64>,
    /// Refit on the selected columns (least squares, or the loss itself for classification).
    #[arg(long)]
    pub refit: bool,
    /// Force the file format instead of detecting it from the extension.
    #[arg(long = "file-format", value_name = "FORMAT", value_parser = ["csv", "libsvm", "npy"])]
    pub format: Option<String>,
    #[command(flatten)]
    pub memory: MemoryArgs,
}

/// Runs `ravel select` and returns the JSON to print.
pub fn run(args: &SelectArgs) -> anyhow::Result<String> {
    Ok(serde_json::to_string(&select(args)?)?)
}

/// The model `ravel select` prints.
pub fn select(args: &SelectArgs) -> anyhow::Result<Model> {
    let start = Instant::now();
    let params = OsParams {
        eta: args.eta,
        ..OsParams::new(args.s, args.loss)
    };
    params.check()?;
    if args.passes == 0 {
        anyhow::bail!("--passes must be at least 1");
    }
    if let Some(q) = args.workers
        && (q == 0 || q > args.s)
    {
        anyhow::bail!(
            "--workers must lie in 1..={} (each worker keeps s/workers features), got {q}",
            args.s
        );
    }
    let format = args.format.as_deref().map(|f| match f {
        "csv" => Format::Csv,
        "npy" => Format::Npy,
        _ => Format::Libsvm,
    });
    // The file is held whole (n x p): refused before reading when that and the selection
    // need more than --max-memory.
    let opts = OpenOptions {
        target: args.target.as_deref(),
        format,
        compact_features: false,
        budget: args.memory.limit().budget(Plan::Select { s: args.s }),
        fields: Default::default(),
    };
    let mut reader = RowReader::open(&args.file, &opts)?;
    let p = reader.p;
    let (mut x, mut y) = (Vec::new(), Vec::new());
    while reader.next_batch(4096, &mut x, &mut y)? > 0 {}
    let n = y.len();
    let names: Vec<String> = reader
        .names
        .clone()
        .unwrap_or_else(|| (0..p).map(|j| j.to_string()).collect());
    let labels =
        Labels::new(y, args.loss).map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
    let column = |j: usize| -> Vec<f64> { (0..n).map(|i| x[i * p + j]).collect() };
    let mut constant = vec![];
    let mut selection = match args.workers {
        None => Substitution::os(labels, &params)?,
        Some(q) => Substitution::asy(labels, &params, q)?,
    };
    for pass in 0..args.passes {
        for (j, name) in names.iter().enumerate() {
            let col: Arc<[f64]> = column(j).into();
            let outcome = selection
                .push(j, name, col.clone())
                .map_err(|e| located(e, &args.file))?;
            // Asy-OS workers report constant columns by count only; find them here.
            if pass == 0
                && outcome
                    .map(|o| o == Outcome::Constant)
                    .unwrap_or_else(|| ravel_core::features::selector::is_constant(&col))
            {
                constant.push(j);
            }
        }
        selection.end_pass()?;
    }
    let mut model = selection.finish()?.model(args.refit);
    model.diagnostics.excluded_constant = constant;
    model.diagnostics.elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(model)
}

fn located(e: FeatureError, file: &std::path::Path) -> anyhow::Error {
    anyhow::anyhow!("{}: {e}", file.display())
}
