//! CSV (and TSV) files with a header row: the target column named or numbered, each cell
//! parsed and checked, the error naming the line and column.

use super::{
    DataError, Dimensions, FieldOptions, Inner, OpenOptions, Plan, is_missing, parse_cell,
    resolve_target,
};
use crate::fields::{Field, Fields, Kind, MAX_LEVELS, Missing, Refusal, Value};
use std::collections::BTreeSet;
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
    /// Categorical, hashed or missing-tolerant columns (`OpenOptions::fields`); None: every
    /// column but the target is a number.
    mapping: Option<Box<Mapping>>,
}

/// How the header's columns become features when they are not all plain numbers.
struct Mapping {
    fields: Fields,
    /// The field of each header column (None: the target, or a column not declared).
    of: Vec<Option<usize>>,
    /// What a missing target does (the missing policy of the columns not declared in full).
    target_missing: Missing,
    /// Rows left out under `skip_row`.
    skipped: u64,
}

/// The fields of a file's header under `opts` (checked: every named column exists, levels
/// found in the file within `MAX_LEVELS`).
fn mapping(
    path: &Path,
    header: &[String],
    target: usize,
    opts: &FieldOptions,
    reopen: impl Fn() -> Result<csv::Reader<BufReader<File>>, DataError>,
) -> Result<Mapping, DataError> {
    let err = |msg: String| DataError::File {
        path: path.into(),
        msg,
    };
    let column = |name: &str| header.iter().position(|h| h == name);
    for name in opts
        .categorical
        .iter()
        .map(|(n, _)| n)
        .chain(opts.hashed.iter().map(|(n, _)| n))
    {
        match column(name) {
            None => {
                return Err(err(format!(
                    "no column '{name}' in the header ({})",
                    header.join(", ")
                )));
            }
            Some(c) if c == target => {
                return Err(err(format!("column '{name}' is the target, not a feature")));
            }
            Some(_) => {}
        }
    }
    let mut fields: Vec<Field> = match &opts.declared {
        Some(declared) => {
            for f in declared {
                match column(&f.name) {
                    None => {
                        return Err(err(format!(
                            "the configuration declares feature '{}' but the header has no \
                             such column ({})",
                            f.name,
                            header.join(", ")
                        )));
                    }
                    Some(c) if c == target => {
                        return Err(err(format!(
                            "column '{}' is the target and a declared feature",
                            f.name
                        )));
                    }
                    Some(_) => {}
                }
            }
            declared.clone()
        }
        None => header
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != target)
            .map(|(_, name)| {
                let kind =
                    if let Some((_, levels)) = opts.categorical.iter().find(|(n, _)| n == name) {
                        Kind::Categorical {
                            levels: levels.clone().unwrap_or_default(),
                        }
                    } else if let Some((_, b)) = opts.hashed.iter().find(|(n, _)| n == name) {
                        Kind::Hashed { buckets: *b }
                    } else {
                        Kind::Numeric
                    };
                Field {
                    name: name.clone(),
                    kind,
                    missing: opts.missing,
                }
            })
            .collect(),
    };
    // Categorical columns without declared levels take the file's, sorted (one pass).
    let open: Vec<(usize, usize)> = fields
        .iter()
        .enumerate()
        .filter(|(_, f)| matches!(&f.kind, Kind::Categorical { levels } if levels.is_empty()))
        .map(|(i, f)| (i, column(&f.name).expect("checked above")))
        .collect();
    if !open.is_empty() {
        let mut found = vec![BTreeSet::new(); open.len()];
        let mut reader = reopen()?;
        let mut record = csv::StringRecord::new();
        while reader
            .read_record(&mut record)
            .map_err(|e| DataError::Line {
                path: path.into(),
                line: e.position().map(|p| p.line()).unwrap_or(0),
                msg: csv_msg(&e),
            })?
        {
            for ((i, c), set) in open.iter().zip(found.iter_mut()) {
                let Some(cell) = record.get(*c) else { continue };
                if is_missing(cell) || set.contains(cell.trim()) {
                    continue;
                }
                if set.len() == MAX_LEVELS {
                    return Err(err(format!(
                        "column '{}' has more than {MAX_LEVELS} distinct values: hash it \
                         (--hashed {}:<buckets>) or declare the levels that matter \
                         (--categorical '{}=a,b,c'; the rest go to {}=other)",
                        fields[*i].name, fields[*i].name, fields[*i].name, fields[*i].name
                    )));
                }
                set.insert(cell.trim().to_string());
            }
        }
        for ((i, _), set) in open.iter().zip(found) {
            if set.is_empty() {
                return Err(err(format!(
                    "column '{}' holds no value to take categories from",
                    fields[*i].name
                )));
            }
            fields[*i].kind = Kind::Categorical {
                levels: set.into_iter().collect(),
            };
        }
    }
    let fields = Fields::new(fields).map_err(err)?;
    let of = header
        .iter()
        .enumerate()
        .map(|(i, h)| if i == target { None } else { fields.field(h) })
        .collect();
    Ok(Mapping {
        fields,
        of,
        target_missing: opts.missing,
        skipped: 0,
    })
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
    let mapping = if opts.fields.is_plain() {
        None
    } else {
        let reopen = || {
            let f = File::open(path).map_err(io)?;
            Ok(builder().from_reader(BufReader::new(f)))
        };
        Some(Box::new(mapping(path, &header, t, &opts.fields, reopen)?))
    };
    let p = mapping.as_ref().map_or(width - 1, |m| m.fields.p());
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
        p,
        rows,
        driver: if mapping.is_some() {
            format!("the header's (line 1) features expand to p = {p} columns")
        } else {
            format!("the header (line 1) has {width} columns, so p = {p}")
        },
        reader_bytes: 0,
        distinct: None,
    }
    .check(&opts.budget)?;
    let names: Vec<String> = match &mapping {
        Some(m) => m.fields.columns().to_vec(),
        None => header
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != t)
            .map(|(_, n)| n.clone())
            .collect(),
    };
    Ok((
        Some(names),
        p,
        Inner::Csv(CsvRows {
            reader,
            target: t,
            width,
            record: csv::StringRecord::new(),
            header,
            mapping,
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
            mapping,
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
            if let Some(m) = mapping {
                if m.row(record, *target, header, &path, line, x, y)? {
                    got += 1;
                }
                continue;
            }
            for (c, cell) in record.iter().enumerate() {
                let v = parse_cell(cell, &path, line, || {
                    if c == *target {
                        format!("column '{}' (the target)", header[c])
                    } else {
                        format!("column '{}'", header[c])
                    }
                })?;
                if c == *target { y.push(v) } else { x.push(v) }
            }
            got += 1;
        }
        Ok(got)
    }
}

impl CsvRows {
    /// Rows left out because a value was missing (`--missing skip_row`).
    pub(super) fn skipped(&self) -> u64 {
        self.mapping.as_ref().map_or(0, |m| m.skipped)
    }
}

impl Mapping {
    /// One record through the fields: appends its row and target and answers true, or
    /// answers false for a row left out (`skip_row`), or the error naming line and column.
    #[allow(clippy::too_many_arguments)]
    fn row(
        &mut self,
        record: &csv::StringRecord,
        target: usize,
        header: &[String],
        path: &Path,
        line: u64,
        x: &mut Vec<f64>,
        y: &mut Vec<f64>,
    ) -> Result<bool, DataError> {
        let refuse = |msg: String| DataError::Line {
            path: path.into(),
            line,
            msg,
        };
        let cell = &record[target];
        let label = if is_missing(cell) {
            if self.target_missing == Missing::Reject {
                return Err(refuse(format!(
                    "column '{}' (the target) is missing: fill it, or leave such rows out \
                     with --missing skip_row",
                    header[target]
                )));
            }
            None
        } else {
            Some(parse_cell(cell, path, line, || {
                format!("column '{}' (the target)", header[target])
            })?)
        };
        let start = x.len();
        x.resize(start + self.fields.p(), 0.0);
        let mut skip = label.is_none();
        for (c, cell) in record.iter().enumerate() {
            let Some(f) = self.of[c] else { continue };
            let value = if is_missing(cell) {
                Value::Missing
            } else if self.fields.fields()[f].kind == Kind::Numeric {
                Value::Number(parse_cell(cell, path, line, || {
                    format!("column '{}'", header[c])
                })?)
            } else {
                Value::Text(cell.trim())
            };
            match self.fields.put(f, value, &mut x[start..]) {
                Ok(()) => {}
                Err(Refusal::SkipRow) => skip = true,
                Err(Refusal::Missing(_)) => {
                    x.truncate(start);
                    return Err(refuse(format!(
                        "column '{}': '{cell}' is a missing value: fill it, or read missing \
                         cells with --missing skip_row (leave the row out) or --missing \
                         indicator (0 plus a 0/1 column {}=missing)",
                        header[c], header[c]
                    )));
                }
                Err(Refusal::Wrong(m)) => {
                    x.truncate(start);
                    return Err(refuse(format!("column '{}': {m}", header[c])));
                }
            }
        }
        match (skip, label) {
            (false, Some(v)) => {
                y.push(v);
                Ok(true)
            }
            _ => {
                x.truncate(start);
                self.skipped += 1;
                Ok(false)
            }
        }
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
