//! NPY files (2-D float64, C or Fortran order, either byte order), read in bulk: memory-mapped
//! when the file is as long as its header says, so a batch is converted from the mapped pages,
//! or handed out where it lies (`next_mapped`); with ordinary reads when it is shorter, or when
//! the caller keeps only part of each batch (`read_without_map`: the sparse columns of
//! `read_csc`, which would otherwise hold the whole file's mapped pages in its resident
//! memory). The map is the one `unsafe` of the readers.

use super::{DataError, Dimensions, Inner, OpenOptions, RowReader, resolve_target};
use crate::stats::StridedRows;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// An NPY reader (see `Inner::Npy`).
pub(super) struct NpyRows {
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
}

/// Opens a file of this format (`RowReader::open`): its dimensions checked against the budget,
/// positioned at the first row; the feature names, p and the reader.
pub(super) fn open(
    path: &Path,
    file: File,
    opts: &OpenOptions,
) -> Result<(Option<Vec<String>>, usize, Inner), DataError> {
    let target = opts.target;
    let io = |error| DataError::Io {
        path: path.into(),
        error,
    };
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
    Ok((
        None,
        width - 1,
        Inner::Npy(NpyRows {
            file,
            map,
            start,
            fortran,
            big_endian,
            target: t,
            width,
            rows,
            buf: Vec::new(),
        }),
    ))
}

impl RowReader {
    /// Reads an NPY file's batches with ordinary reads from here on instead of from its map
    /// (a no-op for other formats). For a caller that copies every batch and keeps only a
    /// fraction of it (`read_csc` on dense wide files): the pages of a map count in the
    /// process's resident memory as they are touched, so a map costs the whole file's size
    /// beside what is built from it, while a read costs one batch. A Fortran-order file keeps
    /// its map: there a batch of rows lies in every column, and reading it would take one
    /// seek and read a column (hundreds of thousands a batch on a wide file).
    pub fn read_without_map(&mut self) {
        if let Inner::Npy(r) = &mut self.inner
            && !r.fortran
        {
            r.map = None;
        }
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
        let Inner::Npy(NpyRows {
            fortran,
            width,
            rows,
            ..
        }) = &self.inner
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
        let Inner::Npy(NpyRows {
            fortran,
            width,
            rows: total,
            ..
        }) = &self.inner
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
}

impl NpyRows {
    /// `RowReader::next_batch` for this format: appends up to `max_rows` rows to `x` and `y`
    /// and returns how many; `rows_read` rows were read before.
    pub(super) fn next_batch(
        &mut self,
        path: PathBuf,
        p: usize,
        rows_read: u64,
        max_rows: usize,
        x: &mut Vec<f64>,
        y: &mut Vec<f64>,
    ) -> Result<usize, DataError> {
        let NpyRows {
            file,
            map,
            start,
            fortran,
            big_endian,
            target,
            width,
            rows,
            buf,
        } = self;
        let (width, target, rows, big_endian) = (*width, *target, *rows, *big_endian);
        let n = (max_rows as u64).min(rows - rows_read) as usize;
        if n == 0 {
            return Ok(0);
        }
        let first = rows_read;
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
        Ok(n)
    }
}

/// The values of a reader's memory-mapped NPY file and where the first row's feature 0 and
/// target lie among them, when it hands out rows where they lie (`RowReader::maps_rows`).
fn mapped_values(inner: &Inner) -> Option<(&[f64], usize, usize)> {
    let Inner::Npy(NpyRows {
        map: Some(map),
        start,
        big_endian: false,
        target,
        width,
        rows,
        fortran,
        ..
    }) = inner
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

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::*;

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
                    // From the map and with ordinary reads (`read_without_map`).
                    for mapped in [true, false] {
                        let mut r = RowReader::open(&f.0, &opts).unwrap();
                        if !mapped {
                            r.read_without_map();
                        }
                        let (mut x, mut y) = (vec![], vec![]);
                        while r.next_batch(batch, &mut x, &mut y).unwrap() > 0 {}
                        assert_eq!(
                            (&x, &y),
                            (&want_x, &want_y),
                            "{rows} rows of {width}, {name}, batches of {batch}, mapped {mapped}"
                        );
                        assert_eq!(r.rows_read(), rows as u64);
                    }
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
            let mut unmapped = RowReader::open(&f.0, &opts("20")).unwrap();
            unmapped.read_without_map();
            // A Fortran-order file keeps its map (a read a column otherwise).
            assert_eq!(
                unmapped.maps_rows(),
                fortran,
                "{name}: read without its map"
            );
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
}
