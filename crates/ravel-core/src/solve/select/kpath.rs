//! Fast k-paths (issue 34): the fits k = 1..=K of OLSth, FSA, IHT and HTP, and the
//! least-squares refits along any sequence of supports (a penalized path with `refit`), for the
//! cost of about one solve of the largest support instead of one solve per point.
//!
//! The refits share one Cholesky factor of Q_SS (`cholesky::ColumnCholesky`) that follows the
//! support: a column that enters is one bordering step, O(s^2), a column that leaves one
//! sweep of rotations, O(s^2). OLSth's supports are nested (the k largest |b_j| of one full fit,
//! the same for every k: 003 Alg. 1), so its whole path is the full fit plus K appends, where
//! the per-k solves repeated the full fit K times. FSA and IHT / HTP share what precedes their
//! first k-dependent step (the step size and the warm-up, `threshold::fsa_start`,
//! `iht::warm_start`); their later iterations depend on k and stay per k.
//!
//! Same answers as the per-k solves, including when a system is singular. `linear::solve_subset`
//! puts a ridge on a system whose conditioning test (smallest pivot or inverse-iteration bound,
//! both upper bounds on lambda_min) falls below `RCOND_TOL` of the largest diagonal entry.
//! The factor here carries a lower bound instead: lambda_min >= 1 / tr(Q_SS^-1), with the trace
//! ||L^-1||_F^2 kept through appends (bordering adds (1 + ||L^-T r||^2) / d^2) and removals
//! (tr - B_jj - sum_{i != j} B_ij^2 / B_jj, with B_.j = Q_SS^-1 e_j). When that bound is at
//! least `SAFE_RCOND` (ten times `RCOND_TOL`) of the largest diagonal entry, every test
//! `solve_subset` makes passes too, so its answer is the unridged solve the factor gives (to
//! rounding); otherwise the point is solved by `solve_subset` itself, the per-k answer exactly.
//! The bound is within a factor s of lambda_min, so the fallback costs time only on systems
//! within a factor 10 s of singular.

use super::super::threshold::{FsaStart, L0Solution, fsa_from, fsa_start, grad_on, l0_fit};
use super::super::{Estimator, Fit, Problem, iht};
use crate::gram::Gram;
use crate::gram::linear::{LsSolution, RCOND_TOL, solve_subset};
use crate::linalg::dot;
use crate::solve::cholesky::ColumnCholesky;
use crate::solve::interrupt;

/// The lower bound on lambda_min / max diag above which the factor's solve stands for
/// `solve_subset`'s (module header).
pub const SAFE_RCOND: f64 = 10.0 * RCOND_TOL;

/// Least-squares fits (Q_SS b_S = c_S) along a sequence of supports, from one factor that
/// follows them (module header).
#[derive(Debug, Clone, Default)]
pub struct RefitPath {
    chol: ColumnCholesky,
    /// tr(Q_SS^-1) of the factor's columns.
    trace_inv: f64,
    /// Points solved by the factor, and by `solve_subset` (the fallback).
    pub incremental: usize,
    /// See `incremental`.
    pub fallbacks: usize,
}

impl RefitPath {
    /// An empty path.
    pub fn new() -> Self {
        Self::default()
    }

    /// The least-squares fit on `support` (any order), as `solve_subset(g, support, 0.0)`
    /// gives it.
    pub fn solve(&mut self, g: &Gram, support: &[usize]) -> LsSolution {
        if !support.is_empty() && self.follow(g, support) {
            let max_diag = support.iter().map(|&j| g.at(j, j)).fold(0.0f64, f64::max);
            let bound = 1.0 / self.trace_inv;
            if max_diag > 0.0 && bound.is_finite() && bound >= SAFE_RCOND * max_diag {
                let cols = self.chol.columns();
                let mut x: Vec<f64> = cols.iter().map(|&j| g.c[j]).collect();
                self.chol.solve(&mut x);
                if x.iter().all(|v| v.is_finite()) {
                    let mut b = vec![0.0; g.m];
                    for (&j, v) in cols.iter().zip(x) {
                        b[j] = v;
                    }
                    self.incremental += 1;
                    return LsSolution {
                        b,
                        jitter: 0.0,
                        rcond: bound / max_diag,
                        weakest: Vec::new(),
                    };
                }
            }
        }
        self.fallbacks += 1;
        solve_subset(g, support, 0.0)
    }

    /// Makes the factor hold exactly `support`: removals and appends when they are few, a
    /// fresh factor (appended column by column, which also gives the trace) when most
    /// columns change. False when the system is not numerically positive definite (the
    /// factor is then dropped).
    fn follow(&mut self, g: &Gram, support: &[usize]) -> bool {
        let mut wanted = vec![false; g.m];
        for &j in support {
            wanted[j] = true;
        }
        let s = self.chol.len();
        let stale: Vec<usize> = (0..s)
            .filter(|&i| !wanted[self.chol.columns()[i]])
            .collect();
        let kept = s - stale.len();
        let added = support.len() - kept;
        // Flops: a removal at position i touches about 2 (s - i)^2 entries (the rotations
        // and the solve for B_.j); an append 2 s^2 (row and trace); a fresh factor s^3 / 3.
        let t = support.len() as f64;
        let incremental = stale
            .iter()
            .map(|&i| 2.0 * ((s - i) as f64).powi(2) + 2.0 * (s as f64).powi(2))
            .sum::<f64>()
            + added as f64 * 2.0 * t * t;
        if incremental > t * t * t / 3.0 {
            self.chol.clear();
            self.trace_inv = 0.0;
            return self.append_all(g, support);
        }
        for &i in stale.iter().rev() {
            self.remove(i);
        }
        let mut present = vec![false; g.m];
        for &j in self.chol.columns() {
            present[j] = true;
        }
        let new: Vec<usize> = support.iter().copied().filter(|&j| !present[j]).collect();
        self.append_all(g, &new)
    }

    fn append_all(&mut self, g: &Gram, cols: &[usize]) -> bool {
        for &j in cols {
            if !self.append(g, j) {
                self.chol.clear();
                self.trace_inv = 0.0;
                return false;
            }
        }
        true
    }

    /// Appends column j: bordering L with the row (r, d) adds (1 + ||L^-T r||^2) / d^2 to
    /// ||L^-1||_F^2.
    fn append(&mut self, g: &Gram, j: usize) -> bool {
        let s = self.chol.len();
        if !self.chol.push(g, j, 0.0) {
            return false;
        }
        let row = self.chol.row(s);
        let d = row[s];
        let mut x = row[..s].to_vec();
        self.chol.backward_prefix(&mut x);
        self.trace_inv += (1.0 + dot(&x, &x)) / (d * d);
        true
    }

    /// Removes the column at position `pos`: with B = Q_SS^-1, the inverse without it is
    /// B_-j,-j - B_-j,j B_j,-j / B_jj, whose trace is tr B - B_jj - sum_{i != j} B_ij^2 / B_jj.
    /// When that difference cancels most of the trace (the removed column held the weak
    /// direction) it is recomputed from the new factor.
    fn remove(&mut self, pos: usize) {
        let s = self.chol.len();
        let mut e = vec![0.0; s];
        e[pos] = 1.0;
        self.chol.solve(&mut e);
        let bjj = e[pos];
        let off = dot(&e, &e) - bjj * bjj;
        let next = self.trace_inv - bjj - off / bjj;
        self.chol.remove(pos);
        self.trace_inv = if next > 1e-6 * self.trace_inv && next.is_finite() {
            next
        } else {
            self.exact_trace()
        };
    }

    /// ||L^-1||_F^2 from the factor, column by column of L^-1 (O(s^3)).
    fn exact_trace(&self) -> f64 {
        let s = self.chol.len();
        let mut total = 0.0;
        for c in 0..s {
            // Column c of L^-1 is zero above c: forward substitution from row c.
            let mut y = vec![0.0; s];
            for i in c..s {
                let li = self.chol.row(i);
                let rhs = if i == c { 1.0 } else { 0.0 };
                y[i] = (rhs - dot(&li[c..i], &y[c..i])) / li[i];
            }
            total += dot(&y[c..], &y[c..]);
        }
        total
    }
}

/// OLSth at every k = 1..=`k_max` (at most m): the full fit once, then the refits of the
/// nested supports (module header). Each point is `threshold::olsth(g, k, ridge)`.
pub fn olsth_path(g: &Gram, k_max: usize, ridge: f64) -> Vec<L0Solution> {
    let all: Vec<usize> = (0..g.m).collect();
    let full = solve_subset(g, &all, ridge);
    // `top_k`'s order: |b_j| descending, the lower index first on ties; its k-set is the
    // first k of this order.
    let mut order = all;
    order.sort_unstable_by(|&a, &c| full.b[c].abs().total_cmp(&full.b[a].abs()).then(a.cmp(&c)));
    let mut refits = RefitPath::new();
    let mut out = Vec::with_capacity(k_max.min(g.m));
    for k in 1..=k_max.min(g.m) {
        if interrupt::stop() {
            break;
        }
        let mut support = order[..k].to_vec();
        support.sort_unstable();
        let refit = refits.solve(g, &support);
        let measure = grad_on(g, &refit.b, &support);
        out.push(L0Solution {
            b: refit.b,
            support,
            iterations: 1,
            measure,
            jitter: full.jitter.max(refit.jitter),
        });
    }
    out
}

/// The fits of a k-family estimator (OLSth, FSA, IHT, HTP) at each k of `ks` (each in
/// 1..=m), as `at_k(est, k).solver().fit(problem)` gives them one by one.
pub(crate) fn k_fits(problem: &Problem, est: &Estimator, ks: &[usize]) -> Vec<Fit> {
    let g = &problem.gram;
    match est {
        Estimator::Olsth(e) => {
            let top = ks.iter().copied().max().unwrap_or(0);
            let path = olsth_path(g, top, e.lambda.unwrap_or(0.0));
            // A fold's grid can name a k twice (clamped to its m): one fit per entry.
            ks.iter()
                .filter_map(|&k| path.get(k.checked_sub(1)?).cloned())
                .map(|sol| {
                    let k = sol.support.len();
                    l0_fit(sol, k, e.lambda, Vec::new())
                })
                .collect()
        }
        Estimator::Fsa(e) => {
            let opt = e.options();
            let start: FsaStart = fsa_start(g, &opt);
            ks.iter()
                .map_while(|&k| {
                    (!interrupt::stop())
                        .then(|| l0_fit(fsa_from(g, k, &opt, &start), k, None, Vec::new()))
                })
                .collect()
        }
        Estimator::Iht(iht::Iht(e)) | Estimator::Htp(iht::Htp(e)) => {
            let method = match est {
                Estimator::Iht(_) => iht::HardThreshold::Iht,
                _ => iht::HardThreshold::Htp,
            };
            let warm = iht::warm_start(g, &e.options());
            ks.iter()
                .map_while(|&k| {
                    (!interrupt::stop()).then(|| {
                        let at = iht::HardThresholding { k, ..e.clone() };
                        at.fit_from(g, method, warm.as_deref())
                    })
                })
                .collect()
        }
        other => ks
            .iter()
            .map(|&k| super::at_k(other, k).solver().fit(problem))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{k_fits_one_by_one, problem_of};
    use super::*;
    use crate::solve::Request;
    use crate::stats::{AlphaSchedule, Stats};
    use crate::task::Task;
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use rand_distr::{Distribution, StandardNormal};

    /// Rows of a design with p columns: a common factor of weight `rho` (pairwise correlation
    /// about rho^2 / (1 + rho^2)), `twins` columns that copy another up to noise of sd `eps`,
    /// and y from 8 true features (one of them a twin's original) plus unit noise.
    struct Design {
        n: usize,
        p: usize,
        rho: f64,
        twins: usize,
        eps: f64,
    }

    fn problem(d: &Design, seed: u64) -> Problem {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut normal = || -> f64 { StandardNormal.sample(&mut rng) };
        let (n, p) = (d.n, d.p);
        let mut x = vec![0.0; n * p];
        let mut y = vec![0.0; n];
        for i in 0..n {
            let z = normal();
            let row = &mut x[i * p..(i + 1) * p];
            for v in row.iter_mut() {
                *v = d.rho * z + normal();
            }
            // Twins: column p - 1 - t copies column t.
            for t in 0..d.twins {
                row[p - 1 - t] = row[t] + d.eps * normal();
            }
            y[i] = (0..8)
                .map(|j| row[j * (p / 8)] * (1.0 + j as f64 * 0.25))
                .sum::<f64>()
                + normal();
        }
        let mut stats = Stats::new(Task::Regression, p, AlphaSchedule::Plain);
        stats.update_batch(&x, &y).unwrap();
        let req: Request = serde_json::from_str(r#"{"method": "ols"}"#).unwrap();
        problem_of(&stats, &req).unwrap()
    }

    fn support(b: &[f64]) -> Vec<usize> {
        (0..b.len()).filter(|&j| b[j] != 0.0).collect()
    }

    /// Each fast point against its per-k solve: the same support, k, exactness, ridge and
    /// notes, the same training loss (RSS) to 1e-9 relative, and the same criteria to 1e-9 n.
    fn assert_same(name: &str, fast: &[Fit], slow: &[Fit], g: &Gram) {
        assert_eq!(fast.len(), slow.len(), "{name}: path lengths");
        for (k, (a, b)) in fast.iter().zip(slow).enumerate() {
            let at = format!("{name} at k = {}", k + 1);
            assert_eq!(support(&a.b), support(&b.b), "{at}: supports");
            assert_eq!(a.requested_k, b.requested_k, "{at}");
            assert_eq!(a.k_exact, b.k_exact, "{at}");
            assert_eq!(a.singular_ridge, b.singular_ridge, "{at}: ridge");
            assert_eq!(a.notes, b.notes, "{at}: notes");
            let (la, lb) = (g.loss(&a.b), g.loss(&b.b));
            assert!(
                (la - lb).abs() <= 1e-9 * lb.abs().max(1e-300),
                "{at}: loss {la:e} vs {lb:e}"
            );
            let n = 1000.0;
            let p = g.m;
            let crit = |f: &Fit| {
                let s = support(&f.b).len();
                let mse = 2.0 * g.loss(&f.b);
                super::super::criteria(n, p, s as f64, s, mse, 0.5)
            };
            let (ca, cb) = (crit(a), crit(b));
            // A criterion is n ln(RSS / n) plus penalties: a relative error e of the RSS moves
            // it by n e, whatever its value (which can be near 0 by cancellation).
            for (u, v) in [(ca.aic, cb.aic), (ca.bic, cb.bic), (ca.ebic, cb.ebic)] {
                assert!((u - v).abs() <= 1e-9 * n, "{at}: {u} vs {v}");
            }
        }
    }

    fn request(json: &str) -> Estimator {
        serde_json::from_str::<Request>(json).unwrap().estimator
    }

    /// The fast k-paths of every k-family equal the per-k solves on random designs: well
    /// conditioned, correlated, with near-duplicate columns (correlation 1 - 1e-12 and
    /// 1 - 1e-6), and with fewer rows than columns (singular: the ridge fallback).
    #[test]
    fn fast_k_paths_equal_the_per_k_solves() {
        let designs = [
            Design {
                n: 400,
                p: 60,
                rho: 0.0,
                twins: 0,
                eps: 0.0,
            },
            Design {
                n: 300,
                p: 120,
                rho: 1.0,
                twins: 0,
                eps: 0.0,
            },
            Design {
                n: 300,
                p: 80,
                rho: 1.0,
                twins: 4,
                eps: 1e-3,
            },
            Design {
                n: 300,
                p: 80,
                rho: 0.5,
                twins: 3,
                eps: 1e-6,
            },
            Design {
                n: 60,
                p: 90,
                rho: 1.0,
                twins: 0,
                eps: 0.0,
            },
            Design {
                n: 800,
                p: 300,
                rho: 1.0,
                twins: 2,
                eps: 1e-2,
            },
        ];
        for (i, d) in designs.iter().enumerate() {
            for seed in [1, 2] {
                let pb = problem(d, seed * 100 + i as u64);
                let top = 40.min(pb.gram.m);
                for json in [
                    r#"{"method": "olsth", "k": 40}"#,
                    r#"{"method": "olsth", "k": 40, "lambda": 0.01}"#,
                    r#"{"method": "fsa", "k": 40, "fsa_iterations": 60}"#,
                    r#"{"method": "iht", "k": 40, "max_iterations": 50}"#,
                    r#"{"method": "htp", "k": 40, "max_iterations": 20}"#,
                ] {
                    if d.p >= 300 && !json.contains("olsth") {
                        continue; // the iterative families are slow in debug builds
                    }
                    let est = request(json);
                    let ks: Vec<usize> = (1..=top).collect();
                    let fast = k_fits(&pb, &est, &ks);
                    let slow = k_fits_one_by_one(&pb, &est, top);
                    let name = format!("design {i} seed {seed} {json}");
                    assert_same(&name, &fast, &slow, &pb.gram);
                }
            }
        }
    }

    /// The near-singular designs take both branches: the factor where it is safe, and
    /// `solve_subset` (with its ridge) where it is not; the answers stay the per-k ones (above).
    #[test]
    fn near_singular_supports_fall_back_to_the_per_k_solve() {
        let d = Design {
            n: 300,
            p: 80,
            rho: 0.5,
            twins: 3,
            eps: 1e-7,
        };
        let pb = problem(&d, 7);
        let g = &pb.gram;
        let mut refits = RefitPath::new();
        // Grow to all columns (the twins make the later supports singular), then shrink.
        let mut order: Vec<usize> = (0..g.m).collect();
        order.rotate_left(5);
        let mut ridged = 0;
        for s in (1..=g.m).chain((1..g.m).rev()) {
            let mut support = order[..s].to_vec();
            support.sort_unstable();
            let fast = refits.solve(g, &support);
            let slow = solve_subset(g, &support, 0.0);
            assert_eq!(fast.jitter, slow.jitter, "size {s}");
            ridged += usize::from(slow.jitter > 0.0);
            let (la, lb) = (g.loss(&fast.b), g.loss(&slow.b));
            assert!((la - lb).abs() <= 1e-9 * lb.abs(), "size {s}: {la} vs {lb}");
        }
        assert!(ridged > 0, "the design should have singular supports");
        assert!(refits.incremental > 0 && refits.fallbacks > 0, "{refits:?}");
    }

    /// Supports that change by several columns at a time, both ways (a penalized path with
    /// `refit`), and jumps that rebuild the factor: every fit is `solve_subset`'s, and the
    /// trace the bound rests on stays exact.
    #[test]
    fn refits_follow_supports_that_change_both_ways() {
        let d = Design {
            n: 500,
            p: 100,
            rho: 1.0,
            twins: 0,
            eps: 0.0,
        };
        let pb = problem(&d, 11);
        let g = &pb.gram;
        let mut rng = StdRng::seed_from_u64(5);
        let mut refits = RefitPath::new();
        let mut current: Vec<usize> = (0..10).collect();
        for step in 0..200 {
            use rand::Rng;
            // Mostly small moves, sometimes a jump to a fresh support.
            if step % 37 == 36 {
                current = (0..g.m).filter(|_| rng.random_bool(0.4)).collect();
            } else {
                for _ in 0..rng.random_range(1..4) {
                    let j = rng.random_range(0..g.m);
                    match current.binary_search(&j) {
                        Ok(pos) if current.len() > 1 => {
                            current.remove(pos);
                        }
                        Ok(_) => {}
                        Err(pos) => current.insert(pos, j),
                    }
                }
            }
            let fast = refits.solve(g, &current);
            let slow = solve_subset(g, &current, 0.0);
            for j in 0..g.m {
                assert!(
                    (fast.b[j] - slow.b[j]).abs() <= 1e-9 * slow.b[j].abs().max(1.0),
                    "step {step} column {j}: {} vs {}",
                    fast.b[j],
                    slow.b[j]
                );
            }
            let exact = refits.exact_trace();
            assert!(
                (refits.trace_inv - exact).abs() <= 1e-9 * exact,
                "step {step}: trace {} vs {exact}",
                refits.trace_inv
            );
        }
        assert_eq!(refits.fallbacks, 0, "{refits:?}");
    }
}
