//! Centred statistics and their stable pairwise merge (Chan, Golub and LeVeque): counts,
//! means and centred second moments, combined without ever subtracting two large sums. The
//! statistics of time buckets (`windows`) merge through here into the statistics of any span
//! of buckets, exactly up to rounding and with an error that grows with the depth of a
//! balanced tree of merges (log2 of the buckets), not with their number.
//!
//! For parts A and B with n = n_A + n_B, f = n_B / n, g = n_A / n and d = mean_B - mean_A:
//! mean = mean_A + f d and C = g C_A + f C_B + g f d d^T, where C is the normalized centred
//! second moment E[(x - mean)(x - mean)^T] (likewise for (x, y) and y). Every term of a
//! diagonal is non-negative: nothing cancels. A part enters from a plain `RunningStats` once
//! (`Centred::of`: its moments are around one of its own rows, so E[(x - s)(x - s)^T] -
//! E[x - s] E[x - s]^T is a difference of numbers of the part's own spread) and leaves as a
//! `RunningStats` around the first part's shift (`into_running`), which every solver takes.
//! Means are kept as that shift plus E[x - s], so d too is a difference at the data's spread.

use super::{AlphaSchedule, ClassStats, RunningStats, Stats};

/// Counts, means and centred second moments of plain (unweighted) rows. The mean is kept as
/// a shift s (a row of the data, as in `RunningStats`) plus E[x - s]: a mean of 1e6 with a
/// spread of 1 is not representable to better than 1e-10, and the difference of two such
/// means (the d of a merge) would carry that error at the scale of the spread.
#[derive(Debug, Clone, PartialEq)]
pub struct Centred {
    p: usize,
    n: u64,
    shift_x: Vec<f64>,
    shift_y: f64,
    /// E[x - s].
    dx: Vec<f64>,
    /// E[y - t].
    dy: f64,
    /// E[(x - mean)(x - mean)^T], lower triangle packed column by column.
    cxx: Vec<f64>,
    /// E[(x - mean)(y - mean_y)].
    cxy: Vec<f64>,
    /// E[(y - mean_y)^2].
    cyy: f64,
}

impl Centred {
    /// No rows of p features.
    pub fn empty(p: usize) -> Centred {
        Centred {
            p,
            n: 0,
            shift_x: vec![0.0; p],
            shift_y: 0.0,
            dx: vec![0.0; p],
            dy: 0.0,
            cxx: vec![0.0; p * (p + 1) / 2],
            cxy: vec![0.0; p],
            cyy: 0.0,
        }
    }

    /// The centred form of plain statistics (the averages of their rows, whatever their
    /// schedule says: buckets are always plain).
    pub fn of(s: &RunningStats) -> Centred {
        let p = s.p;
        if s.n == 0 {
            return Centred::empty(p);
        }
        let mut cxx = Vec::with_capacity(p * (p + 1) / 2);
        for j in 0..p {
            for i in j..p {
                cxx.push(s.dxx[i + j * p] - s.dx[i] * s.dx[j]);
            }
        }
        Centred {
            p,
            n: s.n,
            shift_x: s.shift_x.clone(),
            shift_y: s.shift_y,
            dx: s.dx.clone(),
            dy: s.dy,
            cxx,
            cxy: (0..p).map(|j| s.dxy[j] - s.dx[j] * s.dy).collect(),
            cyy: s.dyy - s.dy * s.dy,
        }
    }

    /// Rows.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// Folds `other`'s rows in (the update in the module header), around this part's shift:
    /// d = (s_B - s_A) + (E_B[x - s_B] - E_A[x - s_A]), differences of numbers of the data's
    /// own spread.
    pub fn merge(&mut self, other: &Centred) {
        assert_eq!(self.p, other.p, "centred statistics of different p");
        if other.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = other.clone();
            return;
        }
        let n = self.n + other.n;
        let f = other.n as f64 / n as f64;
        let g = self.n as f64 / n as f64;
        let gf = g * f;
        let dx: Vec<f64> = (0..self.p)
            .map(|j| (other.shift_x[j] - self.shift_x[j]) + (other.dx[j] - self.dx[j]))
            .collect();
        let dy = (other.shift_y - self.shift_y) + (other.dy - self.dy);
        let mut at = 0;
        for (j, &d) in dx.iter().enumerate() {
            let dj = gf * d;
            for &di in &dx[j..] {
                self.cxx[at] = g * self.cxx[at] + f * other.cxx[at] + dj * di;
                at += 1;
            }
        }
        for ((c, &o), &d) in self.cxy.iter_mut().zip(&other.cxy).zip(&dx) {
            *c = g * *c + f * o + gf * d * dy;
        }
        self.cyy = g * self.cyy + f * other.cyy + gf * dy * dy;
        for (m, d) in self.dx.iter_mut().zip(&dx) {
            *m += f * d;
        }
        self.dy += f * dy;
        self.n = n;
    }

    /// Plain `RunningStats` holding these rows, around the same shift: E[(x - s)(x - s)^T] =
    /// C + E[x - s] E[x - s]^T, numbers of the data's spread (s is a row of it).
    pub fn into_running(self) -> RunningStats {
        let p = self.p;
        let mut s = RunningStats::new(p, AlphaSchedule::Plain);
        if self.n == 0 {
            return s;
        }
        let mut at = 0;
        for j in 0..p {
            for i in j..p {
                s.dxx[i + j * p] = self.cxx[at] + self.dx[i] * self.dx[j];
                at += 1;
            }
        }
        s.n = self.n;
        s.weight = 1.0;
        s.sum_sq_shares = 1.0 / self.n as f64;
        s.dxy = (0..p).map(|j| self.cxy[j] + self.dx[j] * self.dy).collect();
        s.dyy = self.cyy + self.dy * self.dy;
        s.dx = self.dx;
        s.dy = self.dy;
        s.shift_x = self.shift_x;
        s.shift_y = self.shift_y;
        s
    }
}

/// The rows of `parts` merged as a balanced tree (pairwise), in their order. A part becomes
/// centred when the tree reaches its leaf, so at most one partial result a level is alive
/// (about log2 of the parts), not a centred copy of every part: a day of one-minute buckets
/// at p = 100 merges in about 0.73 of the time it took with every part converted (and cloned)
/// first, with the same tree and the same arithmetic.
fn tree(parts: &[&RunningStats], p: usize) -> Centred {
    match parts {
        [] => Centred::empty(p),
        [one] => Centred::of(one),
        _ => {
            let (a, b) = parts.split_at(parts.len() / 2);
            let mut left = tree(a, p);
            left.merge(&tree(b, p));
            left
        }
    }
}

/// Plain statistics of p features holding the rows of every part (plain statistics, e.g.
/// time buckets), merged pairwise in centred form.
pub fn merge_pairwise(p: usize, parts: &[&RunningStats]) -> RunningStats {
    let rows: Vec<&RunningStats> = parts.iter().copied().filter(|s| s.n > 0).collect();
    tree(&rows, p).into_running()
}

/// `merge_pairwise` for statistics of either task: classification merges each class on its
/// own. None when the parts are not all of `template`'s task and p.
pub fn merge_stats_pairwise(template: &Stats, parts: &[&Stats]) -> Option<Stats> {
    let p = template.p();
    if parts
        .iter()
        .any(|s| s.task() != template.task() || s.p() != p)
    {
        return None;
    }
    Some(match template {
        Stats::Regression(_) => {
            let rs: Vec<&RunningStats> = parts
                .iter()
                .filter_map(|s| match s {
                    Stats::Regression(r) => Some(r),
                    Stats::Classification(_) => None,
                })
                .collect();
            Stats::Regression(merge_pairwise(p, &rs))
        }
        Stats::Classification(_) => {
            let cs: Vec<&ClassStats> = parts
                .iter()
                .filter_map(|s| match s {
                    Stats::Classification(c) => Some(c),
                    Stats::Regression(_) => None,
                })
                .collect();
            let pos: Vec<&RunningStats> = cs.iter().map(|c| &c.pos).collect();
            let neg: Vec<&RunningStats> = cs.iter().map(|c| &c.neg).collect();
            Stats::Classification(ClassStats {
                pos: merge_pairwise(p, &pos),
                neg: merge_pairwise(p, &neg),
            })
        }
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::gram::Moments;
    use crate::stats::uniform;

    /// Means and centred second moments of rows computed directly (two passes).
    pub(crate) fn direct(
        p: usize,
        x: &[f64],
        y: &[f64],
    ) -> (Vec<f64>, f64, Vec<f64>, Vec<f64>, f64) {
        let n = y.len() as f64;
        let mut mx = vec![0.0; p];
        for row in x.chunks_exact(p) {
            for (m, v) in mx.iter_mut().zip(row) {
                *m += v;
            }
        }
        mx.iter_mut().for_each(|m| *m /= n);
        let my = y.iter().sum::<f64>() / n;
        let (mut cxx, mut cxy, mut cyy) = (vec![0.0; p * p], vec![0.0; p], 0.0);
        for (row, &yi) in x.chunks_exact(p).zip(y) {
            let e = yi - my;
            cyy += e * e;
            for i in 0..p {
                let di = row[i] - mx[i];
                cxy[i] += di * e;
                for j in 0..p {
                    cxx[i + j * p] += di * (row[j] - mx[j]);
                }
            }
        }
        cxx.iter_mut().chain(cxy.iter_mut()).for_each(|c| *c /= n);
        (mx, my, cxx, cxy, cyy / n)
    }

    /// Rows around a large offset (1e6, spread about 1): where subtracting raw sums fails.
    pub(crate) fn rows(p: usize, n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
        let mut next = uniform(seed);
        let x: Vec<f64> = (0..n * p)
            .map(|i| 1e6 * (1.0 + (i % p) as f64) + next())
            .collect();
        let y = x
            .chunks_exact(p)
            .map(|r| r.iter().sum::<f64>() * 0.5 + next())
            .collect();
        (x, y)
    }

    pub(crate) fn assert_matches(s: &RunningStats, x: &[f64], y: &[f64], what: &str) {
        let p = s.p();
        let (mx, my, cxx, cxy, cyy) = direct(p, x, y);
        let rel = |a: f64, b: f64, scale: f64| (a - b).abs() <= 1e-12 * scale.max(b.abs());
        assert_eq!(s.n(), y.len() as u64, "{what}: n");
        for i in 0..p {
            assert!(rel(s.mean_x()[i], mx[i], 0.0), "{what}: mean_x[{i}]");
            if cxx[i + i * p] <= 1e-24 * mx[i] * mx[i] {
                // A constant column: exactly 0 here (the two passes round its mean).
                assert_eq!(
                    (s.cov_at(i, i), s.cov_xy(i)),
                    (0.0, 0.0),
                    "{what}: constant {i}"
                );
                continue;
            }
            let si = cxx[i + i * p].sqrt();
            assert!(
                rel(s.cov_xy(i), cxy[i], si * cyy.sqrt()),
                "{what}: cov_xy[{i}] {} vs {}",
                s.cov_xy(i),
                cxy[i]
            );
            for j in (0..=i).filter(|&j| cxx[j + j * p] > 1e-24 * mx[j] * mx[j]) {
                let scale = si * cxx[j + j * p].sqrt();
                let (a, b) = (s.cov_at(i, j), cxx[i + j * p]);
                assert!(rel(a, b, scale), "{what}: cov[{i},{j}] {a} vs {b}");
            }
        }
        assert!(rel(s.mean_y(), my, 0.0), "{what}: mean_y");
        assert!(
            rel(s.var_y(), cyy, 0.0),
            "{what}: var_y {} vs {cyy}",
            s.var_y()
        );
    }

    #[test]
    fn pairwise_merges_of_any_split_equal_the_rows_computed_directly() {
        let p = 5;
        let (x, y) = rows(p, 3000, 3);
        // Splits into parts of uneven sizes, a single row and empty parts among them.
        for (seed, parts) in [(1u64, 1usize), (2, 2), (3, 7), (4, 100), (5, 1000)] {
            let mut cut = uniform(seed);
            let mut bounds: Vec<usize> = (0..parts - 1)
                .map(|_| ((cut() + 1.0) / 4.0 * 3000.0) as usize)
                .collect();
            bounds.extend([0, 3000, 17, 17, 18]);
            bounds.sort_unstable();
            let stats: Vec<RunningStats> = bounds
                .windows(2)
                .map(|w| {
                    let mut s = RunningStats::new(p, AlphaSchedule::Plain);
                    s.update_batch(&x[w[0] * p..w[1] * p], &y[w[0]..w[1]])
                        .unwrap();
                    s
                })
                .collect();
            let refs: Vec<&RunningStats> = stats.iter().collect();
            let merged = merge_pairwise(p, &refs);
            assert_matches(&merged, &x, &y, &format!("{parts} parts"));
            // A span of the parts is the rows of that span.
            let (a, b) = (1, refs.len() - 1);
            let span = merge_pairwise(p, &refs[a..b]);
            let (lo, hi) = (bounds[a], bounds[b]);
            if hi > lo {
                assert_matches(&span, &x[lo * p..hi * p], &y[lo..hi], "a span");
            }
        }
    }

    #[test]
    fn a_constant_column_stays_exactly_constant_and_merged_stats_fold_on() {
        let p = 3;
        let (mut x, y) = rows(p, 400, 9);
        for row in x.chunks_exact_mut(p) {
            row[1] = 123456.789;
        }
        let parts: Vec<RunningStats> = (0..4)
            .map(|k| {
                let mut s = RunningStats::new(p, AlphaSchedule::Plain);
                s.update_batch(
                    &x[k * 100 * p..(k + 1) * 100 * p],
                    &y[k * 100..(k + 1) * 100],
                )
                .unwrap();
                s
            })
            .collect();
        let refs: Vec<&RunningStats> = parts.iter().collect();
        let mut merged = merge_pairwise(p, &refs[..3]);
        assert_eq!(merged.cov_at(1, 1), 0.0);
        assert_eq!(merged.mean_x()[1], 123456.789);
        assert!(merged.validate().is_ok());
        // Rows folded into merged statistics (a late row into a rolled-up bucket).
        merged.update_batch(&x[300 * p..], &y[300..]).unwrap();
        assert_matches(&merged, &x, &y, "merged, then folded");
    }

    #[test]
    fn classification_merges_class_by_class() {
        let p = 2;
        let (x, _) = rows(p, 200, 5);
        let labels: Vec<f64> = (0..200)
            .map(|i| if i % 3 == 0 { 1.0 } else { -1.0 })
            .collect();
        let mut whole = ClassStats::new(p, AlphaSchedule::Plain);
        whole.update_batch(&x, &labels).unwrap();
        let halves: Vec<Stats> = [0..77, 77..200]
            .into_iter()
            .map(|r| {
                let mut c = ClassStats::new(p, AlphaSchedule::Plain);
                c.update_batch(&x[r.start * p..r.end * p], &labels[r])
                    .unwrap();
                Stats::Classification(c)
            })
            .collect();
        let refs: Vec<&Stats> = halves.iter().collect();
        let Some(Stats::Classification(m)) = merge_stats_pairwise(&halves[0], &refs) else {
            panic!("classification merged into another task");
        };
        assert_eq!((m.pos.n(), m.neg.n()), (whole.pos.n(), whole.neg.n()));
        for j in 0..p {
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1.0);
            assert!(close(m.pos.mean_x()[j], whole.pos.mean_x()[j]));
            assert!(close(m.neg.cov_at(j, j), whole.neg.cov_at(j, j)));
        }
        let other = Stats::new(crate::Task::Regression, p, AlphaSchedule::Plain);
        assert!(merge_stats_pairwise(&other, &refs).is_none());
    }
}
