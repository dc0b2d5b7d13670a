//! The shape of a stream's windows (issue 47): the bucket width and retention as the
//! configuration writes them (`bucket = "1m", keep = "7d"`), checked, and the ladder of
//! resolutions they roll up through (`WindowSpec::tiers`), with the span syntax both use.
//! Kept apart from the buckets themselves (`super`) because the configuration, the API and
//! the memory budget need the spec without any statistics.

use crate::task::Task;
use serde::{Deserialize, Serialize};

/// One second, minute, hour and day in milliseconds.
pub const SECOND_MS: i64 = 1000;
/// One minute in milliseconds.
pub const MINUTE_MS: i64 = 60 * SECOND_MS;
/// One hour in milliseconds.
pub const HOUR_MS: i64 = 60 * MINUTE_MS;
/// One day in milliseconds.
pub const DAY_MS: i64 = 24 * HOUR_MS;
/// The longest retention (`keep`): ten years of 365 days.
pub const MAX_KEEP_MS: i64 = 3650 * DAY_MS;
/// How far ahead of `now` a row's timestamp may be (clock skew between producers and this
/// service): further ahead it is refused (`Placed::Ahead`).
pub const MAX_AHEAD_MS: i64 = 5 * MINUTE_MS;
/// How long buckets finer than an hour are kept before they roll up into hours, and buckets
/// finer than a day before they roll up into days.
const FINE_AGE_MS: i64 = DAY_MS;
const HOURLY_AGE_MS: i64 = 30 * DAY_MS;

/// A span written `90s`, `1m`, `6h`, `7d`, `2w` or `500ms`: a whole number and a unit.
pub fn parse_span(s: &str) -> Result<i64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let unit_ms = match unit.trim() {
        "ms" => 1,
        "s" => SECOND_MS,
        "m" | "min" => MINUTE_MS,
        "h" => HOUR_MS,
        "d" => DAY_MS,
        "w" => 7 * DAY_MS,
        "" => {
            return Err(format!(
                "'{s}' has no unit: write it as 30s, 1m, 6h, 7d or 2w"
            ));
        }
        u => {
            return Err(format!(
                "'{s}': unknown unit '{u}' (one of ms, s, m, h, d, w, as in 1m or 7d)"
            ));
        }
    };
    let n: i64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number and a unit, as in 1m or 7d"))?;
    n.checked_mul(unit_ms).filter(|&ms| ms > 0).ok_or_else(|| {
        format!(
            "'{s}' must be a positive span of at most {} days",
            MAX_KEEP_MS / DAY_MS
        )
    })
}

/// A span in its largest whole unit (`1m`, `7d`, `90s`).
pub fn format_span(ms: i64) -> String {
    for (unit, size) in [
        ("d", DAY_MS),
        ("h", HOUR_MS),
        ("m", MINUTE_MS),
        ("s", SECOND_MS),
    ] {
        if ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

pub(super) fn align_down(t: i64, w: i64) -> i64 {
    t.div_euclid(w) * w
}

pub(super) fn align_up(t: i64, w: i64) -> i64 {
    -align_down(-t, w)
}

/// The bucket width and retention of a stream's windows, checked: the width is whole seconds
/// that divide an hour (below an hour), whole hours that divide a day (below a day) or whole
/// days, so that buckets roll up into hours and days without straddling them; `keep` is at
/// least one bucket and at most `MAX_KEEP_MS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowSpec {
    /// The width of the finest buckets, in milliseconds.
    pub bucket_ms: i64,
    /// How long rows are kept (in buckets of some width), in milliseconds.
    pub keep_ms: i64,
}

/// One resolution of the buckets: their width, and the age (of the coarser bucket they roll up
/// into) from which they are rolled up, or for the last tier dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tier {
    /// Bucket width in milliseconds.
    pub width_ms: i64,
    /// Buckets older than this (milliseconds before `now`) leave the tier.
    pub age_ms: i64,
}

impl WindowSpec {
    /// The spec of `bucket` and `keep` (`parse_span` each), checked.
    pub fn parse(bucket: &str, keep: &str) -> Result<WindowSpec, String> {
        let bucket_ms = parse_span(bucket).map_err(|e| format!("bucket: {e}"))?;
        let keep_ms = parse_span(keep).map_err(|e| format!("keep: {e}"))?;
        WindowSpec::new(bucket_ms, keep_ms)
    }

    /// A spec of these widths in milliseconds, checked (see the type).
    pub fn new(bucket_ms: i64, keep_ms: i64) -> Result<WindowSpec, String> {
        let b = format_span(bucket_ms);
        let fits = bucket_ms >= SECOND_MS
            && bucket_ms % SECOND_MS == 0
            && if bucket_ms < HOUR_MS {
                HOUR_MS % bucket_ms == 0
            } else if bucket_ms < DAY_MS {
                DAY_MS % bucket_ms == 0
            } else {
                bucket_ms % DAY_MS == 0
            };
        if !fits {
            return Err(format!(
                "bucket = \"{b}\" must be whole seconds dividing an hour (1s to 30m, e.g. 1m, 5m, 15m), \
                 whole hours dividing a day (1h, 2h, 3h, 4h, 6h, 8h, 12h) or whole days, so that \
                 buckets roll up into hours and days"
            ));
        }
        if keep_ms < bucket_ms || keep_ms > MAX_KEEP_MS {
            return Err(format!(
                "keep = \"{}\" must be at least one bucket ({b}) and at most {} days",
                format_span(keep_ms),
                MAX_KEEP_MS / DAY_MS
            ));
        }
        Ok(WindowSpec { bucket_ms, keep_ms })
    }

    /// The resolutions, finest first: the bucket width for a day, hours for 30 days, days
    /// until `keep` (widths not coarser than the bucket are skipped; the tier that reaches
    /// `keep` is the last, and holds its buckets until then).
    pub fn tiers(&self) -> Vec<Tier> {
        let b = self.bucket_ms;
        let first_age = if b < HOUR_MS {
            FINE_AGE_MS
        } else if b < DAY_MS {
            HOURLY_AGE_MS
        } else {
            i64::MAX
        };
        let mut ladder = vec![(b, first_age)];
        if b < HOUR_MS {
            ladder.push((HOUR_MS, HOURLY_AGE_MS));
        }
        if b < DAY_MS {
            ladder.push((DAY_MS, i64::MAX));
        }
        let mut tiers = Vec::new();
        for (i, &(width_ms, age)) in ladder.iter().enumerate() {
            // Hours and days only once the finer tier's age is below keep.
            let last = age >= self.keep_ms || i + 1 == ladder.len();
            tiers.push(Tier {
                width_ms,
                age_ms: if last { self.keep_ms } else { age },
            });
            if last {
                break;
            }
        }
        tiers
    }

    /// The most buckets that can exist at once: each tier's buckets over its ages, the
    /// partial buckets at both ends, and those of rows up to `MAX_AHEAD_MS` ahead.
    pub fn max_buckets(&self) -> u64 {
        let tiers = self.tiers();
        let mut total: i64 = MAX_AHEAD_MS / tiers[0].width_ms + 1;
        let mut younger = 0;
        for (i, t) in tiers.iter().enumerate() {
            let coarser = tiers.get(i + 1).map_or(t.width_ms, |c| c.width_ms);
            total += (t.age_ms - younger + coarser) / t.width_ms + 2;
            younger = t.age_ms;
        }
        total as u64
    }

    /// Bytes of one bucket of a p-feature stream of `task` (`memory::memory_estimate`'s
    /// statistics: one `RunningStats` per class).
    pub fn bucket_bytes(p: usize, task: Task) -> u64 {
        crate::memory::memory_estimate(p, task).statistics
    }

    /// The windows as the configuration writes them.
    pub fn describe(&self) -> String {
        format!(
            "bucket = \"{}\", keep = \"{}\"",
            format_span(self.bucket_ms),
            format_span(self.keep_ms)
        )
    }
}
