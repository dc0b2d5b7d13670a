//! The columns the solver reads: the used (non-empty) columns of the matrix in a compact
//! array (`Used`: each one's nonzeros' place and its mean, 32 bytes, in column order, so a
//! pass over them reads memory in order and never touches an empty column; a column of one
//! nonzero, half of the used ones in a text file, holds it there, so its dot product reads
//! nothing else), and the randomized
//! rule's draw (`Draw`, 004 Alg. 2): each iteration a uniform kappa-subset of the used
//! columns, marked in a bitset by rejection (a column drawn twice is drawn again) and read
//! back in column order, without a permutation of the columns and without a sort.
//!
//! Why the used columns only: an empty column's correlation is always 0, so it can never be
//! the vertex, and a draw spent on it is wasted (a text file of 200,000 declared columns may
//! use a third of them). Drawing among the used columns makes a seeded path independent of
//! the empty columns a file declares (`empty_columns_do_not_change_a_seeded_path`), and
//! `sample_fraction` a fraction of the used columns.

use crate::data::csc::{Csc, sparse_dot};
use rand::Rng;
use rand::rngs::StdRng;

/// A used column: its first nonzero's place and its nonzeros, its mean, and its first
/// nonzero's row and value.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    mean: f64,
    value: f64,
    row: u32,
    len: u32,
}

/// The used columns of a matrix, in column order.
pub(super) struct Used {
    /// Each used column's index in the matrix.
    cols: Vec<u32>,
    /// Each used column's nonzeros and mean.
    spans: Vec<Span>,
}

impl Used {
    /// The used columns of `x`, whose column means are `mean`.
    pub(super) fn new(x: &Csc, mean: &[f64]) -> Used {
        let mut cols = Vec::with_capacity(x.p - x.empty_columns.min(x.p));
        let mut spans = Vec::with_capacity(cols.capacity());
        for (j, &mj) in mean.iter().enumerate().take(x.p) {
            let (start, end) = (x.col_ptr[j], x.col_ptr[j + 1]);
            if end > start {
                cols.push(u32::try_from(j).expect("fewer than 2^32 columns"));
                spans.push(Span {
                    start,
                    mean: mj,
                    value: x.values[start],
                    row: x.rows[start],
                    len: u32::try_from(end - start).expect("a column has at most n nonzeros"),
                });
            }
        }
        Used { cols, spans }
    }

    /// The used columns.
    pub(super) fn len(&self) -> usize {
        self.cols.len()
    }

    /// The k-th used column's z_c^T r, for r summing to `rsum`: the value of
    /// `WideProblem::corr`, summed in the same order (`sparse_dot`'s).
    #[inline]
    fn corr(&self, x: &Csc, k: usize, r: &[f64], rsum: f64) -> f64 {
        let sp = &self.spans[k];
        let s = if sp.len == 1 {
            // sparse_dot's one product (added to 0, as it adds it).
            let mut s = 0.0;
            s += sp.value * r[sp.row as usize];
            s
        } else {
            let (a, b) = (sp.start, sp.start + sp.len as usize);
            sparse_dot(&x.rows[a..b], &x.values[a..b], r)
        };
        s - sp.mean * rsum
    }

    /// Every used column's correlation with r, into `c` (by column; an empty column's entry
    /// is left as it is, 0): the largest |c_j| and its column (the first of equals; column 0
    /// and 0 when every correlation is 0).
    pub(super) fn all(&self, x: &Csc, r: &[f64], rsum: f64, c: &mut [f64]) -> (usize, f64) {
        let mut best = (0usize, 0.0f64);
        for (k, &j) in self.cols.iter().enumerate() {
            let v = self.corr(x, k, r, rsum);
            c[j as usize] = v;
            if v.abs() > best.1 {
                best = (j as usize, v.abs());
            }
        }
        best
    }
}

/// The randomized rule's draw: a bitset over the used columns, empty between draws.
pub(super) struct Draw {
    bits: Vec<u64>,
}

impl Draw {
    /// For `used` columns.
    pub(super) fn new(used: usize) -> Draw {
        Draw {
            bits: vec![0; used.div_ceil(64)],
        }
    }

    /// Draws a uniform `kappa`-subset of the used columns (0 < kappa < used.len()) and
    /// returns the sampled column of largest |z_c^T r| (the first of equals in column order)
    /// with its signed correlation. Past half of the columns, the columns left out are drawn
    /// instead (as few draws either way).
    pub(super) fn best(
        &mut self,
        used: &Used,
        x: &Csc,
        r: &[f64],
        rsum: f64,
        kappa: usize,
        rng: &mut StdRng,
    ) -> (usize, f64) {
        let m = used.len();
        debug_assert!(kappa > 0 && kappa < m);
        let out = 2 * kappa > m;
        let draws = if out { m - kappa } else { kappa };
        let m32 = m as u32;
        for _ in 0..draws {
            loop {
                let s = rng.random_range(0..m32) as usize;
                let (w, bit) = (s / 64, 1u64 << (s % 64));
                if self.bits[w] & bit == 0 {
                    self.bits[w] |= bit;
                    break;
                }
            }
        }
        let mut best = (0usize, -1.0f64, 0.0f64);
        let last = self.bits.len() - 1;
        for (w, word) in self.bits.iter_mut().enumerate() {
            let mut set = if out { !*word } else { *word };
            if out && w == last && !m.is_multiple_of(64) {
                set &= (1u64 << (m % 64)) - 1;
            }
            *word = 0;
            while set != 0 {
                let k = w * 64 + set.trailing_zeros() as usize;
                set &= set - 1;
                let c = used.corr(x, k, r, rsum);
                if c.abs() > best.1 {
                    best = (used.cols[k] as usize, c.abs(), c);
                }
            }
        }
        (best.0, best.2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// 10 columns of which 4 are empty (0, 3, 4, 9) and one (8) has one nonzero, 5 rows.
    fn matrix() -> Csc {
        let p = 10;
        let mut x = vec![0.0; 5 * p];
        for (i, row) in x.chunks_mut(p).enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                if ![0, 3, 4, 9].contains(&j) && (i + j) % 2 == 0 && (j != 8 || i == 2) {
                    *v = (i * p + j) as f64 / 7.0 - 2.0;
                }
            }
        }
        Csc::from_dense(&x, &[1.0, -2.0, 0.5, 3.0, 0.0], p)
    }

    fn means(x: &Csc) -> Vec<f64> {
        (0..x.p)
            .map(|j| x.column(j).1.iter().sum::<f64>() / x.n as f64)
            .collect()
    }

    #[test]
    fn the_used_columns_give_every_correlation_and_skip_the_empty_ones() {
        let x = matrix();
        let mean = means(&x);
        let used = Used::new(&x, &mean);
        assert_eq!(used.cols, vec![1, 2, 5, 6, 7, 8]);
        assert_eq!(used.spans[5].len, 1);
        let r = [0.3, -1.0, 2.0, 0.25, -1.55];
        let rsum: f64 = r.iter().sum();
        let mut c = vec![0.0; x.p];
        let (j, cmax) = used.all(&x, &r, rsum, &mut c);
        let mut want = (0, 0.0f64);
        for (k, &ck) in c.iter().enumerate() {
            assert_eq!(ck, x.dot(k, &r) - mean[k] * rsum, "column {k}");
            if ck.abs() > want.1 {
                want = (k, ck.abs());
            }
        }
        assert_eq!((j, cmax), want);
    }

    /// Each draw is a kappa-subset of the used columns, every subset about equally often
    /// (the best of a draw is the subset's largest index when the correlations grow with the
    /// index), on both sides of half the columns; the same seed draws the same subsets.
    #[test]
    fn draws_are_uniform_subsets_of_the_used_columns_and_repeat_from_a_seed() {
        // Column j has one nonzero, j + 1 at row 0, so |z_c_j^T r| grows with j for r = e_0.
        let p = 12;
        let mut dense = vec![0.0; 2 * p];
        for (j, d) in dense.iter_mut().take(p).enumerate() {
            *d = j as f64 + 1.0;
        }
        let x = Csc::from_dense(&dense, &[0.0, 0.0], p);
        let mean = means(&x);
        let used = Used::new(&x, &mean);
        let r = [1.0, 0.0];
        for kappa in [1, 3, 9, 11] {
            let mut draw = Draw::new(used.len());
            let mut rng = StdRng::seed_from_u64(5);
            let mut counts = vec![0usize; p];
            let rounds = 24_000;
            for _ in 0..rounds {
                let (j, c) = draw.best(&used, &x, &r, 1.0, kappa, &mut rng);
                assert_eq!(c, x.dot(j, &r) - mean[j]);
                counts[j] += 1;
                assert!(
                    draw.bits.iter().all(|w| *w == 0),
                    "the bitset is left empty"
                );
            }
            // P(max of a uniform kappa-subset of 0..p is j) = C(j, kappa - 1) / C(p, kappa).
            let choose = |a: usize, b: usize| -> f64 {
                if b > a {
                    return 0.0;
                }
                (0..b).map(|i| (a - i) as f64 / (b - i) as f64).product()
            };
            for (j, &n) in counts.iter().enumerate() {
                let want = rounds as f64 * choose(j, kappa - 1) / choose(p, kappa);
                assert!(
                    (n as f64 - want).abs() <= 5.0 * want.sqrt() + 1.0,
                    "kappa {kappa}, column {j}: {n} against {want:.1}"
                );
            }
            let mut again = Draw::new(used.len());
            let mut rng2 = StdRng::seed_from_u64(5);
            let mut rng1 = StdRng::seed_from_u64(5);
            let mut first = Draw::new(used.len());
            for _ in 0..50 {
                assert_eq!(
                    first.best(&used, &x, &r, 1.0, kappa, &mut rng1),
                    again.best(&used, &x, &r, 1.0, kappa, &mut rng2)
                );
            }
        }
    }
}
