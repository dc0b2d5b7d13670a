//! Memory bounds (issue 21): how many bytes the state of a p-feature stream, an extraction
//! from it, the rows held while reading, or a feature selection will take, computed from
//! dimensions alone. The file readers (`data`, for `ravel fit`, `select` and `produce`) and
//! the service's configuration check call these same functions, so a file or a configured
//! stream too large for the machine is refused with a message before anything of that size
//! is allocated, instead of the process aborting on a failed allocation (a LIBSVM index of
//! 200000 sets p = 200000, and the statistics alone take p^2 doubles = 320 GB).
//!
//! [`ByteSize`] is the amount a limit is given in: bytes, or a number with a unit (`4GiB`,
//! `512MB`, `1.5 TiB`), and how estimates are printed.
//!
//! The estimates count the arrays whose size grows with p (or n and s): vectors and matrices
//! of f64. Fixed-size headers, the allocator's overhead and the program itself are not
//! counted; limits should leave room for them (the default limits are half of the machine).

use crate::task::Task;
use std::fmt;
use std::str::FromStr;

const F64: u128 = std::mem::size_of::<f64>() as u128;

fn bytes(doubles: u128) -> u64 {
    u64::try_from(doubles.saturating_mul(F64)).unwrap_or(u64::MAX)
}

/// a x b + c x d doubles, saturating (dimensions up to usize::MAX never wrap around).
fn doubles(a: u128, b: u128, c: u128, d: u128) -> u128 {
    a.saturating_mul(b).saturating_add(c.saturating_mul(d))
}

/// Bytes of the parts of a computation, each from its dimensions (see each field).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Estimate {
    /// The running statistics (`stats::RunningStats`), per copy and per class: the p x p
    /// second moments E[(x - s)(x - s)^T] (p^2 doubles: stored square, only the lower
    /// triangle is maintained) and three p-vectors (E[x - s], E[(x - s)(y - t)], the shift
    /// s). Classification keeps two (`ClassStats`: positives and negatives); the service keeps
    /// two copies (the one ingest folds into and the snapshot readers extract from).
    pub statistics: u64,
    /// One extraction: the Gram matrix Q of the active columns (p^2 doubles) and, for a least
    /// squares solve on all of them (OLS, ridge, a full refit), the system and its Cholesky
    /// factor (2 p^2 more).
    pub extraction: u64,
    /// Rows held at once: a batch as read plus its working copy inside the update (the class
    /// split, or the packing of the symmetric update), 2 x rows x (p + 1) doubles; for
    /// `ravel select`, the whole file (n x (p + 1)).
    pub rows: u64,
    /// A feature selection (online substitution): the s kept columns of n samples with their
    /// standardized copies, the labels, scores and residuals (4 n), and the s x s refit system
    /// and its factor.
    pub selection: u64,
    /// The service's model history (`GET /v1/streams/{name}/history`): a bounded ring of
    /// snapshots of the stream's default model, each a few numbers and up to k coefficients.
    pub history: u64,
    /// A stream's time buckets (`stats::windows`): each bucket one copy of the statistics.
    pub windows: u64,
}

/// The statistics of one p-feature stream of this task and one extraction from them (the
/// state `ravel fit` builds from a file; the service adds a copy and its batches).
pub fn memory_estimate(p: usize, task: Task) -> Estimate {
    let p = p as u128;
    let classes = match task {
        Task::Regression => 1,
        Task::Classification => 2,
    };
    Estimate {
        statistics: bytes(doubles(p, p, 3, p).saturating_mul(classes)),
        extraction: bytes(doubles(3 * p, p, 4, p)),
        ..Estimate::default()
    }
}

/// The state of a feature stream of n samples keeping s features (see `Estimate::selection`).
pub fn selection_estimate(n: u64, s: usize) -> Estimate {
    let (n, s) = (n as u128, s as u128);
    Estimate {
        selection: bytes(doubles(2 * s, n, 4, n).saturating_add(doubles(2 * s, s, 0, 0))),
        ..Estimate::default()
    }
}

impl Estimate {
    /// `copies` copies of the statistics (the service: 2).
    pub fn with_copies(mut self, copies: u64) -> Estimate {
        self.statistics = self.statistics.saturating_mul(copies);
        self
    }
    /// Adds batches of `rows` rows of p features (read, then copied inside the update).
    pub fn with_batch(mut self, rows: u64, p: usize) -> Estimate {
        let d = doubles(2 * rows as u128, p as u128 + 1, 0, 0);
        self.rows = self.rows.saturating_add(bytes(d));
        self
    }
    /// Adds a whole file of n rows of p features held in memory (`ravel select`).
    pub fn with_file(mut self, n: u64, p: usize) -> Estimate {
        let d = doubles(n as u128, p as u128 + 1, 0, 0);
        self.rows = self.rows.saturating_add(bytes(d));
        self
    }
    /// Adds `bytes` of model history.
    pub fn with_history(mut self, bytes: u64) -> Estimate {
        self.history = self.history.saturating_add(bytes);
        self
    }
    /// Adds `bytes` of time buckets.
    pub fn with_windows(mut self, bytes: u64) -> Estimate {
        self.windows = self.windows.saturating_add(bytes);
        self
    }
    /// The sum of another estimate's parts and this one's (several streams).
    pub fn plus(self, other: Estimate) -> Estimate {
        Estimate {
            statistics: self.statistics.saturating_add(other.statistics),
            extraction: self.extraction.saturating_add(other.extraction),
            rows: self.rows.saturating_add(other.rows),
            selection: self.selection.saturating_add(other.selection),
            history: self.history.saturating_add(other.history),
            windows: self.windows.saturating_add(other.windows),
        }
    }
    /// All parts, in bytes (saturating at u64::MAX).
    pub fn total(&self) -> u64 {
        self.statistics
            .saturating_add(self.extraction)
            .saturating_add(self.rows)
            .saturating_add(self.selection)
            .saturating_add(self.history)
            .saturating_add(self.windows)
    }
}

/// "1.2 TiB (statistics 298.0 GiB, extraction 894.1 GiB, rows 1.5 GiB)": the total and its
/// nonzero parts.
impl fmt::Display for Estimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", ByteSize(self.total()))?;
        let parts = [
            ("statistics", self.statistics),
            ("extraction", self.extraction),
            ("rows", self.rows),
            ("selection", self.selection),
            ("history", self.history),
            ("windows", self.windows),
        ];
        let shown: Vec<String> = parts
            .iter()
            .filter(|(_, b)| *b > 0)
            .map(|(name, b)| format!("{name} {}", ByteSize(*b)))
            .collect();
        if shown.len() > 1 {
            write!(f, " ({})", shown.join(", "))?;
        }
        Ok(())
    }
}

/// An amount of memory in bytes. Parsed from a plain number of bytes or a number and a unit:
/// B, KB, MB, GB, TB (powers of 1000; K, M, G, T too) or KiB, MiB, GiB, TiB (powers of 1024),
/// case-insensitive, with or without a space (`4GiB`, `512 mb`, `1.5TiB`). Printed in binary
/// units with one decimal (`3.7 GiB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<ByteSize, String> {
        let t = s.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = (&t[..split], t[split..].trim());
        let help = "give bytes or a number with a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB \
                    (e.g. 4GiB)";
        let value: f64 = num
            .parse()
            .map_err(|_| format!("'{s}' is not an amount of memory: {help}"))?;
        let scale: f64 = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 1.0,
            "k" | "kb" => 1e3,
            "m" | "mb" => 1e6,
            "g" | "gb" => 1e9,
            "t" | "tb" => 1e12,
            "kib" => 1024f64,
            "mib" => 1024f64.powi(2),
            "gib" => 1024f64.powi(3),
            "tib" => 1024f64.powi(4),
            _ => return Err(format!("'{s}': unknown unit '{unit}': {help}")),
        };
        let b = value * scale;
        if !(b >= 1.0 && b < u64::MAX as f64) {
            return Err(format!(
                "'{s}' is not an amount of memory between 1 byte and 16 EiB"
            ));
        }
        Ok(ByteSize(b.round() as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
        if self.0 < 1024 {
            return write!(f, "{} B", self.0);
        }
        let mut v = self.0 as f64 / 1024.0;
        let mut unit = 0;
        while v >= 1024.0 && unit + 1 < UNITS.len() {
            v /= 1024.0;
            unit += 1;
        }
        write!(f, "{v:.1} {}", UNITS[unit])
    }
}

/// Configuration files give a limit as a string with a unit (`"4GiB"`) or a number of bytes.
impl<'de> serde::Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ByteSize, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an amount of memory such as \"4GiB\" or a number of bytes")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<ByteSize, E> {
                s.parse().map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, b: u64) -> Result<ByteSize, E> {
                if b == 0 {
                    return Err(E::custom("a memory limit must be at least 1 byte"));
                }
                Ok(ByteSize(b))
            }
            fn visit_i64<E: serde::de::Error>(self, b: i64) -> Result<ByteSize, E> {
                u64::try_from(b)
                    .map_err(|_| E::custom("a memory limit cannot be negative"))
                    .and_then(|b| self.visit_u64(b))
            }
        }
        d.deserialize_any(V)
    }
}

/// Written as a number of bytes (which reads back as the same amount).
impl serde::Serialize for ByteSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn statistics_are_p_squared_doubles_per_class() {
        let p = 1000usize;
        let r = memory_estimate(p, Task::Regression);
        assert_eq!(r.statistics, 8 * (1000 * 1000 + 3 * 1000));
        assert_eq!(r.extraction, 8 * (3 * 1000 * 1000 + 4 * 1000));
        assert_eq!((r.rows, r.selection), (0, 0));
        let c = memory_estimate(p, Task::Classification);
        assert_eq!(c.statistics, 2 * r.statistics, "two class statistics");
        assert_eq!(c.extraction, r.extraction, "one Gram problem");
        assert_eq!(r.total(), r.statistics + r.extraction);
    }

    #[test]
    fn the_issue_file_needs_far_more_than_a_machine() {
        // `1 200000:2` sets p = 200000: 4 p^2 doubles = 1.28e12 bytes.
        let e = memory_estimate(200_000, Task::Regression);
        assert!(e.total() > 1_200_000_000_000, "{e}");
        assert_eq!(e.to_string().split(' ').next(), Some("1.2"), "{e}");
        assert!(
            e.to_string()
                .ends_with("(statistics 298.0 GiB, extraction 894.1 GiB)")
        );
    }

    #[test]
    fn copies_batches_files_and_sums() {
        let e = memory_estimate(10, Task::Regression);
        assert_eq!(e.with_copies(2).statistics, 2 * e.statistics);
        assert_eq!(e.with_batch(100, 10).rows, 8 * 2 * 100 * 11);
        assert_eq!(Estimate::default().with_file(100, 10).rows, 8 * 100 * 11);
        let s = selection_estimate(200, 10);
        assert_eq!(s.selection, 8 * (2 * 10 * 200 + 4 * 200 + 2 * 100));
        assert_eq!(e.plus(s).total(), e.total() + s.total());
    }

    #[test]
    fn huge_dimensions_saturate_instead_of_overflowing() {
        let e = memory_estimate(usize::MAX, Task::Classification).with_batch(u64::MAX, 1 << 40);
        assert_eq!(e.total(), u64::MAX);
        let f = Estimate::default().with_file(1_000_000_000_000, 99_999);
        assert_eq!(f.rows, 8 * 1_000_000_000_000 * 100_000);
    }

    #[test]
    fn max_memory_parses_units() {
        let ok = [
            ("4GiB", 4 * GIB),
            ("4 GiB", 4 * GIB),
            ("4gib", 4 * GIB),
            ("1.5GiB", 3 * GIB / 2),
            ("512MiB", 512 << 20),
            ("64KiB", 64 << 10),
            ("2TiB", 2 << 40),
            ("4GB", 4_000_000_000),
            ("4G", 4_000_000_000),
            ("250 MB", 250_000_000),
            ("10k", 10_000),
            ("1T", 1_000_000_000_000),
            ("123456", 123_456),
            ("123456B", 123_456),
            (" 8 GiB ", 8 * GIB),
        ];
        for (s, want) in ok {
            assert_eq!(s.parse::<ByteSize>(), Ok(ByteSize(want)), "{s}");
        }
        for bad in [
            "",
            "GiB",
            "4 parsecs",
            "-1GiB",
            "0",
            "0.1",
            "1e3",
            "4..2GiB",
            "99999EiB",
        ] {
            let e = bad.parse::<ByteSize>().unwrap_err();
            assert!(e.contains(bad.trim()), "{bad}: {e}");
        }
        assert!(
            "4 parsecs"
                .parse::<ByteSize>()
                .unwrap_err()
                .contains("unknown unit 'parsecs'")
        );
    }

    #[test]
    fn sizes_print_in_binary_units() {
        assert_eq!(ByteSize(512).to_string(), "512 B");
        assert_eq!(ByteSize(1536).to_string(), "1.5 KiB");
        assert_eq!(ByteSize(4 * GIB).to_string(), "4.0 GiB");
        assert_eq!(ByteSize(u64::MAX).to_string(), "16.0 EiB");
        // What is printed parses back to the same amount (to the printed precision).
        assert_eq!("4.0 GiB".parse::<ByteSize>(), Ok(ByteSize(4 * GIB)));
    }

    #[test]
    fn config_files_give_strings_or_bytes() {
        let s: ByteSize = serde_json::from_str("\"4GiB\"").unwrap();
        assert_eq!(s, ByteSize(4 * GIB));
        let b: ByteSize = serde_json::from_str("1048576").unwrap();
        assert_eq!(b, ByteSize(1 << 20));
        assert!(serde_json::from_str::<ByteSize>("\"lots\"").is_err());
        assert!(serde_json::from_str::<ByteSize>("0").is_err());
        assert!(serde_json::from_str::<ByteSize>("-5").is_err());
    }
}
