//! LIBSVM / SVMlight files (`label idx:value ...`, sparse): a first pass finds p (or the
//! distinct indices, `compact_features`) and the rows, the second reads them.

use super::{DataError, Dimensions, Inner, OpenOptions, parse_cell};
use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// A LIBSVM reader at its next line.
pub(super) struct LibsvmRows {
    lines: std::io::Lines<BufReader<File>>,
    line: u64,
    columns: LibsvmColumns,
}

/// Where a LIBSVM index goes: index - offset (indices from 0 or from 1), or the position of
/// the index among the distinct ones (`compact_features`).
enum LibsvmColumns {
    Offset(usize),
    Compact(HashMap<usize, usize>),
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
    if target.is_some() {
        return Err(DataError::File {
            path: path.into(),
            msg: "--target does not apply to LIBSVM files: the label is the first token".into(),
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
        let driver = format!("the file uses {d} distinct feature indices ({largest}), so p = {d}");
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
    Ok((
        names,
        p,
        Inner::Libsvm(LibsvmRows {
            lines: BufReader::new(file).lines(),
            line: 0,
            columns,
        }),
    ))
}

impl LibsvmRows {
    /// `RowReader::next_batch` for this format: appends up to `max_rows` rows to `x` and `y`
    /// and returns how many.
    pub(super) fn next_batch(
        &mut self,
        path: PathBuf,
        p: usize,
        max_rows: usize,
        x: &mut Vec<f64>,
        y: &mut Vec<f64>,
    ) -> Result<usize, DataError> {
        let mut got = 0;
        let LibsvmRows {
            lines,
            line,
            columns,
        } = self;
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
            let label = parse_cell(toks.next().unwrap_or(""), &path, *line, || {
                "the label".into()
            })?;
            let start = x.len();
            x.resize(start + p, 0.0);
            for tok in toks {
                let (i, v) = tok.split_once(':').unwrap_or((tok, ""));
                let i: usize = i.parse().unwrap_or(usize::MAX);
                let v = parse_cell(v, &path, *line, || format!("feature {i}"))?;
                let j = match columns {
                    LibsvmColumns::Offset(offset) => i - *offset,
                    LibsvmColumns::Compact(map) => map[&i],
                };
                x[start + j] = v;
            }
            y.push(label);
            got += 1;
        }
        Ok(got)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::*;

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
            "the raw sparse columns without the statistics",
            "ravel fit --wide",
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
}
