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
use ravel_core::solve::{self, Method, Request};
use ravel_core::stats::{AlphaSchedule, Stats};
use std::path::PathBuf;

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
    /// With --prequential: re-extract the model at every multiple of R rows (default
    /// max(1, p/4)).
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

/// The extraction flags: one per field of the API's request body (`--l1-ratio` is
/// `"l1_ratio"`), turned into that JSON object and parsed by the same `solve::Request`, so the
/// CLI and the API accept and refuse the same things. A flag the method does not take is
/// refused by name.
#[derive(Debug, Clone, clap::Args)]
pub struct ExtractArgs {
    /// The estimator: ols, ridge, olsth, fsa, lasso, elastic-net, mcp, scad, fw-lasso, iht, htp
    /// or k-support (docs/methods.md "Estimators"). Without it, --select chooses along OLSth's k-path
    /// k = 1..=min(p, 300, n / 2) (or to --k).
    #[arg(long)]
    pub method: Option<String>,
    /// Exactly k nonzero coefficients (olsth, fsa, iht, htp, k-support; lasso, elastic-net,
    /// mcp, scad instead of --lambda).
    #[arg(long)]
    pub k: Option<usize>,
    /// Penalty level lambda (objective (1/2n)||y - b0 - Xb||^2 + P_lambda(b)); olsth: ridge
    /// of the first fit; iht/htp: the ridge of the certificate.
    #[arg(long, allow_negative_numbers = true)]
    pub lambda: Option<f64>,
    /// Elastic-net mixing: 1 is Lasso, towards 0 is ridge (default 0.9).
    #[arg(long, allow_negative_numbers = true)]
    pub l1_ratio: Option<f64>,
    /// MCP / SCAD concavity (defaults 3 and 3.7).
    #[arg(long, allow_negative_numbers = true)]
    pub gamma: Option<f64>,
    /// Refit OLS on the selected support (penalized methods; the default with --k, as paper
    /// 003 Alg. 3 does).
    #[arg(long, conflicts_with = "no_refit")]
    pub refit: bool,
    /// Penalized methods: no OLS refit (with --k: the penalized estimate at the lambda that
    /// selects k).
    #[arg(long)]
    pub no_refit: bool,
    /// Fit on raw columns (then lasso/elastic-net equal scikit-learn's on the same rows).
    #[arg(long)]
    pub no_standardize: bool,
    /// Number of points on the path (default 100).
    #[arg(long)]
    pub path_points: Option<usize>,
    /// lambda_min / lambda_max of the path (default 1e-4 when n > p, else 1e-2).
    #[arg(long)]
    pub lambda_min_ratio: Option<f64>,
    /// Convergence tolerance (penalized, fw-lasso, iht/htp, k-support).
    #[arg(long, allow_negative_numbers = true)]
    pub tol: Option<f64>,
    /// FSA iterations T (default 1000) and annealing parameter mu (default 10): the columns
    /// kept after step t are k + (p - k) max(0, (T - t) / (t mu + T)).
    #[arg(long)]
    pub fsa_iterations: Option<usize>,
    /// FSA annealing parameter mu (default 10; larger prunes sooner).
    #[arg(long, allow_negative_numbers = true)]
    pub fsa_mu: Option<f64>,
    /// Classification: weight of the positive and negative class (default 1 each).
    #[arg(long, allow_negative_numbers = true)]
    pub w_pos: Option<f64>,
    #[arg(long, allow_negative_numbers = true)]
    pub w_neg: Option<f64>,
    /// fw-lasso: the l1 radius delta (standardized units unless --no-standardize).
    #[arg(long, allow_negative_numbers = true)]
    pub delta: Option<f64>,
    /// fw-lasso: deterministic or randomized.
    #[arg(long, value_parser = ["deterministic", "randomized"])]
    pub variant: Option<String>,
    /// fw-lasso randomized: coordinates sampled per iteration, and the seed.
    #[arg(long)]
    pub kappa: Option<usize>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// fw-lasso: no away steps.
    #[arg(long)]
    pub no_away_steps: bool,
    /// fw-lasso path: delta_min / delta_max (default 0.01).
    #[arg(long)]
    pub delta_min_ratio: Option<f64>,
    /// Choose the model along the path: aic, bic, ebic (information criteria from the
    /// statistics), cv or cv_1se (exact K-fold cross-validation, --folds). Replaces --k /
    /// --lambda for lasso, elastic-net, mcp, scad, fw-lasso; for olsth, fsa, iht, htp --k is
    /// the largest k tried (k = 1..=k; without --k, min(300, p, n / 2)). With --path: the
    /// whole path and the selection.
    #[arg(long, value_name = "CRITERION")]
    pub select: Option<String>,
    /// EBIC's gamma in [0, 1] (default 1 - ln n / (2 ln p), clipped).
    #[arg(long, allow_negative_numbers = true)]
    pub ebic_gamma: Option<f64>,
    /// Standard errors, t statistics and p-values (ols, ridge, refitted models).
    #[arg(long)]
    pub inference: bool,
    /// fw-lasso, iht/htp, k-support: the most iterations.
    #[arg(long)]
    pub max_iterations: Option<usize>,
    /// iht/htp: gradient steps before the first threshold (default 20) and DIHT iterations
    /// (default 200).
    #[arg(long)]
    pub warmup: Option<usize>,
    #[arg(long)]
    pub dual_iterations: Option<usize>,
}

impl ExtractArgs {
    /// The request these flags describe, parsed as the API parses its body.
    pub fn request(&self) -> anyhow::Result<Request> {
        let method: Method = match (&self.method, &self.select) {
            (Some(m), _) => m.parse().map_err(anyhow::Error::msg)?,
            (None, Some(_)) => solve::select::DEFAULT_METHOD,
            (None, None) => anyhow::bail!(
                "--method is required: one of {}; or --select CRITERION alone, which chooses \
                 along OLSth's k-path",
                Method::estimator_list()
            ),
        };
        let mut obj = serde_json::Map::new();
        let mut put = |key: &str, v: Option<serde_json::Value>| {
            if let Some(v) = v {
                obj.insert(key.to_string(), v);
            }
        };
        use serde_json::json;
        put("method", Some(json!(method.name())));
        let k = match self.default_k() {
            true => Some(self.k.unwrap_or(solve::select::DEFAULT_K_MAX)),
            false => self.k,
        };
        put("k", k.map(|v| json!(v)));
        put("lambda", self.lambda.map(|v| json!(v)));
        put("l1_ratio", self.l1_ratio.map(|v| json!(v)));
        put("gamma", self.gamma.map(|v| json!(v)));
        put(
            "refit",
            (self.refit || self.no_refit).then_some(json!(self.refit)),
        );
        put("standardize", self.no_standardize.then_some(json!(false)));
        put("path_points", self.path_points.map(|v| json!(v)));
        put("lambda_min_ratio", self.lambda_min_ratio.map(|v| json!(v)));
        put("tol", self.tol.map(|v| json!(v)));
        put("fsa_iterations", self.fsa_iterations.map(|v| json!(v)));
        put("fsa_mu", self.fsa_mu.map(|v| json!(v)));
        put("w_pos", self.w_pos.map(|v| json!(v)));
        put("w_neg", self.w_neg.map(|v| json!(v)));
        put("delta", self.delta.map(|v| json!(v)));
        put("variant", self.variant.as_ref().map(|v| json!(v)));
        put("kappa", self.kappa.map(|v| json!(v)));
        put("seed", self.seed.map(|v| json!(v)));
        put("away_steps", self.no_away_steps.then_some(json!(false)));
        put("delta_min_ratio", self.delta_min_ratio.map(|v| json!(v)));
        put("max_iterations", self.max_iterations.map(|v| json!(v)));
        put("warmup", self.warmup.map(|v| json!(v)));
        put("dual_iterations", self.dual_iterations.map(|v| json!(v)));
        if let Some(c) = &self.select {
            let c: solve::Criterion = c.parse().map_err(anyhow::Error::msg)?;
            put("select", Some(json!(c.name())));
        }
        put("ebic_gamma", self.ebic_gamma.map(|v| json!(v)));
        put("inference", self.inference.then_some(json!(true)));
        serde_json::from_value(serde_json::Value::Object(obj)).map_err(|e| {
            // serde names the JSON field; the user typed the flag.
            let msg = flag_names(&e.to_string());
            anyhow::anyhow!("--method {method}: {msg}")
        })
    }
}

impl ExtractArgs {
    /// Whether --select came without --method (`select::DEFAULT_METHOD`'s k-path).
    pub fn default_method(&self) -> bool {
        self.method.is_none() && self.select.is_some()
    }

    /// Whether the k-path's largest k is the default: --select without --k, and without
    /// --method or with one whose path runs over k (`select::selects_over_k`).
    fn default_k(&self) -> bool {
        self.select.is_some()
            && self.k.is_none()
            && self
                .method
                .as_deref()
                .is_none_or(|m| m.parse::<Method>().is_ok_and(solve::select::selects_over_k))
    }

    /// `request` for a file of p features and (once read) n rows: the default k-path to
    /// `select::default_k_max(p, n)` (p alone before the rows are read), and the note its
    /// answer carries.
    pub fn request_for(
        &self,
        p: usize,
        n: Option<u64>,
    ) -> anyhow::Result<(Request, Option<String>)> {
        let mut req = self.request()?;
        if !self.default_method() && !self.default_k() {
            return Ok((req, None));
        }
        let k_max = |k: usize| match n {
            Some(n) => solve::select::default_k_max(p, n as f64),
            None => k.min(p).max(1),
        };
        let mut note = None;
        if self.default_method() {
            if let (solve::Estimator::Olsth(o), Some(c)) = (&mut req.estimator, req.select) {
                if self.k.is_none() {
                    o.k = k_max(o.k);
                }
                note = Some(solve::select::default_method_note(c, o.k));
            }
            return Ok((req, note));
        }
        // A method whose path runs over k, without --k: the default largest k.
        let (method, select) = (req.estimator.method(), req.select);
        let k = match &mut req.estimator {
            solve::Estimator::Olsth(e) => Some(&mut e.k),
            solve::Estimator::Fsa(e) => Some(&mut e.k),
            solve::Estimator::Iht(e) => Some(&mut e.0.k),
            solve::Estimator::Htp(e) => Some(&mut e.0.k),
            _ => None,
        };
        if let (Some(k), Some(c)) = (k, select) {
            *k = k_max(*k);
            note = Some(format!(
                "{} over {}'s k-path k = 1..{k} (no --k given: the default largest k, at most \
                 {}, p and n / 2)",
                c.name(),
                method.name(),
                solve::select::DEFAULT_K_MAX
            ));
        }
        Ok((req, note))
    }
}

/// The note of a defaulted method first among the selection's notes.
fn note_default(selection: Option<&mut solve::Selection>, note: &Option<String>) {
    if let (Some(sel), Some(note)) = (selection, note) {
        sel.notes.insert(0, note.clone());
    }
}

/// A refused request in the flags' words.
fn flag_error(e: solve::ParamError) -> anyhow::Error {
    anyhow::anyhow!(flag_names(&e.to_string()))
}

/// "unknown field `l1_ratio`" -> "unknown field `--l1-ratio`" in serde's messages.
fn flag_names(msg: &str) -> String {
    let mut out = String::new();
    let mut rest = msg;
    while let Some(i) = rest.find('`') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let Some(j) = after.find('`') else {
            out.push_str(&rest[i..]);
            return out;
        };
        let word = &after[..j];
        if word
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            out.push_str(&format!("`--{}`", word.replace('_', "-")));
        } else {
            out.push_str(&format!("`{word}`"));
        }
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    out
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
    let mut note;
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
        let checked = params.check_path(reader.p).map_err(flag_error)?;
        let p = reader.p;
        let (stats, names) = read_stats(reader, args.task, schedule, args.batch)?;
        let mut checked = checked;
        if args.extract.default_method() {
            (params, note) = args.extract.request_for(p, Some(stats.n()))?;
            checked = params.check_path(p).map_err(flag_error)?;
        }
        let mut path = solve::path_from_stats(&stats, &checked, names.as_deref())?;
        note_default(path.selection.as_mut(), &note);
        serde_json::to_string(&path)?
    } else {
        let checked = params.check(reader.p).map_err(flag_error)?;
        let p = reader.p;
        let (stats, names) = read_stats(reader, args.task, schedule, args.batch)?;
        let mut checked = checked;
        if args.extract.default_method() {
            (params, note) = args.extract.request_for(p, Some(stats.n()))?;
            checked = params.check(p).map_err(flag_error)?;
        }
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

    #[test]
    fn serde_field_names_become_flag_names() {
        assert_eq!(
            flag_names("unknown field `l1_ratio`, expected `k` or `lambda`"),
            "unknown field `--l1-ratio`, expected `--k` or `--lambda`"
        );
        assert_eq!(flag_names("no backticks"), "no backticks");
    }
}
