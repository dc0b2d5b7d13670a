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

//!
//! Files: `budget` (what a caller builds from the rows, `Plan`, and the check of a file's
//! dimensions against its `Budget`), one file per format (`csv`, `libsvm`, `npy`: how each is
//! opened and read; `npy` holds the memory map, the module's only `unsafe`), and here the
//! types every format shares (`RowReader`, `DataError`, `Format`, `OpenOptions`).

mod budget;
pub mod csc;
mod csv;
mod libsvm;
#[allow(unsafe_code)] // the memory map of an NPY file (`map_values`)
mod npy;

pub use budget::{Budget, Plan};

use self::csv::CsvRows;
use crate::fields::{Field, Missing};
use budget::Dimensions;
use libsvm::LibsvmRows;
use npy::NpyRows;
use std::fs::File;
use std::io::{BufRead, BufReader};
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
    /// How CSV columns become features (categorical, hashed, missing values); the default
    /// reads every column as a number and refuses missing cells.
    pub fields: FieldOptions,
}

/// How a CSV file's columns become features (`crate::fields`): by default every column but
/// the target is numeric and a missing cell is an error.
#[derive(Debug, Clone, Default)]
pub struct FieldOptions {
    /// Fields declared in full (a stream's configuration): only these columns are read, by
    /// header name; the file's other columns are ignored.
    pub declared: Option<Vec<Field>>,
    /// Columns read as categories: `name` (levels found in the file, sorted, the first the
    /// reference) or with declared levels (others go to `<name>=other`).
    pub categorical: Vec<(String, Option<Vec<String>>)>,
    /// Columns hashed into a number of buckets.
    pub hashed: Vec<(String, usize)>,
    /// What a missing cell (empty, `NA`, `null`, ...) does in a column not declared in full.
    pub missing: Missing,
}

impl FieldOptions {
    /// Whether these are the defaults (every column a number, no missing cell).
    pub fn is_plain(&self) -> bool {
        self.declared.is_none()
            && self.categorical.is_empty()
            && self.hashed.is_empty()
            && self.missing == Missing::Reject
    }
}

impl<'a> OpenOptions<'a> {
    /// Options with the defaults (last column as target, format detected) and `budget`.
    pub fn new(budget: Budget) -> OpenOptions<'a> {
        OpenOptions {
            target: None,
            format: None,
            compact_features: false,
            budget,
            fields: FieldOptions::default(),
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

/// A reader of one format, positioned at its next row.
enum Inner {
    Csv(CsvRows),
    Libsvm(LibsvmRows),
    /// NPY float64, read in bulk: the file is memory-mapped when it is as long as its header
    /// says, and a batch is converted from the mapped pages (no read into a buffer first); a
    /// Fortran-order (column-major) batch is gathered from its columns' runs eight features
    /// at a time, so each row of the batch is written a cache line at a time. Without a map
    /// (a short file, or one the system would not map) a batch is one read of its rows, or
    /// one read per column, into `buf`. Neither order is ever held whole in memory. When the
    /// target is the first or last column, `next_mapped` hands out the mapped rows themselves.
    Npy(NpyRows),
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
            // One column whose name holds another separator: a file separated by semicolons
            // or tabs read as commas.
            let sep = header
                .and_then(|h| h.first())
                .and_then(|n| [';', '\t', '|'].into_iter().find(|c| n.contains(*c)));
            let hint = match sep {
                Some('\t') => " (the header holds tabs: name the file .tsv)".to_string(),
                Some(c) => format!(
                    " (the header holds '{c}': ravel reads commas; convert the file, e.g. \
                     tr '{c}' ',' < in.csv > out.csv, when no value holds a comma)"
                ),
                None => String::new(),
            };
            Err(err(format!(
                "need at least two columns (features and a target){hint}"
            )))
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
        Err(_) => {
            // The name as the header spells it, when only the case differs.
            let hint = header
                .and_then(|h| h.iter().find(|n| n.eq_ignore_ascii_case(t)))
                .map(|n| format!(" (did you mean --target {n}?)"))
                .unwrap_or_default();
            Err(err(format!(
                "target '{t}' is neither a header name nor a column index{hint}"
            )))
        }
    }
}

/// Whether a cell stands for a missing value: empty, or `NA`, `N/A`, `NaN`, `null`, `None`,
/// `?`, `-` (any case).
pub fn is_missing(cell: &str) -> bool {
    let t = cell.trim();
    t.is_empty()
        || ["na", "n/a", "nan", "null", "none", "?", "-"]
            .iter()
            .any(|m| t.eq_ignore_ascii_case(m))
}

/// A cell as a number; `column` names its column for the error ("column 'region'", only
/// formatted when the cell is refused). The message says what to do: a missing value or text
/// where a number belongs is the usual mistake, not a broken file.
fn parse_cell(
    cell: &str,
    path: &Path,
    line: u64,
    column: impl FnOnce() -> String,
) -> Result<f64, DataError> {
    let refuse = |msg: String| DataError::Line {
        path: path.into(),
        line,
        msg,
    };
    let v: f64 = match cell.trim().parse() {
        Ok(v) => v,
        Err(_) => {
            let column = column();
            // "column 'region'" names the flag's argument: region.
            let name = column
                .split('\'')
                .nth(1)
                .filter(|_| column.starts_with("column '") && !column.ends_with("(the target)"));
            let hint = match (is_missing(cell), name) {
                (true, _) => "(a missing value): fill it, or read missing cells with --missing \
                              skip_row (leave the row out) or --missing indicator (0 plus a 0/1 \
                              column <name>=missing)"
                    .to_string(),
                (false, Some(name)) => format!(
                    "(text): declare the column categorical (--categorical {name}) or hashed \
                     (--hashed {name}:<buckets>), or drop it"
                ),
                (false, None) => "(text)".to_string(),
            };
            return Err(refuse(format!("{column}: '{cell}' is not a number {hint}")));
        }
    };
    if !v.is_finite() {
        return Err(refuse(format!("{}: {cell} is not finite", column())));
    }
    Ok(v)
}

impl RowReader {
    /// Opens a file: reads its dimensions, refuses it when what `opts.budget.plan` builds
    /// from them needs more than the budget, and returns the reader positioned at the first
    /// row.
    pub fn open(path: &Path, opts: &OpenOptions) -> Result<RowReader, DataError> {
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
        if !opts.fields.is_plain() && format != Format::Csv {
            return Err(DataError::File {
                path: path.into(),
                msg: "--categorical, --hashed and --missing apply to CSV files (columns with \
                      names and text cells)"
                    .into(),
            });
        }
        let file = File::open(path).map_err(io)?;
        let (names, p, inner) = match format {
            Format::Csv => self::csv::open(path, file, opts)?,
            Format::Libsvm => libsvm::open(path, file, opts)?,
            Format::Npy => npy::open(path, file, opts)?,
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

    /// Rows left out because a value was missing (`FieldOptions::missing = SkipRow`).
    pub fn rows_skipped(&self) -> u64 {
        match &self.inner {
            Inner::Csv(r) => r.skipped(),
            _ => 0,
        }
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
        let got = match &mut self.inner {
            Inner::Csv(r) => r.next_batch(path, max_rows, x, y)?,
            Inner::Libsvm(r) => r.next_batch(path, p, max_rows, x, y)?,
            Inner::Npy(r) => r.next_batch(path, p, self.rows_read, max_rows, x, y)?,
        };
        self.rows_read += got as u64;
        Ok(got)
    }
}

/// A whole file in memory (`read_all`).
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Feature names (the CSV header without the target), or None.
    pub names: Option<Vec<String>>,
    /// Number of features.
    pub p: usize,
    /// The rows, row-major (n x p).
    pub x: Vec<f64>,
    /// The targets.
    pub y: Vec<f64>,
}

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
    Ok(Table {
        names: r.names.clone(),
        p: r.p,
        x,
        y,
    })
}

/// Test files and budgets the formats' tests share.
#[cfg(test)]
mod testing {
    use super::*;
    use crate::task::Task;

    /// A file in the temp directory, removed when dropped.
    pub(super) struct TempFile(pub(super) PathBuf);
    impl TempFile {
        pub(super) fn new(name: &str, bytes: &[u8]) -> TempFile {
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

    pub(super) const GIB: u64 = 1 << 30;

    pub(super) fn fit_budget(max_bytes: u64) -> Budget {
        Budget {
            plan: Plan::Stats {
                task: Task::Regression,
                batch_rows: 1024,
            },
            max_bytes,
            limit: "--max-memory".into(),
        }
    }

    pub(super) fn open(path: &Path, budget: Budget, compact: bool) -> Result<RowReader, DataError> {
        let opts = OpenOptions {
            compact_features: compact,
            ..OpenOptions::new(budget)
        };
        RowReader::open(path, &opts)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[test]
    fn read_all_gives_the_names_p_and_rows() {
        let f = TempFile::new("all.csv", b"a,b,y\n1,2,3\n4,5,6\n");
        let t = read_all(&f.0, None, GIB).unwrap();
        let names = Some(vec!["a".to_string(), "b".to_string()]);
        assert_eq!(
            t,
            Table {
                names,
                p: 2,
                x: vec![1.0, 2.0, 4.0, 5.0],
                y: vec![3.0, 6.0],
            }
        );
    }
}
