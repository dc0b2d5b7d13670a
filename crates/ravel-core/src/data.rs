//! Streaming readers for the row files ravel learns from offline (`ravel fit`, `ravel produce`):
//! CSV with a header row, LIBSVM (`label idx:value ...`) and NPY (2-D float64).
//!
//! Rows come out in mini-batches (row-major x, and y) so that a file of any length is folded
//! into `RunningStats` without being held in memory. Every error names the line (or row) and
//! column so the user can fix the file.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The I/O error is part of the message, not a `source()`: the CLI prints error chains
    /// (`{:#}`), which would repeat it.
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}: line {line}: {msg}")]
    Line {
        path: PathBuf,
        line: u64,
        msg: String,
    },
    #[error("{path}: {msg}")]
    File { path: PathBuf, msg: String },
}

/// File formats, chosen from the extension (`.csv`, `.npy`, anything else is LIBSVM when its
/// first line looks like `label idx:value`, CSV otherwise) or named explicitly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Libsvm,
    Npy,
}

impl Format {
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

/// A row source: feature names, p, and batches of rows.
pub struct RowReader {
    pub path: PathBuf,
    pub format: Format,
    /// Feature names (CSV header without the target) or None (columns are named by index).
    pub names: Option<Vec<String>>,
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
        offset: usize,
    },
    Npy {
        data: Box<dyn Iterator<Item = std::io::Result<f64>>>,
        target: usize,
        width: usize,
        rows: u64,
    },
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
    pub fn open(
        path: &Path,
        target: Option<&str>,
        format: Option<Format>,
    ) -> Result<RowReader, DataError> {
        let format = match format {
            Some(f) => f,
            None => Format::detect(path)?,
        };
        let io = |error| DataError::Io {
            path: path.into(),
            error,
        };
        let file = File::open(path).map_err(io)?;
        let (names, p, inner) = match format {
            Format::Csv => {
                let delim = if path.extension().is_some_and(|e| e == "tsv") {
                    b'\t'
                } else {
                    b','
                };
                let mut reader = csv::ReaderBuilder::new()
                    .delimiter(delim)
                    .has_headers(true)
                    .trim(csv::Trim::All)
                    .from_reader(BufReader::new(file));
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
                // First pass: the number of features and whether indices start at 0 or 1.
                let (mut min_idx, mut max_idx) = (usize::MAX, 0usize);
                let mut any = false;
                for (i, line) in BufReader::new(file).lines().enumerate() {
                    let line = line.map_err(io)?;
                    for tok in line
                        .split('#')
                        .next()
                        .unwrap_or("")
                        .split_whitespace()
                        .skip(1)
                    {
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
                        max_idx = max_idx.max(idx);
                        any = true;
                    }
                }
                if !any {
                    return Err(DataError::File {
                        path: path.into(),
                        msg: "no features found".into(),
                    });
                }
                let offset = if min_idx == 0 { 0 } else { 1 };
                let p = max_idx + 1 - offset;
                let file = File::open(path).map_err(io)?;
                (
                    None,
                    p,
                    Inner::Libsvm {
                        lines: BufReader::new(file).lines(),
                        line: 0,
                        offset,
                    },
                )
            }
            Format::Npy => {
                let mut reader = BufReader::new(file);
                let npy = npyz::NpyFile::new(&mut reader).map_err(io)?;
                let shape = npy.shape().to_vec();
                if shape.len() != 2 {
                    return Err(DataError::File {
                        path: path.into(),
                        msg: format!("expected a 2-D array, got shape {shape:?}"),
                    });
                }
                let (rows, width) = (shape[0], shape[1] as usize);
                let t = resolve_target(target, None, width, path)?;
                let fortran = npy.order() == npyz::Order::Fortran;
                let wrong_type = |_| DataError::File {
                    path: path.into(),
                    msg: "expected float64 data (dtype '<f8')".into(),
                };
                let data: Box<dyn Iterator<Item = std::io::Result<f64>>> = if fortran {
                    // Column-major files cannot be streamed by row: transpose in memory.
                    let v: Vec<f64> = npy
                        .data::<f64>()
                        .map_err(wrong_type)?
                        .collect::<Result<_, _>>()
                        .map_err(|e| npy_read_error(path.into(), e))?;
                    let r = rows as usize;
                    let t: Vec<f64> = (0..r * width)
                        .map(|k| v[(k % width) * r + k / width])
                        .collect();
                    Box::new(t.into_iter().map(Ok))
                } else {
                    drop(npy);
                    // Re-open and stream: npyz's reader borrows; this keeps the iterator 'static.
                    let mut f = File::open(path).map_err(io)?;
                    let hdr = npyz::NpyHeader::from_reader(&mut f).map_err(io)?;
                    let pos = f.stream_position().map_err(io)?;
                    let mut f = BufReader::new(f);
                    f.seek(SeekFrom::Start(pos)).map_err(io)?;
                    let file = npyz::NpyFile::with_header(hdr, f);
                    Box::new(file.data::<f64>().map_err(wrong_type)?)
                };
                (
                    None,
                    width - 1,
                    Inner::Npy {
                        data,
                        target: t,
                        width,
                        rows,
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

    pub fn rows_read(&self) -> u64 {
        self.rows_read
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
                offset,
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
                        x[start + i - *offset] = v;
                    }
                    y.push(label);
                    got += 1;
                }
            }
            Inner::Npy {
                data,
                target,
                width,
                rows,
            } => {
                while got < max_rows && self.rows_read + (got as u64) < *rows {
                    let row = self.rows_read + got as u64;
                    for c in 0..*width {
                        let v = match data.next() {
                            Some(Ok(v)) => v,
                            Some(Err(error)) => return Err(npy_read_error(path, error)),
                            None => {
                                return Err(DataError::File {
                                    path,
                                    msg: "file is shorter than its header says".into(),
                                });
                            }
                        };
                        if !v.is_finite() {
                            return Err(DataError::File {
                                path,
                                msg: format!("row {row}, column {c}: {v} is not finite"),
                            });
                        }
                        if c == *target { y.push(v) } else { x.push(v) }
                    }
                    got += 1;
                }
            }
        }
        self.rows_read += got as u64;
        Ok(got)
    }
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

/// Reads a whole file into memory (tests and small files only).
pub fn read_all(path: &Path, target: Option<&str>) -> Result<Table, DataError> {
    let mut r = RowReader::open(path, target, None)?;
    let (mut x, mut y) = (vec![], vec![]);
    while r.next_batch(4096, &mut x, &mut y)? > 0 {}
    Ok((r.names.clone(), r.p, x, y))
}
