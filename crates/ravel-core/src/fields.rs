//! Named fields to feature columns: how a record's fields (a JSON event, a CSV row, a decoded
//! Avro record) become the fixed-width row x the statistics fold.
//!
//! The statistics need the dimension p before the first row, so every field expands into a
//! fixed block of columns, decided by its declaration alone:
//! - **numeric**: one column (integers, floats; booleans as 0 / 1);
//! - **categorical** over declared levels: one 0/1 column per level after the first, and one
//!   `<name>=other` column for every value that was not declared. The first level is the
//!   reference (its rows are 0 in the whole block): a column per level beside the intercept
//!   would sum to one on every row, an exact collinearity no least-squares method could
//!   answer uniquely; with a reference level each coefficient is how much its level differs
//!   from the first (treatment coding, scikit-learn's `OneHotEncoder(drop="first")`);
//! - **hashed** into B buckets: each token adds +1 or -1 to column `<name>#<bucket>`, with
//!   scikit-learn's `FeatureHasher(input_type="string")` definition: h = MurmurHash3 x86 32-bit
//!   of the token's UTF-8 bytes with seed 0, read as a signed 32-bit integer; the bucket is
//!   |h| mod B and the sign that of h (so a block of one token per row does not sum to a
//!   constant either);
//! - with the `indicator` missing policy, one more 0/1 column `<name>=missing`.
//!
//! A missing value (an absent field, null, NaN, an empty or `NA` CSV cell) follows the field's
//! policy: `reject` (the record is refused, naming the field), `skip_row`, or `indicator`
//! (the block stays 0 and `<name>=missing` is 1: exact, and what linear models usually do).
//! A value of the wrong type (text in a numeric field, a list where one value belongs) is
//! always refused: it means the data is not what the declaration says.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::ops::Range;

/// The most levels one categorical field may declare (or a file may hold).
pub const MAX_LEVELS: usize = 1000;
/// The most buckets one hashed field may have.
pub const MAX_BUCKETS: usize = 4096;

/// What a missing value does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Missing {
    /// The record is refused (a stream dead-letters it with the field named).
    #[default]
    Reject,
    /// The row is left out (counted).
    SkipRow,
    /// The field's block stays 0 and its `<name>=missing` column is 1.
    Indicator,
}

impl Missing {
    /// The name in configurations and flags.
    pub fn name(&self) -> &'static str {
        match self {
            Missing::Reject => "reject",
            Missing::SkipRow => "skip_row",
            Missing::Indicator => "indicator",
        }
    }
    /// The policy named `s` (`reject`, `skip_row` or `indicator`).
    pub fn parse(s: &str) -> Result<Missing, String> {
        match s.replace('-', "_").as_str() {
            "reject" => Ok(Missing::Reject),
            "skip_row" => Ok(Missing::SkipRow),
            "indicator" => Ok(Missing::Indicator),
            _ => Err(format!(
                "missing = '{s}': use reject (refuse the row), skip_row (leave it out) or \
                 indicator (0 plus a 0/1 column <name>=missing)"
            )),
        }
    }
}

/// How a field becomes columns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Kind {
    /// One column.
    Numeric,
    /// One column per level after the first (the reference), and `<name>=other`.
    Categorical {
        /// The declared levels, the first the reference.
        levels: Vec<String>,
    },
    /// `buckets` columns `<name>#<bucket>`.
    Hashed {
        /// The number of buckets.
        buckets: usize,
    },
}

impl Kind {
    /// The name in configurations (`numeric`, `categorical`, `hashed`).
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Numeric => "numeric",
            Kind::Categorical { .. } => "categorical",
            Kind::Hashed { .. } => "hashed",
        }
    }
}

/// One declared field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Its name, a dotted path into nested records (`user.age`): also the prefix of its
    /// columns' names.
    pub name: String,
    /// How it becomes columns.
    pub kind: Kind,
    /// What a missing value does.
    pub missing: Missing,
}

impl Field {
    /// A numeric field that refuses missing values (what `features = ["a", "b"]` declares).
    pub fn numeric(name: impl Into<String>) -> Field {
        Field {
            name: name.into(),
            kind: Kind::Numeric,
            missing: Missing::Reject,
        }
    }
}

/// One field's value as a record carries it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// Absent, null, NaN, or an empty / `NA` cell.
    Missing,
    /// A number.
    Number(f64),
    /// A boolean (1 / 0 in a numeric field, `true` / `false` as a category).
    Bool(bool),
    /// Text.
    Text(&'a str),
}

/// Why a value was not placed.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// A missing value under `reject`: the message names the field.
    Missing(String),
    /// A missing value under `skip_row`: leave the row out.
    SkipRow,
    /// A value of the wrong type or out of range: what is wrong and what to do.
    Wrong(String),
}

/// The expansion of declared fields into columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Fields {
    fields: Vec<Field>,
    /// The first column of each field's block.
    start: Vec<usize>,
    columns: Vec<String>,
    /// Per categorical field: level -> offset in its block (the reference has none).
    levels: Vec<HashMap<String, usize>>,
    index: HashMap<String, usize>,
    /// Every field's name and each of its dotted prefixes (`user` for `user.age`): the
    /// top-level keys of a record the fields use.
    prefixes: std::collections::HashSet<String>,
}

impl Fields {
    /// Checks the declarations (names unique, levels and buckets within bounds, column names
    /// distinct) and lays the columns out in declaration order.
    pub fn new(fields: Vec<Field>) -> Result<Fields, String> {
        let mut start = Vec::with_capacity(fields.len());
        let mut columns = Vec::new();
        let mut levels = Vec::with_capacity(fields.len());
        let mut index = HashMap::with_capacity(fields.len());
        for (i, f) in fields.iter().enumerate() {
            let name = &f.name;
            if name.is_empty() {
                return Err("a feature has an empty name".into());
            }
            if index.insert(name.clone(), i).is_some() {
                return Err(format!("feature '{name}' is declared twice"));
            }
            start.push(columns.len());
            let mut map = HashMap::new();
            match &f.kind {
                Kind::Numeric => columns.push(name.clone()),
                Kind::Categorical { levels: declared } => {
                    if declared.is_empty() || declared.len() > MAX_LEVELS {
                        return Err(format!(
                            "feature '{name}': a categorical feature declares 1..={MAX_LEVELS} \
                             levels, got {}; beyond that use kind = \"hashed\" with a number \
                             of buckets",
                            declared.len()
                        ));
                    }
                    for (j, level) in declared.iter().enumerate() {
                        if level == "other" || level == "missing" {
                            return Err(format!(
                                "feature '{name}': level '{level}' is the name of a column ravel \
                                 adds ({name}={level}); leave it out of levels (undeclared values \
                                 go to {name}=other)"
                            ));
                        }
                        if declared[..j].contains(level) {
                            return Err(format!(
                                "feature '{name}': level '{level}' is declared twice"
                            ));
                        }
                        if j > 0 {
                            map.insert(level.clone(), j - 1);
                        }
                    }
                    columns.extend(declared[1..].iter().map(|l| format!("{name}={l}")));
                    columns.push(format!("{name}=other"));
                }
                Kind::Hashed { buckets } => {
                    if !(1..=MAX_BUCKETS).contains(buckets) {
                        return Err(format!(
                            "feature '{name}': buckets = {buckets}: a hashed feature has \
                             1..={MAX_BUCKETS} buckets"
                        ));
                    }
                    columns.extend((0..*buckets).map(|b| format!("{name}#{b}")));
                }
            }
            if f.missing == Missing::Indicator {
                columns.push(format!("{name}=missing"));
            }
            levels.push(map);
        }
        let mut seen = std::collections::HashSet::with_capacity(columns.len());
        if let Some(c) = columns.iter().find(|c| !seen.insert(c.as_str())) {
            return Err(format!(
                "two features expand to the column '{c}': rename one of them"
            ));
        }
        let mut prefixes = std::collections::HashSet::new();
        for f in &fields {
            prefixes.insert(f.name.clone());
            prefixes.extend(
                f.name
                    .match_indices('.')
                    .map(|(i, _)| f.name[..i].to_string()),
            );
        }
        Ok(Fields {
            fields,
            start,
            columns,
            levels,
            index,
            prefixes,
        })
    }

    /// Numeric fields named `names`, refusing missing values (`features = ["a", "b"]`).
    pub fn numeric(names: &[String]) -> Result<Fields, String> {
        Fields::new(names.iter().map(Field::numeric).collect())
    }

    /// The dimension of the rows: the number of columns.
    pub fn p(&self) -> usize {
        self.columns.len()
    }

    /// The columns' names, in the rows' order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// The declared fields, in order.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// The field named `name` (its position in `fields`).
    pub fn field(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Whether a record's top-level key `key` holds a declared field (the field itself, or an
    /// object a dotted path goes into).
    pub fn uses(&self, key: &str) -> bool {
        self.prefixes.contains(key)
    }

    /// The columns of field `f` (its block, the indicator included).
    pub fn columns_of(&self, f: usize) -> Range<usize> {
        let end = self.start.get(f + 1).copied().unwrap_or(self.columns.len());
        self.start[f]..end
    }

    /// Whether every field is numeric and refuses missing values: rows are then the fields'
    /// values in order, as positional messages carry them.
    pub fn is_plain(&self) -> bool {
        self.fields
            .iter()
            .all(|f| f.kind == Kind::Numeric && f.missing == Missing::Reject)
    }

    /// Places field `f`'s value in `row` (the p columns, zero where nothing was placed yet).
    /// A hashed field takes several tokens by calling this once per token.
    pub fn put(&self, f: usize, value: Value, row: &mut [f64]) -> Result<(), Refusal> {
        let field = &self.fields[f];
        let at = self.start[f];
        let name = &field.name;
        let value = match value {
            Value::Number(v) if v.is_nan() => Value::Missing,
            v => v,
        };
        if value == Value::Missing {
            return match field.missing {
                Missing::Reject => Err(Refusal::Missing(format!(
                    "feature '{name}' is missing (set missing = \"indicator\" or \"skip_row\" \
                     for the feature or the stream to accept rows without it)"
                ))),
                Missing::SkipRow => Err(Refusal::SkipRow),
                Missing::Indicator => {
                    row[self.columns_of(f).end - 1] = 1.0;
                    Ok(())
                }
            };
        }
        match &field.kind {
            Kind::Numeric => {
                row[at] = match value {
                    Value::Number(v) if v.is_finite() => v,
                    Value::Number(v) => {
                        return Err(Refusal::Wrong(format!(
                            "feature '{name}' is {v}, not a finite number"
                        )));
                    }
                    Value::Bool(b) => f64::from(u8::from(b)),
                    Value::Text(t) => {
                        return Err(Refusal::Wrong(format!(
                            "feature '{name}' holds text ('{}'), not a number: declare it \
                             categorical (kind = \"categorical\", or --categorical {name}) or \
                             hashed, or send numbers",
                            preview(t)
                        )));
                    }
                    Value::Missing => unreachable!("handled above"),
                };
            }
            Kind::Categorical { levels } => {
                let text = as_text(&value);
                if text == levels[0] {
                    return Ok(());
                }
                let offset = self.levels[f]
                    .get(text.as_ref())
                    .copied()
                    .unwrap_or(levels.len() - 1);
                row[at + offset] = 1.0;
            }
            Kind::Hashed { buckets } => {
                let (bucket, sign) = bucket(&as_text(&value), *buckets);
                row[at + bucket] += sign;
            }
        }
        Ok(())
    }
}

/// A category or token as text: numbers in their shortest form (`3`, not `3.0`), booleans
/// as `true` / `false`.
fn as_text<'a>(value: &Value<'a>) -> std::borrow::Cow<'a, str> {
    match *value {
        Value::Text(t) => t.into(),
        Value::Number(v) if v.fract() == 0.0 && v.abs() < 1e15 => format!("{}", v as i64).into(),
        Value::Number(v) => format!("{v}").into(),
        Value::Bool(b) => if b { "true" } else { "false" }.into(),
        Value::Missing => "".into(),
    }
}

/// The first 40 characters of `t`, for messages.
fn preview(t: &str) -> String {
    match t.char_indices().nth(40) {
        Some((i, _)) => format!("{}...", &t[..i]),
        None => t.to_string(),
    }
}

/// The bucket of `token` among `buckets` and its sign, as scikit-learn's `FeatureHasher`
/// computes them: h = MurmurHash3 (x86, 32-bit, seed 0) of the UTF-8 bytes as an i32;
/// bucket |h| mod `buckets`, sign +1 when h >= 0, else -1.
pub fn bucket(token: &str, buckets: usize) -> (usize, f64) {
    let h = murmur3::murmur3_32(&mut std::io::Cursor::new(token.as_bytes()), 0)
        .expect("reading from memory cannot fail") as i32;
    let b = (i64::from(h).unsigned_abs() % buckets as u64) as usize;
    (b, if h >= 0 { 1.0 } else { -1.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cat(name: &str, levels: &[&str], missing: Missing) -> Field {
        Field {
            name: name.into(),
            kind: Kind::Categorical {
                levels: levels.iter().map(|s| s.to_string()).collect(),
            },
            missing,
        }
    }

    #[test]
    fn blocks_are_laid_out_in_declaration_order() {
        let f = Fields::new(vec![
            Field::numeric("sqft"),
            cat("region", &["north", "south", "east"], Missing::Indicator),
            Field {
                name: "tags".into(),
                kind: Kind::Hashed { buckets: 3 },
                missing: Missing::SkipRow,
            },
        ])
        .unwrap();
        assert_eq!(
            f.columns(),
            [
                "sqft",
                "region=south",
                "region=east",
                "region=other",
                "region=missing",
                "tags#0",
                "tags#1",
                "tags#2"
            ]
        );
        assert_eq!(f.columns_of(1), 1..5);
        assert_eq!(f.field("tags"), Some(2));
        let mut row = vec![0.0; f.p()];
        f.put(0, Value::Number(2.5), &mut row).unwrap();
        f.put(1, Value::Text("east"), &mut row).unwrap();
        assert_eq!(&row[..5], [2.5, 0.0, 1.0, 0.0, 0.0]);
        let mut row = vec![0.0; f.p()];
        f.put(1, Value::Text("north"), &mut row).unwrap();
        assert!(
            row.iter().all(|v| *v == 0.0),
            "the reference level is all zeros"
        );
        f.put(1, Value::Text("west"), &mut row).unwrap();
        assert_eq!(row[3], 1.0, "an undeclared level is other");
        let mut row = vec![0.0; f.p()];
        f.put(1, Value::Missing, &mut row).unwrap();
        assert_eq!(&row[1..5], [0.0, 0.0, 0.0, 1.0]);
        assert_eq!(f.put(2, Value::Missing, &mut row), Err(Refusal::SkipRow));
        assert!(
            matches!(f.put(0, Value::Missing, &mut row), Err(Refusal::Missing(m)) if m.contains("'sqft'"))
        );
        assert!(
            matches!(f.put(0, Value::Text("big"), &mut row), Err(Refusal::Wrong(m)) if m.contains("categorical"))
        );
        f.put(0, Value::Bool(true), &mut row).unwrap();
        assert_eq!(row[0], 1.0);
    }

    #[test]
    fn numbers_are_categories_by_their_shortest_text() {
        let f = Fields::new(vec![cat("rooms", &["1", "2", "3"], Missing::Reject)]).unwrap();
        let mut row = vec![0.0; f.p()];
        f.put(0, Value::Number(3.0), &mut row).unwrap();
        assert_eq!(row, [0.0, 1.0, 0.0]);
    }

    #[test]
    fn declarations_out_of_bounds_are_refused_naming_the_field() {
        let too_many: Vec<String> = (0..=MAX_LEVELS).map(|i| i.to_string()).collect();
        let refs: Vec<&str> = too_many.iter().map(String::as_str).collect();
        let e = Fields::new(vec![cat("zip", &refs, Missing::Reject)]).unwrap_err();
        assert!(e.contains("'zip'") && e.contains("hashed"), "{e}");
        let e = Fields::new(vec![cat("r", &["a", "b", "a"], Missing::Reject)]).unwrap_err();
        assert!(e.contains("'a' is declared twice"), "{e}");
        let e = Fields::new(vec![cat("r", &["a", "other"], Missing::Reject)]).unwrap_err();
        assert!(e.contains("r=other"), "{e}");
        let e = Fields::new(vec![Field {
            name: "t".into(),
            kind: Kind::Hashed { buckets: 0 },
            missing: Missing::Reject,
        }])
        .unwrap_err();
        assert!(e.contains("buckets = 0"), "{e}");
        let e = Fields::new(vec![
            Field::numeric("r=other"),
            cat("r", &["a"], Missing::Reject),
        ])
        .unwrap_err();
        assert!(e.contains("'r=other'"), "{e}");
        let e = Fields::numeric(&["a".into(), "a".into()]).unwrap_err();
        assert!(e.contains("declared twice"), "{e}");
    }

    /// MurmurHash3 x86 32-bit against published test vectors (seed 0), and the bucket and
    /// sign of FeatureHasher's definition, with an independent reading of the hash's sign.
    #[test]
    fn hashing_follows_murmur3_and_feature_hasher() {
        let h = |s: &str| murmur3::murmur3_32(&mut std::io::Cursor::new(s.as_bytes()), 0).unwrap();
        assert_eq!(h(""), 0);
        assert_eq!(h("hello"), 0x248b_fa47);
        assert_eq!(h("Hello, world!"), 0xc036_3e43);
        for token in ["", "hello", "Hello, world!", "east", "tags"] {
            let signed = h(token) as i32;
            let (b, s) = bucket(token, 32);
            assert_eq!(b as i64, (signed as i64).abs() % 32);
            assert_eq!(s, if signed >= 0 { 1.0 } else { -1.0 });
        }
        let f = Fields::new(vec![Field {
            name: "tags".into(),
            kind: Kind::Hashed { buckets: 8 },
            missing: Missing::Reject,
        }])
        .unwrap();
        let mut row = vec![0.0; 8];
        f.put(0, Value::Text("a"), &mut row).unwrap();
        f.put(0, Value::Text("a"), &mut row).unwrap();
        let (b, s) = bucket("a", 8);
        assert_eq!(row[b], 2.0 * s, "repeated tokens add up");
    }
}
