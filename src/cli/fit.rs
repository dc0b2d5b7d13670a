//! `ravel fit`: the offline entry point. Streams a file through the same `RunningStats` the
//! service keeps and prints the model JSON the HTTP API returns, so users can evaluate a
//! method on their data before deploying it. With `--prequential N` it replays the file
//! test-then-train instead (`ravel_core::prequential`) and prints one JSON line per N rows, so
//! weight schedules (`--alpha`) can be compared before deploying one.

use crate::config::limits::MemoryArgs;
use ravel_core::Task;
use ravel_core::data::{DataError, FieldOptions, Format, OpenOptions, Plan, RowReader};
use ravel_core::fields::Missing;
use ravel_core::prequential::Prequential;
use ravel_core::solve::{self, Request};
use ravel_core::stats::{AlphaSchedule, Stats};
use std::path::PathBuf;

pub use crate::cli::extract_flags::ExtractArgs;
use crate::cli::extract_flags::{flag_error, note_default};

#[derive(Debug, Clone, clap::Args)]
pub struct FitArgs {
    /// CSV (header row), LIBSVM or NPY (2-D float64) file.
    pub file: PathBuf,
    /// Target column: a header name or a 0-based column index (default: the last column).
    #[arg(long)]
    pub target: Option<String>,
    /// What to extract: the same parameters as the HTTP API's request body.
    #[command(flatten)]
    pub extract: ExtractArgs,
    /// The whole warm-started path (lasso, elastic-net, mcp, scad: over lambda; fw-lasso: over
    /// delta).
    #[arg(long)]
    pub path: bool,
    /// regression, or classification on +1/-1 labels (0 counts as -1).
    #[arg(long, default_value = "regression", value_parser = crate::cli::args::enum_parser::<Task>(Task::ALL.iter().map(|t| t.name())))]
    pub task: Task,
    /// Weight schedule of the running averages: plain, fixed:A, floor:A, adaptive or
    /// adaptive:key=value,... (keys fa, shift, jump, floor, refresh, warmup, ridge, clip;
    /// docs/drift.md).
    #[arg(long, default_value = "plain")]
    pub alpha: String,
    /// Replay the file test-then-train and print one JSON line per N rows,
    /// {"rows","rmse","alpha","alarms","quality"}: the RMSE of those rows, each predicted by
    /// the --method model before the row was folded in, and the quality figures of the last N
    /// rows, weighted and in total (the service's `quality` on a stream: docs/streams.md "Quality").
    #[arg(long, value_name = "N", conflicts_with = "path")]
    pub prequential: Option<u64>,
    /// With --prequential: re-extract the model at every multiple of R rows, after a
    /// warm-up at p + 1, 2 (p + 1), 4 (p + 1), ... rows below R (default max(1, p/4)).
    #[arg(long, value_name = "R", requires = "prequential")]
    pub refit_every: Option<u64>,
    /// Folds of --select cv / cv_1se (2..=20, default 5). Row i (0-based, file order) goes to
    /// fold splitmix64(i) mod K (`solve::select::fold_of`); plain averages only.
    #[arg(long, value_name = "K")]
    pub folds: Option<usize>,
    /// Rows per mini-batch while reading.
    #[arg(long, default_value_t = 1024)]
    pub batch: usize,
    /// Force the file format instead of detecting it from the extension.
    #[arg(long = "file-format", value_name = "FORMAT", value_parser = ["csv", "libsvm", "npy"])]
    pub format: Option<String>,
    /// LIBSVM: number the features by the distinct indices the file uses instead of by the
    /// largest index (p = how many are used); coefficients are named by the file's indices.
    #[arg(long)]
    pub compact_features: bool,
    #[command(flatten)]
    pub columns: ColumnArgs,
    #[command(flatten)]
    pub memory: MemoryArgs,
    #[command(flatten)]
    pub wide: crate::cli::args::WideArgs,
}

/// How a CSV file's columns become features (`ravel fit`, and `ravel produce` for its checks):
/// the flags of a stream's `features` tables.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ColumnArgs {
    /// A CSV column of categories: NAME (the levels found in the file, sorted; the first is the
    /// reference level, 0 in every NAME=... column) or NAME=a,b,c (declared levels, the first
    /// the reference; other values go to NAME=other). Repeatable.
    #[arg(long, value_name = "NAME[=LEVELS]")]
    pub categorical: Vec<String>,
    /// A CSV column of tokens hashed into buckets, NAME:BUCKETS (MurmurHash3 with a sign, as
    /// scikit-learn's FeatureHasher). Repeatable.
    #[arg(long, value_name = "NAME:BUCKETS")]
    pub hashed: Vec<String>,
    /// What a missing CSV cell (empty, NA, null, NaN, ?) does: reject (an error naming line
    /// and column), skip_row (the row is left out and counted), or indicator (0, plus a 0/1
    /// column NAME=missing per feature).
    #[arg(long, default_value = "reject", value_parser = ["reject", "skip_row", "skip-row", "indicator"])]
    pub missing: String,
    /// Read the columns as the stream NAME of the service's configuration (--config) reads
    /// its events: its `features` (kinds, levels, buckets, missing policies), `target` and
    /// `missing`; the file's other columns are ignored.
    #[arg(long, value_name = "NAME", requires = "config", conflicts_with_all = ["categorical", "hashed"])]
    pub stream: Option<String>,
    /// The service's configuration file, for --stream.
    #[arg(long, value_name = "FILE", requires = "stream")]
    pub config: Option<PathBuf>,
}

impl ColumnArgs {
    /// The reader's field options, and the target the stream names (--stream).
    pub fn options(&self) -> anyhow::Result<(FieldOptions, Option<String>)> {
        if let (Some(name), Some(path)) = (&self.stream, &self.config) {
            let cfg = crate::config::from_file(path)?;
            let Some(s) = cfg.streams.iter().find(|s| &s.name == name) else {
                let names: Vec<&str> = cfg.streams.iter().map(|s| s.name.as_str()).collect();
                anyhow::bail!(
                    "--stream {name}: {} declares no such stream (its streams: {})",
                    path.display(),
                    names.join(", ")
                );
            };
            let Some(fields) = s.fields()? else {
                anyhow::bail!(
                    "--stream {name}: the stream declares its features by count; a CSV's \
                     columns are read as numbers without --stream"
                );
            };
            let opts = FieldOptions {
                declared: Some(fields.fields().to_vec()),
                categorical: Vec::new(),
                hashed: Vec::new(),
                missing: s.missing(),
            };
            return Ok((opts, s.target.clone()));
        }
        self.flags().map(|o| (o, None))
    }

    fn flags(&self) -> anyhow::Result<FieldOptions> {
        let categorical = self
            .categorical
            .iter()
            .map(|c| match c.split_once('=') {
                None => Ok((c.clone(), None)),
                Some((name, levels)) => {
                    let levels: Vec<String> =
                        levels.split(',').map(|l| l.trim().to_string()).collect();
                    if levels.iter().any(String::is_empty) {
                        anyhow::bail!("--categorical {c}: an empty level (write NAME=a,b,c)");
                    }
                    Ok((name.to_string(), Some(levels)))
                }
            })
            .collect::<anyhow::Result<_>>()?;
        let hashed = self
            .hashed
            .iter()
            .map(|h| {
                let (name, b) = h.rsplit_once(':').ok_or_else(|| {
                    anyhow::anyhow!("--hashed {h}: write NAME:BUCKETS, e.g. --hashed tags:32")
                })?;
                let b: usize = b.parse().map_err(|_| {
                    anyhow::anyhow!("--hashed {h}: BUCKETS must be a whole number, e.g. tags:32")
                })?;
                Ok((name.to_string(), b))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(FieldOptions {
            declared: None,
            categorical,
            hashed,
            missing: Missing::parse(&self.missing).map_err(|e| anyhow::anyhow!("--{e}"))?,
        })
    }
}

/// Streams a file into running statistics. Returns the feature names too.
///
/// Reading (parsing, decoding) and folding overlap: a reader thread fills the next batches
/// while this one folds the current, with two batches in flight and their buffers recycled,
/// so the memory stays a few batches whatever the file's length. A memory-mapped NPY file
/// whose target is its first or last column needs neither: the fold reads its rows where they
/// lie.
pub fn read_stats(
    reader: RowReader,
    task: Task,
    schedule: AlphaSchedule,
    batch: usize,
) -> anyhow::Result<(Stats, Option<Vec<String>>)> {
    let (mut stats, names) = read_folds(reader, task, schedule, batch, 1)?;
    Ok((stats.pop().expect("one fold"), names))
}

/// What `read_checked` answers: the statistics, the columns' names, the checked request and
/// the default method's note.
type Checked<C> = (Stats, Option<Vec<String>>, C, Option<String>);

/// The file's statistics with the request checked by `check` (`Request::check` or
/// `check_path`): before any row is read, so that a bad flag costs no read, and again for the
/// default method, which `request_for` picks from the rows read (its note with it).
fn read_checked<C>(
    reader: RowReader,
    args: &FitArgs,
    schedule: AlphaSchedule,
    mut params: Request,
    mut note: Option<String>,
    check: fn(&Request, usize) -> Result<C, solve::ParamError>,
) -> anyhow::Result<Checked<C>> {
    let p = reader.p;
    let mut checked = check(&params, p).map_err(flag_error)?;
    let (stats, names) = read_stats(reader, args.task, schedule, args.batch)?;
    if args.extract.default_method() {
        (params, note) = args.extract.request_for(p, Some(stats.n()))?;
        checked = check(&params, p).map_err(flag_error)?;
    }
    Ok((stats, names, checked, note))
}

/// Streams a file into `folds` statistics, row i (0-based) into fold
/// `select::fold_of(i, folds)` (all rows into the one when `folds` is 1).
pub fn read_folds(
    mut reader: RowReader,
    task: Task,
    schedule: AlphaSchedule,
    batch: usize,
    folds: usize,
) -> anyhow::Result<(Vec<Stats>, Option<Vec<String>>)> {
    let file = reader.path.clone();
    let names = reader.names.clone();
    let p = reader.p;
    let mut stats: Vec<Stats> = (0..folds.max(1))
        .map(|_| Stats::new(task, p, schedule.clone()))
        .collect();
    if folds <= 1 && reader.maps_rows() {
        // A memory-mapped NPY file: the fold packs the rows from the mapped pages, with no
        // reader thread and no copy (`RowReader::next_mapped`).
        loop {
            let first = reader.rows_read();
            let Some(rows) = reader.next_mapped(batch.max(1))? else {
                break;
            };
            let got = rows.rows;
            stats[0].update_strided(rows).map_err(|e| {
                // The fold checks the values; a refused batch is named as the reader names it.
                match reader.mapped_non_finite(first, got) {
                    Some(bad) => anyhow::Error::from(bad),
                    None => rows_error(&file, first, got, e),
                }
            })?;
        }
        return Ok((stats, names));
    }
    let (mut fx, mut fy) = (vec![Vec::new(); folds], vec![Vec::new(); folds]);
    type Batch = (Vec<f64>, Vec<f64>, u64);
    let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Result<Batch, DataError>>(2);
    let (free_tx, free_rx) = std::sync::mpsc::channel::<(Vec<f64>, Vec<f64>)>();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        scope.spawn(move || {
            loop {
                let (mut x, mut y) = free_rx.try_recv().unwrap_or_default();
                x.clear();
                y.clear();
                let first = reader.rows_read();
                match reader.next_batch(batch.max(1), &mut x, &mut y) {
                    Ok(0) => {
                        let skipped = reader.rows_skipped();
                        if skipped > 0 {
                            eprintln!(
                                "{}: left out {skipped} rows with a missing value (--missing skip_row)",
                                reader.path.display()
                            );
                        }
                        break;
                    }
                    Ok(_) => {
                        if full_tx.send(Ok((x, y, first))).is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        let _ = full_tx.send(Err(e));
                        break;
                    }
                }
            }
        });
        // Dropping the receiver on an error stops the reader at its next batch.
        for msg in full_rx {
            let (x, y, first) = msg?;
            if folds <= 1 {
                stats[0]
                    .update_batch(&x, &y)
                    .map_err(|e| rows_error(&file, first, y.len(), e))?;
            } else {
                for (i, (row, &v)) in x.chunks_exact(p.max(1)).zip(&y).enumerate() {
                    let f = solve::select::fold_of(first + i as u64, folds);
                    fx[f].extend_from_slice(row);
                    fy[f].push(v);
                }
                for f in 0..folds {
                    stats[f]
                        .update_batch(&fx[f], &fy[f])
                        .map_err(|e| rows_error(&file, first, y.len(), e))?;
                    fx[f].clear();
                    fy[f].clear();
                }
            }
            let _ = free_tx.send((x, y));
        }
        Ok(())
    })?;
    Ok((stats, names))
}

/// Runs `ravel fit` (not `--wide`: `fit_wide::run`) and returns the JSON to print.
pub fn run(args: &FitArgs) -> anyhow::Result<String> {
    let schedule: AlphaSchedule = args.alpha.parse().map_err(anyhow::Error::msg)?;
    let mut params = args.extract.request()?;
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
    // The statistics' memory is estimated from the file's dimensions and checked against
    // --max-memory before any row is read (issue 21).
    let cv = params.select.is_some_and(|c| c.is_cv());
    let plan = if cv {
        Plan::Folds {
            task: args.task,
            batch_rows: args.batch.max(1),
            folds: args.folds.unwrap_or(5).clamp(2, solve::select::MAX_FOLDS),
        }
    } else {
        Plan::Stats {
            task: args.task,
            batch_rows: args.batch.max(1),
        }
    };
    let (fields, stream_target) = args.columns.options()?;
    let opts = OpenOptions {
        target: args.target.as_deref().or(stream_target.as_deref()),
        format,
        compact_features: args.compact_features,
        budget: args.memory.limit().budget(plan),
        fields,
    };
    let reader = RowReader::open(&args.file, &opts)?;
    let note;
    (params, note) = args.extract.request_for(reader.p, None)?;
    // Check the request before reading a large file.
    if let Some(window) = args.prequential {
        return prequential(reader, args, schedule, &params, window);
    }
    if cv {
        return cross_validate(reader, args, schedule, &params, &note);
    }
    if args.folds.is_some() {
        anyhow::bail!("--folds is for --select cv or cv_1se");
    }
    let json = if args.path {
        let (stats, names, checked, note) =
            read_checked(reader, args, schedule, params, note, Request::check_path)?;
        let mut path = solve::path_from_stats(&stats, &checked, names.as_deref())?;
        note_default(path.selection.as_mut(), &note);
        serde_json::to_string(&path)?
    } else {
        let (stats, names, checked, note) =
            read_checked(reader, args, schedule, params, note, Request::check)?;
        let mut model = solve::model_from_stats(&stats, &checked, names.as_deref())?;
        note_default(model.selection.as_deref_mut(), &note);
        serde_json::to_string(&model)?
    };
    Ok(json)
}

/// `--select cv | cv_1se`: rows into K folds by index, the CV curve from their statistics.
fn cross_validate(
    reader: RowReader,
    args: &FitArgs,
    schedule: AlphaSchedule,
    params: &Request,
    note: &Option<String>,
) -> anyhow::Result<String> {
    let folds = args.folds.unwrap_or(5);
    if !(2..=solve::select::MAX_FOLDS).contains(&folds) {
        anyhow::bail!(
            "--folds {folds}: it must lie in [2, {}]",
            solve::select::MAX_FOLDS
        );
    }
    if !matches!(schedule, AlphaSchedule::Plain) {
        anyhow::bail!(
            "--select cv on a file uses plain averages (each fold is a sample of the file); drop              --alpha"
        );
    }
    let p = reader.p;
    let mut checked = params.check_path(p).map_err(flag_error)?;
    let (stats, names) = read_folds(reader, args.task, schedule, args.batch, folds)?;
    let mut total = stats[0].clone();
    for f in &stats[1..] {
        total.merge(f)?;
    }
    let mut note = note.clone();
    if args.extract.default_method() {
        let params;
        (params, note) = args.extract.request_for(p, Some(total.n()))?;
        checked = params.check_path(p).map_err(flag_error)?;
    }
    let mut path = solve::select::cross_validate(&total, &stats, &checked, names.as_deref())
        .map_err(flag_error)?;
    note_default(path.selection.as_mut(), &note);
    Ok(if args.path {
        serde_json::to_string(&path)?
    } else {
        serde_json::to_string(&solve::select::chosen_model(path).map_err(flag_error)?)?
    })
}

/// `--prequential N`: the test-then-train trace, one JSON line per window.
fn prequential(
    mut reader: RowReader,
    args: &FitArgs,
    schedule: AlphaSchedule,
    params: &Request,
    window: u64,
) -> anyhow::Result<String> {
    if window == 0 || args.refit_every == Some(0) {
        anyhow::bail!("--prequential and --refit-every take a number of rows >= 1");
    }
    let p = reader.p;
    let refit = args
        .refit_every
        .unwrap_or_else(|| Prequential::default_refit(p));
    let mut replay = Prequential::with_stats(
        Stats::new(args.task, p, schedule),
        params.clone(),
        window,
        refit,
        None,
    )?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use ravel_core::solve::Method;

    #[derive(clap::Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: FitArgs,
    }

    /// `--help` lists every estimator on the `--method` line (a new solver must be added there).
    #[test]
    fn method_help_lists_every_estimator() {
        let cmd = Wrapper::command();
        let help = cmd
            .get_arguments()
            .find(|a| a.get_id() == "method")
            .and_then(|a| a.get_help())
            .expect("--method has a help text")
            .to_string();
        let words: Vec<&str> = help
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .collect();
        for m in Method::ESTIMATORS {
            assert!(words.contains(&m.name()), "{m} missing from: {help}");
        }
    }
}
