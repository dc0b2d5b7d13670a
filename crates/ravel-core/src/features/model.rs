//! The selected set as the `Model` JSON that `ravel fit` prints and the HTTP API returns, with
//! the optional refit on the selected columns: least squares for the squared loss (the
//! foundation's Cholesky solve on their Gram matrix), damped Newton on the loss itself for the
//! classification losses.

use super::selector::{Retained, Selector};
use super::{Labels, Loss, Summary};
use crate::gram::{Gram, solve_subset};
use crate::linalg::{axpy, dot};
use crate::model::{Coefficient, Diagnostics, Method, Model};
use std::time::Instant;

/// Newton refit: iteration cap and the gradient size (max |dL/dw_k|) that counts as converged.
const REFIT_ITERATIONS: usize = 100;
const REFIT_TOL: f64 = 1e-8;

pub(crate) struct ModelInput<'a> {
    pub summary: Summary,
    pub sets: Vec<&'a Selector>,
    /// The intercept in standardized units (b0 of u = b0 + X w).
    pub b0: f64,
    pub labels: &'a Labels,
    pub last_pass_substitutions: Option<u64>,
    pub refit: bool,
}

pub(crate) fn build(inp: ModelInput<'_>) -> Model {
    let start = Instant::now();
    let labels = inp.labels;
    let (n, y, loss) = (labels.n(), labels.values(), labels.loss());
    let nf = n as f64;
    let mut cols: Vec<(&Retained, f64, &[f64])> =
        inp.sets.iter().flat_map(|s| s.retained()).collect();
    cols.sort_by_key(|c| c.0.index);
    let mut w: Vec<f64> = cols.iter().map(|c| c.1).collect();
    let mut b0 = inp.b0;
    let sm = &inp.summary;
    let mut notes = vec![];
    let mut refit_done = false;
    let mut singular_ridge = None;
    if inp.refit && !cols.is_empty() {
        let columns: Vec<&[f64]> = cols.iter().map(|c| c.2).collect();
        match loss {
            Loss::Squared => {
                let ybar = y.iter().sum::<f64>() / nf;
                let m = columns.len();
                let mut q = vec![0.0; m * m];
                for a in 0..m {
                    for b in 0..=a {
                        let v = dot(columns[a], columns[b]) / nf;
                        q[a + b * m] = v;
                        q[b + a * m] = v;
                    }
                }
                let yc: Vec<f64> = y.iter().map(|v| v - ybar).collect();
                let c = columns.iter().map(|col| dot(col, &yc) / nf).collect();
                let yy = yc.iter().map(|v| v * v).sum::<f64>() / nf;
                let gram = Gram { m, q, c, yy };
                let all: Vec<usize> = (0..m).collect();
                let sol = solve_subset(&gram, &all, 0.0);
                if sol.jitter == f64::INFINITY {
                    notes.push(
                        "refit: the least-squares system is singular; kept the OS weights".into(),
                    );
                } else {
                    if sol.jitter > 0.0 {
                        singular_ridge = Some(sol.jitter);
                        notes.push(format!(
                            "refit: selected columns are collinear; added ridge {:.3e}",
                            sol.jitter
                        ));
                    }
                    // Centred columns: the intercept of the least-squares fit is mean(y).
                    w = sol.b;
                    b0 = ybar;
                    refit_done = true;
                    notes.push(format!("refit: least squares on the {m} selected columns"));
                }
            }
            Loss::SquaredHinge | Loss::Logistic => {
                let (iterations, grad_max) = newton(&columns, y, loss, &mut w, &mut b0);
                refit_done = true;
                notes.push(format!(
                    "refit: Newton on the {loss} loss over the {} selected columns, {iterations} iterations, \
                     max |gradient| {grad_max:.2e}{}",
                    columns.len(),
                    match (grad_max <= REFIT_TOL, loss) {
                        (true, _) => "",
                        (false, Loss::Logistic) => " (not converged: on separable data the logistic loss has no finite minimizer)",
                        (false, _) => " (not converged)",
                    }
                ));
            }
        }
    }
    let mut u = vec![b0; n];
    for (c, &wk) in cols.iter().zip(&w) {
        axpy(wk, c.2, &mut u);
    }
    let train_mse = u.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum::<f64>() / nf;
    let ybar = y.iter().sum::<f64>() / nf;
    let var_y = y.iter().map(|v| (v - ybar) * (v - ybar)).sum::<f64>() / nf;
    let r2 = if var_y > 0.0 {
        1.0 - train_mse / var_y
    } else {
        0.0
    };
    let coefficients: Vec<Coefficient> = cols
        .iter()
        .zip(&w)
        .filter(|(_, wk)| **wk != 0.0)
        .map(|(c, &wk)| Coefficient {
            feature: c.0.name.clone(),
            index: c.0.index,
            value: wk / c.0.scale,
        })
        .collect();
    let intercept = b0
        - cols
            .iter()
            .zip(&w)
            .map(|(c, wk)| wk * c.0.mean / c.0.scale)
            .sum::<f64>();
    let nonzeros = coefficients.len();

    let fmt_list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.6e}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    notes.insert(
        0,
        format!(
            "{} loss at the end of each pass: [{}]",
            loss,
            fmt_list(&sm.loss_per_pass)
        ),
    );
    if refit_done {
        notes.push(format!(
            "{loss} loss after the refit: {:.6e}",
            loss.mean(&u, y)
        ));
    }
    let lowered = if sm.eta < sm.eta_start {
        format!(
            ", lowered {} times by the curvature check",
            sm.counters.eta_reductions
        )
    } else {
        String::new()
    };
    notes.push(format!(
        "eta = {:.4e} (start {:.4e}{lowered}), m = {}",
        sm.eta, sm.eta_start, sm.m
    ));
    let k = &sm.counters;
    notes.push(format!(
        "{} features seen: {} entered ({} substitutions), {} rejected, {} updated in place",
        sm.features_seen, k.entered, k.substitutions, k.rejected, k.updated
    ));
    if k.constant > 0 {
        notes.push(format!("{} constant columns skipped", k.constant));
    }
    if k.skipped > 0 {
        notes.push(format!(
            "{} steps skipped: no step size passed the curvature check",
            k.skipped
        ));
    }
    if !sm.staleness.is_empty() {
        let per: Vec<String> = sm
            .staleness
            .iter()
            .map(|s| format!("worker {}: mean {:.2}, max {}", s.worker, s.mean, s.max))
            .collect();
        notes.push(format!(
            "staleness (u_C updates between read and push): {}",
            per.join("; ")
        ));
    }
    if loss.is_classification() {
        let errors = u
            .iter()
            .zip(y)
            .filter(|(a, b)| (**a >= 0.0) != (**b > 0.0))
            .count();
        notes.push(format!("training error rate {:.4}", errors as f64 / nf));
    }
    let converged = inp.last_pass_substitutions == Some(0);
    notes.push(match inp.last_pass_substitutions {
        None => {
            "convergence needs two closed passes; converged means a full pass without substitution"
                .into()
        }
        Some(c) => format!("{c} substitutions during the last pass (converged means none)"),
    });
    let lp = &sm.loss_per_pass;
    let convergence = (lp.len() >= 2).then(|| {
        let (a, b) = (lp[lp.len() - 2], lp[lp.len() - 1]);
        (a - b) / a.abs().max(f64::MIN_POSITIVE)
    });
    let method = if sm.method == "asy-os" {
        Method::AsyOs
    } else {
        Method::Os
    };
    Model {
        method,
        k: nonzeros,
        lambda: None,
        intercept,
        coefficients,
        n: n as u64,
        diagnostics: Diagnostics {
            method,
            lambda: None,
            l1_ratio: None,
            gamma: None,
            delta: None,
            certificate: None,
            nonzeros,
            requested_k: Some(sm.s),
            k_exact: Some(nonzeros == sm.s),
            iterations: sm.passes,
            duality_gap: None,
            convergence,
            converged,
            train_mse,
            r2,
            standardize: true,
            intercept: true,
            refit: refit_done,
            excluded_constant: vec![],
            excluded_duplicate: vec![],
            singular_ridge,
            exact_fit: false,
            notes,
            criteria: None,
            elapsed_ms: start.elapsed().as_secs_f64() * 1e3,
        },
        selection: None,
        inference: None,
    }
}

/// Damped Newton on L(b0 + X w) over the given columns, from (w, b0): the (generalized)
/// Hessian [1 X]^T diag(l''/n) [1 X] is (s+1) x (s+1), solved by the foundation's Cholesky
/// (with its jitter when singular, e.g. few margin violators), and each step is halved until
/// the Armijo condition holds, so the loss never goes up. For the squared hinge this is the
/// primal Newton method of L2-SVMs, which ends in a few iterations. Returns the iterations and
/// the final max |gradient|.
fn newton(cols: &[&[f64]], y: &[f64], loss: Loss, w: &mut [f64], b0: &mut f64) -> (usize, f64) {
    let n = y.len();
    let nf = n as f64;
    let m = cols.len() + 1;
    // Coordinate 0 is the intercept (a column of ones), 1.. the selected columns.
    let col = |a: usize, i: usize| if a == 0 { 1.0 } else { cols[a - 1][i] };
    let score = |w: &[f64], b0: f64| {
        let mut u = vec![b0; n];
        for (c, &wk) in cols.iter().zip(w) {
            axpy(wk, c, &mut u);
        }
        u
    };
    let mut u = score(w, *b0);
    let mut grad_max = f64::INFINITY;
    for it in 0..REFIT_ITERATIONS {
        let d: Vec<f64> = u
            .iter()
            .zip(y)
            .map(|(&ui, &yi)| loss.derivative(ui, yi) / nf)
            .collect();
        let h: Vec<f64> = u
            .iter()
            .zip(y)
            .map(|(&ui, &yi)| loss.second_derivative(ui, yi) / nf)
            .collect();
        let mut grad = vec![d.iter().sum::<f64>()];
        grad.extend(cols.iter().map(|c| dot(c, &d)));
        grad_max = grad.iter().fold(0.0, |a: f64, v| a.max(v.abs()));
        if grad_max <= REFIT_TOL {
            return (it, grad_max);
        }
        let mut q = vec![0.0; m * m];
        let mut hx = vec![0.0; n];
        for a in 0..m {
            for (i, v) in hx.iter_mut().enumerate() {
                *v = h[i] * col(a, i);
            }
            for b in 0..=a {
                let v = if b == 0 {
                    hx.iter().sum()
                } else {
                    dot(&hx, cols[b - 1])
                };
                q[a + b * m] = v;
                q[b + a * m] = v;
            }
        }
        let gram = Gram {
            m,
            q,
            c: grad.iter().map(|g| -g).collect(),
            yy: 0.0,
        };
        let all: Vec<usize> = (0..m).collect();
        let sol = solve_subset(&gram, &all, 0.0);
        if sol.jitter == f64::INFINITY {
            return (it, grad_max);
        }
        let dir = sol.b;
        let slope: f64 = grad.iter().zip(&dir).map(|(g, d)| g * d).sum();
        if slope >= 0.0 || slope.is_nan() {
            return (it, grad_max);
        }
        let old = loss.mean(&u, y);
        let mut t = 1.0;
        let mut moved = false;
        for _ in 0..60 {
            let w_next: Vec<f64> = w
                .iter()
                .zip(&dir[1..])
                .map(|(wk, dk)| wk + t * dk)
                .collect();
            let b_next = *b0 + t * dir[0];
            let u_next = score(&w_next, b_next);
            if loss.mean(&u_next, y) <= old + 1e-4 * t * slope {
                w.copy_from_slice(&w_next);
                *b0 = b_next;
                u = u_next;
                moved = true;
                break;
            }
            t *= 0.5;
        }
        if !moved {
            return (it, grad_max);
        }
    }
    (REFIT_ITERATIONS, grad_max)
}
