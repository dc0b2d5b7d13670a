//! Statistics per time bucket (issue 47): a stream may keep, beside its statistics, plain
//! (unweighted) statistics of the rows of each time bucket, keyed by the rows' timestamps, so
//! that the statistics of any span of buckets, and every model of them, are exact: buckets
//! merge pairwise in centred form (`centred`), never by subtracting sums.
//!
//! Old buckets roll up geometrically so that memory stays bounded (`WindowSpec::tiers`):
//! buckets of the configured width are kept for a day, then merged into hours, which are kept
//! for 30 days, then into days, kept until `keep`; a width of an hour or more skips the finer
//! tiers, and `keep` ends the ladder early. A coarse bucket is rolled up only whole (all its
//! fine buckets at once), so at any time every instant lies in exactly one bucket and a span
//! is a set of whole buckets. `now` (the caller's clock, never moving back) decides the ages;
//! a row older than the oldest bucket that may still exist (`Windows::floor_ms`) or further
//! ahead of `now` than `MAX_AHEAD_MS` is refused and counted by the caller, never folded into
//! another bucket.

mod spec;
mod stored;

pub use spec::{
    DAY_MS, HOUR_MS, MAX_AHEAD_MS, MAX_KEEP_MS, MINUTE_MS, SECOND_MS, Tier, WindowSpec,
    format_span, parse_span,
};

use super::centred::merge_stats_pairwise;
use super::{AlphaSchedule, Stats, StatsError};
use crate::task::Task;
use spec::{align_down, align_up};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Where a row's timestamp goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// Into the bucket that starts here, of this width.
    Bucket {
        /// Start (Unix ms).
        start: i64,
        /// Width (ms).
        width: i64,
    },
    /// Older than the oldest bucket that may exist (`Windows::floor_ms`).
    TooOld,
    /// Further ahead of `now` than `MAX_AHEAD_MS`.
    Ahead,
}

/// What `Windows::fold` did with a batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Folded {
    /// Rows folded into a bucket.
    pub rows: usize,
    /// Rows refused as older than retention, and the oldest such timestamp.
    pub too_old: usize,
    /// The oldest refused timestamp (Unix ms).
    pub oldest: Option<i64>,
    /// Rows refused as too far ahead of `now`, and the furthest such timestamp.
    pub ahead: usize,
    /// The furthest refused timestamp (Unix ms).
    pub furthest: Option<i64>,
}

/// Why a span cannot be answered, in the request's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowError {
    /// `to` is not after `from`.
    Inverted {
        /// The asked start (Unix ms).
        from: i64,
        /// The asked end (Unix ms).
        to: i64,
    },
    /// `from` is before the oldest kept bucket.
    OutsideRetention {
        /// The asked start (Unix ms).
        from: i64,
        /// The oldest time still kept (Unix ms).
        floor: i64,
        /// The retention.
        keep_ms: i64,
    },
    /// The span holds no whole bucket of the resolution kept at its age.
    NarrowerThanBuckets {
        /// The asked start (Unix ms).
        from: i64,
        /// The asked end (Unix ms).
        to: i64,
        /// The width of the buckets there.
        width_ms: i64,
    },
}

impl fmt::Display for WindowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WindowError::Inverted { from, to } => write!(
                f,
                "window \"to\" ({to}) must be after \"from\" ({from}): a window is [from, to)"
            ),
            WindowError::OutsideRetention {
                from,
                floor,
                keep_ms,
            } => write!(
                f,
                "window \"from\" ({from}) is before the oldest kept bucket ({floor}): the stream keeps \
                 windows for {} (windows.keep)",
                format_span(*keep_ms)
            ),
            WindowError::NarrowerThanBuckets { from, to, width_ms } => write!(
                f,
                "window [{from}, {to}) holds no whole bucket: rows of that age are kept in buckets of {} \
                 (older buckets roll up into hours and days); widen the window",
                format_span(*width_ms)
            ),
        }
    }
}

impl std::error::Error for WindowError {}

/// The statistics of a span of buckets.
#[derive(Debug, Clone)]
pub struct Span {
    /// The rows of the span's buckets, plain.
    pub stats: Stats,
    /// The span the buckets cover: [from, to) in Unix ms, the asked span snapped inward to
    /// bucket boundaries.
    pub from: i64,
    /// End of the covered span (Unix ms, exclusive).
    pub to: i64,
    /// Buckets merged (those holding rows).
    pub buckets: usize,
}

#[derive(Debug, Clone, PartialEq)]
struct Bucket {
    width: i64,
    stats: Arc<Stats>,
}

/// A stream's buckets (see the module header). Cloning shares the buckets (`Arc`): a snapshot
/// costs a pointer per bucket, and a fold copies only the buckets it changes while a reader
/// holds them.
#[derive(Debug, Clone, PartialEq)]
pub struct Windows {
    spec: WindowSpec,
    tiers: Vec<Tier>,
    task: Task,
    p: usize,
    /// The latest `now` (Unix ms); None before the first fold.
    now_ms: Option<i64>,
    buckets: BTreeMap<i64, Bucket>,
}

impl Windows {
    /// No buckets yet.
    pub fn new(spec: WindowSpec, task: Task, p: usize) -> Windows {
        Windows {
            tiers: spec.tiers(),
            spec,
            task,
            p,
            now_ms: None,
            buckets: BTreeMap::new(),
        }
    }

    /// The spec.
    pub fn spec(&self) -> WindowSpec {
        self.spec
    }
    /// Features p.
    pub fn p(&self) -> usize {
        self.p
    }
    /// Buckets held now.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }
    /// Whether no bucket is held.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
    /// Rows in all buckets.
    pub fn n(&self) -> u64 {
        self.buckets.values().map(|b| b.stats.n()).sum()
    }
    /// The latest `now` the buckets were aged at (Unix ms).
    pub fn now_ms(&self) -> Option<i64> {
        self.now_ms
    }
    /// Each bucket's start, width and rows, oldest first.
    pub fn buckets(&self) -> impl Iterator<Item = (i64, i64, u64)> + '_ {
        self.buckets.iter().map(|(&s, b)| (s, b.width, b.stats.n()))
    }

    /// The task of the buckets' statistics.
    pub fn task(&self) -> Task {
        self.task
    }

    /// Each bucket's start, width and statistics, oldest first. The statistics are shared:
    /// a fold replaces a bucket's `Arc` whenever it changes the bucket (a new row or a
    /// roll-up), so a caller that keeps the `Arc`s of an earlier copy tells the buckets
    /// changed since by `Arc::ptr_eq` (the Kafka store writes only those).
    pub fn shared_buckets(&self) -> impl Iterator<Item = (i64, i64, &Arc<Stats>)> + '_ {
        self.buckets.iter().map(|(&s, b)| (s, b.width, &b.stats))
    }

    /// Windows of `spec`, aged at `now_ms`, holding these buckets (start, width, statistics),
    /// as stored apart (the Kafka store's bucket records): refuses two buckets at one start
    /// and buckets of a width or alignment the spec has no tier for, or not plain statistics
    /// of `task` and p. Each bucket's values are the caller's to check (`Stats::validate`),
    /// once, when it is read.
    pub fn from_shared(
        spec: WindowSpec,
        task: Task,
        p: usize,
        now_ms: Option<i64>,
        buckets: impl IntoIterator<Item = (i64, i64, Arc<Stats>)>,
    ) -> Result<Windows, String> {
        let mut w = Windows::new(spec, task, p);
        w.now_ms = now_ms;
        for (start, width, stats) in buckets {
            if w.buckets.insert(start, Bucket { width, stats }).is_some() {
                return Err(format!("two buckets start at {start}"));
            }
        }
        for (&start, b) in &w.buckets {
            w.check_bucket(start, b)?;
        }
        Ok(w)
    }

    /// A bucket's width, alignment, task, p and schedule against the windows'.
    fn check_bucket(&self, start: i64, b: &Bucket) -> Result<(), String> {
        if !self.tiers.iter().any(|t| t.width_ms == b.width) || start % b.width != 0 {
            return Err(format!(
                "the bucket at {start} of width {} ms is not one of {}",
                b.width,
                self.spec.describe()
            ));
        }
        if b.stats.task() != self.task
            || b.stats.p() != self.p
            || *b.stats.schedule() != AlphaSchedule::Plain
        {
            return Err(format!(
                "the bucket at {start} is not plain {} statistics of p = {}",
                self.task, self.p
            ));
        }
        Ok(())
    }

    /// Where tier i (not the last) ends, going back in time: rows from here on are in tier i.
    fn boundary(&self, now: i64, i: usize) -> i64 {
        align_down(
            now.saturating_sub(self.tiers[i].age_ms),
            self.tiers[i + 1].width_ms,
        )
    }

    fn floor_at(&self, now: i64) -> i64 {
        let last = self.tiers[self.tiers.len() - 1];
        align_down(now.saturating_sub(last.age_ms), last.width_ms)
    }

    /// The oldest time a bucket may still hold (Unix ms); None before the first fold.
    pub fn floor_ms(&self) -> Option<i64> {
        self.now_ms.map(|n| self.floor_at(n))
    }

    /// The width of the buckets holding time `t`, at the current `now`.
    fn width_at(&self, now: i64, t: i64) -> i64 {
        for i in 0..self.tiers.len() - 1 {
            if t >= self.boundary(now, i) {
                return self.tiers[i].width_ms;
            }
        }
        self.tiers[self.tiers.len() - 1].width_ms
    }

    /// Where a row stamped `ts` goes at `now`.
    pub fn place(&self, now: i64, ts: i64) -> Placed {
        if ts > now.saturating_add(MAX_AHEAD_MS) {
            return Placed::Ahead;
        }
        if ts < self.floor_at(now) {
            return Placed::TooOld;
        }
        let width = self.width_at(now, ts);
        Placed::Bucket {
            start: align_down(ts, width),
            width,
        }
    }

    /// Ages the buckets to `now` (never back): the fine buckets whose coarse bucket is past
    /// their tier's age merge into it, and buckets older than retention go.
    pub fn advance(&mut self, now: i64) {
        let now = self.now_ms.map_or(now, |n| n.max(now));
        self.now_ms = Some(now);
        for i in 0..self.tiers.len() - 1 {
            let (fine, coarse) = (self.tiers[i].width_ms, self.tiers[i + 1].width_ms);
            let boundary = self.boundary(now, i);
            let due: Vec<i64> = self
                .buckets
                .range(..boundary)
                .filter(|(_, b)| b.width == fine)
                .map(|(&s, _)| s)
                .collect();
            let mut groups: BTreeMap<i64, Vec<Arc<Stats>>> = BTreeMap::new();
            for start in due {
                let b = self.buckets.remove(&start).expect("listed above");
                groups
                    .entry(align_down(start, coarse))
                    .or_default()
                    .push(b.stats);
            }
            for (parent, children) in groups {
                let mut parts: Vec<Arc<Stats>> = Vec::with_capacity(children.len() + 1);
                if let Some(existing) = self.buckets.remove(&parent) {
                    parts.push(existing.stats);
                }
                parts.extend(children);
                let refs: Vec<&Stats> = parts.iter().map(|s| s.as_ref()).collect();
                let merged = merge_stats_pairwise(&self.empty(), &refs)
                    .expect("buckets are of the windows' task and p");
                self.buckets.insert(
                    parent,
                    Bucket {
                        width: coarse,
                        stats: Arc::new(merged),
                    },
                );
            }
        }
        let floor = self.floor_at(now);
        self.buckets = self.buckets.split_off(&floor);
    }

    fn empty(&self) -> Stats {
        Stats::new(self.task, self.p, AlphaSchedule::Plain)
    }

    /// Ages the buckets to `now`, then folds each row (row-major `x`, `y`, `stamps[i]` the
    /// Unix ms of row i) into its bucket; rows too old or too far ahead are counted, not
    /// folded. Nothing changes on error (a batch the statistics refuse).
    pub fn fold(
        &mut self,
        now: i64,
        stamps: &[i64],
        x: &[f64],
        y: &[f64],
    ) -> Result<Folded, StatsError> {
        let p = self.p;
        assert_eq!(stamps.len(), y.len(), "one timestamp per row");
        self.advance(now);
        let now = self.now_ms.expect("set by advance");
        let mut out = Folded::default();
        let mut groups: BTreeMap<i64, (i64, Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for (i, &ts) in stamps.iter().enumerate() {
            match self.place(now, ts) {
                Placed::Bucket { start, width } => {
                    let g = groups
                        .entry(start)
                        .or_insert_with(|| (width, Vec::new(), Vec::new()));
                    g.1.extend_from_slice(&x[i * p..(i + 1) * p]);
                    g.2.push(y[i]);
                    out.rows += 1;
                }
                Placed::TooOld => {
                    out.too_old += 1;
                    out.oldest = Some(out.oldest.map_or(ts, |o| o.min(ts)));
                }
                Placed::Ahead => {
                    out.ahead += 1;
                    out.furthest = Some(out.furthest.map_or(ts, |o| o.max(ts)));
                }
            }
        }
        // Check every group before any bucket changes, so that an error changes nothing.
        let mut folded: Vec<(i64, i64, Stats)> = Vec::with_capacity(groups.len());
        for (start, (width, gx, gy)) in groups {
            let mut stats = match self.buckets.get(&start) {
                Some(b) => b.stats.as_ref().clone(),
                None => self.empty(),
            };
            stats.update_batch(&gx, &gy)?;
            folded.push((start, width, stats));
        }
        for (start, width, stats) in folded {
            self.buckets.insert(
                start,
                Bucket {
                    width,
                    stats: Arc::new(stats),
                },
            );
        }
        Ok(out)
    }

    /// The statistics of the rows in [from, to) (Unix ms), snapped inward to the boundaries of
    /// the buckets at each end: the merge of every bucket inside.
    pub fn span(&self, from: i64, to: i64) -> Result<Span, WindowError> {
        if to <= from {
            return Err(WindowError::Inverted { from, to });
        }
        let Some(now) = self.now_ms else {
            return Ok(Span {
                stats: self.empty(),
                from,
                to,
                buckets: 0,
            });
        };
        let floor = self.floor_at(now);
        if from < floor {
            return Err(WindowError::OutsideRetention {
                from,
                floor,
                keep_ms: self.spec.keep_ms,
            });
        }
        let start = align_up(from, self.width_at(now, from));
        let end_width = self.width_at(now, to - 1);
        let end = align_down(to, end_width);
        if end <= start {
            return Err(WindowError::NarrowerThanBuckets {
                from,
                to,
                width_ms: self.width_at(now, from).max(end_width),
            });
        }
        let parts: Vec<&Stats> = self
            .buckets
            .range(start..end)
            .filter(|(s, b)| **s + b.width <= end)
            .map(|(_, b)| b.stats.as_ref())
            .collect();
        let stats = merge_stats_pairwise(&self.empty(), &parts).expect("same task and p");
        Ok(Span {
            stats,
            from: start,
            to: end,
            buckets: parts.len(),
        })
    }

    /// The statistics of the rows in [from, to) in these buckets and `others` together (one
    /// stream's partitions, each with its own buckets): every set is aged to the latest `now`
    /// among them, so that all snap to the same bucket boundaries, then spanned, and the spans
    /// merged pairwise, as if every row were in one set. The sets must be of one spec, task
    /// and p (checked when they were restored).
    pub fn span_with(&self, others: &[&Windows], from: i64, to: i64) -> Result<Span, WindowError> {
        let sets: Vec<&Windows> = std::iter::once(self)
            .chain(others.iter().copied())
            .collect();
        let Some(now) = sets.iter().filter_map(|w| w.now_ms).max() else {
            return self.span(from, to);
        };
        let mut spans = Vec::with_capacity(sets.len());
        for w in sets {
            let span = if w.now_ms == Some(now) {
                w.span(from, to)?
            } else {
                // A clone shares the buckets; ageing copies only those that roll up.
                let mut aged = w.clone();
                aged.advance(now);
                aged.span(from, to)?
            };
            spans.push(span);
        }
        let (start, end) = (spans[0].from, spans[0].to);
        debug_assert!(spans.iter().all(|s| (s.from, s.to) == (start, end)));
        let parts: Vec<&Stats> = spans.iter().map(|s| &s.stats).collect();
        let stats = merge_stats_pairwise(&self.empty(), &parts).expect("same task and p");
        Ok(Span {
            stats,
            from: start,
            to: end,
            buckets: spans.iter().map(|s| s.buckets).sum(),
        })
    }

    /// Checks windows that came from outside (a checkpoint): the buckets are of `task` and p,
    /// plain, valid, of a tier's width and aligned to it.
    pub fn validate(&self, task: Task, p: usize) -> Result<(), String> {
        if self.task != task || self.p != p {
            return Err(format!(
                "the windows are of a {} stream of p = {}, not of a {task} stream of p = {p}",
                self.task, self.p
            ));
        }
        for (&start, b) in &self.buckets {
            self.check_bucket(start, b)?;
            b.stats
                .validate()
                .map_err(|e| format!("the bucket at {start}: {e}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::centred::tests::{assert_matches, rows};
    use crate::stats::uniform;

    const T0: i64 = 1_790_000_000_000 - 1_790_000_000_000 % DAY_MS;

    #[test]
    fn spans_parse_and_specs_are_bounded() {
        assert_eq!(parse_span("1m"), Ok(MINUTE_MS));
        assert_eq!(parse_span(" 7d "), Ok(7 * DAY_MS));
        assert_eq!(parse_span("500ms"), Ok(500));
        assert_eq!(parse_span("2w"), Ok(14 * DAY_MS));
        for bad in [
            "",
            "m",
            "1",
            "1.5h",
            "-1h",
            "0s",
            "3 fortnights",
            "99999999999999999d",
        ] {
            assert!(parse_span(bad).is_err(), "{bad}");
        }
        assert!(parse_span("1").unwrap_err().contains("no unit"));
        assert_eq!(format_span(90 * SECOND_MS), "90s");
        assert_eq!(format_span(7 * DAY_MS), "7d");
        assert!(WindowSpec::parse("1m", "7d").is_ok());
        for (b, k) in [
            ("7m", "7d"),
            ("5h", "7d"),
            ("36h", "7d"),
            ("500ms", "1d"),
            ("1h", "30m"),
            ("1d", "20000d"),
        ] {
            let e = WindowSpec::parse(b, k).unwrap_err();
            assert!(e.contains("bucket") || e.contains("keep"), "{b} {k}: {e}");
        }
        let tiers = |b: &str, k: &str| -> Vec<(i64, i64)> {
            WindowSpec::parse(b, k)
                .unwrap()
                .tiers()
                .iter()
                .map(|t| (t.width_ms, t.age_ms))
                .collect()
        };
        assert_eq!(
            tiers("1m", "7d"),
            vec![(MINUTE_MS, DAY_MS), (HOUR_MS, 7 * DAY_MS)]
        );
        assert_eq!(
            tiers("1m", "365d"),
            vec![
                (MINUTE_MS, DAY_MS),
                (HOUR_MS, 30 * DAY_MS),
                (DAY_MS, 365 * DAY_MS)
            ]
        );
        assert_eq!(tiers("1m", "12h"), vec![(MINUTE_MS, 12 * HOUR_MS)]);
        assert_eq!(
            tiers("1h", "90d"),
            vec![(HOUR_MS, 30 * DAY_MS), (DAY_MS, 90 * DAY_MS)]
        );
        assert_eq!(tiers("1d", "90d"), vec![(DAY_MS, 90 * DAY_MS)]);
    }

    /// One stream's rows split over three partitions, each folding into its own buckets at
    /// its own pace (so their `now`s differ and their roll-ups are at different stages):
    /// `span_with` over the three equals the span of one set holding every row, for spans
    /// over fine and rolled-up buckets, and refuses what the single set refuses.
    #[test]
    fn partitions_buckets_span_together_as_one_set() {
        let p = 2;
        let spec = WindowSpec::parse("1m", "7d").unwrap();
        let mut one = Windows::new(spec, Task::Regression, p);
        let mut parts: Vec<Windows> = (0..3)
            .map(|_| Windows::new(spec, Task::Regression, p))
            .collect();
        let n = 3000;
        let (x, y) = rows(p, n, 5);
        let stamps: Vec<i64> = (0..n)
            .map(|i| T0 + (i as i64 * 3 * DAY_MS) / n as i64)
            .collect();
        // Batch b (30 rows) into a set of buckets, at the clock `now`.
        let fold_batch = |w: &mut Windows, now: i64, b: usize| {
            let r = b * 30..(b + 1) * 30;
            w.fold(now, &stamps[r.clone()], &x[r.start * p..r.end * p], &y[r])
                .unwrap();
        };
        for b in 0..(n / 30) {
            let now = stamps[(b + 1) * 30 - 1];
            fold_batch(&mut one, now, b);
            // Partition i takes every third batch, and partition 2 stops folding a day early.
            let i = b % 3;
            if i == 2 && now > T0 + 2 * DAY_MS {
                continue;
            }
            fold_batch(&mut parts[i], now, b);
        }
        // The rows partition 2 left out go to partition 0, late, at the end.
        let late: Vec<usize> = (0..n / 30)
            .filter(|b| b % 3 == 2 && stamps[(b + 1) * 30 - 1] > T0 + 2 * DAY_MS)
            .collect();
        let now = one.now_ms().unwrap();
        for b in late {
            fold_batch(&mut parts[0], now, b);
        }
        assert_ne!(parts[2].now_ms(), parts[0].now_ms());
        let others: Vec<&Windows> = parts[1..].iter().collect();
        for (from, to) in [
            (T0, T0 + 3 * DAY_MS),
            (
                T0 + 2 * DAY_MS + 17 * MINUTE_MS,
                T0 + 2 * DAY_MS + 5 * HOUR_MS,
            ),
            (T0 + HOUR_MS, T0 + 30 * HOUR_MS),
        ] {
            let whole = one.span(from, to).unwrap();
            let split = parts[0].span_with(&others, from, to).unwrap();
            assert_eq!((split.from, split.to), (whole.from, whole.to));
            let inside: Vec<usize> = (0..n)
                .filter(|&i| stamps[i] >= whole.from && stamps[i] < whole.to)
                .collect();
            assert!(inside.len() > 10, "[{from}, {to}): {} rows", inside.len());
            let sx: Vec<f64> = inside
                .iter()
                .flat_map(|&i| x[i * p..(i + 1) * p].to_vec())
                .collect();
            let sy: Vec<f64> = inside.iter().map(|&i| y[i]).collect();
            for (what, got) in [
                ("one set", &whole.stats),
                ("three partitions", &split.stats),
            ] {
                let Stats::Regression(r) = got else {
                    panic!("task")
                };
                assert_matches(
                    r,
                    &sx,
                    &sy,
                    &format!("{what} [{}, {})", whole.from, whole.to),
                );
            }
        }
        let before = T0 - 8 * DAY_MS;
        assert!(one.span(before, T0).is_err());
        assert!(parts[0].span_with(&others, before, T0).is_err());
    }

    /// Rows stamped over 40 days at p = 3, folded in batches as time passes (with late rows),
    /// then spans over minutes, hours and days (rolled up) against the rows themselves.
    #[test]
    fn any_span_equals_its_rows_computed_directly_through_roll_ups() {
        let p = 3;
        let spec = WindowSpec::parse("1m", "35d").unwrap();
        let mut w = Windows::new(spec, Task::Regression, p);
        let n = 6000;
        let (x, y) = rows(p, n, 11);
        let mut next = uniform(4);
        // Timestamps: mostly increasing over 40 days, some rows late by up to 3 days.
        let span = 40 * DAY_MS;
        let mut stamps: Vec<i64> = (0..n).map(|i| T0 + (i as i64 * span) / n as i64).collect();
        for s in stamps.iter_mut() {
            let u = next();
            if u > 2.97 {
                *s -= 36 * DAY_MS; // later than retention
            } else if u > 2.6 {
                *s -= ((next() + 1.0) / 4.0 * 3.0 * DAY_MS as f64) as i64;
            }
        }
        let mut kept: Vec<usize> = Vec::new();
        let (mut too_old, mut most) = (0, 0);
        for b in 0..(n / 50) {
            let r = b * 50..(b + 1) * 50;
            let now = *stamps[r.clone()].iter().max().unwrap();
            let before = w.clone();
            let got = w
                .fold(
                    now,
                    &stamps[r.clone()],
                    &x[r.start * p..r.end * p],
                    &y[r.clone()],
                )
                .unwrap();
            // Roll-ups keep every row; only buckets past retention drop theirs.
            assert_eq!(before.n() + got.rows as u64 - w_dropped(&before, &w), w.n());
            too_old += got.too_old;
            let floor = w.floor_ms().unwrap();
            kept.retain(|&i| stamps[i] >= floor);
            kept.extend(r.filter(|&i| stamps[i] >= floor));
            most = most.max(w.len());
            assert_eq!((w.n(), got.ahead), (kept.len() as u64, 0), "batch {b}");
            assert!(w.len() as u64 <= spec.max_buckets(), "{} buckets", w.len());
        }
        assert!(too_old > 0, "the test should see rows older than retention");
        assert_eq!(w.n(), kept.len() as u64);
        let mut widths: Vec<i64> = w.buckets().map(|(_, width, _)| width).collect();
        widths.dedup();
        assert_eq!(
            widths,
            [DAY_MS, HOUR_MS, MINUTE_MS],
            "days, then hours, then minutes"
        );
        assert!(most > 300, "{most}");
        let now = w.now_ms().unwrap();
        let floor = w.floor_ms().unwrap();
        let rows_in = |from: i64, to: i64| -> (Vec<f64>, Vec<f64>) {
            let (mut sx, mut sy) = (Vec::new(), Vec::new());
            for &i in &kept {
                if (from..to).contains(&stamps[i]) {
                    sx.extend_from_slice(&x[i * p..(i + 1) * p]);
                    sy.push(y[i]);
                }
            }
            (sx, sy)
        };
        let windows = [
            (now - 2 * HOUR_MS, now + MINUTE_MS), // recent minutes
            (now - 20 * HOUR_MS - 17 * MINUTE_MS, now - 3 * HOUR_MS), // minutes, unaligned
            (now - 3 * DAY_MS, now - DAY_MS),     // hours
            (now - 30 * DAY_MS, now),             // hours and minutes
            (floor, now + MINUTE_MS),             // everything kept
            (floor + 5 * HOUR_MS + 1, floor + 9 * DAY_MS), // unaligned in the hours
        ];
        for (from, to) in windows {
            let s = w.span(from, to).unwrap();
            assert!(s.from >= from && s.to <= to && s.from < s.to);
            let (sx, sy) = rows_in(s.from, s.to);
            assert!(sy.len() > 10, "[{from}, {to}): {} rows", sy.len());
            let Stats::Regression(r) = &s.stats else {
                panic!("task")
            };
            assert_matches(r, &sx, &sy, &format!("[{}, {})", s.from, s.to));
        }
        // Bad windows are named.
        assert!(matches!(
            w.span(now, now - 1),
            Err(WindowError::Inverted { .. })
        ));
        assert!(matches!(
            w.span(floor - 1, now),
            Err(WindowError::OutsideRetention { .. })
        ));
        let e = w
            .span(now - 3 * DAY_MS + 1, now - 3 * DAY_MS + 10 * MINUTE_MS)
            .unwrap_err();
        assert!(e.to_string().contains("1h"), "{e}");
        // Stored and loaded, the buckets are the same.
        let back: Windows = serde_json::from_str(&serde_json::to_string(&w).unwrap()).unwrap();
        assert_eq!(back, w);
        assert!(back.validate(Task::Regression, p).is_ok());
        assert!(back.validate(Task::Regression, p + 1).is_err());
    }

    /// What the Kafka store relies on to write only changed buckets: a fold replaces the
    /// `Arc` of exactly the buckets it changes (rows, roll-ups), and `from_shared` rebuilds
    /// equal windows from the shared buckets, refusing a bucket the spec has no place for.
    #[test]
    fn a_fold_replaces_only_the_buckets_it_changes_and_shared_buckets_rebuild() {
        let p = 2;
        let spec = WindowSpec::parse("1m", "7d").unwrap();
        let mut w = Windows::new(spec, Task::Regression, p);
        let (x, y) = rows(p, 200, 3);
        // 100 minutes from T0 + 23h, one row each at second 7.
        let stamps: Vec<i64> = (0..100)
            .map(|i| T0 + 23 * HOUR_MS + i * MINUTE_MS + 7000)
            .collect();
        let now = stamps[99];
        w.fold(now, &stamps, &x[..200], &y[..100]).unwrap();
        let before: Vec<(i64, i64, Arc<Stats>)> = w
            .shared_buckets()
            .map(|(s, wd, st)| (s, wd, st.clone()))
            .collect();
        assert_eq!(before.len(), 100);
        // One row into the minute of row 40, at the same `now`: only that bucket is new.
        w.fold(now, &[stamps[40]], &x[200..202], &y[100..101])
            .unwrap();
        let changed: Vec<i64> = w
            .shared_buckets()
            .zip(&before)
            .filter(|((_, _, a), (_, _, b))| !Arc::ptr_eq(a, b))
            .map(|((s, _, _), _)| s)
            .collect();
        assert_eq!(changed, vec![stamps[40] - 7000]);
        // A day later the minutes before T0 + 24h roll up into the hour at T0 + 23h: that
        // bucket is new, its minutes are gone, the later minutes are the same `Arc`s.
        let rebuilt = |w: &Windows| {
            Windows::from_shared(
                w.spec(),
                w.task(),
                w.p(),
                w.now_ms(),
                w.shared_buckets().map(|(s, wd, st)| (s, wd, st.clone())),
            )
            .unwrap()
        };
        let mut later = w.clone();
        later.advance(T0 + 48 * HOUR_MS + MINUTE_MS);
        let after: BTreeMap<i64, (i64, Arc<Stats>)> = later
            .shared_buckets()
            .map(|(s, wd, st)| (s, (wd, st.clone())))
            .collect();
        assert_eq!(after.len(), 1 + 40, "the hour and the 40 minutes after it");
        assert_eq!(after[&(T0 + 23 * HOUR_MS)].0, HOUR_MS);
        assert_eq!(after[&(T0 + 23 * HOUR_MS)].1.n(), 61);
        for (s, _, st) in w.shared_buckets().filter(|&(s, _, _)| s >= T0 + DAY_MS) {
            assert!(Arc::ptr_eq(st, &after[&s].1), "{s}");
        }
        assert_eq!(rebuilt(&w), w);
        assert_eq!(rebuilt(&later), later);
        // A bucket of a width the spec has no tier for, or at one start twice, is refused.
        let odd = [(T0, 2 * MINUTE_MS, before[0].2.clone())];
        let e = Windows::from_shared(spec, Task::Regression, p, Some(now), odd).unwrap_err();
        assert!(e.contains("not one of"), "{e}");
        let twice = [before[0].clone(), before[0].clone()];
        let e = Windows::from_shared(spec, Task::Regression, p, Some(now), twice).unwrap_err();
        assert!(e.contains("two buckets"), "{e}");
        let e = Windows::from_shared(
            spec,
            Task::Regression,
            p + 1,
            Some(now),
            [before[0].clone()],
        )
        .unwrap_err();
        assert!(e.contains("p = 3"), "{e}");
    }

    /// Rows of buckets dropped between `a` and `b` (those below `b`'s floor).
    fn w_dropped(a: &Windows, b: &Windows) -> u64 {
        let floor = b.floor_ms().unwrap();
        a.buckets()
            .filter(|&(s, _, _)| s < floor)
            .map(|(_, _, n)| n)
            .sum()
    }

    #[test]
    fn rows_too_old_or_too_far_ahead_are_counted_not_folded() {
        let spec = WindowSpec::parse("1m", "1h").unwrap();
        let mut w = Windows::new(spec, Task::Regression, 1);
        let now = T0 + 10 * HOUR_MS;
        let stamps = [
            now,
            now - 2 * HOUR_MS,
            now + MAX_AHEAD_MS + 1,
            now - 30 * MINUTE_MS,
        ];
        let got = w
            .fold(now, &stamps, &[1.0, 2.0, 3.0, 4.0], &[1.0, 2.0, 3.0, 4.0])
            .unwrap();
        assert_eq!((got.rows, got.too_old, got.ahead), (2, 1, 1));
        assert_eq!(got.oldest, Some(now - 2 * HOUR_MS));
        assert_eq!(got.furthest, Some(now + MAX_AHEAD_MS + 1));
        assert_eq!(w.n(), 2);
        // The clock never goes back: an earlier now ages nothing back.
        w.fold(now - DAY_MS, &[], &[], &[]).unwrap();
        assert_eq!(w.now_ms(), Some(now));
        // A fold the statistics refuse changes nothing.
        let before = w.clone();
        assert!(w.fold(now, &[now], &[f64::NAN], &[1.0]).is_err());
        assert_eq!(w, before);
    }

    #[test]
    fn the_memory_bound_counts_every_tier() {
        let spec = WindowSpec::parse("1m", "7d").unwrap();
        // 1,440 minutes and an hour's slack, the hours of days 2 to 7, rows 5 min ahead.
        let m = spec.max_buckets();
        assert!((1440 + 168..=1440 + 168 + 100).contains(&m), "{m}");
        assert_eq!(
            WindowSpec::bucket_bytes(100, Task::Regression),
            8 * (100 * 100 + 300)
        );
    }
}
