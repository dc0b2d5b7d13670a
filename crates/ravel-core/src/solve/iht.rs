//! l0-constrained ridge least squares by iterative hard thresholding (IHT) and hard
//! thresholding pursuit (HTP), with the sparse primal-dual gap of paper 002 chapter 3 as a
//! certificate of global optimality.
//!
//! Problem (002 eq. 3.1.1 with the squared loss, in the Gram form):
//!   min_{||w||_0 <= k} P(w) = 1/2 w^T Q w - c^T w + yy/2 + lambda/2 ||w||^2.
//! IHT: w <- H_k(w - eta (Q w - c + lambda w)); HTP adds the exact (ridge) fit on the support
//! after each step. The step eta is the exact line search along the gradient restricted to the
//! current support (normalized IHT, Blumensath-Davies), halved until P decreases, so both are
//! monotone. Both end with the exact fit on the final support, as OLSth and FSA do.
//!
//! The dual in the Gram form. 002 Prop. 1 writes D over one dual variable per sample; from
//! running averages there are no samples, but with a factor Q = R^T R and pseudo-targets z
//! (R^T z = c) the dual variables that matter are alpha = R u - z, and substituting gives a
//! dual over u in R^m that needs only Q, c and yy:
//!   D(u) = yy/2 - 1/2 u^T Q u - 1/(2 lambda) ||H_k(Q u - c)||^2.
//! Weak duality holds directly: for any k-sparse w with support F and any u,
//!   P(w) - D(u) = 1/2 (w-u)^T Q (w-u) + [g^T w + lambda/2 ||w||^2 + 1/(2 lambda)||H_k(g)||^2]
//! with g = Q u - c, and the bracket is >= 0 because min over w_F of g_F^T w_F + lambda/2
//! ||w_F||^2 is -||g_F||^2/(2 lambda) >= -||H_k(g)||^2/(2 lambda). So D(u) <= P* for every u,
//! and gap = P(w) - D(u) >= P(w) - P*: a zero gap proves w globally optimal. At u = w (the
//! dual point alpha = f'(R w) of 002 Thm. 2 (b)) the gap is zero exactly when
//! (Q w - c + lambda w)_F = 0 and min_F lambda |w_i| >= max_{j not in F} |(Q w - c)_j|, the
//! conditions of 002 eq. (3.3.3) (ALGORITHMS.md section 5). When they fail, DIHT (002 Alg. 2)
//! climbs the dual: in u the super-gradient step of (3.3.6) with eta = N/(mu (t+2)) (Thm. 6;
//! mu = 1 for the squared loss) becomes u <- u + (w(u) - u)/(t + 2) with
//! w(u) = H_k(-(Q u - c)/lambda), a better lower bound; and its primal w(u), refitted, is a
//! candidate the primal method may have missed.
//!
//! The request's parameters (`HardThresholding`, as `Iht` and `Htp`) and their `Solver`
//! implementations come last.

use super::{Fit, Method, ParamError, Problem, Solver, check, jitter_note, limits, usable_k};
use crate::gram::Gram;
use crate::gram::linear::{largest_eigenvalue, solve_subset};
use crate::solve::threshold::top_k;
use serde::{Deserialize, Serialize};

/// Which primal method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HardThreshold {
    /// Iterative hard thresholding.
    Iht,
    /// Hard thresholding pursuit (a least-squares solve on each support).
    Htp,
}

/// Solver settings.
#[derive(Debug, Clone, Copy)]
pub struct IhtOptions {
    /// The ridge lambda of P (>= 0). The certificate needs lambda > 0; larger lambda makes it
    /// hold more often (002 Fig. 3.4.1).
    pub lambda: f64,
    /// Iteration cap.
    pub max_iterations: usize,
    /// Stop when the support is unchanged and P decreased by at most tol * yy.
    pub tol: f64,
    /// DIHT iterations to tighten the dual bound when the certificate at u = w fails (0: none).
    pub dual_iterations: usize,
    /// Gradient steps on all columns (step 1/L, L the largest eigenvalue of Q + lambda I)
    /// before the first hard threshold; 0 starts from w = 0 as 002 does. Default 20, as FSA's
    /// warm-up and for the same reason: on 003's Table 2 design (pairwise correlation 0.5,
    /// p = 1000, k = 100, n = 3000) IHT from w = 0 stops at a fixed point holding 54-56% of
    /// the true features (seeds 1, 2); after 20 warm-up steps it finds all of them. HTP found
    /// all of them from either start.
    pub warmup: usize,
}

impl Default for IhtOptions {
    fn default() -> Self {
        IhtOptions {
            lambda: 0.0,
            max_iterations: 1000,
            tol: 1e-12,
            dual_iterations: 200,
            warmup: 20,
        }
    }
}

/// The sparse primal-dual gap at the returned w (the `Model`'s diagnostics carry it).
pub use crate::model::Certificate;

/// The answer of IHT / HTP.
#[derive(Debug, Clone)]
pub struct IhtSolution {
    /// The solution (solver units).
    pub b: Vec<f64>,
    /// Its support.
    pub support: Vec<usize>,
    /// Iterations made.
    pub iterations: usize,
    /// Whether it stopped on the tolerance.
    pub converged: bool,
    /// None when lambda = 0 (the dual bound is -infinity then).
    pub certificate: Option<Certificate>,
    /// DIHT's primal point was better than the primal method's and replaced it.
    pub improved_by_dual: bool,
    /// Jitter the final fit needed (see `solve_subset`).
    pub jitter: f64,
}

/// P(w) for a w that is zero off `support`.
pub fn primal(g: &Gram, w: &[f64], lambda: f64) -> f64 {
    g.loss(w) + 0.5 * lambda * w.iter().map(|v| v * v).sum::<f64>()
}

/// D(u) = yy/2 - 1/2 u^T Q u - ||H_k(Q u - c)||^2 / (2 lambda) (module comment).
pub fn dual(g: &Gram, u: &[f64], k: usize, lambda: f64) -> f64 {
    let grad = g.gradient(u);
    let uqu: f64 = u
        .iter()
        .zip(&grad)
        .zip(&g.c)
        .map(|((ui, gi), ci)| ui * (gi + ci))
        .sum();
    0.5 * g.yy - 0.5 * uqu - top_k_sq(&grad, k) / (2.0 * lambda)
}

/// ||H_k(v)||^2.
fn top_k_sq(v: &[f64], k: usize) -> f64 {
    let all: Vec<usize> = (0..v.len()).collect();
    top_k(v, &all, k).iter().map(|&i| v[i] * v[i]).sum()
}

/// The gap at u = w, in the cancellation-free form g^T w + lambda/2 ||w||^2 +
/// ||H_k(g)||^2 / (2 lambda) with g = Q w - c.
fn self_gap(g: &Gram, w: &[f64], k: usize, lambda: f64) -> f64 {
    let grad = g.gradient(w);
    let gw: f64 = grad.iter().zip(w).map(|(a, b)| a * b).sum();
    let ww: f64 = w.iter().map(|v| v * v).sum();
    (gw + 0.5 * lambda * ww + top_k_sq(&grad, k) / (2.0 * lambda)).max(0.0)
}

/// The certificate of w, tightened by up to `dual_iterations` DIHT steps when the gap at
/// u = w is not zero. Also returns DIHT's best primal candidate (refitted), if any.
pub fn certify(
    g: &Gram,
    w: &[f64],
    k: usize,
    lambda: f64,
    dual_iterations: usize,
) -> (Option<Certificate>, Option<Vec<f64>>) {
    if lambda.is_nan() || lambda <= 0.0 {
        return (None, None);
    }
    let tol = 1e-9 * g.yy.max(f64::MIN_POSITIVE);
    let p = primal(g, w, lambda);
    let gap0 = self_gap(g, w, k, lambda);
    let mut best = Certificate {
        primal: p,
        dual: p - gap0,
        gap: gap0,
        optimal: gap0 <= tol,
    };
    if best.optimal || dual_iterations == 0 {
        return (Some(best), None);
    }
    // DIHT (002 Alg. 2) from u = w.
    let all: Vec<usize> = (0..g.m).collect();
    let mut u = w.to_vec();
    let mut candidate: Option<(f64, Vec<f64>)> = None;
    for t in 0..dual_iterations {
        if super::interrupt::stop() {
            break;
        }
        let grad = g.gradient(&u);
        let f = top_k(&grad, &all, k);
        let mut wu = vec![0.0; g.m];
        for &i in &f {
            wu[i] = -grad[i] / lambda;
        }
        let d = dual(g, &u, k, lambda);
        if d > best.dual {
            best.dual = d;
        }
        if t % 10 == 0 {
            let refit = solve_subset(g, &f, lambda).b;
            let pr = primal(g, &refit, lambda);
            if pr < candidate.as_ref().map_or(p, |c| c.0) {
                candidate = Some((pr, refit));
            }
        }
        let eta = 1.0 / (t as f64 + 2.0);
        u.iter_mut()
            .zip(&wu)
            .for_each(|(ui, wi)| *ui += eta * (wi - *ui));
    }
    best.gap = (best.primal - best.dual).max(0.0);
    best.optimal = best.gap <= tol;
    (Some(best), candidate.map(|c| c.1))
}

/// The warm-up of `hard_threshold` (`IhtOptions::warmup` gradient steps on all columns from
/// w = 0), which does not depend on k: a k-path computes it once (`select::kpath`). None when
/// there is no warm-up (0 steps, or Q + lambda I = 0).
pub fn warm_start(g: &Gram, opt: &IhtOptions) -> Option<Vec<f64>> {
    if opt.warmup == 0 {
        return None;
    }
    let all: Vec<usize> = (0..g.m).collect();
    let lambda = opt.lambda;
    let lip = (largest_eigenvalue(g, &all, 200) + lambda) * 1.05;
    if lip <= 0.0 {
        return None;
    }
    let mut b = vec![0.0; g.m];
    for _ in 0..opt.warmup {
        let grad = g.gradient(&b);
        b.iter_mut()
            .zip(&grad)
            .for_each(|(bi, gi)| *bi -= (gi + lambda * *bi) / lip);
    }
    Some(b)
}

/// IHT or HTP at sparsity k (k <= m), then the exact fit on the support and the certificate.
pub fn hard_threshold(g: &Gram, k: usize, method: HardThreshold, opt: &IhtOptions) -> IhtSolution {
    let warm = if k > 0 { warm_start(g, opt) } else { None };
    hard_threshold_from(g, k, method, opt, warm.as_deref())
}

/// `hard_threshold` from the warm-up's point `warm` (`warm_start`; None: from w = 0).
pub fn hard_threshold_from(
    g: &Gram,
    k: usize,
    method: HardThreshold,
    opt: &IhtOptions,
    warm: Option<&[f64]>,
) -> IhtSolution {
    let m = g.m;
    let k = k.min(m);
    let lambda = opt.lambda;
    let scale = g.yy.max(f64::MIN_POSITIVE);
    let all: Vec<usize> = (0..m).collect();
    let mut b = vec![0.0; m];
    let mut support: Vec<usize> = vec![];
    if k > 0
        && let Some(warm) = warm
    {
        b.copy_from_slice(warm);
        support = top_k(&b, &all, k);
        let mut kept = vec![0.0; m];
        for &i in &support {
            kept[i] = b[i];
        }
        b = match method {
            HardThreshold::Iht => kept,
            HardThreshold::Htp => solve_subset(g, &support, lambda).b,
        };
    }
    let mut obj = primal(g, &b, lambda);
    let mut iterations = 0;
    let mut converged = false;
    while iterations < opt.max_iterations && k > 0 {
        if super::interrupt::stop() {
            break;
        }
        iterations += 1;
        let grad: Vec<f64> = g
            .gradient(&b)
            .iter()
            .zip(&b)
            .map(|(gi, bi)| gi + lambda * bi)
            .collect();
        // Normalized step on the current support (or on the k largest gradient entries).
        let s = if support.is_empty() {
            top_k(&grad, &all, k)
        } else {
            support.clone()
        };
        let gs: f64 = s.iter().map(|&i| grad[i] * grad[i]).sum();
        let curv: f64 = s
            .iter()
            .map(|&i| {
                let col = g.col(i);
                grad[i] * (s.iter().map(|&j| col[j] * grad[j]).sum::<f64>() + lambda * grad[i])
            })
            .sum();
        if gs == 0.0 {
            converged = true;
            break;
        }
        let mut eta = if curv > 0.0 { gs / curv } else { 1.0 };
        let mut accepted = None;
        for _ in 0..60 {
            let z: Vec<f64> = b.iter().zip(&grad).map(|(bi, gi)| bi - eta * gi).collect();
            let f = top_k(&z, &all, k);
            let next = match method {
                HardThreshold::Iht => {
                    let mut w = vec![0.0; m];
                    for &i in &f {
                        w[i] = z[i];
                    }
                    w
                }
                HardThreshold::Htp => solve_subset(g, &f, lambda).b,
            };
            let o = primal(g, &next, lambda);
            if o < obj {
                accepted = Some((next, f, o));
                break;
            }
            eta *= 0.5;
        }
        let Some((next, f, o)) = accepted else {
            converged = true; // no descent along the hard-thresholded gradient: a fixed point
            break;
        };
        let same = f == support;
        let decrease = obj - o;
        b = next;
        support = f;
        obj = o;
        if same && (method == HardThreshold::Htp || decrease <= opt.tol * scale) {
            converged = true;
            break;
        }
    }
    let fit = solve_subset(g, &support, lambda);
    let mut b = fit.b;
    let (mut certificate, candidate) = certify(g, &b, k, lambda, opt.dual_iterations);
    let mut improved_by_dual = false;
    if let Some(w) = candidate
        && primal(g, &w, lambda) < primal(g, &b, lambda)
    {
        b = w;
        support = (0..m).filter(|&j| b[j] != 0.0).collect();
        let dual_bound = certificate.map(|c| c.dual);
        certificate = certify(g, &b, k, lambda, 0).0.map(|mut c| {
            // Keep the better of the two lower bounds.
            if let Some(d) = dual_bound
                && d > c.dual
            {
                c.dual = d;
                c.gap = (c.primal - d).max(0.0);
                c.optimal = c.gap <= 1e-9 * g.yy.max(f64::MIN_POSITIVE);
            }
            c
        });
        improved_by_dual = true;
    }
    IhtSolution {
        b,
        support,
        iterations,
        converged,
        certificate,
        improved_by_dual,
        jitter: fit.jitter,
    }
}

/// IHT / HTP parameters: `{"method": "iht", "k": 10, "lambda": 0.1}`. With lambda > 0 the
/// model's diagnostics carry the certificate (lambda = 0 is plain l0 least squares, with no
/// dual bound).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HardThresholding {
    /// Nonzeros (1..=p).
    pub k: usize,
    /// Ridge penalty of the l0-constrained problem (default 0: no certificate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda: Option<f64>,
    /// Gradient steps before the first threshold (default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<usize>,
    /// DIHT iterations tightening the dual bound (default 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dual_iterations: Option<usize>,
    /// Relative decrease below which IHT stops (default 1e-12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tol: Option<f64>,
    /// Most primal iterations (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<usize>,
}

/// IHT: `{"method": "iht", ...}` with the parameters of `HardThresholding`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Iht(pub HardThresholding);

/// HTP: `{"method": "htp", ...}` with the parameters of `HardThresholding`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Htp(pub HardThresholding);

impl HardThresholding {
    /// k nonzeros, other settings default.
    pub fn k(k: usize) -> Self {
        HardThresholding {
            k,
            lambda: None,
            warmup: None,
            dual_iterations: None,
            tol: None,
            max_iterations: None,
        }
    }

    /// Without the ridge the l0 problem does not care how weight is split among identical
    /// columns (and a duplicate would only take a slot); with it, the certificate speaks of
    /// every k-subset of the columns as given, so all of them stay.
    fn merges_duplicates(&self) -> bool {
        self.lambda.unwrap_or(0.0) == 0.0
    }

    fn check(&self, p: usize, path: bool, method: Method) -> Result<(), ParamError> {
        check::k(self.k, p)?;
        check::nonneg("lambda", self.lambda)?;
        check::within("warmup", self.warmup, 0, limits::MAX_ITERATIONS)?;
        check::within(
            "dual_iterations",
            self.dual_iterations,
            0,
            limits::MAX_ITERATIONS,
        )?;
        check::tol(self.tol)?;
        check::iterations(
            "max_iterations",
            self.max_iterations,
            limits::MAX_ITERATIONS,
        )?;
        check::has_no_path(path, method)
    }

    /// The solver settings these parameters ask for.
    pub fn options(&self) -> IhtOptions {
        let d = IhtOptions::default();
        IhtOptions {
            lambda: self.lambda.unwrap_or(0.0),
            max_iterations: self.max_iterations.unwrap_or(d.max_iterations),
            tol: self.tol.unwrap_or(d.tol),
            dual_iterations: self.dual_iterations.unwrap_or(d.dual_iterations),
            warmup: self.warmup.unwrap_or(d.warmup),
        }
    }

    fn fit(&self, problem: &Problem, method: HardThreshold) -> Fit {
        let g = &problem.gram;
        let k = self.k.min(g.m);
        let warm = if k > 0 {
            warm_start(g, &self.options())
        } else {
            None
        };
        self.fit_from(g, method, warm.as_deref())
    }

    /// The fit from a warm-up point shared along a k-path (`warm_start`).
    pub(crate) fn fit_from(&self, g: &Gram, method: HardThreshold, warm: Option<&[f64]>) -> Fit {
        let mut notes = Vec::new();
        let k = usable_k(self.k, g, &mut notes);
        let sol = hard_threshold_from(g, k, method, &self.options(), warm);
        let singular_ridge = jitter_note(sol.jitter, &mut notes);
        if sol.improved_by_dual {
            notes.push(
                "the dual ascent (DIHT) found a better support than the primal method".into(),
            );
        }
        if let Some(c) = sol.certificate {
            notes.push(if c.optimal {
                "certificate: the support is the best k-subset (zero duality gap)".into()
            } else {
                format!(
                    "certificate: within {:.3e} of the best k-subset's objective (not proven optimal)",
                    c.gap
                )
            });
        }
        Fit {
            b: sol.b,
            lambda: self.lambda,
            iterations: sol.iterations,
            gap: sol.certificate.map(|c| c.gap),
            converged: sol.converged,
            requested_k: Some(self.k),
            k_exact: Some(sol.support.len() == k),
            refit: true,
            certificate: sol.certificate,
            singular_ridge,
            notes,
            ..Fit::default()
        }
    }
}

impl Solver for Iht {
    fn check(&self, p: usize, path: bool) -> Result<(), ParamError> {
        self.0.check(p, path, Method::Iht)
    }
    fn fit(&self, problem: &Problem) -> Fit {
        self.0.fit(problem, HardThreshold::Iht)
    }
    fn merges_duplicates(&self) -> bool {
        self.0.merges_duplicates()
    }
}

impl Solver for Htp {
    fn check(&self, p: usize, path: bool) -> Result<(), ParamError> {
        self.0.check(p, path, Method::Htp)
    }
    fn fit(&self, problem: &Problem) -> Fit {
        self.0.fit(problem, HardThreshold::Htp)
    }
    fn merges_duplicates(&self) -> bool {
        self.0.merges_duplicates()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Orthogonal design Q = diag(d): the l0 ridge solution keeps the k largest c_j^2/(d_j +
    /// lambda) and w_j = c_j / (d_j + lambda); the certificate holds when the separation of
    /// 002 eq. (3.3.3) does.
    #[test]
    fn diagonal_design_closed_form_and_certificate() {
        let m = 6;
        let d = [1.0, 2.0, 1.0, 0.5, 1.5, 1.0];
        let c = [0.9, -1.0, 0.1, 0.3, 0.05, -0.6];
        let mut q = vec![0.0; m * m];
        for j in 0..m {
            q[j + j * m] = d[j];
        }
        let g = Gram {
            m,
            q,
            c: c.to_vec(),
            yy: 3.0,
        };
        let lambda = 1.0;
        for method in [HardThreshold::Iht, HardThreshold::Htp] {
            let opt = IhtOptions {
                lambda,
                ..IhtOptions::default()
            };
            let sol = hard_threshold(&g, 2, method, &opt);
            // c^2/(d+lambda): 0.405, 0.333, 0.005, 0.06, 0.001, 0.18 -> {0, 1}.
            assert_eq!(sol.support, vec![0, 1], "{method:?}");
            assert!((sol.b[0] - 0.45).abs() < 1e-12 && (sol.b[1] + 1.0 / 3.0).abs() < 1e-12);
            // Separation: lambda min |w_F| = 1/3 >= max_{j not in F} |c_j| = 0.6? No: the
            // certificate cannot hold, and the gap says so.
            let cert = sol.certificate.unwrap();
            assert!(!cert.optimal && cert.gap > 0.0);
        }
        // With a larger lambda the separation holds: lambda = 4 gives w = (0.18, -1/6),
        // lambda min|w| = 0.667 >= 0.6.
        let opt = IhtOptions {
            lambda: 4.0,
            ..IhtOptions::default()
        };
        let sol = hard_threshold(&g, 2, HardThreshold::Htp, &opt);
        assert_eq!(sol.support, vec![0, 1]);
        let cert = sol.certificate.unwrap();
        assert!(cert.optimal, "{cert:?}");
        assert!(cert.gap.abs() < 1e-12);
    }

    #[test]
    fn dual_is_below_primal_everywhere() {
        let m = 5;
        let mut q = vec![0.0; m * m];
        for i in 0..m {
            for j in 0..m {
                q[i + j * m] = if i == j { 1.0 } else { 0.4 };
            }
        }
        let g = Gram {
            m,
            q,
            c: vec![0.5, -0.2, 0.8, 0.1, -0.7],
            yy: 2.0,
        };
        for lambda in [0.1, 1.0] {
            let w = [0.3, 0.0, 0.4, 0.0, 0.0];
            for s in 0..20 {
                let u: Vec<f64> = (0..m)
                    .map(|i| ((i * 7 + s * 3) % 11) as f64 / 5.0 - 1.0)
                    .collect();
                assert!(dual(&g, &u, 2, lambda) <= primal(&g, &w, lambda) + 1e-12);
            }
        }
    }
}
