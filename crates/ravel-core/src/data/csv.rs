//! CSV (and TSV) files with a header row: the target column named or numbered, each cell
//! parsed and checked, the error naming the line and column.

use super::{DataError, Dimensions, Inner, OpenOptions, Plan, parse_cell, resolve_target};
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

/// A CSV reader at its next record.
pub(super) struct CsvRows {
    reader: csv::Reader<BufReader<File>>,
    target: usize,
    width: usize,
    record: csv::StringRecord,
    /// The header's names, target included (for errors).
    header: Vec<String>,
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
    Ok((
        Some(names),
        width - 1,
        Inner::Csv(CsvRows {
            reader,
            target: t,
            width,
            record: csv::StringRecord::new(),
            header,
        }),
    ))
}

impl CsvRows {
    /// `RowReader::next_batch` for this format: appends up to `max_rows` rows to `x` and `y`
    /// and returns how many.
    pub(super) fn next_batch(
        &mut self,
        path: PathBuf,
        max_rows: usize,
        x: &mut Vec<f64>,
        y: &mut Vec<f64>,
    ) -> Result<usize, DataError> {
        let mut got = 0;
        let CsvRows {
            reader,
            target,
            width,
            record,
            header,
        } = self;
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
                let v = parse_cell(cell, &path, line, || format!("column '{}'", header[c]))?;
                if c == *target { y.push(v) } else { x.push(v) }
            }
            got += 1;
        }
        Ok(got)
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

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::*;

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
