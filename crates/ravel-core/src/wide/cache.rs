//! The correlations of the columns that have been active, kept up to date without a pass over
//! them (004's "method of active covariates", for the active set only): for each cached
//! column j, sigma_j = z_c_j^T y_c, h_j = z_c_j^T q and the Gram entries z_c_j^T z_c_k with
//! the other cached columns; a step q += gamma (a q + s z_c_i) moves h_j by
//! gamma (a h_j + s G_ji), O(cached) instead of a dot with every active column (frequent
//! columns have thousands of nonzeros). A column enters when it first becomes active, at the
//! cost of one dot with each cached column. At `CACHE_MAX` columns (its Gram block would
//! take 32 MiB) the columns no longer active leave; when at least half of them are still
//! active, the cache is dropped and active correlations are computed by dots again.
//!
//! A cached column is found by a hash map keyed by a one-multiply hash of its index (the
//! solver asks for every active column's correlation each iteration: SipHash showed in
//! profiles).

use super::WideProblem;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Columns cached at most.
pub(super) const CACHE_MAX: usize = 2048;

/// Fibonacci hashing of a column index: one multiply, the high bits well mixed, the low bits
/// a bijection of the index's (hashbrown takes both).
#[derive(Default, Clone, Copy)]
struct ColumnHash(u64);

impl Hasher for ColumnHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, i: usize) {
        self.0 = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The cache (see the module's comment).
pub(super) struct Cache {
    on: bool,
    cols: Vec<usize>,
    pos: HashMap<usize, usize, BuildHasherDefault<ColumnHash>>,
    sigma: Vec<f64>,
    h: Vec<f64>,
    gram: Vec<Vec<f64>>,
    scatter: Vec<f64>,
}

impl Cache {
    /// Empty, on.
    pub(super) fn new() -> Cache {
        Cache {
            on: true,
            cols: Vec::new(),
            pos: Default::default(),
            sigma: Vec::new(),
            h: Vec::new(),
            gram: Vec::new(),
            scatter: Vec::new(),
        }
    }

    /// Column j's correlation z_c_j^T r from the cache (None: not cached).
    #[inline]
    pub(super) fn corr(&self, j: usize) -> Option<f64> {
        let k = *self.pos.get(&j)?;
        Some(self.sigma[k] - self.h[k])
    }

    /// Keeps only the cached columns whose coefficient in `b` is not 0, or drops the cache
    /// when at least half of them are (it would fill again soon).
    fn evict(&mut self, b: &[f64]) {
        let keep: Vec<bool> = self.cols.iter().map(|&j| b[j] != 0.0).collect();
        if 2 * keep.iter().filter(|k| **k).count() >= self.cols.len() {
            self.on = false;
            self.cols.clear();
            self.pos.clear();
            self.gram.clear();
            return;
        }
        let mut k = 0;
        self.gram.retain(|_| {
            k += 1;
            keep[k - 1]
        });
        for row in &mut self.gram {
            let mut l = 0;
            row.retain(|_| {
                l += 1;
                keep[l - 1]
            });
        }
        for v in [&mut self.sigma, &mut self.h] {
            let mut l = 0;
            v.retain(|_| {
                l += 1;
                keep[l - 1]
            });
        }
        let mut l = 0;
        self.cols.retain(|_| {
            l += 1;
            keep[l - 1]
        });
        self.pos.clear();
        for (k, &j) in self.cols.iter().enumerate() {
            self.pos.insert(j, k);
        }
    }

    /// Puts column i in the cache (before it becomes active), with q the current X_c b and
    /// b the coefficients (whose zeros may leave a full cache); counts its dots.
    pub(super) fn add(&mut self, pr: &WideProblem, q: &[f64], b: &[f64], i: usize, dots: &mut u64) {
        if !self.on || self.pos.contains_key(&i) {
            return;
        }
        if self.cols.len() >= CACHE_MAX {
            self.evict(b);
            if !self.on {
                return;
            }
        }
        let x = pr.x;
        let n = x.n as f64;
        if self.scatter.len() != x.n {
            self.scatter = vec![0.0; x.n];
        }
        let (rows, vals) = x.column(i);
        for (&r, &v) in rows.iter().zip(vals) {
            self.scatter[r as usize] = v;
        }
        let mi = pr.mean[i];
        // At its final length from the start: a row grown by doubling could hold twice its
        // entries, and the Gram block its 32 MiB twice over (`wide_bytes` counts it once).
        let mut row = Vec::with_capacity(CACHE_MAX.min(x.p));
        for (k, &j) in self.cols.iter().enumerate() {
            let g = x.dot(j, &self.scatter) - n * pr.mean[j] * mi;
            self.gram[k].push(g);
            row.push(g);
        }
        for &r in rows {
            self.scatter[r as usize] = 0.0;
        }
        row.push(pr.norm2[i]);
        *dots += self.cols.len() as u64 + 2;
        let ysum: f64 = pr.yc.iter().sum();
        let qsum: f64 = q.iter().sum();
        self.sigma.push(pr.corr(i, &pr.yc, ysum));
        self.h.push(pr.corr(i, q, qsum));
        self.pos.insert(i, self.cols.len());
        self.cols.push(i);
        self.gram.push(row);
    }

    /// The cache after q += gamma (a q + s z_c_i) (i None: s = 0).
    pub(super) fn step(&mut self, gamma: f64, a: f64, s: f64, i: Option<usize>) {
        if !self.on || gamma == 0.0 {
            return;
        }
        match i.and_then(|i| self.pos.get(&i).copied()) {
            Some(ki) => {
                let g = &self.gram[ki];
                for (h, gk) in self.h.iter_mut().zip(g) {
                    *h += gamma * (a * *h + s * gk);
                }
            }
            None => {
                debug_assert!(i.is_none() || s == 0.0);
                for h in self.h.iter_mut() {
                    *h += gamma * a * *h;
                }
            }
        }
    }

    /// h recomputed from q (rounding does not accumulate).
    pub(super) fn refresh(&mut self, pr: &WideProblem, q: &[f64]) {
        if !self.on {
            return;
        }
        let qsum: f64 = q.iter().sum();
        for (k, &j) in self.cols.iter().enumerate() {
            self.h[k] = pr.corr(j, q, qsum);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::csc::Csc;

    /// A full cache lets its inactive columns go and keeps the active ones' correlations
    /// and Gram entries; one whose columns are mostly active is dropped.
    #[test]
    fn a_full_cache_lets_inactive_columns_go_or_is_dropped() {
        let (n, p) = (6, CACHE_MAX + 2);
        let mut dense = vec![0.0; n * p];
        for (k, v) in dense.iter_mut().enumerate() {
            let (i, j) = (k / p, k % p);
            if (i * 7 + j * 3) % 5 < 2 {
                *v = ((i + 2 * j) % 11) as f64 - 4.0;
            }
        }
        let y: Vec<f64> = (0..n).map(|i| i as f64 * 0.5 - 1.0).collect();
        let x = Csc::from_dense(&dense, &y, p);
        let pr = WideProblem::new(&x);
        let q: Vec<f64> = (0..n).map(|i| 0.1 * i as f64 - 0.25).collect();
        let r: Vec<f64> = pr.yc.iter().zip(&q).map(|(y, q)| y - q).collect();
        let rsum: f64 = r.iter().sum();
        // Every third column active.
        let b: Vec<f64> = (0..p).map(|j| (j % 3 == 0) as u8 as f64).collect();
        let mut cache = Cache::new();
        let mut dots = 0;
        for j in 0..CACHE_MAX {
            cache.add(&pr, &q, &b, j, &mut dots);
        }
        assert_eq!(cache.cols.len(), CACHE_MAX);
        cache.add(&pr, &q, &b, CACHE_MAX, &mut dots);
        assert!(cache.on);
        let kept: Vec<usize> = (0..CACHE_MAX).filter(|j| j % 3 == 0).collect();
        assert_eq!(cache.cols[..kept.len()], kept[..]);
        assert_eq!(cache.cols[kept.len()], CACHE_MAX);
        for (k, &j) in cache.cols.iter().enumerate() {
            let c = cache.corr(j).unwrap();
            let want = pr.corr(j, &r, rsum);
            assert!((c - want).abs() <= 1e-12 * (1.0 + want.abs()), "{j}");
            for (l, &i) in cache.cols.iter().enumerate() {
                let (ri, vi) = x.column(i);
                let mut s = 0.0;
                for (&row, &v) in ri.iter().zip(vi) {
                    s += v * (dense[row as usize * p + j]);
                }
                let g = s - n as f64 * pr.mean[i] * pr.mean[j];
                assert!((cache.gram[k][l] - g).abs() <= 1e-9 * (1.0 + g.abs()));
            }
        }
        assert!(cache.corr(1).is_none());
        // Mostly active: dropped.
        let all = vec![1.0; p];
        let mut cache = Cache::new();
        for j in 0..=CACHE_MAX {
            cache.add(&pr, &q, &all, j, &mut dots);
        }
        assert!(!cache.on && cache.corr(0).is_none());
    }
}
