//! Streaming readers for the row files ravel learns from offline (`ravel fit`, `ravel produce`):
//! CSV with a header row, LIBSVM (`label idx:value ...`) and NPY (2-D float64).
//!
//! Rows come out in mini-batches (row-major x, and y) so that a file of any length is folded
//! into `RunningStats` without being held in memory. Every error names the line (or row) and
//! column so the user can fix the file.
//!
//! Opening a file reads only its dimensions (CSV header, LIBSVM first pass, NPY header) and
//! checks them against a [`Budget`] before anything that grows with them is allocated: the
//! caller says what it will build from the rows ([`Plan`]), `memory` estimates the bytes from
//! p (and n for `ravel select`), and a file that needs more than the limit is refused with an
//! error naming the dimension that drives it (issue 21: a LIBSVM index of 200000 sets
//! p = 200000, and the statistics alone would take 320 GB). A LIBSVM file whose indices are
//! far apart can be renumbered to the distinct indices it uses (`compact_features`).

use crate::memory::{ByteSize, Estimate, memory_estimate, selection_estimate};
use crate::stats::StridedRows;
use crate::task::Task;
use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Why a file could not be read; the message names the file (and the line).
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The I/O error is part of the message, not a `source()`: the CLI prints error chains
    /// (`{:#}`), which would repeat it.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        error: std::io::Error,
    },
    /// A line that cannot be read as a row.
    #[error("{path}: line {line}: {msg}")]
    Line {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: u64,
        /// What is wrong with it.
        msg: String,
    },
    /// The file as a whole (dimensions, header, NPY type, memory budget).
    #[error("{path}: {msg}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        msg: String,
    },
}

/// File formats, chosen from the extension (`.csv`, `.npy`, anything else is LIBSVM when its
/// first line looks like `label idx:value`, CSV otherwise) or named explicitly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Comma-separated values with a header row.
    Csv,
    /// LIBSVM / SVMlight: `label idx:value ...`, sparse.
    Libsvm,
    /// A numpy `.npy` array of n rows (features and the target column).
    Npy,
}

impl Format {
    /// The format of `path`, from its extension or (no known extension) its first line.
    pub fn detect(path: &Path) -> Result<Format, DataError> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        match ext.as_str() {
            "csv" | "tsv" => return Ok(Format::Csv),
            "npy" => return Ok(Format::Npy),
            "libsvm" | "svm" | "svmlight" => return Ok(Format::Libsvm),
            _ => {}
        }
        let f = File::open(path).map_err(|error| DataError::Io {
            path: path.into(),
            error,
        })?;
        let mut first = String::new();
        BufReader::new(f)
            .read_line(&mut first)
            .map_err(|error| DataError::Io {
                path: path.into(),
                error,
            })?;
        Ok(
            if first.split_whitespace().skip(1).any(|t| t.contains(':')) {
                Format::Libsvm
            } else {
                Format::Csv
            },
        )
    }
}

/// What the caller builds from the rows, so that `RowReader::open` can estimate the memory it
/// will take from the file's dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Running statistics of this task, folded `batch_rows` rows at a time, and one extraction
    /// from them (`ravel fit`).
    Stats {
        /// Regression or classification.
        task: Task,
        /// Rows folded at a time.
        batch_rows: usize,
    },
    /// K-fold cross-validation (`ravel fit --select cv --folds K`): the statistics of each
    /// fold, their merge (the totals) and one training merge at a time: K + 2 copies.
    Folds {
        /// Regression or classification.
        task: Task,
        /// Rows folded at a time.
        batch_rows: usize,
        /// K, the number of folds.
        folds: usize,
    },
    /// The whole file in memory and a selection of `s` of its columns (`ravel select`; s = 0:
    /// the file only, `read_all`).
    Select {
        /// Columns selected.
        s: usize,
    },
    /// Batches of `batch_rows` rows, nothing kept (`ravel produce`).
    Rows {
        /// Rows per batch.
        batch_rows: usize,
    },
}

impl Plan {
    /// The estimate for a file of p features and (when known) n rows.
    pub fn estimate(&self, p: usize, n: Option<u64>) -> Estimate {
        match *self {
            Plan::Stats { task, batch_rows } => {
                memory_estimate(p, task).with_batch(batch_rows as u64, p)
            }
            Plan::Folds {
                task,
                batch_rows,
                folds,
            } => memory_estimate(p, task)
                .with_copies(folds as u64 + 2)
                .with_batch(batch_rows as u64, p),
            Plan::Select { s } => {
                let n = n.unwrap_or(0);
                selection_estimate(n, s).with_file(n, p)
            }
            Plan::Rows { batch_rows } => Estimate::default().with_batch(batch_rows as u64, p),
        }
    }

    fn describe(&self) -> String {
        match *self {
            Plan::Stats {
                task: Task::Regression,
                ..
            } => "the statistics (a p x p matrix of second moments) and an extraction from them"
                .into(),
            Plan::Stats {
                task: Task::Classification,
                ..
            } => "the classification statistics (two p x p matrices of second moments, one per \
                  class) and an extraction from them"
                .into(),
            Plan::Folds { folds, .. } => format!(
                "{folds}-fold cross-validation: the statistics of each fold, their totals and one \
                 training merge ({} copies of the p x p second moments) and an extraction",
                folds + 2
            ),
            Plan::Select { s: 0 } => "holding the file in memory (n x p)".into(),
            Plan::Select { s } => {
                format!("holding the file in memory (n x p) and a selection of s = {s}")
            }
            Plan::Rows { batch_rows } => format!("batches of {batch_rows} rows"),
        }
    }
}

/// The memory a caller may use for what it builds from a file: `RowReader::open` refuses a
/// file whose dimensions need more than `max_bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// What the caller builds from the rows.
    pub plan: Plan,
    /// The bytes it may take (`u64::MAX`: no limit).
    pub max_bytes: u64,
    /// Where the limit comes from and how to raise it, for the error message (e.g.
    /// "--max-memory (default: half of this machine's 15.5 GiB)").
    pub limit: String,
}

impl Budget {
    /// No limit (tests, tools that read known small files).
    pub fn unlimited(plan: Plan) -> Budget {
        Budget {
            plan,
            max_bytes: u64::MAX,
            limit: "no limit".into(),
        }
    }
}

/// How a file is opened.
#[derive(Debug, Clone)]
pub struct OpenOptions<'a> {
    /// Target column (CSV, NPY): a header name or an index; default the last column.
    pub target: Option<&'a str>,
    /// The format, or None to detect it (`Format::detect`).
    pub format: Option<Format>,
    /// LIBSVM: number the features by the distinct indices the file uses (column j is the
    /// j-th smallest index) instead of by the largest index; `names` are then the file's
    /// indices, so coefficients are reported under them.
    pub compact_features: bool,
    /// The memory the caller may use (the file is refused beyond it).
    pub budget: Budget,
}

impl<'a> OpenOptions<'a> {
    /// Options with the defaults (last column as target, format detected) and `budget`.
    pub fn new(budget: Budget) -> OpenOptions<'a> {
        OpenOptions {
            target: None,
            format: None,
            compact_features: false,
            budget,
        }
    }
}

/// A row source: feature names, p, and batches of rows.
pub struct RowReader {
    /// The file read.
    pub path: PathBuf,
    /// Its format.
    pub format: Format,
    /// Feature names (CSV header without the target) or None (columns are named by index).
    pub names: Option<Vec<String>>,
    /// Number of features.
    pub p: usize,
    inner: Inner,
    rows_read: u64,
}

enum Inner {
    Csv {
        reader: csv::Reader<BufReader<File>>,
        target: usize,
        width: usize,
        record: csv::StringRecord,
    },
    Libsvm {
        lines: std::io::Lines<BufReader<File>>,
        line: u64,
        columns: LibsvmColumns,
    },
    /// NPY float64, read in bulk: the file is memory-mapped when it is as long as its header
    /// says, and a batch is converted from the mapped pages (no read into a buffer first); a
    /// Fortran-order (column-major) batch is gathered from its columns' runs eight features
    /// at a time, so each row of the batch is written a cache line at a time. Without a map
    /// (a short file, or one the system would not map) a batch is one read of its rows, or
    /// one read per column, into `buf`. Neither order is ever held whole in memory. When the
    /// target is the first or last column, `next_mapped` hands out the mapped rows themselves.
    Npy {
        file: File,
        map: Option<memmap2::Mmap>,
        /// Byte offset of the first value.
        start: u64,
        fortran: bool,
        big_endian: bool,
        target: usize,
        width: usize,
        rows: u64,
        buf: Vec<u8>,
    },
}

/// Where a LIBSVM index goes: index - offset (indices from 0 or from 1), or the position of
/// the index among the distinct ones (`compact_features`).
enum LibsvmColumns {
    Offset(usize),
    Compact(HashMap<usize, usize>),
}

/// The dimensions of a file as read before its rows, and the check of a budget against them.
struct Dimensions<'a> {
    path: &'a Path,
    p: usize,
    /// Rows, when known before reading them (NPY header; LIBSVM first pass; CSV for select).
    rows: Option<u64>,
    /// What sets p, in the file's words ("the largest feature index is 200000 (line 1)").
    driver: String,
    /// Bytes the reader itself holds beyond a batch.
    reader_bytes: u64,
    /// LIBSVM without compaction: the distinct indices used, when far fewer than p.
    distinct: Option<usize>,
}

impl Dimensions<'_> {
    fn check(&self, budget: &Budget) -> Result<(), DataError> {
        let mut est = budget.plan.estimate(self.p, self.rows);
        est.rows = est.rows.saturating_add(self.reader_bytes);
        if est.total() <= budget.max_bytes {
            return Ok(());
        }
        let rows = match (budget.plan, self.rows) {
            (Plan::Select { .. }, Some(n)) => format!(", and n = {n} rows"),
            _ => String::new(),
        };
        let mut hint = String::new();
        if let Some(d) = self.distinct {
            let compact = budget.plan.estimate(d, self.rows).total();
            hint = format!(
                " The file uses only {d} distinct feature indices: --compact-features renumbers \
                 them (p = {d}, an estimated {}).",
                ByteSize(compact)
            );
        }
        Err(DataError::File {
            path: self.path.into(),
            msg: format!(
                "too large for the memory limit: {}{rows}; {} would need an estimated {est}, \
                 over the limit of {} ({}).{hint} Drop or hash features, learn them as a feature \
                 stream (ravel select, [[feature_streams]]), or raise the limit.",
                self.driver,
                budget.plan.describe(),
                ByteSize(budget.max_bytes),
                budget.limit,
            ),
        })
    }
}

/// Target column given as a header name or an index.
fn resolve_target(
    target: Option<&str>,
    header: Option<&[String]>,
    width: usize,
    path: &Path,
) -> Result<usize, DataError> {
    let err = |msg: String| DataError::File {
        path: path.into(),
        msg,
    };
    let Some(t) = target else {
        return if width >= 2 {
            Ok(width - 1)
        } else {
            Err(err(
                "need at least two columns (features and a target)".into()
            ))
        };
    };
    if let Some(h) = header
        && let Some(i) = h.iter().position(|n| n == t)
    {
        return Ok(i);
    }
    match t.parse::<usize>() {
        Ok(i) if i < width => Ok(i),
        Ok(i) => Err(err(format!(
            "target column {i} is out of range: the file has {width} columns"
        ))),
        Err(_) => Err(err(format!(
            "target '{t}' is neither a header name nor a column index"
        ))),
    }
}

fn parse_cell(cell: &str, path: &Path, line: u64, col: usize) -> Result<f64, DataError> {
    let v: f64 = cell.trim().parse().map_err(|_| DataError::Line {
        path: path.into(),
        line,
        msg: format!("column {col}: '{cell}' is not a number"),
    })?;
    if !v.is_finite() {
        return Err(DataError::Line {
            path: path.into(),
            line,
            msg: format!("column {col}: {cell} is not finite"),
        });
    }
    Ok(v)
}

impl RowReader {
    /// Opens a file: reads its dimensions, refuses it when what `opts.budget.plan` builds
    /// from them needs more than the budget, and returns the reader positioned at the first
    /// row.
    pub fn open(path: &Path, opts: &OpenOptions) -> Result<RowReader, DataError> {
        let target = opts.target;
        let format = match opts.format {
            Some(f) => f,
            None => Format::detect(path)?,
        };
        let io = |error| DataError::Io {
            path: path.into(),
            error,
        };
        if opts.compact_features && format != Format::Libsvm {
            return Err(DataError::File {
                path: path.into(),
                msg: "--compact-features applies to LIBSVM files (it renumbers feature indices)"
                    .into(),
            });
        }
        let file = File::open(path).map_err(io)?;
        let (names, p, inner) = match format {
            Format::Csv => {
                let delim = if path.extension().is_some_and(|e| e == "tsv") {
                    b'\t'
                } else {
                    b','
                };
                let builder = || {
                    let mut b = csv::ReaderBuilder::new();
                    b.delimiter(delim).has_headers(true).trim(csv::Trim::All);
                    b
                };
                let mut reader = builder().from_reader(BufReader::new(file));
                let header: Vec<String> = reader
                    .headers()
                    .map_err(|e| DataError::File {
                        path: path.into(),
                        msg: e.to_string(),
                    })?
                    .iter()
                    .map(str::to_string)
                    .collect();
                let width = header.len();
                let t = resolve_target(target, Some(&header), width, path)?;
                // `ravel select` holds every row: count them first (a pass over the records,
                // nothing kept).
                let rows = if matches!(opts.budget.plan, Plan::Select { .. }) {
                    let f = File::open(path).map_err(io)?;
                    let mut counter = builder().from_reader(BufReader::new(f));
                    let mut record = csv::ByteRecord::new();
                    let mut n = 0u64;
                    while counter.read_byte_record(&mut record).unwrap_or(false) {
                        n += 1;
                    }
                    Some(n)
                } else {
                    None
                };
                Dimensions {
                    path,
                    p: width - 1,
                    rows,
                    driver: format!(
                        "the header (line 1) has {width} columns, so p = {}",
                        width - 1
                    ),
                    reader_bytes: 0,
                    distinct: None,
                }
                .check(&opts.budget)?;
                let names: Vec<String> = header
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != t)
                    .map(|(_, n)| n.clone())
                    .collect();
                (
                    Some(names),
                    width - 1,
                    Inner::Csv {
                        reader,
                        target: t,
                        width,
                        record: csv::StringRecord::new(),
                    },
                )
            }
            Format::Libsvm => {
                if target.is_some() {
                    return Err(DataError::File {
                        path: path.into(),
                        msg:
                            "--target does not apply to LIBSVM files: the label is the first token"
                                .into(),
                    });
                }
                // First pass: the number of features, whether indices start at 0 or 1, the
                // distinct indices used and the rows.
                let (mut min_idx, mut max_idx, mut max_line) = (usize::MAX, 0usize, 0u64);
                let mut used = BTreeSet::new();
                let mut rows = 0u64;
                for (i, line) in BufReader::new(file).lines().enumerate() {
                    let line = line.map_err(io)?;
                    let content = line.split('#').next().unwrap_or("");
                    if !content.trim().is_empty() {
                        rows += 1;
                    }
                    for tok in content.split_whitespace().skip(1) {
                        let (idx, _) = tok.split_once(':').ok_or_else(|| DataError::Line {
                            path: path.into(),
                            line: i as u64 + 1,
                            msg: format!("'{tok}' is not idx:value"),
                        })?;
                        let idx: usize = idx.parse().map_err(|_| DataError::Line {
                            path: path.into(),
                            line: i as u64 + 1,
                            msg: format!("'{idx}' is not a feature index"),
                        })?;
                        min_idx = min_idx.min(idx);
                        if max_line == 0 || idx > max_idx {
                            max_idx = idx;
                            max_line = i as u64 + 1;
                        }
                        used.insert(idx);
                    }
                }
                if used.is_empty() {
                    return Err(DataError::File {
                        path: path.into(),
                        msg: "no features found".into(),
                    });
                }
                let offset = if min_idx == 0 { 0 } else { 1 };
                let largest = format!("the largest feature index is {max_idx} (line {max_line})");
                let (p, names, columns, driver, distinct) = if opts.compact_features {
                    let d = used.len();
                    let names: Vec<String> = used.iter().map(|i| i.to_string()).collect();
                    let map = used.iter().enumerate().map(|(j, &i)| (i, j)).collect();
                    let driver = format!(
                        "the file uses {d} distinct feature indices ({largest}), so p = {d}"
                    );
                    (d, Some(names), LibsvmColumns::Compact(map), driver, None)
                } else {
                    let p = max_idx + 1 - offset;
                    // Far fewer indices used than p: renumbering them would help.
                    let sparse = (used.len() <= p / 2).then_some(used.len());
                    let driver = format!("{largest}, so p = {p}");
                    (p, None, LibsvmColumns::Offset(offset), driver, sparse)
                };
                drop(used);
                Dimensions {
                    path,
                    p,
                    rows: Some(rows),
                    driver,
                    reader_bytes: 0,
                    distinct,
                }
                .check(&opts.budget)?;
                let file = File::open(path).map_err(io)?;
                (
                    names,
                    p,
                    Inner::Libsvm {
                        lines: BufReader::new(file).lines(),
                        line: 0,
                        columns,
                    },
                )
            }
            Format::Npy => {
                let mut reader = BufReader::new(file);
                let npy = npyz::NpyHeader::from_reader(&mut reader).map_err(io)?;
                let shape = npy.shape().to_vec();
                if shape.len() != 2 {
                    return Err(DataError::File {
                        path: path.into(),
                        msg: format!("expected a 2-D array, got shape {shape:?}"),
                    });
                }
                let (rows, width) = (shape[0], usize::try_from(shape[1]).unwrap_or(usize::MAX));
                let t = resolve_target(target, None, width, path)?;
                let fortran = npy.order() == npyz::Order::Fortran;
                Dimensions {
                    path,
                    p: width - 1,
                    rows: Some(rows),
                    driver: format!(
                        "the header says {rows} rows of {width} columns{}, so p = {}",
                        if fortran { " in Fortran order" } else { "" },
                        width - 1
                    ),
                    reader_bytes: 0,
                    distinct: None,
                }
                .check(&opts.budget)?;
                let big_endian = match npy.dtype().descr().as_str() {
                    "'<f8'" => false,
                    "'>f8'" => true,
                    _ => {
                        return Err(DataError::File {
                            path: path.into(),
                            msg: "expected float64 data (dtype '<f8')".into(),
                        });
                    }
                };
                // Where the values start: the header's length, read again on the bare file.
                let mut file = File::open(path).map_err(io)?;
                npyz::NpyHeader::from_reader(&mut file).map_err(io)?;
                let start = file.stream_position().map_err(io)?;
                let map = map_values(&file, start, rows, width);
                (
                    None,
                    width - 1,
                    Inner::Npy {
                        file,
                        map,
                        start,
                        fortran,
                        big_endian,
                        target: t,
                        width,
                        rows,
                        buf: Vec::new(),
                    },
                )
            }
        };
        Ok(RowReader {
            path: path.into(),
            format,
            names,
            p,
            inner,
            rows_read: 0,
        })
    }

    /// Rows returned so far.
    pub fn rows_read(&self) -> u64 {
        self.rows_read
    }

    /// Whether `next_mapped` hands out the rows where they lie: a memory-mapped little-endian
    /// NPY file whose values are 8-byte aligned in the map and whose target is its first or
    /// last column (so the features are evenly spaced in either order).
    pub fn maps_rows(&self) -> bool {
        mapped_values(&self.inner).is_some()
    }

    /// The next batch of up to `max_rows` rows where they lie in the mapped file (no copy);
    /// `None` at the end. Only when `maps_rows` (panics otherwise); the rows count in
    /// `rows_read` as `next_batch`'s do. The values are not checked here: the fold checks
    /// them on its way (`RunningStats::update_strided` refuses a batch with a NaN or an
    /// infinity), and `mapped_non_finite` then names the value as `next_batch` would.
    pub fn next_mapped(&mut self, max_rows: usize) -> Result<Option<StridedRows<'_>>, DataError> {
        let Inner::Npy {
            fortran,
            width,
            rows,
            ..
        } = &self.inner
        else {
            panic!("next_mapped on a reader that does not map rows");
        };
        let (fortran, width, total) = (*fortran, *width, *rows as usize);
        let first = self.rows_read as usize;
        let n = max_rows.min(total - first);
        if n == 0 {
            return Ok(None);
        }
        let (values, x_at, y_at) = mapped_values(&self.inner).expect("maps_rows");
        let (rs, cs, base) = if fortran {
            (1, total, first)
        } else {
            (width, 1, first * width)
        };
        self.rows_read += n as u64;
        Ok(Some(StridedRows {
            x: &values[base + x_at..],
            row_stride: rs,
            col_stride: cs,
            y: &values[base + y_at..],
            y_stride: rs,
            rows: n,
        }))
    }

    /// The error `next_batch` gives for the first value that is not finite among the `rows`
    /// mapped rows from row `first` (`None` if they are all finite), for a batch from
    /// `next_mapped` the fold refused.
    pub fn mapped_non_finite(&self, first: u64, rows: usize) -> Option<DataError> {
        let Inner::Npy {
            fortran,
            width,
            rows: total,
            ..
        } = &self.inner
        else {
            return None;
        };
        let (values, _, _) = mapped_values(&self.inner)?;
        let (width, total, first) = (*width, *total as usize, usize::try_from(first).ok()?);
        let at = |r: usize, c: usize| {
            let i = if *fortran {
                c * total + r
            } else {
                r * width + c
            };
            values.get(i).copied().unwrap_or(0.0)
        };
        let (r, c) = (first..first.saturating_add(rows).min(total))
            .flat_map(|r| (0..width).map(move |c| (r, c)))
            .find(|&(r, c)| !at(r, c).is_finite())?;
        Some(DataError::File {
            path: self.path.clone(),
            msg: format!("row {r}, column {c}: {} is not finite", at(r, c)),
        })
    }

    /// Appends up to `max_rows` rows to `x` (row-major) and `y`; returns how many (0 at end).
    pub fn next_batch(
        &mut self,
        max_rows: usize,
        x: &mut Vec<f64>,
        y: &mut Vec<f64>,
    ) -> Result<usize, DataError> {
        let path = self.path.clone();
        let p = self.p;
        let mut got = 0;
        match &mut self.inner {
            Inner::Csv {
                reader,
                target,
                width,
                record,
            } => {
                while got < max_rows {
                    match reader.read_record(record) {
                        Ok(false) => break,
                        Ok(true) => {}
                        Err(e) => {
                            let line = e.position().map(|p| p.line()).unwrap_or(0);
                            return Err(DataError::Line {
                                path,
                                line,
                                msg: csv_msg(&e),
                            });
                        }
                    }
                    let line = record.position().map(|p| p.line()).unwrap_or(0);
                    if record.len() != *width {
                        return Err(DataError::Line {
                            path,
                            line,
                            msg: format!("{} fields, the header has {width}", record.len()),
                        });
                    }
                    for (c, cell) in record.iter().enumerate() {
                        let v = parse_cell(cell, &path, line, c)?;
                        if c == *target { y.push(v) } else { x.push(v) }
                    }
                    got += 1;
                }
            }
            Inner::Libsvm {
                lines,
                line,
                columns,
            } => {
                while got < max_rows {
                    let Some(l) = lines.next() else { break };
                    *line += 1;
                    let l = l.map_err(|error| DataError::Io {
                        path: path.clone(),
                        error,
                    })?;
                    let content = l.split('#').next().unwrap_or("").trim();
                    if content.is_empty() {
                        continue;
                    }
                    let mut toks = content.split_whitespace();
                    let label = parse_cell(toks.next().unwrap_or(""), &path, *line, 0)?;
                    let start = x.len();
                    x.resize(start + p, 0.0);
                    for tok in toks {
                        let (i, v) = tok.split_once(':').unwrap_or((tok, ""));
                        let i: usize = i.parse().unwrap_or(usize::MAX);
                        let v = parse_cell(v, &path, *line, i)?;
                        let j = match columns {
                            LibsvmColumns::Offset(offset) => i - *offset,
                            LibsvmColumns::Compact(map) => map[&i],
                        };
                        x[start + j] = v;
                    }
                    y.push(label);
                    got += 1;
                }
            }
            Inner::Npy {
                file,
                map,
                start,
                fortran,
                big_endian,
                target,
                width,
                rows,
                buf,
            } => {
                let (width, target, rows, big_endian) = (*width, *target, *rows, *big_endian);
                let n = (max_rows as u64).min(rows - self.rows_read) as usize;
                if n == 0 {
                    return Ok(0);
                }
                let first = self.rows_read;
                let (x0, y0) = (x.len(), y.len());
                // Grown only once the batch's bytes are there (a failed read appends nothing).
                let grow = |x: &mut Vec<f64>, y: &mut Vec<f64>| {
                    x.resize(x0 + n * p, 0.0);
                    y.resize(y0 + n, 0.0);
                };
                if !*fortran {
                    // Row-major: the batch's rows are one contiguous run of bytes.
                    let at = *start + first * width as u64 * 8;
                    let len = n * width * 8;
                    let src: &[u8] = match map {
                        Some(m) => &m[at as usize..][..len],
                        None => {
                            buf.resize(len, 0);
                            file.seek(SeekFrom::Start(at))
                                .and_then(|_| file.read_exact(buf))
                                .map_err(|e| npy_read_error(path.clone(), e))?;
                            buf
                        }
                    };
                    grow(x, y);
                    let (xb, yb) = (&mut x[x0..], &mut y[y0..]);
                    for (r, row) in src.chunks_exact(width * 8).enumerate() {
                        let xr = &mut xb[r * p..(r + 1) * p];
                        let (before, rest) = row.split_at(target * 8);
                        let (t, after) = rest.split_at(8);
                        convert(before, &mut xr[..target], big_endian);
                        convert(after, &mut xr[target..], big_endian);
                        convert(t, std::slice::from_mut(&mut yb[r]), big_endian);
                    }
                } else {
                    // Column-major: each column's run of the batch's rows, from the map or read
                    // into `buf` one after another.
                    let run = |c: usize| *start + (c as u64 * rows + first) * 8;
                    let columns: Vec<&[u8]> = match map {
                        Some(m) => (0..width).map(|c| &m[run(c) as usize..][..n * 8]).collect(),
                        None => {
                            buf.resize(n * width * 8, 0);
                            for (c, dst) in buf.chunks_exact_mut(n * 8).enumerate() {
                                file.seek(SeekFrom::Start(run(c)))
                                    .and_then(|_| file.read_exact(dst))
                                    .map_err(|e| npy_read_error(path.clone(), e))?;
                            }
                            buf.chunks_exact(n * 8).collect()
                        }
                    };
                    grow(x, y);
                    let (xb, yb) = (&mut x[x0..], &mut y[y0..]);
                    convert(columns[target], yb, big_endian);
                    let features: Vec<&[u8]> = (0..width)
                        .filter(|&c| c != target)
                        .map(|c| columns[c])
                        .collect();
                    gather_columns(&features, xb, n, big_endian);
                }
                // One branch-free pass over the batch; the error names the first bad value.
                let (xb, yb) = (&x[x0..], &y[y0..]);
                if !all_finite(xb) || !all_finite(yb) {
                    let (r, c, v) = (0..n)
                        .flat_map(|r| (0..width).map(move |c| (r, c)))
                        .map(|(r, c)| {
                            let v = match c.cmp(&target) {
                                std::cmp::Ordering::Less => xb[r * p + c],
                                std::cmp::Ordering::Equal => yb[r],
                                std::cmp::Ordering::Greater => xb[r * p + c - 1],
                            };
                            (r, c, v)
                        })
                        .find(|(_, _, v)| !v.is_finite())
                        .expect("a value that is not finite");
                    x.truncate(x0);
                    y.truncate(y0);
                    return Err(DataError::File {
                        path,
                        msg: format!("row {}, column {c}: {v} is not finite", first + r as u64),
                    });
                }
                got = n;
            }
        }
        self.rows_read += got as u64;
        Ok(got)
    }
}

/// The values of a reader's memory-mapped NPY file and where the first row's feature 0 and
/// target lie among them, when it hands out rows where they lie (`RowReader::maps_rows`).
fn mapped_values(inner: &Inner) -> Option<(&[f64], usize, usize)> {
    let Inner::Npy {
        map: Some(map),
        start,
        big_endian: false,
        target,
        width,
        rows,
        fortran,
        ..
    } = inner
    else {
        return None;
    };
    let (width, target) = (*width, *target);
    if width < 2 || (target != 0 && target != width - 1) {
        return None;
    }
    let start = usize::try_from(*start).ok()?;
    let len = usize::try_from(*rows).ok()? * width * 8;
    let values: &[f64] = bytemuck::try_cast_slice(map.get(start..start + len)?).ok()?;
    // The next value of a feature and of the target: 1 along a row, `rows` down a column.
    let step = if *fortran { values.len() / width } else { 1 };
    let (x_at, y_at) = if target == 0 {
        (step, 0)
    } else {
        (0, (width - 1) * step)
    };
    Some((values, x_at, y_at))
}

/// A failed read of NPY data: running out of bytes means the file is truncated.
fn npy_read_error(path: PathBuf, error: std::io::Error) -> DataError {
    if error.kind() == std::io::ErrorKind::UnexpectedEof {
        DataError::File {
            path,
            msg: "file is shorter than its header says (truncated?)".into(),
        }
    } else {
        DataError::Io { path, error }
    }
}

/// The map of an NPY file's values, when the file is as long as its header says (a shorter
/// one is read instead, and its batches report where it ends) and the system maps it.
fn map_values(file: &File, start: u64, rows: u64, width: usize) -> Option<memmap2::Mmap> {
    let end = rows
        .checked_mul(width as u64)?
        .checked_mul(8)?
        .checked_add(start)?;
    let len = file.metadata().ok()?.len();
    if end == start || len < end || usize::try_from(len).is_err() {
        return None;
    }
    // SAFETY: the map is only read, as bytes. What `Mmap::map` cannot rule out is another
    // process changing the file while it is mapped: values written meanwhile are read as they
    // are (as with reads), and a file truncated meanwhile ends the process with SIGBUS, as it
    // would numpy's `np.load(mmap_mode="r")`. The readers are the command-line jobs on a file
    // the user names, never the service.
    unsafe { memmap2::Mmap::map(file) }.ok()
}

/// Little- or big-endian float64 bytes into `dst` (as many as it holds).
fn convert(src: &[u8], dst: &mut [f64], big_endian: bool) {
    let src = src
        .chunks_exact(8)
        .map(|b| <[u8; 8]>::try_from(b).expect("8 bytes"));
    if big_endian {
        dst.iter_mut()
            .zip(src)
            .for_each(|(d, b)| *d = f64::from_be_bytes(b));
    } else {
        dst.iter_mut()
            .zip(src)
            .for_each(|(d, b)| *d = f64::from_le_bytes(b));
    }
}

/// The rows of a batch from its feature columns (each `n` values, in column order), into the
/// row-major `x`: eight columns at a time, so each row's eight values land in one cache line
/// while eight runs are read in order.
fn gather_columns(columns: &[&[u8]], x: &mut [f64], n: usize, big_endian: bool) {
    let p = columns.len();
    let value = |b: &[u8], r: usize| {
        let b: [u8; 8] = b[r * 8..r * 8 + 8].try_into().expect("8 bytes");
        if big_endian {
            f64::from_be_bytes(b)
        } else {
            f64::from_le_bytes(b)
        }
    };
    for (g, group) in columns.chunks(8).enumerate() {
        let j0 = g * 8;
        for r in 0..n {
            let row = &mut x[r * p + j0..r * p + j0 + group.len()];
            for (d, c) in row.iter_mut().zip(group) {
                *d = value(c, r);
            }
        }
    }
}

/// Whether every value is finite, in one branch-free pass (it vectorizes).
fn all_finite(v: &[f64]) -> bool {
    const EXP: u64 = 0x7ff0_0000_0000_0000;
    v.iter()
        .fold(0u64, |bad, x| bad | ((x.to_bits() & EXP == EXP) as u64))
        == 0
}

fn csv_msg(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => {
            format!("{len} fields, the header has {expected_len}")
        }
        _ => e.to_string(),
    }
}

/// A whole file in memory: feature names (CSV header), p, row-major x and y.
pub type Table = (Option<Vec<String>>, usize, Vec<f64>, Vec<f64>);

/// Reads a whole file into memory (tests and small files only), within `max_bytes`.
pub fn read_all(path: &Path, target: Option<&str>, max_bytes: u64) -> Result<Table, DataError> {
    let opts = OpenOptions {
        target,
        ..OpenOptions::new(Budget {
            plan: Plan::Select { s: 0 },
            max_bytes,
            limit: "read_all".into(),
        })
    };
    let mut r = RowReader::open(path, &opts)?;
    let (mut x, mut y) = (vec![], vec![]);
    while r.next_batch(4096, &mut x, &mut y)? > 0 {}
    Ok((r.names.clone(), r.p, x, y))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file in the temp directory, removed when dropped.
    struct TempFile(PathBuf);
    impl TempFile {
        fn new(name: &str, bytes: &[u8]) -> TempFile {
            let dir = std::env::temp_dir().join(format!("ravel-data-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join(name);
            std::fs::write(&path, bytes).unwrap();
            TempFile(path)
        }
    }
    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    const GIB: u64 = 1 << 30;

    fn fit_budget(max_bytes: u64) -> Budget {
        Budget {
            plan: Plan::Stats {
                task: Task::Regression,
                batch_rows: 1024,
            },
            max_bytes,
            limit: "--max-memory".into(),
        }
    }

    fn open(path: &Path, budget: Budget, compact: bool) -> Result<RowReader, DataError> {
        let opts = OpenOptions {
            compact_features: compact,
            ..OpenOptions::new(budget)
        };
        RowReader::open(path, &opts)
    }

    /// An NPY v1 header for float64 data of this shape, followed by `body`.
    fn npy(shape: &str, fortran: bool, body: &[f64]) -> Vec<u8> {
        let mut dict = format!(
            "{{'descr': '<f8', 'fortran_order': {}, 'shape': {shape}, }}",
            if fortran { "True" } else { "False" }
        );
        while (10 + dict.len() + 1) % 64 != 0 {
            dict.push(' ');
        }
        dict.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        out.extend_from_slice(dict.as_bytes());
        for v in body {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    #[test]
    fn a_large_libsvm_index_is_refused_with_its_line_and_a_hint() {
        let f = TempFile::new("mid.svm", b"1 200000:2\n0 1:1\n");
        let e = open(&f.0, fit_budget(4 * GIB), false)
            .err()
            .expect("refused")
            .to_string();
        for part in [
            f.0.display().to_string().as_str(),
            "the largest feature index is 200000 (line 1), so p = 200000",
            "an estimated 1.2 TiB",
            "over the limit of 4.0 GiB (--max-memory)",
            "only 2 distinct feature indices: --compact-features renumbers them (p = 2",
            "Drop or hash features",
            "raise the limit",
        ] {
            assert!(e.contains(part), "'{part}' missing from: {e}");
        }
        // The same file opens under a limit it fits.
        let r = open(&f.0, Budget::unlimited(Plan::Rows { batch_rows: 2 }), false).unwrap();
        assert_eq!(r.p, 200_000);
    }

    #[test]
    fn compact_features_number_the_indices_used() {
        let f = TempFile::new(
            "sparse.libsvm",
            b"1.5 3:1 70000:2\n-2 999999:4 # comment 5:5\n\n0.5 3:-1 999999:1 70000:0.5\n",
        );
        let mut r = open(&f.0, fit_budget(GIB), true).unwrap();
        assert_eq!(r.p, 3);
        let names = r.names.clone().unwrap();
        assert_eq!(names, ["3", "70000", "999999"]);
        let (mut x, mut y) = (vec![], vec![]);
        while r.next_batch(2, &mut x, &mut y).unwrap() > 0 {}
        assert_eq!(y, [1.5, -2.0, 0.5]);
        assert_eq!(x, [1.0, 2.0, 0.0, 0.0, 0.0, 4.0, -1.0, 0.5, 1.0]);
        // Not compacted, the same file needs p = 999999 (indices from 1).
        let e = open(&f.0, fit_budget(GIB), false)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("index is 999999 (line 2), so p = 999999"), "{e}");
        assert!(e.contains("only 3 distinct"), "{e}");
        // Compaction is for LIBSVM files only.
        let c = TempFile::new("dense.csv", b"a,y\n1,2\n");
        let e = open(&c.0, fit_budget(GIB), true).err().unwrap().to_string();
        assert!(
            e.contains("--compact-features applies to LIBSVM files"),
            "{e}"
        );
    }

    #[test]
    fn a_wide_csv_header_is_refused_before_any_row() {
        let header: Vec<String> = (0..100_000).map(|j| format!("x{j}")).collect();
        // The row is malformed: refusing must not read it.
        let body = format!("{}\nnot,a,row\n", header.join(","));
        let f = TempFile::new("wide.csv", body.as_bytes());
        let e = open(&f.0, fit_budget(GIB), false)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("the header (line 1) has 100000 columns"), "{e}");
        assert!(
            e.contains("so p = 99999; the statistics (a p x p matrix"),
            "{e}"
        );
    }

    #[test]
    fn an_npy_header_is_checked_before_its_body() {
        let f = TempFile::new(
            "huge.npy",
            &npy("(1000000000000, 100000)", false, &[1.0; 4]),
        );
        let e = open(&f.0, fit_budget(4 * GIB), false)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("the header says 1000000000000 rows of 100000 columns"),
            "{e}"
        );
        // Fortran order is streamed by column, never held whole: a file of 1e8 rows opens
        // within a 1 GiB budget (and this one, cut short, fails when read).
        let f = TempFile::new("fortran.npy", &npy("(100000000, 3)", true, &[1.0; 4]));
        let mut r = open(&f.0, fit_budget(GIB), false).unwrap();
        let (mut x, mut y) = (vec![], vec![]);
        let e = r.next_batch(8, &mut x, &mut y).unwrap_err().to_string();
        assert!(e.contains("shorter than its header says"), "{e}");
        // A small Fortran file is read and transposed.
        let f = TempFile::new("small.npy", &npy("(2, 3)", true, &[1., 2., 3., 4., 5., 6.]));
        let mut r = open(&f.0, fit_budget(GIB), false).unwrap();
        let (mut x, mut y) = (vec![], vec![]);
        while r.next_batch(8, &mut x, &mut y).unwrap() > 0 {}
        assert_eq!((x, y), (vec![1., 3., 2., 4.], vec![5., 6.]));
    }

    /// The table of `cell(row, column)` in C and in Fortran order.
    fn orders(rows: usize, width: usize, cell: impl Fn(usize, usize) -> f64) -> [Vec<f64>; 2] {
        let order = |at: &dyn Fn(usize) -> (usize, usize)| {
            (0..rows * width)
                .map(|k| {
                    let (r, c) = at(k);
                    cell(r, c)
                })
                .collect()
        };
        [
            order(&|k| (k / width, k % width)),
            order(&|k| (k % rows, k / rows)),
        ]
    }

    #[test]
    fn npy_orders_and_byte_orders_give_the_same_rows_in_any_batch_size() {
        // 5 and 150 rows of 4 and 21 columns (two full groups of eight features and a
        // partial one, where Fortran order is gathered eight columns at a time), the target
        // the second column; batch sizes that divide the rows and that leave a partial last
        // batch. Every cell holds a different value.
        let cell = |r: usize, c: usize| (r * 100 + c) as f64 + 0.5;
        for (rows, width) in [(5usize, 4usize), (150, 4), (5, 21), (150, 21)] {
            let shape = format!("({rows}, {width})");
            let [c_order, f_order] = orders(rows, width, cell);
            let mut want_x = vec![];
            let mut want_y = vec![];
            for r in 0..rows {
                for c in 0..width {
                    if c == 1 {
                        want_y.push(cell(r, c))
                    } else {
                        want_x.push(cell(r, c))
                    }
                }
            }
            let big = |fortran: bool, body: &[f64]| {
                let mut b = npy(&shape, fortran, &[]);
                let at = b.iter().position(|&c| c == b'<').unwrap();
                b[at] = b'>';
                for v in body {
                    b.extend_from_slice(&v.to_be_bytes());
                }
                b
            };
            let files = [
                ("c.npy", npy(&shape, false, &c_order)),
                ("f.npy", npy(&shape, true, &f_order)),
                ("cb.npy", big(false, &c_order)),
                ("fb.npy", big(true, &f_order)),
            ];
            for (name, bytes) in files {
                let f = TempFile::new(name, &bytes);
                for batch in [1, 2, 3, 5, 8, 63, 64, 65, 100, 150, 1000] {
                    let opts = OpenOptions {
                        target: Some("1"),
                        ..OpenOptions::new(fit_budget(GIB))
                    };
                    let mut r = RowReader::open(&f.0, &opts).unwrap();
                    let (mut x, mut y) = (vec![], vec![]);
                    while r.next_batch(batch, &mut x, &mut y).unwrap() > 0 {}
                    assert_eq!(
                        (&x, &y),
                        (&want_x, &want_y),
                        "{rows} rows of {width}, {name}, batches of {batch}"
                    );
                    assert_eq!(r.rows_read(), rows as u64);
                }
            }
        }
        let (rows, width) = (5, 4);
        let [c_order, f_order] = orders(rows, width, cell);
        // A NaN names its row and column, in either order; the batch appends nothing.
        let mut bad_f = f_order.clone();
        bad_f[2 * rows + 3] = f64::NAN;
        let mut bad_c = c_order.clone();
        bad_c[3 * width + 2] = f64::INFINITY;
        for (name, bytes) in [
            ("nan_f.npy", npy("(5, 4)", true, &bad_f)),
            ("inf_c.npy", npy("(5, 4)", false, &bad_c)),
        ] {
            let f = TempFile::new(name, &bytes);
            let mut r = open(&f.0, fit_budget(GIB), false).unwrap();
            let (mut x, mut y) = (vec![1.0], vec![2.0]);
            let e = r.next_batch(8, &mut x, &mut y).unwrap_err().to_string();
            assert!(e.contains("row 3, column 2"), "{name}: {e}");
            assert_eq!((x, y), (vec![1.0], vec![2.0]), "{name}");
        }
    }

    #[test]
    fn mapped_rows_are_the_rows_next_batch_gives() {
        // 150 rows of 21 columns in either order, the target first or last: the strided rows
        // `next_mapped` hands out are `next_batch`'s rows, in any batch size. A target in the
        // middle, big-endian values and a short file are not mapped that way.
        let (rows, width) = (150usize, 21usize);
        let cell = |r: usize, c: usize| (r * 100 + c) as f64 + 0.5;
        let shape = format!("({rows}, {width})");
        let [c_order, f_order] = orders(rows, width, cell);
        let opts = |target| OpenOptions {
            target: Some(target),
            ..OpenOptions::new(fit_budget(GIB))
        };
        for (name, fortran, body) in [("m_c.npy", false, &c_order), ("m_f.npy", true, &f_order)] {
            let f = TempFile::new(name, &npy(&shape, fortran, body));
            for target in ["0", "20"] {
                let mut want = RowReader::open(&f.0, &opts(target)).unwrap();
                let (mut want_x, mut want_y) = (vec![], vec![]);
                while want.next_batch(1000, &mut want_x, &mut want_y).unwrap() > 0 {}
                for batch in [1, 7, 64, 150, 1000] {
                    let mut r = RowReader::open(&f.0, &opts(target)).unwrap();
                    assert!(r.maps_rows(), "{name}, target {target}");
                    let (mut x, mut y) = (vec![], vec![]);
                    while let Some(b) = r.next_mapped(batch).unwrap() {
                        assert!(b.rows <= batch);
                        for i in 0..b.rows {
                            for j in 0..width - 1 {
                                x.push(b.x[i * b.row_stride + j * b.col_stride]);
                            }
                            y.push(b.y[i * b.y_stride]);
                        }
                    }
                    assert_eq!(r.rows_read(), rows as u64);
                    assert_eq!(
                        (&x, &y),
                        (&want_x, &want_y),
                        "{name}, target {target}, batches of {batch}"
                    );
                }
                let middle = RowReader::open(&f.0, &opts("3")).unwrap();
                assert!(!middle.maps_rows(), "{name}: target in the middle");
            }
            let mut short = npy(&shape, fortran, body);
            short.truncate(short.len() - 8);
            let f = TempFile::new(&format!("short_{name}"), &short);
            assert!(!RowReader::open(&f.0, &opts("20")).unwrap().maps_rows());
        }
        let mut big = npy(&shape, false, &[]);
        let at = big.iter().position(|&c| c == b'<').unwrap();
        big[at] = b'>';
        for v in &c_order {
            big.extend_from_slice(&v.to_be_bytes());
        }
        let f = TempFile::new("m_big.npy", &big);
        assert!(!RowReader::open(&f.0, &opts("20")).unwrap().maps_rows());
        // A value that is not finite is handed out (the fold refuses it), and named with its
        // row and column as next_batch names it.
        for (name, fortran, at) in [
            ("m_nan_c.npy", false, 70 * width + 4),
            ("m_nan_f.npy", true, 4 * rows + 70),
        ] {
            let mut body = if fortran {
                f_order.clone()
            } else {
                c_order.clone()
            };
            body[at] = f64::NEG_INFINITY;
            let f = TempFile::new(name, &npy(&shape, fortran, &body));
            let mut r = RowReader::open(&f.0, &opts("20")).unwrap();
            assert!(r.next_mapped(64).unwrap().is_some());
            assert!(r.mapped_non_finite(0, 64).is_none(), "{name}");
            assert!(r.next_mapped(64).unwrap().is_some());
            let e = r.mapped_non_finite(64, 64).unwrap().to_string();
            let mut plain = RowReader::open(&f.0, &opts("20")).unwrap();
            let want = loop {
                match plain.next_batch(64, &mut vec![], &mut vec![]) {
                    Ok(_) => {}
                    Err(e) => break e.to_string(),
                }
            };
            assert_eq!(e, want, "{name}");
            assert!(
                e.contains("row 70, column 4: -inf is not finite"),
                "{name}: {e}"
            );
        }
    }

    #[test]
    fn a_short_npy_file_gives_its_rows_up_to_where_it_ends() {
        // A file shorter than its header says is not mapped but read batch by batch: the
        // batches before its end come out whole and right (in either order), the one that
        // reaches past it fails and appends nothing.
        let (rows, width) = (40usize, 11usize);
        let cell = |r: usize, c: usize| (r * 100 + c) as f64 + 0.25;
        let shape = format!("({rows}, {width})");
        let [c_order, f_order] = orders(rows, width, cell);
        for (name, fortran, body, whole_batches) in [
            // C order, the last row cut short: rows 0..32 in batches of 8.
            ("short_c.npy", false, &c_order, 4),
            // Fortran order, the last value of the last column missing: every batch but the
            // one holding the last row.
            ("short_f.npy", true, &f_order, 4),
        ] {
            let mut bytes = npy(&shape, fortran, body);
            bytes.truncate(bytes.len() - 8);
            let f = TempFile::new(name, &bytes);
            let opts = OpenOptions {
                target: Some("1"),
                ..OpenOptions::new(fit_budget(GIB))
            };
            let mut r = RowReader::open(&f.0, &opts).unwrap();
            let (mut x, mut y) = (vec![], vec![]);
            let e = loop {
                match r.next_batch(8, &mut x, &mut y) {
                    Ok(0) => panic!("{name}: read to the end"),
                    Ok(_) => {}
                    Err(e) => break e.to_string(),
                }
            };
            assert!(e.contains("shorter than its header says"), "{name}: {e}");
            let got = whole_batches * 8;
            assert_eq!(r.rows_read(), got as u64, "{name}");
            let want_x: Vec<f64> = (0..got)
                .flat_map(|r| (0..width).filter(|&c| c != 1).map(move |c| cell(r, c)))
                .collect();
            let want_y: Vec<f64> = (0..got).map(|r| cell(r, 1)).collect();
            assert_eq!((x, y), (want_x, want_y), "{name}");
        }
    }

    #[test]
    fn select_counts_the_rows_it_will_hold() {
        let mut body = String::from("a,b,y\n");
        for i in 0..1000 {
            body.push_str(&format!("{i},1,2\n"));
        }
        let f = TempFile::new("rows.csv", body.as_bytes());
        let budget = |max_bytes| Budget {
            plan: Plan::Select { s: 1 },
            max_bytes,
            limit: "--max-memory".into(),
        };
        let e = open(&f.0, budget(10_000), false).err().unwrap().to_string();
        assert!(
            e.contains("has 3 columns, so p = 2, and n = 1000 rows"),
            "{e}"
        );
        assert!(e.contains("a selection of s = 1"), "{e}");
        let r = open(&f.0, budget(1 << 20), false).unwrap();
        assert_eq!(r.p, 2);
    }
}
