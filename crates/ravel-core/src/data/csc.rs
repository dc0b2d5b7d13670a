//! A file held column-major and sparse (`Csc`), for paper 004's raw-data Frank-Wolfe path on
//! wide data (p up to millions, far above n), where the running statistics' p x p matrix
//! cannot exist. Only the nonzeros are kept: O(nnz + n + p) memory, 12 bytes a nonzero (a u32
//! row and an f64 value) plus a column offset per feature and the targets.
//!
//! A file is read twice and the matrix allocated once, at its final size. The first read
//! checks every row (indices increasing, within a declared p, values finite) and counts the
//! nonzeros of each column in an O(p) vector; the bytes the matrix and the solver's vectors
//! will take ([`wide_bytes`]) are then checked against the [`Budget`] before anything that
//! grows with nnz is allocated; the second read puts each value in its place. Building the
//! rows first (CSR) and transposing would hold two copies at the peak.
//!
//! LIBSVM files are parsed here (a row as tokens, never as a dense p-vector); NPY and CSV
//! files go through `RowReader` in batches of rows and keep their nonzeros.
//!
//! An empty column (an index the file never uses, or an all-zero NPY column) is allowed and
//! counted (`Csc::empty_columns`): its gradient is always 0, so the solver never picks it,
//! and LIBSVM files of text features have many (E2006-log1p).

use super::{Budget, DataError, Format, OpenOptions, Plan, RowReader};
use crate::memory::ByteSize;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// A matrix in compressed sparse column form, with the targets of its rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Csc {
    /// Rows.
    pub n: usize,
    /// Columns (features).
    pub p: usize,
    /// Column j's nonzeros are `rows[col_ptr[j]..col_ptr[j + 1]]` (p + 1 offsets).
    pub col_ptr: Vec<usize>,
    /// Row of each nonzero, increasing within a column.
    pub rows: Vec<u32>,
    /// Value of each nonzero.
    pub values: Vec<f64>,
    /// The targets (n).
    pub y: Vec<f64>,
    /// Feature names (a wide feature stream's), or None: column j is named by its file
    /// index, `first_index + j` (no string per column: E2006-log1p has 4.27 M of them).
    pub names: Option<Vec<String>>,
    /// Columns without a nonzero.
    pub empty_columns: usize,
    /// The file's index of column 0: 0 or 1 (LIBSVM), 0 (NPY, CSV).
    pub first_index: usize,
}

impl Csc {
    /// The nonzeros.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// Column j: its rows and values.
    #[inline]
    pub fn column(&self, j: usize) -> (&[u32], &[f64]) {
        let (a, b) = (self.col_ptr[j], self.col_ptr[j + 1]);
        (&self.rows[a..b], &self.values[a..b])
    }

    /// z_j^T v for an n-vector v (`sparse_dot`).
    #[inline]
    pub fn dot(&self, j: usize, v: &[f64]) -> f64 {
        let (r, x) = self.column(j);
        sparse_dot(r, x, v)
    }

    /// The name of column j: its name, or the file's index.
    pub fn name(&self, j: usize) -> String {
        match &self.names {
            Some(n) => n[j].clone(),
            None => (self.first_index + j).to_string(),
        }
    }

    /// The bytes of the arrays (`csc_bytes` of this matrix).
    pub fn bytes(&self) -> u64 {
        csc_bytes(self.n as u64, self.p as u64, self.nnz() as u64)
    }

    /// Builds a matrix from sparse columns (rows increasing within each, below n) and the
    /// targets: a wide feature stream's kept columns. `nnz` is their total (the capacity).
    pub fn from_columns<'c>(
        y: Vec<f64>,
        columns: impl IntoIterator<Item = (&'c [u32], &'c [f64])>,
        nnz: usize,
        names: Option<Vec<String>>,
    ) -> Csc {
        let mut col_ptr = vec![0];
        let mut rows = Vec::with_capacity(nnz);
        let mut values = Vec::with_capacity(nnz);
        let mut empty_columns = 0;
        for (r, v) in columns {
            empty_columns += r.is_empty() as usize;
            rows.extend_from_slice(r);
            values.extend_from_slice(v);
            col_ptr.push(rows.len());
        }
        Csc {
            n: y.len(),
            p: col_ptr.len() - 1,
            col_ptr,
            rows,
            values,
            y,
            names,
            empty_columns,
            first_index: 0,
        }
    }

    /// Builds a matrix from dense row-major rows (tests, small problems).
    pub fn from_dense(x: &[f64], y: &[f64], p: usize) -> Csc {
        let n = y.len();
        let mut counts = vec![0usize; p];
        for row in x.chunks_exact(p.max(1)) {
            for (c, v) in counts.iter_mut().zip(row) {
                *c += (*v != 0.0) as usize;
            }
        }
        let mut b = Builder::new(n, counts, None);
        for (i, row) in x.chunks_exact(p.max(1)).enumerate() {
            for (j, &v) in row.iter().enumerate() {
                if v != 0.0 {
                    b.push(i, j, v);
                }
            }
        }
        b.finish(y.to_vec())
    }
}

/// `sum_k vals[k] v[rows[k]]`: in order below 8 nonzeros; from 8 on in four running sums
/// (lane k % 4), added pairwise, then the last len % 4 products in order, so a frequent
/// column's thousands of products do not wait on one running sum. One order for a given
/// column, whoever asks.
#[inline]
pub fn sparse_dot(rows: &[u32], vals: &[f64], v: &[f64]) -> f64 {
    debug_assert_eq!(rows.len(), vals.len());
    if rows.len() < 8 {
        let mut s = 0.0;
        for (&i, &x) in rows.iter().zip(vals) {
            s += x * v[i as usize];
        }
        return s;
    }
    let mut a = [0.0; 4];
    let (rc, xc) = (rows.chunks_exact(4), vals.chunks_exact(4));
    let (rt, xt) = (rc.remainder(), xc.remainder());
    for (r, x) in rc.zip(xc) {
        a[0] += x[0] * v[r[0] as usize];
        a[1] += x[1] * v[r[1] as usize];
        a[2] += x[2] * v[r[2] as usize];
        a[3] += x[3] * v[r[3] as usize];
    }
    let mut s = (a[0] + a[2]) + (a[1] + a[3]);
    for (&i, &x) in rt.iter().zip(xt) {
        s += x * v[i as usize];
    }
    s
}

/// Bytes of a CSC matrix: 12 a nonzero, 8 per column offset and per target.
pub fn csc_bytes(n: u64, p: u64, nnz: u64) -> u64 {
    nnz.saturating_mul(12)
        .saturating_add(p.saturating_add(1).saturating_mul(8))
        .saturating_add(n.saturating_mul(8))
}

/// Bytes of the matrix and the raw-data solver's vectors (`wide::WideProblem` and its
/// iterate): per column the mean, squared norm, a correlation and the coefficient (32 bytes),
/// per used column (at most p) its index, its nonzeros' place, first nonzero and mean in the
/// compact array the solver reads and a bit of the randomized rule's draw (`wide::sample`: 36
/// bytes and a bit, counted as 37), eight n-vectors, and the Gram block of the active
/// columns' cache (at most 2048 columns: min(p, 2048)^2 doubles).
pub fn wide_bytes(n: u64, p: u64, nnz: u64) -> u64 {
    let cached = p.min(2048);
    csc_bytes(n, p, nnz)
        .saturating_add(p.saturating_mul(69))
        .saturating_add(n.saturating_mul(64))
        .saturating_add(cached * cached * 8)
}

/// How a wide file is read.
#[derive(Debug, Clone)]
pub struct CscOptions<'a> {
    /// Target column of an NPY or CSV file (default the last).
    pub target: Option<&'a str>,
    /// The format, or None to detect it.
    pub format: Option<Format>,
    /// The number of features the file declares (`--features`): a larger index is an error.
    pub p: Option<usize>,
    /// The memory limit (its plan is ignored: the estimate is `wide_bytes`).
    pub budget: Budget,
}

/// Fills the arrays in place once the counts are known.
struct Builder {
    n: usize,
    col_ptr: Vec<usize>,
    next: Vec<usize>,
    rows: Vec<u32>,
    values: Vec<f64>,
    names: Option<Vec<String>>,
}

impl Builder {
    fn new(n: usize, counts: Vec<usize>, names: Option<Vec<String>>) -> Builder {
        let mut col_ptr = Vec::with_capacity(counts.len() + 1);
        let mut acc = 0usize;
        col_ptr.push(0);
        for c in &counts {
            acc += c;
            col_ptr.push(acc);
        }
        let mut next = counts;
        next.copy_from_slice(&col_ptr[..col_ptr.len() - 1]);
        Builder {
            n,
            col_ptr,
            next,
            rows: vec![0; acc],
            values: vec![0.0; acc],
            names,
        }
    }

    /// Row i's value in column j; rows come in increasing order.
    #[inline]
    fn push(&mut self, i: usize, j: usize, v: f64) {
        let k = self.next[j];
        self.rows[k] = i as u32;
        self.values[k] = v;
        self.next[j] = k + 1;
    }

    fn finish(self, y: Vec<f64>) -> Csc {
        let p = self.col_ptr.len() - 1;
        let empty_columns = self.col_ptr.windows(2).filter(|w| w[0] == w[1]).count();
        Csc {
            n: self.n,
            p,
            col_ptr: self.col_ptr,
            rows: self.rows,
            values: self.values,
            y,
            names: self.names,
            empty_columns,
            first_index: 0,
        }
    }
}

/// Reads a file into a `Csc` within the budget (see the module's comment).
pub fn read_csc(path: &Path, opts: &CscOptions) -> Result<Csc, DataError> {
    let format = match opts.format {
        Some(f) => f,
        None => Format::detect(path)?,
    };
    match format {
        Format::Libsvm => read_libsvm(path, opts),
        Format::Npy | Format::Csv => read_rows(path, format, opts, 1 << 20),
    }
}

/// The budget check once the dimensions and nonzeros are known.
fn check_budget(
    path: &Path,
    n: u64,
    p: u64,
    nnz: u64,
    driver: &str,
    budget: &Budget,
) -> Result<(), DataError> {
    let need = wide_bytes(n, p, nnz);
    if need <= budget.max_bytes {
        return Ok(());
    }
    Err(DataError::File {
        path: path.into(),
        msg: format!(
            "too large for the memory limit: {driver}, n = {n} rows and {nnz} nonzeros; the \
             sparse columns ({}) and the solver's vectors would need an estimated {}, over the \
             limit of {} ({}). Drop rows or features, or raise the limit.",
            ByteSize(csc_bytes(n, p, nnz)),
            ByteSize(need),
            ByteSize(budget.max_bytes),
            budget.limit
        ),
    })
}

/// `a.b.c` -> the bytes as a str (LIBSVM tokens are ASCII; anything else is refused by the
/// number parsers).
fn token_str(t: &[u8]) -> &str {
    std::str::from_utf8(t).unwrap_or("\u{fffd}")
}

/// A LIBSVM line's content (before `#`), trimmed.
fn content(line: &[u8]) -> &[u8] {
    let end = line.iter().position(|&c| c == b'#').unwrap_or(line.len());
    line[..end].trim_ascii()
}

fn parse_value(
    tok: &[u8],
    path: &Path,
    line: u64,
    what: impl Fn() -> String,
) -> Result<f64, DataError> {
    let s = token_str(tok);
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err(DataError::Line {
            path: path.into(),
            line,
            msg: format!("{}: {s} is not finite", what()),
        }),
        Err(_) => Err(DataError::Line {
            path: path.into(),
            line,
            msg: format!("{}: '{s}' is not a number", what()),
        }),
    }
}

/// One row's tokens: the label and the (index, value) pairs, checked (indices increasing and
/// within `max_index`, values finite).
fn parse_row(
    c: &[u8],
    path: &Path,
    line: u64,
    max_index: Option<usize>,
    mut each: impl FnMut(usize, f64) -> Result<(), DataError>,
) -> Result<f64, DataError> {
    let refuse = |msg: String| DataError::Line {
        path: path.into(),
        line,
        msg,
    };
    let mut toks = c
        .split(|b| b.is_ascii_whitespace())
        .filter(|t| !t.is_empty());
    let label = parse_value(toks.next().unwrap_or(b""), path, line, || {
        "the label".into()
    })?;
    let mut prev: Option<usize> = None;
    for tok in toks {
        let colon = tok
            .iter()
            .position(|&b| b == b':')
            .ok_or_else(|| refuse(format!("'{}' is not idx:value", token_str(tok))))?;
        let (i, v) = (&tok[..colon], &tok[colon + 1..]);
        let idx: usize = token_str(i)
            .parse()
            .map_err(|_| refuse(format!("'{}' is not a feature index", token_str(i))))?;
        if let Some(pr) = prev {
            if idx == pr {
                return Err(refuse(format!("feature index {idx} appears twice")));
            }
            if idx < pr {
                return Err(refuse(format!(
                    "feature indices must increase along a line: {idx} after {pr}"
                )));
            }
        }
        if let Some(m) = max_index
            && idx > m
        {
            return Err(refuse(format!(
                "feature index {idx} is above the declared number of features, {m} (--features)"
            )));
        }
        prev = Some(idx);
        let v = parse_value(v, path, line, || format!("feature {idx}"))?;
        each(idx, v)?;
    }
    Ok(label)
}

/// Calls `each(line number, content)` for every non-empty line.
fn for_lines(
    path: &Path,
    mut each: impl FnMut(u64, &[u8]) -> Result<(), DataError>,
) -> Result<(), DataError> {
    let io = |error| DataError::Io {
        path: path.into(),
        error,
    };
    let mut r = BufReader::with_capacity(1 << 20, File::open(path).map_err(io)?);
    let mut buf = Vec::new();
    let mut line = 0u64;
    loop {
        buf.clear();
        if r.read_until(b'\n', &mut buf).map_err(io)? == 0 {
            return Ok(());
        }
        line += 1;
        let c = content(&buf);
        if !c.is_empty() {
            each(line, c)?;
        }
    }
}

fn read_libsvm(path: &Path, opts: &CscOptions) -> Result<Csc, DataError> {
    if opts.target.is_some() {
        return Err(DataError::File {
            path: path.into(),
            msg: "--target does not apply to LIBSVM files: the label is the first token".into(),
        });
    }
    // An index so large that its column offsets alone exceed the limit is refused as it is
    // met, before the count vector grows to it.
    let max_offsets = (opts.budget.max_bytes / 44) as usize;
    let mut counts: Vec<usize> = Vec::new();
    let (mut n, mut nnz) = (0usize, 0u64);
    let (mut max_idx, mut max_line) = (0usize, 0u64);
    for_lines(path, |line, c| {
        parse_row(c, path, line, opts.p, |idx, _| {
            if idx >= counts.len() {
                if idx >= max_offsets {
                    return Err(DataError::File {
                        path: path.into(),
                        msg: format!(
                            "too large for the memory limit: feature index {idx} (line {line}) \
                             needs per-column vectors of {} alone, over the limit of {} ({})",
                            ByteSize((idx as u64 + 1).saturating_mul(44)),
                            ByteSize(opts.budget.max_bytes),
                            opts.budget.limit
                        ),
                    });
                }
                counts.resize(
                    (idx + 1)
                        .max(counts.len() * 2)
                        .min(max_offsets.max(idx + 1)),
                    0,
                );
            }
            counts[idx] += 1;
            nnz += 1;
            if max_line == 0 || idx > max_idx {
                max_idx = idx;
                max_line = line;
            }
            Ok(())
        })?;
        n += 1;
        Ok(())
    })?;
    if n == 0 {
        return Err(DataError::File {
            path: path.into(),
            msg: "no rows found".into(),
        });
    }
    if n > u32::MAX as usize {
        return Err(DataError::File {
            path: path.into(),
            msg: format!(
                "{n} rows: the sparse reader holds at most {} rows",
                u32::MAX
            ),
        });
    }
    // Indices from 0 when the file uses 0, else from 1; a declared p fixes the count.
    let offset = usize::from(counts.first().is_none_or(|&c| c == 0));
    let p = match opts.p {
        Some(p) => {
            if offset == 0 && nnz > 0 && max_idx >= p {
                return Err(DataError::Line {
                    path: path.into(),
                    line: max_line,
                    msg: format!(
                        "feature index {max_idx} with indices from 0 is above the declared \
                         number of features, {p} (--features)"
                    ),
                });
            }
            p
        }
        None => (max_idx + 1).saturating_sub(offset).max(1),
    };
    counts.resize(p + offset, 0);
    // In place: the count vector (up to twice p while it grew) becomes the fill positions.
    counts.drain(..offset);
    counts.shrink_to_fit();
    let driver = match opts.p {
        Some(p) => format!("p = {p} (--features)"),
        None => format!("the largest feature index is {max_idx} (line {max_line}), so p = {p}"),
    };
    check_budget(path, n as u64, p as u64, nnz, &driver, &opts.budget)?;
    let mut b = Builder::new(n, counts, None);
    let mut y = Vec::with_capacity(n);
    let mut i = 0usize;
    for_lines(path, |line, c| {
        let label = parse_row(c, path, line, opts.p, |idx, v| {
            b.push(i, idx - offset, v);
            Ok(())
        })?;
        y.push(label);
        i += 1;
        Ok(())
    })?;
    if i != n {
        return Err(DataError::File {
            path: path.into(),
            msg: "the file changed while it was read".into(),
        });
    }
    let mut x = b.finish(y);
    x.first_index = offset;
    Ok(x)
}

/// An NPY or CSV file's `RowReader`, read without a memory map.
fn row_reader(path: &Path, format: Format, opts: &CscOptions) -> Result<RowReader, DataError> {
    // The batch is the reader's only allocation; its plan checks it.
    let o = OpenOptions {
        target: opts.target,
        format: Some(format),
        ..OpenOptions::new(Budget {
            plan: Plan::Rows { batch_rows: 1 },
            max_bytes: opts.budget.max_bytes,
            limit: opts.budget.limit.clone(),
        })
    };
    // Ordinary reads, batch by batch: a map's touched pages would count in the resident
    // memory beside the matrix (2.5x the CSC arrays on the Pyrim stand-in, issue 44).
    let mut r = RowReader::open(path, &o)?;
    r.read_without_map();
    Ok(r)
}

/// Calls `each(label, nonzeros)` for every row of a file, in order, with the row's nonzeros
/// as (the file's feature index, value): a LIBSVM line's own indices, an NPY or CSV row's
/// column positions from 0. The rows are checked as `read_csc` checks them (`opts.p` bounds
/// the indices) and nothing is kept: a test file is scored against a path's sparse models one
/// row at a time, in the memory of a row (LIBSVM) or of a batch of about a million values
/// (NPY, CSV), without its matrix. Returns the number of rows; a file without any is refused.
pub fn for_each_row(
    path: &Path,
    opts: &CscOptions,
    mut each: impl FnMut(f64, &[(usize, f64)]),
) -> Result<usize, DataError> {
    let format = match opts.format {
        Some(f) => f,
        None => Format::detect(path)?,
    };
    let mut row: Vec<(usize, f64)> = Vec::new();
    let mut n = 0usize;
    match format {
        Format::Libsvm => {
            if opts.target.is_some() {
                return Err(DataError::File {
                    path: path.into(),
                    msg: "--target does not apply to LIBSVM files: the label is the first token"
                        .into(),
                });
            }
            for_lines(path, |line, c| {
                row.clear();
                let label = parse_row(c, path, line, opts.p, |idx, v| {
                    row.push((idx, v));
                    Ok(())
                })?;
                each(label, &row);
                n += 1;
                Ok(())
            })?;
        }
        Format::Npy | Format::Csv => {
            let mut r = row_reader(path, format, opts)?;
            let p = declared_p(path, opts, r.p)?;
            let batch = (1usize << 20).div_ceil(p.max(1)).max(1);
            let (mut x, mut y) = (Vec::new(), Vec::new());
            loop {
                x.clear();
                y.clear();
                if r.next_batch(batch, &mut x, &mut y)? == 0 {
                    break;
                }
                for (i, &label) in y.iter().enumerate() {
                    row.clear();
                    let values = &x[i * p..(i + 1) * p];
                    row.extend(
                        values
                            .iter()
                            .enumerate()
                            .filter(|c| *c.1 != 0.0)
                            .map(|(j, &v)| (j, v)),
                    );
                    each(label, &row);
                    n += 1;
                }
            }
        }
    }
    if n == 0 {
        return Err(DataError::File {
            path: path.into(),
            msg: "no rows found".into(),
        });
    }
    Ok(n)
}

/// NPY and CSV: two passes of `RowReader` batches.
/// NPY and CSV files into a `Csc`, in batches of about `batch_values` values (the dense
/// rows' only allocation, beside the reader's own buffer of the same size).
fn read_rows(
    path: &Path,
    format: Format,
    opts: &CscOptions,
    batch_values: usize,
) -> Result<Csc, DataError> {
    let open = || row_reader(path, format, opts);
    let mut r = open()?;
    let p = declared_p(path, opts, r.p)?;
    let batch = batch_values.div_ceil(p.max(1)).max(1);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    let mut counts = vec![0usize; p];
    let mut n = 0usize;
    loop {
        x.clear();
        y.clear();
        let got = r.next_batch(batch, &mut x, &mut y)?;
        if got == 0 {
            break;
        }
        n += got;
        for row in x.chunks_exact(p.max(1)) {
            for (c, v) in counts.iter_mut().zip(row) {
                *c += (*v != 0.0) as usize;
            }
        }
    }
    if n == 0 {
        return Err(DataError::File {
            path: path.into(),
            msg: "no rows found".into(),
        });
    }
    let nnz: usize = counts.iter().sum();
    let driver = format!("p = {p} features");
    check_budget(path, n as u64, p as u64, nnz as u64, &driver, &opts.budget)?;
    let mut b = Builder::new(n, counts, None);
    let mut r = open()?;
    let mut ys = Vec::with_capacity(n);
    let mut i = 0usize;
    loop {
        x.clear();
        y.clear();
        let got = r.next_batch(batch, &mut x, &mut y)?;
        if got == 0 {
            break;
        }
        for row in x.chunks_exact(p.max(1)) {
            if i >= n {
                break;
            }
            for (j, &v) in row.iter().enumerate() {
                if v != 0.0 {
                    b.push(i, j, v);
                }
            }
            i += 1;
        }
        ys.extend_from_slice(&y);
    }
    if i != n || ys.len() != n {
        return Err(DataError::File {
            path: path.into(),
            msg: "the file changed while it was read".into(),
        });
    }
    Ok(b.finish(ys))
}

/// A dense file's `p` features, or an error when `--features` declares another number.
fn declared_p(path: &Path, opts: &CscOptions, p: usize) -> Result<usize, DataError> {
    match opts.p {
        Some(d) if d != p => Err(DataError::File {
            path: path.into(),
            msg: format!("the file has {p} features, not the {d} declared (--features)"),
        }),
        _ => Ok(p),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn sparse_dot_is_the_sum_of_the_products_in_order_below_8_and_close_above() {
        let v: Vec<f64> = (0..50).map(|i| (i as f64 * 0.7).sin() * 3.0).collect();
        for len in 0..40usize {
            let rows: Vec<u32> = (0..len as u32).map(|k| (k * 7 + 3) % 50).collect();
            let vals: Vec<f64> = (0..len).map(|k| 1.0 / (k as f64 + 0.5) - 0.4).collect();
            let mut plain = 0.0;
            for (&i, &x) in rows.iter().zip(&vals) {
                plain += x * v[i as usize];
            }
            let got = sparse_dot(&rows, &vals, &v);
            if len < 8 {
                assert_eq!(got, plain, "{len}");
            } else {
                assert!((got - plain).abs() <= 1e-12 * (1.0 + plain.abs()), "{len}");
            }
        }
    }

    fn opts(p: Option<usize>, max_bytes: u64) -> CscOptions<'static> {
        CscOptions {
            target: None,
            format: None,
            p,
            budget: Budget {
                plan: Plan::Rows { batch_rows: 1 },
                max_bytes,
                limit: "--max-memory".into(),
            },
        }
    }

    fn err(name: &str, body: &[u8], p: Option<usize>, max_bytes: u64) -> String {
        let f = TempFile::new(name, body);
        match read_csc(&f.0, &opts(p, max_bytes)) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{name}: not refused"),
        }
    }

    #[test]
    fn libsvm_rows_become_columns_named_by_the_files_index() {
        let f = TempFile::new(
            "wide.svm",
            b"1.5 3:1 7:2 # a comment 5:5\n\n-2 1:4 7:-1\n0.5 3:0.25\n",
        );
        let x = read_csc(&f.0, &opts(None, GIB)).unwrap();
        assert_eq!((x.n, x.p, x.nnz()), (3, 7, 5));
        assert_eq!(x.y, [1.5, -2.0, 0.5]);
        assert_eq!(x.column(0), (&[1u32][..], &[4.0][..]));
        assert_eq!(x.column(2), (&[0u32, 2][..], &[1.0, 0.25][..]));
        assert_eq!(x.column(6), (&[0u32, 1][..], &[2.0, -1.0][..]));
        assert_eq!(x.name(6), "7");
        // Indices 2, 4, 5, 6 are never used: allowed and counted.
        assert_eq!(x.empty_columns, 4);
        // The same matrix from dense rows.
        let dense = [
            0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 2.0, //
            4.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, //
            0.0, 0.0, 0.25, 0.0, 0.0, 0.0, 0.0,
        ];
        let d = Csc::from_dense(&dense, &x.y, 7);
        assert_eq!((d.col_ptr, d.rows, d.values), (x.col_ptr, x.rows, x.values));
        // A declared p adds trailing empty columns; indices from 0 keep column 0.
        let x = read_csc(&f.0, &opts(Some(10), GIB)).unwrap();
        assert_eq!((x.p, x.empty_columns), (10, 7));
        let z = TempFile::new("zero.svm", b"1 0:1 2:3\n2 1:1\n");
        let x = read_csc(&z.0, &opts(None, GIB)).unwrap();
        assert_eq!((x.p, x.name(0)), (3, "0".to_string()));
    }

    #[test]
    fn rows_read_one_at_a_time_are_the_matrixs_rows() {
        let f = TempFile::new(
            "rows.svm",
            b"1.5 3:1 7:2 # a comment 5:5\n\n-2 1:4 7:-1\n0.5 3:0.25\n",
        );
        let mut rows = Vec::new();
        let n = for_each_row(&f.0, &opts(None, GIB), |y, r| rows.push((y, r.to_vec()))).unwrap();
        assert_eq!(n, 3);
        assert_eq!(
            rows,
            [
                (1.5, vec![(3, 1.0), (7, 2.0)]),
                (-2.0, vec![(1, 4.0), (7, -1.0)]),
                (0.5, vec![(3, 0.25)])
            ]
        );
        // The same checks as read_csc, and an index above a declared p.
        let e = err_rows("bad_rows.svm", b"1 2:1\n2 3:nan\n", None);
        assert!(e.contains("line 2: feature 3: nan is not finite"), "{e}");
        let e = err_rows("over_p.svm", b"1 2:1\n2 9:1\n", Some(5));
        assert!(e.contains("line 2: feature index 9 is above"), "{e}");
        let e = err_rows("empty_rows.svm", b"# nothing\n", None);
        assert!(e.contains("no rows found"), "{e}");
        // NPY rows: column positions from 0, zeros left out, the target last.
        let npy = TempFile::new(
            "rows.npy",
            &npy_c_order(2, 3, &[0.0, 2.0, 5.0, 3.0, 0.0, 6.0]),
        );
        let mut rows = Vec::new();
        for_each_row(&npy.0, &opts(None, GIB), |y, r| rows.push((y, r.to_vec()))).unwrap();
        assert_eq!(rows, [(5.0, vec![(1, 2.0)]), (6.0, vec![(0, 3.0)])]);
    }

    fn err_rows(name: &str, body: &[u8], p: Option<usize>) -> String {
        let f = TempFile::new(name, body);
        match for_each_row(&f.0, &opts(p, GIB), |_, _| {}) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{name}: not refused"),
        }
    }

    /// A C-order NPY file of float64 values.
    fn npy_c_order(rows: usize, cols: usize, values: &[f64]) -> Vec<u8> {
        npy_f8(rows, cols, false, values)
    }

    /// An NPY file of float64 values, `values` in the file's order (C or Fortran).
    fn npy_f8(rows: usize, cols: usize, fortran: bool, values: &[f64]) -> Vec<u8> {
        let order = if fortran { "True" } else { "False" };
        let mut h =
            format!("{{'descr': '<f8', 'fortran_order': {order}, 'shape': ({rows}, {cols}), }}");
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(' ');
        }
        h.push('\n');
        let mut body = b"\x93NUMPY\x01\x00".to_vec();
        body.extend_from_slice(&(h.len() as u16).to_le_bytes());
        body.extend_from_slice(h.as_bytes());
        for v in values {
            body.extend_from_slice(&v.to_le_bytes());
        }
        body
    }

    #[test]
    fn npy_rows_keep_their_nonzeros() {
        let body = npy_c_order(2, 3, &[0.0, 2.0, 5.0, 3.0, 0.0, 6.0]);
        let f = TempFile::new("wide.npy", &body);
        let x = read_csc(&f.0, &opts(None, GIB)).unwrap();
        assert_eq!((x.n, x.p, x.nnz(), x.empty_columns), (2, 2, 2, 0));
        assert_eq!(x.y, [5.0, 6.0]);
        assert_eq!(x.column(0), (&[1u32][..], &[3.0][..]));
        assert_eq!(x.column(1), (&[0u32][..], &[2.0][..]));
        let e = read_csc(&f.0, &opts(Some(5), GIB))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("has 2 features, not the 5 declared (--features)"),
            "{e}"
        );
    }

    #[test]
    fn npy_read_in_batches_smaller_than_the_file_gives_the_same_matrix() {
        // 23 rows of 40 columns (the target last), a third of the cells zero and a column
        // all zero, in C and in Fortran order: read in batches of 1, 3 and 7 rows (every
        // batch a few hundred bytes of a 7 KiB file) and in one batch, the matrix is the
        // one built from the dense rows.
        let (rows, width) = (23usize, 40usize);
        let cell = |r: usize, c: usize| {
            if c == 5 || (r * 7 + c * 5).is_multiple_of(3) {
                0.0
            } else {
                (r * 100 + c) as f64 - 0.25
            }
        };
        let dense: Vec<f64> = (0..rows)
            .flat_map(|r| (0..width - 1).map(move |c| cell(r, c)))
            .collect();
        let y: Vec<f64> = (0..rows).map(|r| cell(r, width - 1) + 1.0).collect();
        let want = Csc::from_dense(&dense, &y, width - 1);
        assert_eq!(want.empty_columns, 1);
        for fortran in [false, true] {
            let at = |r: usize, c: usize| if c == width - 1 { y[r] } else { cell(r, c) };
            let values: Vec<f64> = if fortran {
                (0..width)
                    .flat_map(|c| (0..rows).map(move |r| (r, c)))
                    .map(|(r, c)| at(r, c))
                    .collect()
            } else {
                (0..rows)
                    .flat_map(|r| (0..width).map(move |c| (r, c)))
                    .map(|(r, c)| at(r, c))
                    .collect()
            };
            let body = npy_f8(rows, width, fortran, &values);
            let f = TempFile::new(&format!("batches_{fortran}.npy"), &body);
            for batch_rows in [1, 3, 7, rows] {
                let x = read_rows(
                    &f.0,
                    Format::Npy,
                    &opts(None, GIB),
                    batch_rows * (width - 1),
                )
                .unwrap();
                assert_eq!(x, want, "fortran {fortran}, batches of {batch_rows} rows");
            }
        }
    }

    #[test]
    fn bad_libsvm_input_is_refused_with_its_line() {
        for (body, p, want) in [
            (
                &b"1 1:1\n2 3:1 2:1\n"[..],
                None,
                "line 2: feature indices must increase along a line: 2 after 3",
            ),
            (
                b"1 1:1 1:2\n",
                None,
                "line 1: feature index 1 appears twice",
            ),
            (
                b"1 1:1\n2 9:1\n",
                Some(5),
                "line 2: feature index 9 is above the declared number of features, 5 (--features)",
            ),
            (
                b"1 0:1 5:1\n",
                Some(5),
                "feature index 5 with indices from 0 is above the declared number of features, 5",
            ),
            (b"1 1:nan\n", None, "line 1: feature 1: nan is not finite"),
            (b"1 1:inf\n", None, "line 1: feature 1: inf is not finite"),
            (b"inf 1:1\n", None, "line 1: the label: inf is not finite"),
            (b"1 1:x\n", None, "line 1: feature 1: 'x' is not a number"),
            (b"1 a:1\n", None, "line 1: 'a' is not a feature index"),
            (b"1 17\n", None, "line 1: '17' is not idx:value"),
            (b"# only a comment\n", None, "no rows found"),
        ] {
            let e = err("bad.svm", body, p, GIB);
            assert!(e.contains(want), "{want:?} missing from {e}");
        }
    }

    #[test]
    fn a_file_over_the_memory_limit_is_refused_before_its_matrix_is_allocated() {
        // 10 rows of 100 nonzeros, p = 100: 12000 + 808 + 80 bytes of arrays, 84240 more.
        let mut body = String::new();
        for i in 0..10 {
            body.push_str(&i.to_string());
            for j in 1..=100 {
                body.push_str(&format!(" {j}:0.5"));
            }
            body.push('\n');
        }
        let e = err("big.svm", body.as_bytes(), None, 10_000);
        for part in [
            "too large for the memory limit",
            "the largest feature index is 100 (line 1), so p = 100",
            "n = 10 rows and 1000 nonzeros",
            "the sparse columns (12.6 KiB)",
            "an estimated 98.1 KiB, over the limit of 9.8 KiB (--max-memory)",
        ] {
            assert!(e.contains(part), "'{part}' missing from: {e}");
        }
        // An index whose per-column vectors alone exceed the limit stops the first read at
        // its line, before the count vector grows to it.
        let e = err("huge.svm", b"1 1:1\n2 99999999999:1\n", None, 1 << 20);
        assert!(
            e.contains("feature index 99999999999 (line 2) needs per-column vectors of"),
            "{e}"
        );
        assert_eq!(
            wide_bytes(3, 1000, 4),
            4 * 12 + 1001 * 8 + 3 * 8 + 69 * 1000 + 64 * 3 + 1000 * 1000 * 8
        );
    }
}
