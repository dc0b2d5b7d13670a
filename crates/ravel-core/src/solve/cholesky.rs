//! A Cholesky factor that follows a changing set of columns of the Gram form, for the
//! active-set (Newton) step of the penalized solvers: (Q_SS + diag(beta)) x = rhs, where the
//! support S changes by a few columns between calls along a lambda path. Appending a column is
//! one triangular solve and removing one is a sweep of Givens rotations, O(s^2) each, instead
//! of a fresh O(s^3) factorization per call (which was most of the 100-point Lasso path at
//! p = 1000). When many columns change at once, `sync` refactors from scratch with faer.

use crate::gram::Gram;
use crate::linalg::dot;
use faer::linalg::matmul::matmul;
use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::{Accum, Mat, MatRef, Par, Side};

/// Smallest pivot accepted, relative to the diagonal entry it comes from: below it the system
/// is numerically singular (duplicated or collinear columns) and the caller falls back to
/// coordinate descent instead of trusting a huge solution.
const PIVOT_TOL: f64 = 1e-12;

/// L L^T = Q_SS + diag(shift) for the columns S in factor order.
#[derive(Debug, Clone, Default)]
pub struct ColumnCholesky {
    /// Row stride of `l`; the factor holds at most `cap` columns before it grows.
    cap: usize,
    /// Lower factor, row-major: L[i][k] = l[i * cap + k] for k <= i; rows in use only.
    l: Vec<f64>,
    /// The Gram column at each position, and its diagonal shift.
    cols: Vec<usize>,
    shifts: Vec<f64>,
}

impl ColumnCholesky {
    /// Columns in the factor.
    pub fn len(&self) -> usize {
        self.cols.len()
    }

    /// Whether the factor holds no column.
    pub fn is_empty(&self) -> bool {
        self.cols.is_empty()
    }

    /// The columns in factor order (the order `solve` expects).
    pub fn columns(&self) -> &[usize] {
        &self.cols
    }

    /// Drops every column.
    pub fn clear(&mut self) {
        self.l.clear();
        self.cols.clear();
        self.shifts.clear();
    }

    /// Room for `rows` rows: the stride grows (doubling) when needed, and `l` holds exactly
    /// the rows asked for, so that a clone (the k-search clones states) copies only those.
    fn reserve(&mut self, rows: usize) {
        if rows <= self.cap {
            self.l.resize(rows * self.cap, 0.0);
            return;
        }
        let cap = rows.max(2 * self.cap).max(16);
        let mut l = vec![0.0; rows * cap];
        for i in 0..self.len() {
            l[i * cap..i * cap + i + 1]
                .copy_from_slice(&self.l[i * self.cap..i * self.cap + i + 1]);
        }
        self.l = l;
        self.cap = cap;
    }

    /// Appends column j of `g` with diagonal shift `shift`. Returns false, leaving the factor
    /// as it was, when the extended matrix is not (numerically) positive definite.
    pub fn push(&mut self, g: &Gram, j: usize, shift: f64) -> bool {
        let s = self.len();
        self.reserve(s + 1);
        let cap = self.cap;
        let col = g.col(j);
        // Row s of L solves L[..s, ..s] x = Q[S, j] (forward substitution on rows).
        let (head, tail) = self.l.split_at_mut(s * cap);
        let row = &mut tail[..s + 1];
        for i in 0..s {
            let li = &head[i * cap..i * cap + i + 1];
            row[i] = (col[self.cols[i]] - dot(&li[..i], &row[..i])) / li[i];
        }
        let diag = col[j] + shift;
        let d2 = diag - dot(&row[..s], &row[..s]);
        if d2.is_nan() || d2 <= PIVOT_TOL * (col[j].abs() + shift.abs()) {
            self.l.truncate(s * cap);
            return false;
        }
        row[s] = d2.sqrt();
        self.cols.push(j);
        self.shifts.push(shift);
        true
    }

    /// Removes the column at position `pos`: the rows below move up, each with one entry right
    /// of its new diagonal, which a rotation of columns (k, k+1) zeroes. Row k needs the
    /// rotations of the rows above it; they are applied to a group of rows at a time so that
    /// the dependent chains of different rows overlap, with contiguous access within a row.
    pub fn remove(&mut self, pos: usize) {
        const GROUP: usize = 8;
        let s = self.len();
        let cap = self.cap;
        for i in pos + 1..s {
            self.l.copy_within(i * cap..i * cap + i + 1, (i - 1) * cap);
        }
        let last = s.saturating_sub(1);
        let mut rotations: Vec<(f64, f64)> = Vec::with_capacity(last.saturating_sub(pos));
        let l = &mut self.l;
        let mut k = pos;
        while k < last {
            let end = (k + GROUP).min(last);
            // The rotations of the rows above this group, to every row of it.
            for (t, &(c, sn)) in rotations.iter().enumerate() {
                let i = pos + t;
                for r in k..end {
                    let (x, y) = (l[r * cap + i], l[r * cap + i + 1]);
                    l[r * cap + i] = c * x + sn * y;
                    l[r * cap + i + 1] = c * y - sn * x;
                }
            }
            // Within the group, one row after another.
            for r in k..end {
                let row = &mut l[r * cap..r * cap + r + 2];
                for (t, &(c, sn)) in rotations[k - pos..].iter().enumerate() {
                    let i = k + t;
                    let (x, y) = (row[i], row[i + 1]);
                    row[i] = c * x + sn * y;
                    row[i + 1] = c * y - sn * x;
                }
                let (a, b) = (row[r], row[r + 1]);
                let h = a.hypot(b);
                rotations.push((a / h, b / h));
                row[r] = h;
                row[r + 1] = 0.0;
            }
            k = end;
        }
        self.l.truncate(last * cap);
        self.cols.remove(pos);
        self.shifts.remove(pos);
    }

    /// Makes the factor hold exactly `wanted` (column, shift) pairs, reusing what it can.
    /// The factor order afterwards is `columns()`. Returns false when the matrix is not
    /// positive definite (the factor then holds a valid subset; callers must not solve).
    pub fn sync(&mut self, g: &Gram, wanted: &[(usize, f64)]) -> bool {
        let mut shift_of = vec![f64::NAN; g.m];
        for &(j, sh) in wanted {
            shift_of[j] = sh;
        }
        let s = self.len();
        let stale: Vec<usize> = (0..s)
            .filter(|&i| shift_of[self.cols[i]].to_bits() != self.shifts[i].to_bits())
            .collect();
        let kept = s - stale.len();
        let added = wanted.len() - kept;
        // Flop estimates, in units of a blocked factorization's rate: a removal at position i
        // rotates (s - i)^2 / 2 entries one at a time; a block of appends is a triangular
        // solve with several right-hand sides; a fresh factorization is s^3 / 3.
        let t = wanted.len() as f64;
        let incremental = stale
            .iter()
            .map(|&i| 3.0 * ((s - i) as f64).powi(2))
            .sum::<f64>()
            + added as f64 * t * t / 2.0;
        if incremental > t * t * t / 3.0 {
            return self.rebuild(g, wanted);
        }
        for &i in stale.iter().rev() {
            self.remove(i);
        }
        let mut present = vec![false; g.m];
        for &j in &self.cols {
            present[j] = true;
        }
        let new: Vec<(usize, f64)> = wanted.iter().copied().filter(|w| !present[w.0]).collect();
        match new.len() {
            0 => true,
            1 => self.push(g, new[0].0, new[0].1),
            _ => self.push_block(g, &new),
        }
    }

    /// Appends several columns at once: X = L^-1 Q[S, T] by one blocked triangular solve, then
    /// the new diagonal block is the factor of Q_TT + diag(shift) - X^T X. Returns false,
    /// leaving the factor as it was, when that block is not positive definite.
    pub fn push_block(&mut self, g: &Gram, new: &[(usize, f64)]) -> bool {
        let (s, t) = (self.len(), new.len());
        self.reserve(s + t);
        let cap = self.cap;
        let mut x = Mat::from_fn(s, t, |i, a| g.at(self.cols[i], new[a].0));
        if s > 0 {
            let l =
                MatRef::from_row_major_slice_with_stride(&self.l[..(s - 1) * cap + s], s, s, cap);
            solve_lower_triangular_in_place(l, x.as_mut(), Par::Seq);
        }
        let mut block = Mat::from_fn(t, t, |a, b| {
            g.at(new[a].0, new[b].0) + if a == b { new[a].1 } else { 0.0 }
        });
        if s > 0 {
            matmul(
                block.as_mut(),
                Accum::Add,
                x.transpose(),
                x.as_ref(),
                -1.0,
                Par::Seq,
            );
        }
        let Ok(llt) = block.llt(Side::Lower) else {
            self.l.truncate(s * cap);
            return false;
        };
        let d = llt.L();
        for (a, &(j, sh)) in new.iter().enumerate() {
            let dd = d[(a, a)];
            if dd.is_nan() || dd * dd <= PIVOT_TOL * (g.at(j, j).abs() + sh.abs()) {
                self.l.truncate(s * cap);
                return false;
            }
        }
        for a in 0..t {
            let row = &mut self.l[(s + a) * cap..(s + a) * cap + s + a + 1];
            for i in 0..s {
                row[i] = x[(i, a)];
            }
            for b in 0..=a {
                row[s + b] = d[(a, b)];
            }
        }
        self.cols.extend(new.iter().map(|w| w.0));
        self.shifts.extend(new.iter().map(|w| w.1));
        true
    }

    /// A fresh factorization of `wanted` in the given order.
    fn rebuild(&mut self, g: &Gram, wanted: &[(usize, f64)]) -> bool {
        self.clear();
        let s = wanted.len();
        if s == 0 {
            return true;
        }
        let a = Mat::from_fn(s, s, |i, k| {
            g.at(wanted[i].0, wanted[k].0) + if i == k { wanted[i].1 } else { 0.0 }
        });
        let Ok(llt) = a.llt(Side::Lower) else {
            return false;
        };
        let factor = llt.L();
        for (i, &(j, sh)) in wanted.iter().enumerate() {
            let d = factor[(i, i)];
            if d.is_nan() || d * d <= PIVOT_TOL * (g.at(j, j).abs() + sh.abs()) {
                return false;
            }
        }
        self.reserve(s);
        let cap = self.cap;
        for i in 0..s {
            for k in 0..=i {
                self.l[i * cap + k] = factor[(i, k)];
            }
        }
        self.cols.extend(wanted.iter().map(|w| w.0));
        self.shifts.extend(wanted.iter().map(|w| w.1));
        true
    }

    /// Row i of L up to its diagonal (entries 0..=i).
    pub fn row(&self, i: usize) -> &[f64] {
        &self.l[i * self.cap..i * self.cap + i + 1]
    }

    /// Solves L\[..len, ..len\]^T x = rhs in place: the back substitution of the leading
    /// `len` columns alone (`rhs.len()` is `len`), which is the whole factor before its last
    /// `len()` - `len` appends.
    pub fn backward_prefix(&self, rhs: &mut [f64]) {
        let len = rhs.len();
        debug_assert!(len <= self.len());
        for i in (0..len).rev() {
            let li = self.row(i);
            let xi = rhs[i] / li[i];
            rhs[i] = xi;
            for (r, l) in rhs[..i].iter_mut().zip(&li[..i]) {
                *r -= l * xi;
            }
        }
    }

    /// Solves L L^T x = rhs in place (rhs in factor order).
    pub fn solve(&self, rhs: &mut [f64]) {
        let (s, cap) = (self.len(), self.cap);
        debug_assert_eq!(rhs.len(), s);
        for i in 0..s {
            let li = &self.l[i * cap..i * cap + i + 1];
            rhs[i] = (rhs[i] - dot(&li[..i], &rhs[..i])) / li[i];
        }
        // L^T x = y, consuming row i of L once x_i is known (contiguous access).
        for i in (0..s).rev() {
            let li = &self.l[i * cap..i * cap + i + 1];
            let xi = rhs[i] / li[i];
            rhs[i] = xi;
            for (r, l) in rhs[..i].iter_mut().zip(&li[..i]) {
                *r -= l * xi;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Gram form of `m` random columns over `n` rows (positive definite when n > m).
    fn gram(m: usize, n: usize, seed: u64) -> Gram {
        let mut state = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 / (1u64 << 53) as f64) - 0.5
        };
        let x: Vec<f64> = (0..m * n).map(|_| next()).collect();
        let mut q = vec![0.0; m * m];
        for i in 0..m {
            for j in 0..m {
                q[i + j * m] = (0..n).map(|r| x[r * m + i] * x[r * m + j]).sum::<f64>() / n as f64;
            }
        }
        let c = (0..m).map(|_| next()).collect();
        Gram { m, q, c, yy: 1.0 }
    }

    /// Solves the wanted system densely with faer for comparison.
    fn reference(g: &Gram, wanted: &[(usize, f64)], rhs: &[f64]) -> Vec<f64> {
        use faer::linalg::solvers::Solve;
        let s = wanted.len();
        let a = Mat::from_fn(s, s, |i, k| {
            g.at(wanted[i].0, wanted[k].0) + if i == k { wanted[i].1 } else { 0.0 }
        });
        let b = Mat::from_fn(s, 1, |i, _| rhs[i]);
        let x = a.llt(Side::Lower).unwrap().solve(&b);
        (0..s).map(|i| x[(i, 0)]).collect()
    }

    fn check(f: &ColumnCholesky, g: &Gram, shift_of: impl Fn(usize) -> f64) {
        let wanted: Vec<(usize, f64)> = f.columns().iter().map(|&j| (j, shift_of(j))).collect();
        let rhs: Vec<f64> = f.columns().iter().map(|&j| g.c[j]).collect();
        let mut x = rhs.clone();
        f.solve(&mut x);
        let want = reference(g, &wanted, &rhs);
        for (a, b) in x.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-10 * b.abs().max(1.0), "{a} vs {b}");
        }
    }

    #[test]
    fn appends_and_removals_match_a_fresh_factorization() {
        let g = gram(40, 200, 3);
        let mut f = ColumnCholesky::default();
        for j in (0..40).step_by(3) {
            assert!(f.push(&g, j, 0.0));
        }
        check(&f, &g, |_| 0.0);
        // Remove first, middle and last positions, then grow again past the capacity.
        f.remove(0);
        check(&f, &g, |_| 0.0);
        f.remove(f.len() / 2);
        check(&f, &g, |_| 0.0);
        f.remove(f.len() - 1);
        check(&f, &g, |_| 0.0);
        for j in (1..40).step_by(3) {
            assert!(f.push(&g, j, 0.0));
        }
        check(&f, &g, |_| 0.0);
        while f.len() > 1 {
            f.remove(1);
            check(&f, &g, |_| 0.0);
        }
        f.remove(0);
        assert!(f.is_empty());
    }

    #[test]
    fn sync_follows_columns_and_shifts_either_way() {
        let g = gram(30, 100, 5);
        let mut f = ColumnCholesky::default();
        let shift = |j: usize| if j.is_multiple_of(4) { 0.05 } else { 0.0 };
        let a: Vec<(usize, f64)> = (0..20).map(|j| (j, shift(j))).collect();
        assert!(f.sync(&g, &a));
        check(&f, &g, shift);
        // A few changes: incremental. Then most columns changed: rebuilt. Same answers.
        let b: Vec<(usize, f64)> = (2..22).map(|j| (j, shift(j))).collect();
        assert!(f.sync(&g, &b));
        check(&f, &g, shift);
        let mut got: Vec<usize> = f.columns().to_vec();
        got.sort();
        assert_eq!(got, (2..22).collect::<Vec<_>>());
        let shift2 = |j: usize| if j.is_multiple_of(3) { 0.1 } else { 0.0 };
        let c: Vec<(usize, f64)> = (10..30).map(|j| (j, shift2(j))).collect();
        assert!(f.sync(&g, &c));
        check(&f, &g, shift2);
    }

    #[test]
    fn a_duplicated_column_is_refused() {
        let mut g = gram(6, 50, 9);
        // Column 5 := column 4 (q is symmetric: copy both the row and the column).
        let m = g.m;
        for i in 0..m {
            g.q[i + 5 * m] = g.q[i + 4 * m];
        }
        for j in 0..m {
            g.q[5 + j * m] = g.q[4 + j * m];
        }
        g.q[5 + 5 * m] = g.q[4 + 4 * m];
        let mut f = ColumnCholesky::default();
        for j in 0..5 {
            assert!(f.push(&g, j, 0.0));
        }
        assert!(!f.push(&g, 5, 0.0));
        assert_eq!(f.len(), 5);
        check(&f, &g, |_| 0.0);
        assert_eq!(f.l.len(), 5 * f.cap);
        let all: Vec<(usize, f64)> = (0..6).map(|j| (j, 0.0)).collect();
        let mut fresh = ColumnCholesky::default();
        assert!(!fresh.sync(&g, &all));
        // Both twins in one block append.
        let mut f = ColumnCholesky::default();
        for j in 0..4 {
            assert!(f.push(&g, j, 0.0));
        }
        assert!(!f.push_block(&g, &all[4..]));
        assert_eq!((f.len(), f.l.len()), (4, 4 * f.cap));
        check(&f, &g, |_| 0.0);
        assert!(f.push_block(&g, &all[4..5]));
        check(&f, &g, |_| 0.0);
    }
}
