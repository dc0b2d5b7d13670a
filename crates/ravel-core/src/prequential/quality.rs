//! Prequential quality figures: what the test-then-train predictions of a stream (or a file)
//! say about the model, over the last W rows (exact), exponentially weighted, and since the
//! start. One definition for `ravel fit --prequential` and the service's live quality, so the
//! two agree on the same rows in the same order.
//!
//! Each row is observed once, in order, with its prediction (the score b0 + x^T b of the model
//! of the last refit point before it, `TestThenTrain`) and its target. A row that came before
//! the first model has no prediction (`UNSCORED`, NaN): it is counted apart (`Report::unscored`)
//! and is in no figure, rather than predicted by a constant; its target still counts in the
//! running mean below.
//! - regression: RMSE, MAE and two R^2, each named:
//!   - `r2` = 1 - SSE / SST, where SST sums the squared errors of the running mean of the
//!     targets before each row (the prediction that knows only the mean so far), so R^2 < 0
//!     says the model predicts worse than that mean (the prequential R^2);
//!   - `r2_pooled` = 1 - SSE / sum (y - mean y)^2 over the scope's own rows, with the mean of
//!     those rows' targets: what scikit-learn's `r2_score` and River's `metrics.R2` report on
//!     the same (target, prediction) pairs (the weighted scope weighs both sums alike);
//! - classification (labels +1 / -1, 0 counts as -1; the predicted label is +1 when the score
//!   is >= 0, as `POST .../predict` labels): AUC of the scores (the window's exact: the
//!   Mann-Whitney statistic with ties counted half; the total's over every row since the
//!   start, with the scores binned: `AUC_BINS` bins of s / (1 + |s|), so that it costs fixed
//!   memory, ties within a bin counted half, which moves it from the exact value by at most
//!   half the share of (positive, negative) pairs that share a bin), accuracy (the share of
//!   rows whose predicted label is right), the Brier score of the probability
//!   clamp((score + 1) / 2, 0, 1), balanced accuracy (mean of the two classes' recalls) and the
//!   class-weighted squared loss of paper 003 section 3.6,
//!   w_pos / n_pos sum_pos (y - score)^2 + w_neg / n_neg sum_neg (y - score)^2.
//!
//! The window's figures are computed from its rows when asked (O(W), O(W log W) for the AUC),
//! so adding a row costs O(1); the weighted and total sums are updated per row with
//! s <- d s + v (d = 1 - 1 / decay_rows for the weighted ones, 1 for the totals). A figure
//! that is not defined yet (no row, one class only, a constant target) is `None`.

use crate::task::Task;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The prediction of a row that came before the first model: counted apart, in no figure.
pub const UNSCORED: f64 = f64::NAN;

/// Bins of the total AUC (of s / (1 + |s|) over [-1, 1]): 2 x 2048 counts, 32 kB a part.
pub const AUC_BINS: usize = 2048;

/// How the figures are kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QualitySpec {
    /// Which figures.
    pub task: Task,
    /// Rows of the sliding window (>= 1).
    pub window: usize,
    /// The weighted figures weigh a row `a` rows old by (1 - 1 / decay_rows)^a (>= 1).
    pub decay_rows: f64,
    /// Class weights of the weighted loss (003 section 3.6; the model request's w_pos and
    /// w_neg, default 1).
    pub w_pos: f64,
    /// The negatives' weight.
    pub w_neg: f64,
}

/// The figures of one scope. Regression streams fill the first three, classification
/// streams the last four.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Rows in the scope (for the weighted scope: the sum of the weights).
    pub rows: f64,
    /// Root mean squared error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rmse: Option<f64>,
    /// Mean absolute error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mae: Option<f64>,
    /// Prequential R^2: 1 - SSE / SST, SST against the running mean of the targets before
    /// each row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r2: Option<f64>,
    /// R^2 as scikit-learn's `r2_score` and River's `metrics.R2` define it: 1 - SSE / SST,
    /// SST against the mean of the scope's own targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r2_pooled: Option<f64>,
    /// Area under the ROC curve of the scores (the window's exact, the total's binned; the
    /// weighted scope has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auc: Option<f64>,
    /// Share of the rows whose predicted label (score >= 0: +1) is right.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<f64>,
    /// Brier score of clamp((score + 1) / 2, 0, 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brier: Option<f64>,
    /// Mean of the two classes' recalls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balanced_accuracy: Option<f64>,
    /// 003 section 3.6's class-weighted squared loss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weighted_loss: Option<f64>,
}

impl Figures {
    /// (name, value) of the defined figures (the Prometheus `figure` label).
    pub fn named(&self) -> Vec<(&'static str, f64)> {
        [
            ("rmse", self.rmse),
            ("mae", self.mae),
            ("r2", self.r2),
            ("r2_pooled", self.r2_pooled),
            ("auc", self.auc),
            ("accuracy", self.accuracy),
            ("brier", self.brier),
            ("balanced_accuracy", self.balanced_accuracy),
            ("weighted_loss", self.weighted_loss),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
    }
    /// The names a task's figures can take.
    pub fn names_of(task: Task) -> &'static [&'static str] {
        match task {
            Task::Regression => &["rmse", "mae", "r2", "r2_pooled"],
            Task::Classification => &[
                "auc",
                "accuracy",
                "brier",
                "balanced_accuracy",
                "weighted_loss",
            ],
        }
    }
}

/// The three scopes at one point.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The last `window_rows` rows.
    pub window: Figures,
    /// Exponentially weighted over all rows (`decay_rows`).
    pub weighted: Figures,
    /// Every row since the start.
    pub total: Figures,
    /// Rows that came before the first model: not predicted, in no figure.
    #[serde(default)]
    pub unscored: u64,
}

/// One observed row: its prediction, target, and the running mean of the targets before it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Row {
    score: f64,
    y: f64,
    base: f64,
}

/// Weighted sums of one scope.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Sums {
    w: f64,
    sq: f64,
    abs: f64,
    base_sq: f64,
    /// Weighted mean of the targets and the weighted sum of their squared deviations from it
    /// (West's update): the SST of `r2_pooled`.
    y_mean: f64,
    y_ss: f64,
    brier: f64,
    pos_w: f64,
    pos_sq: f64,
    pos_hit: f64,
    neg_w: f64,
    neg_sq: f64,
    neg_hit: f64,
}

impl Sums {
    /// Adds a row's terms, weighing the sums so far by d: only the task's (the ingest path
    /// pays for this per row).
    #[inline]
    fn add(&mut self, task: Task, r: Row, d: f64) {
        match task {
            Task::Regression => self.add_regression(r, d),
            Task::Classification => self.add_classification(r, d),
        }
    }

    #[inline]
    fn add_regression(&mut self, r: Row, d: f64) {
        let e = r.y - r.score;
        let b = r.y - r.base;
        let w = d * self.w + 1.0;
        let delta = r.y - self.y_mean;
        self.y_mean += delta / w;
        self.y_ss = d * self.y_ss + delta * (r.y - self.y_mean);
        self.w = w;
        self.sq = d * self.sq + e * e;
        self.abs = d * self.abs + e.abs();
        self.base_sq = d * self.base_sq + b * b;
    }

    #[inline]
    fn add_classification(&mut self, r: Row, d: f64) {
        let e = r.y - r.score;
        self.w = d * self.w + 1.0;
        let prob = ((r.score + 1.0) / 2.0).clamp(0.0, 1.0);
        let pos = r.y > 0.0;
        let t = if pos { 1.0 } else { 0.0 };
        self.brier = d * self.brier + (prob - t) * (prob - t);
        let hit = if (r.score >= 0.0) == pos { 1.0 } else { 0.0 };
        let (pw, psq, ph) = if pos {
            (1.0, e * e, hit)
        } else {
            (0.0, 0.0, 0.0)
        };
        let (nw, nsq, nh) = if pos {
            (0.0, 0.0, 0.0)
        } else {
            (1.0, e * e, hit)
        };
        self.pos_w = d * self.pos_w + pw;
        self.pos_sq = d * self.pos_sq + psq;
        self.pos_hit = d * self.pos_hit + ph;
        self.neg_w = d * self.neg_w + nw;
        self.neg_sq = d * self.neg_sq + nsq;
        self.neg_hit = d * self.neg_hit + nh;
    }

    fn merge(&mut self, o: &Sums) {
        let w = self.w + o.w;
        if w > 0.0 {
            let delta = o.y_mean - self.y_mean;
            self.y_ss += o.y_ss + delta * delta * self.w * o.w / w;
            self.y_mean += delta * o.w / w;
        }
        self.w = w;
        self.sq += o.sq;
        self.abs += o.abs;
        self.base_sq += o.base_sq;
        self.brier += o.brier;
        self.pos_w += o.pos_w;
        self.pos_sq += o.pos_sq;
        self.pos_hit += o.pos_hit;
        self.neg_w += o.neg_w;
        self.neg_sq += o.neg_sq;
        self.neg_hit += o.neg_hit;
    }

    fn figures(&self, spec: &QualitySpec) -> Figures {
        let w = self.w;
        let some = |v: f64| (w > 0.0 && v.is_finite()).then_some(v);
        match spec.task {
            Task::Regression => Figures {
                rows: w,
                rmse: some((self.sq / w).sqrt()),
                mae: some(self.abs / w),
                r2: (self.base_sq > 0.0)
                    .then(|| 1.0 - self.sq / self.base_sq)
                    .and_then(some),
                r2_pooled: (self.y_ss > 0.0)
                    .then(|| 1.0 - self.sq / self.y_ss)
                    .and_then(some),
                ..Default::default()
            },
            Task::Classification => {
                let both = self.pos_w > 0.0 && self.neg_w > 0.0;
                Figures {
                    rows: w,
                    brier: some(self.brier / w),
                    accuracy: some((self.pos_hit + self.neg_hit) / w),
                    balanced_accuracy: both
                        .then(|| (self.pos_hit / self.pos_w + self.neg_hit / self.neg_w) / 2.0)
                        .and_then(some),
                    weighted_loss: both
                        .then(|| {
                            spec.w_pos * self.pos_sq / self.pos_w
                                + spec.w_neg * self.neg_sq / self.neg_w
                        })
                        .and_then(some),
                    ..Default::default()
                }
            }
        }
    }
}

/// The exact AUC of scores against labels (y > 0 positive): the Mann-Whitney U statistic
/// over P * N, ties counted half. `None` without both classes.
pub fn auc(rows: impl IntoIterator<Item = (f64, f64)>) -> Option<f64> {
    let mut v: Vec<(f64, bool)> = rows.into_iter().map(|(s, y)| (s, y > 0.0)).collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut rank_sum, mut pos, mut neg) = (0.0f64, 0u64, 0u64);
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j < v.len() && v[j].0 == v[i].0 {
            j += 1;
        }
        // Ranks i+1 ..= j share their mean.
        let mean_rank = (i + 1 + j) as f64 / 2.0;
        for r in &v[i..j] {
            if r.1 {
                rank_sum += mean_rank;
                pos += 1;
            } else {
                neg += 1;
            }
        }
        i = j;
    }
    if pos == 0 || neg == 0 {
        return None;
    }
    let (p, n) = (pos as f64, neg as f64);
    Some((rank_sum - p * (p + 1.0) / 2.0) / (p * n))
}

/// The bin of a score for the total AUC: s / (1 + |s|) in (-1, 1) cut into `AUC_BINS` equal
/// bins (monotone, so the order of the bins is the order of the scores).
fn auc_bin(score: f64) -> usize {
    let u = score / (1.0 + score.abs());
    (((u + 1.0) / 2.0 * AUC_BINS as f64) as usize).min(AUC_BINS - 1)
}

/// The AUC of binned (negatives, positives) counts, ties within a bin counted half. `None`
/// without both classes.
fn binned_auc(bins: &[[u64; 2]]) -> Option<f64> {
    let (mut below, mut sum, mut pos) = (0.0f64, 0.0f64, 0.0f64);
    for &[n, p] in bins {
        let (n, p) = (n as f64, p as f64);
        sum += p * (below + n / 2.0);
        below += n;
        pos += p;
    }
    (pos > 0.0 && below > 0.0).then(|| sum / (pos * below))
}

/// `Quality::combined`, one part at a time: a reader that takes each part's lock in turn adds
/// the part under it and copies nothing (but a classification window's scores and labels, which
/// the AUC sorts), instead of cloning every window first (240 kB a part by default, what each
/// `GET /v1/streams` did). The same sums in the same order as `combined`, so the same bits.
#[derive(Debug, Default)]
pub struct Combiner {
    /// The first part's spec (every part of a stream has the same).
    spec: Option<QualitySpec>,
    window: Sums,
    weighted: Sums,
    total: Sums,
    /// Classification: the windows' (score, target), part after part.
    scored: Vec<(f64, f64)>,
    /// Classification: the parts' AUC bins added.
    bins: Vec<[u64; 2]>,
    unscored: u64,
}

impl Combiner {
    /// Adds one part's figures.
    pub fn add(&mut self, q: &Quality) {
        let spec = *self.spec.get_or_insert(q.spec);
        for r in &q.ring {
            self.window.add(spec.task, *r, 1.0);
        }
        if spec.task == Task::Classification {
            self.scored.extend(q.window_rows());
            if self.bins.is_empty() {
                self.bins = vec![[0, 0]; AUC_BINS];
            }
            for (a, b) in self.bins.iter_mut().zip(&q.bins) {
                a[0] += b[0];
                a[1] += b[1];
            }
        }
        self.unscored += q.unscored;
        self.weighted.merge(&q.weighted);
        self.total.merge(&q.total);
    }

    /// The figures of the parts added (no part: the default report).
    pub fn report(self) -> Report {
        let Some(spec) = self.spec else {
            return Report::default();
        };
        let mut w = self.window.figures(&spec);
        let mut total = self.total.figures(&spec);
        if spec.task == Task::Classification {
            w.auc = auc(self.scored);
            total.auc = binned_auc(&self.bins);
        }
        Report {
            window: w,
            weighted: self.weighted.figures(&spec),
            total,
            unscored: self.unscored,
        }
    }
}

/// The running figures of one stream (or one partition of it, or a file).
#[derive(Debug, Clone, PartialEq)]
pub struct Quality {
    spec: QualitySpec,
    ring: VecDeque<Row>,
    /// Rows observed and the plain mean of their targets.
    seen: u64,
    mean_y: f64,
    /// Rows observed with no prediction (before the first model).
    unscored: u64,
    weighted: Sums,
    total: Sums,
    /// Classification: (negatives, positives) of every scored row by `auc_bin`.
    bins: Vec<[u64; 2]>,
}

impl Quality {
    /// No row yet.
    pub fn new(spec: QualitySpec) -> Quality {
        Quality {
            spec,
            ring: VecDeque::with_capacity(spec.window.clamp(1, 1 << 16)),
            seen: 0,
            mean_y: 0.0,
            unscored: 0,
            weighted: Sums::default(),
            total: Sums::default(),
            bins: match spec.task {
                Task::Classification => vec![[0, 0]; AUC_BINS],
                Task::Regression => Vec::new(),
            },
        }
    }

    /// How the figures are kept.
    pub fn spec(&self) -> &QualitySpec {
        &self.spec
    }

    /// Rows observed.
    pub fn rows(&self) -> u64 {
        self.seen
    }

    /// Rows observed with no prediction (`UNSCORED`).
    pub fn unscored(&self) -> u64 {
        self.unscored
    }

    /// Observes rows in order: their predictions (`UNSCORED` for a row before the first
    /// model) and targets.
    pub fn observe(&mut self, scores: &[f64], y: &[f64]) {
        let d = 1.0 - 1.0 / self.spec.decay_rows.max(1.0);
        let task = self.spec.task;
        for (&score, &y) in scores.iter().zip(y) {
            let row = Row {
                score,
                y,
                base: self.mean_y,
            };
            self.seen += 1;
            self.mean_y += (y - self.mean_y) / self.seen as f64;
            if score.is_nan() {
                self.unscored += 1;
                continue;
            }
            if task == Task::Classification {
                self.bins[auc_bin(score)][usize::from(y > 0.0)] += 1;
            }
            self.weighted.add(task, row, d);
            self.total.add(task, row, 1.0);
            if self.ring.len() >= self.spec.window.max(1) {
                self.ring.pop_front();
            }
            self.ring.push_back(row);
        }
    }

    /// The window's rows: (score, target), oldest first.
    pub fn window_rows(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.ring.iter().map(|r| (r.score, r.y))
    }

    /// The figures now.
    pub fn report(&self) -> Report {
        Quality::combined(std::slice::from_ref(self))
    }

    /// The figures of several parts of one stream (partitions, each with its own rows): the
    /// window holds each part's window, the weighted and total sums add up. One part: its
    /// own figures.
    pub fn combined(parts: &[Quality]) -> Report {
        let mut c = Combiner::default();
        for q in parts {
            c.add(q);
        }
        c.report()
    }

    /// Bytes of a full window (and a classification part's AUC bins).
    pub fn memory_bytes(window: usize) -> u64 {
        window as u64 * std::mem::size_of::<Row>() as u64
            + (AUC_BINS * std::mem::size_of::<[u64; 2]>()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(task: Task, window: usize) -> QualitySpec {
        QualitySpec {
            task,
            window,
            decay_rows: 4.0,
            w_pos: 2.0,
            w_neg: 1.0,
        }
    }

    #[test]
    fn regression_figures_by_hand() {
        let mut q = Quality::new(spec(Task::Regression, 2));
        // Targets 1, 3, 2; predictions 0, 2, 4. Baselines (running means before): 0, 1, 2.
        q.observe(&[0.0, 2.0, 4.0], &[1.0, 3.0, 2.0]);
        let r = q.report();
        // Total: errors 1, 1, -2.
        assert_eq!(r.total.rmse, Some((6.0f64 / 3.0).sqrt()));
        assert_eq!(r.total.mae, Some(4.0 / 3.0));
        // SST: (1-0)^2 + (3-1)^2 + (2-2)^2 = 5.
        assert_eq!(r.total.r2, Some(1.0 - 6.0 / 5.0));
        // scikit-learn's r2_score: the mean of the targets is 2, SST = 1 + 1 + 0.
        assert_eq!(r.total.r2_pooled, Some(1.0 - 6.0 / 2.0));
        // Window: the last two rows.
        assert_eq!(r.window.rows, 2.0);
        assert_eq!(r.window.rmse, Some((5.0f64 / 2.0).sqrt()));
        assert_eq!(r.window.r2, Some(1.0 - 5.0 / 4.0));
        // Targets 3, 2 around their mean 2.5: SST 0.5.
        assert_eq!(r.window.r2_pooled, Some(1.0 - 5.0 / 0.5));
        // Weighted, d = 3/4: weights 9/16, 3/4, 1.
        let w: f64 = 9.0 / 16.0 + 0.75 + 1.0;
        let sq: f64 = 9.0 / 16.0 + 0.75 + 4.0;
        assert!((r.weighted.rmse.unwrap() - (sq / w).sqrt()).abs() < 1e-15);
        assert_eq!(r.total.auc, None);
        assert_eq!(r.unscored, 0);
    }

    /// A pseudo-random number in [0, 1).
    fn unit(i: u64) -> f64 {
        let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) as f64 / 2f64.powi(64)
    }

    #[test]
    fn pooled_r2_is_scikit_learns_on_every_scope_by_brute_force() {
        let n = 500;
        let y: Vec<f64> = (0..n).map(|i| 40.0 + 10.0 * unit(i)).collect();
        let s: Vec<f64> = (0..n)
            .map(|i| y[i as usize] + unit(i + 999) - 0.5)
            .collect();
        let mut sp = spec(Task::Regression, 100);
        sp.decay_rows = 50.0;
        let mut q = Quality::new(sp);
        // Two rows with no model yet: in no figure.
        q.observe(&[UNSCORED, UNSCORED], &[1000.0, -1000.0]);
        q.observe(&s, &y);
        let r = q.report();
        assert_eq!((r.unscored, q.rows()), (2, n + 2));
        // Brute force with weights w_i: 1 - sum w (y - s)^2 / sum w (y - ybar_w)^2.
        let brute = |w: &dyn Fn(usize) -> f64| {
            let n = n as usize;
            let sw: f64 = (0..n).map(w).sum();
            let m: f64 = (0..n).map(|i| w(i) * y[i]).sum::<f64>() / sw;
            let sse: f64 = (0..n).map(|i| w(i) * (y[i] - s[i]).powi(2)).sum();
            let sst: f64 = (0..n).map(|i| w(i) * (y[i] - m).powi(2)).sum();
            1.0 - sse / sst
        };
        let d: f64 = 1.0 - 1.0 / 50.0;
        for (scope, got, want) in [
            ("total", r.total.r2_pooled, brute(&|_| 1.0)),
            (
                "window",
                r.window.r2_pooled,
                brute(&|i| if i >= n as usize - 100 { 1.0 } else { 0.0 }),
            ),
            (
                "weighted",
                r.weighted.r2_pooled,
                brute(&|i| d.powi((n as usize - 1 - i) as i32)),
            ),
        ] {
            let got = got.unwrap();
            assert!((got - want).abs() < 1e-12, "{scope}: {got} vs {want}");
        }
        assert_eq!(r.total.rows, n as f64, "the unscored rows are in no figure");
        // Parts combine to the same pooled figure as one part.
        let (mut a, mut b) = (Quality::new(sp), Quality::new(sp));
        a.observe(&s[..200], &y[..200]);
        b.observe(&s[200..], &y[200..]);
        let c = Quality::combined(&[a, b]).total.r2_pooled.unwrap();
        assert!((c - brute(&|_| 1.0)).abs() < 1e-12, "{c}");
    }

    #[test]
    fn the_total_auc_is_the_exact_auc_within_its_bins_share() {
        let n = 3000u64;
        let y: Vec<f64> = (0..n)
            .map(|i| if unit(i) < 0.4 { 1.0 } else { -1.0 })
            .collect();
        let s: Vec<f64> = (0..n)
            .map(|i| 0.8 * y[i as usize] + 3.0 * (unit(i + 7777) - 0.5))
            .collect();
        let mut q = Quality::new(spec(Task::Classification, 10));
        q.observe(&[UNSCORED], &[1.0]);
        q.observe(&s, &y);
        let r = q.report();
        let exact = auc(s.iter().copied().zip(y.iter().copied())).unwrap();
        let got = r.total.auc.unwrap();
        assert!((got - exact).abs() < 1e-3, "{got} vs exact {exact}");
        assert!(got > 0.6 && got < 0.95, "{got}");
        let hits = s
            .iter()
            .zip(&y)
            .filter(|(s, y)| (**s >= 0.0) == (**y > 0.0))
            .count();
        assert_eq!(r.total.accuracy, Some(hits as f64 / n as f64));
        assert_eq!(r.unscored, 1);
        assert_eq!(r.weighted.auc, None, "no weighted AUC");
    }

    #[test]
    fn classification_figures_by_hand() {
        let mut q = Quality::new(spec(Task::Classification, 10));
        // Scores and labels: positives 0.5, -0.2; negatives -0.5, 0.5 (a tie with a positive).
        q.observe(&[0.5, -0.5, -0.2, 0.5], &[1.0, -1.0, 1.0, -1.0]);
        let r = q.report();
        // Pairs (pos, neg): (0.5, -0.5) 1, (0.5, 0.5) 1/2, (-0.2, -0.5) 1, (-0.2, 0.5) 0.
        assert_eq!(r.window.auc, Some(2.5 / 4.0));
        // Recalls: positives 1/2, negatives 1/2.
        assert_eq!(r.window.balanced_accuracy, Some(0.5));
        // Squared errors: pos 0.25, 1.44; neg 0.25, 2.25.
        let wl = 2.0 * (0.25 + 1.44) / 2.0 + (0.25 + 2.25) / 2.0;
        assert!((r.window.weighted_loss.unwrap() - wl).abs() < 1e-15);
        // Probabilities 0.75, 0.25, 0.4, 0.75 against 1, 0, 1, 0.
        let brier = (0.0625 + 0.0625 + 0.36 + 0.5625) / 4.0;
        assert!((r.window.brier.unwrap() - brier).abs() < 1e-15);
        assert_eq!(r.total.brier, r.window.brier);
        // The total AUC's bins separate every score here but the tie: the exact value.
        assert_eq!(r.total.auc, Some(2.5 / 4.0));
        // Right: the first two; wrong: -0.2 (+1) and 0.5 (-1).
        assert_eq!(r.window.accuracy, Some(0.5));
        assert_eq!(r.window.rmse, None);
    }

    #[test]
    fn auc_needs_both_classes_and_counts_ties_half() {
        assert_eq!(auc([(1.0, 1.0), (2.0, 1.0)]), None);
        assert_eq!(auc([(1.0, 1.0), (1.0, -1.0)]), Some(0.5));
        assert_eq!(auc([(2.0, 1.0), (1.0, -1.0)]), Some(1.0));
        assert_eq!(auc([(0.0, 1.0), (1.0, 0.0)]), Some(0.0));
    }

    #[test]
    fn parts_combine_windows_and_sums() {
        let mut a = Quality::new(spec(Task::Regression, 3));
        let mut b = Quality::new(spec(Task::Regression, 3));
        a.observe(&[0.0, 1.0], &[1.0, 1.0]);
        b.observe(&[2.0], &[0.0]);
        let r = Quality::combined(&[a.clone(), b]);
        assert_eq!(r.window.rows, 3.0);
        assert_eq!(r.total.rmse, Some((5.0f64 / 3.0).sqrt()));
        assert_eq!(Quality::combined(&[a.clone()]), a.report());
        assert_eq!(Quality::combined(&[]), Report::default());
    }
}
