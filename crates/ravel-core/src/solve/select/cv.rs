//! Exact K-fold cross-validation from fold statistics (the module above says how): each
//! fold's held-out error from its own moments, the training merges weighted as the stream
//! weighs its rows, and the selection at the minimum or one standard error from it.

use super::*;

/// The held-out mean squared error of the model (`b` dense, original units) on one fold's
/// statistics: exact from its moments (module header). Classification: the class-weighted
/// loss w_p E_p[(x b + b0 - 1)^2] + w_n E_n[(x b + b0 + 1)^2].
fn held_out_error(fold: &Stats, b: &[f64], b0: f64, w_pos: f64, w_neg: f64) -> f64 {
    let support: Vec<usize> = (0..b.len()).filter(|&j| b[j] != 0.0).collect();
    // E[(t - b0 - x b)^2] about a fixed target t (None: y) for one set of moments.
    let part = |m: &dyn MomentsDyn, target: Option<f64>| -> f64 {
        let mut quad = 0.0;
        for &i in &support {
            for &j in &support {
                quad += b[i] * b[j] * m.cov(i, j);
            }
        }
        let mean_x = m.mean_x();
        let fitted: f64 = b0 + support.iter().map(|&j| b[j] * mean_x[j]).sum::<f64>();
        match target {
            None => {
                let cross: f64 = support.iter().map(|&j| b[j] * m.cov_y(j)).sum();
                let bias = m.mean_y() - fitted;
                (m.var_y() - 2.0 * cross + quad).max(0.0) + bias * bias
            }
            Some(t) => quad.max(0.0) + (t - fitted) * (t - fitted),
        }
    };
    match fold {
        Stats::Regression(s) => part(s, None),
        Stats::Classification(c) => {
            w_pos * part(&c.pos, Some(1.0)) + w_neg * part(&c.neg, Some(-1.0))
        }
    }
}

/// The moment reads `held_out_error` needs, object-safe.
trait MomentsDyn {
    fn cov(&self, i: usize, j: usize) -> f64;
    fn cov_y(&self, j: usize) -> f64;
    fn var_y(&self) -> f64;
    fn mean_x(&self) -> Vec<f64>;
    fn mean_y(&self) -> f64;
}

impl<M: Moments> MomentsDyn for M {
    fn cov(&self, i: usize, j: usize) -> f64 {
        Moments::cov_at(self, i.max(j), i.min(j))
    }
    fn cov_y(&self, j: usize) -> f64 {
        Moments::cov_xy(self, j)
    }
    fn var_y(&self) -> f64 {
        Moments::var_y(self)
    }
    fn mean_x(&self) -> Vec<f64> {
        Moments::mean_x(self)
    }
    fn mean_y(&self) -> f64 {
        Moments::mean_y(self)
    }
}

/// The weight of a fold in the CV mean: its (effective) rows.
fn fold_weight(s: &Stats) -> f64 {
    match s {
        Stats::Regression(r) => r.effective_n(),
        Stats::Classification(c) => c.pos.effective_n() + c.neg.effective_n(),
    }
}

/// K-fold cross-validation of a checked select request (criterion cv or cv_1se) over fold
/// statistics: the full path on `total` (the merge of the folds), each fold's path at the same
/// lambdas (or ks) on the merge of the others, the held-out error of each from the fold's own
/// moments. Returns the full path with the selection.
pub fn cross_validate(
    total: &Stats,
    folds: &[Stats],
    req: &crate::solve::CheckedPath,
    names: Option<&[String]>,
) -> Result<PathModel, ParamError> {
    cross_validate_weighted(total, folds, &FoldWeights::Rows, req, names, Vec::new())
}

/// K-fold cross-validation of a stream's fold statistics (`stats::FoldSet`), whose folds
/// weigh by their shares of the stream's weight: the same curve as `cross_validate`, with the
/// training statistics of fold j the share-weighted merge of the others and each fold's
/// weight in the CV mean its share of the stream's effective rows (its rows, for plain
/// averages). When the folds hold fewer rows than `total` (cv.folds was set after a
/// checkpoint without folds), the full path is fitted on the merge of the folds, so that the
/// curve and the chosen model describe the same rows, and the answer says so.
pub fn cross_validate_folds(
    total: &Stats,
    folds: &crate::stats::FoldSet,
    req: &crate::solve::CheckedPath,
    names: Option<&[String]>,
) -> Result<PathModel, ParamError> {
    let shares = folds.shares();
    let n_eff: Vec<f64> = match total {
        Stats::Regression(s) => vec![s.effective_n()],
        Stats::Classification(c) => vec![c.pos.effective_n(), c.neg.effective_n()],
    };
    let mut notes = Vec::new();
    let merged;
    let total = if folds.n() == total.n() {
        total
    } else {
        notes.push(format!(
            "the folds hold the last {} of the stream's {} rows (cv.folds was set after a \
             checkpoint without folds): the path and the curve are those of these rows",
            folds.n(),
            total.n()
        ));
        merged = folds.merged();
        &merged
    };
    let weights = FoldWeights::Shares { shares, n_eff };
    cross_validate_weighted(total, &folds.stats(), &weights, req, names, notes)
}

/// How fold statistics combine (training sets) and weigh (the CV mean).
enum FoldWeights {
    /// By their rows (`ravel fit --folds`: each fold averages its own rows).
    Rows,
    /// By their shares of a stream's weight, per class, and the stream's effective rows per
    /// class.
    Shares {
        shares: Vec<Vec<f64>>,
        n_eff: Vec<f64>,
    },
}

impl FoldWeights {
    /// Fold `j`'s weight in the CV mean.
    fn weight(&self, j: usize, fold: &Stats) -> f64 {
        match self {
            FoldWeights::Rows => fold_weight(fold),
            FoldWeights::Shares { shares, n_eff } => {
                shares[j].iter().zip(n_eff).map(|(s, n)| s * n).sum()
            }
        }
    }

    /// The training statistics of held-out fold `held`: the merge of the others.
    fn training(&self, folds: &[Stats], held: usize) -> Result<Stats, ParamError> {
        let err = |e: crate::stats::StatsError| ParamError::Invalid(e.to_string());
        let mut train: Option<Stats> = None;
        let mut acc = [0.0; 2];
        for (i, f) in folds.iter().enumerate() {
            if i == held {
                continue;
            }
            let Some(t) = train.as_mut() else {
                train = Some(f.clone());
                if let FoldWeights::Shares { shares, .. } = self {
                    acc[..shares[i].len()].copy_from_slice(&shares[i]);
                }
                continue;
            };
            match (self, t, f) {
                (FoldWeights::Rows, t, f) => t.merge(f).map_err(err)?,
                (
                    FoldWeights::Shares { shares, .. },
                    Stats::Regression(t),
                    Stats::Regression(f),
                ) => {
                    t.merge_weighted(f, acc[0], shares[i][0]).map_err(err)?;
                    acc[0] += shares[i][0];
                }
                (
                    FoldWeights::Shares { shares, .. },
                    Stats::Classification(t),
                    Stats::Classification(f),
                ) => {
                    t.pos
                        .merge_weighted(&f.pos, acc[0], shares[i][0])
                        .map_err(err)?;
                    t.neg
                        .merge_weighted(&f.neg, acc[1], shares[i][1])
                        .map_err(err)?;
                    acc[0] += shares[i][0];
                    acc[1] += shares[i][1];
                }
                _ => return Err(ParamError::Invalid("folds of different tasks".into())),
            }
        }
        train.ok_or_else(|| ParamError::Invalid("cross-validation needs two folds".into()))
    }
}

fn cross_validate_weighted(
    total: &Stats,
    folds: &[Stats],
    weights: &FoldWeights,
    req: &crate::solve::CheckedPath,
    names: Option<&[String]>,
    notes: Vec<String>,
) -> Result<PathModel, ParamError> {
    let start = Instant::now();
    let req = req.request();
    let criterion = req
        .select
        .filter(|c| c.is_cv())
        .ok_or_else(|| ParamError::Invalid("cross_validate needs select = cv or cv_1se".into()))?;
    let k = folds.len();
    if !(2..=MAX_FOLDS).contains(&k) {
        return Err(ParamError::OutOfBounds {
            name: "folds",
            value: k.to_string(),
            bound: format!("it must lie in [2, {MAX_FOLDS}]"),
        });
    }
    if let Some(j) = folds.iter().position(|f| f.n() == 0) {
        return Err(ParamError::Invalid(format!(
            "fold {j} of {k} has no rows yet: cross-validation needs rows in every fold"
        )));
    }
    let problem = problem_of(total, req)?;
    let mut full = crate::solve::path_choosing(&problem, req, names, |points| {
        cv_selection(points, folds, weights, req, criterion).map(|mut s| {
            s.notes.extend(notes);
            Some(s)
        })
    })?;
    full.elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(full)
}

/// The CV curve over the full path's `points` (module header) and the choice.
fn cv_selection(
    points: &[Model],
    folds: &[Stats],
    weights: &FoldWeights,
    req: &Request,
    criterion: Criterion,
) -> Result<Selection, ParamError> {
    let k = folds.len();
    // Fold models need no standard errors.
    let plain = Request {
        inference: false,
        ..req.clone()
    };
    let grid = if is_k_family(&req.estimator) {
        Grid::Ks(
            points
                .iter()
                .map(|m| m.diagnostics.requested_k.unwrap_or(m.k))
                .collect(),
        )
    } else {
        Grid::Lambdas(points.iter().map(|m| m.lambda.unwrap_or(0.0)).collect())
    };
    let (w_pos, w_neg) = (req.w_pos.unwrap_or(1.0), req.w_neg.unwrap_or(1.0));
    let mut errors = vec![vec![0.0; k]; points.len()];
    for (j, held) in folds.iter().enumerate() {
        let train = weights.training(folds, j)?;
        let problem = problem_of(&train, req)?;
        let solver = req.estimator.solver();
        let (reduced, duplicates) = for_solver(&problem, solver);
        let fits = fits_on_grid(&reduced, req, &grid);
        for (pt, fit) in fits.into_iter().enumerate() {
            let model = to_model(
                &reduced,
                &plain,
                fit,
                &duplicates,
                None,
                Instant::now(),
                false,
            );
            let b = model.dense(problem.p);
            errors[pt][j] = held_out_error(held, &b, model.intercept, w_pos, w_neg);
        }
    }
    let weights: Vec<f64> = folds
        .iter()
        .enumerate()
        .map(|(j, f)| weights.weight(j, f))
        .collect();
    let wsum: f64 = weights.iter().sum();
    let curve: Vec<CurvePoint> = points
        .iter()
        .zip(&errors)
        .map(|(m, e)| {
            let mean = e.iter().zip(&weights).map(|(e, w)| e * w).sum::<f64>() / wsum;
            let var = e
                .iter()
                .zip(&weights)
                .map(|(e, w)| w * (e - mean) * (e - mean))
                .sum::<f64>()
                / wsum
                / (k - 1) as f64;
            CurvePoint {
                lambda: m.lambda,
                delta: None,
                k: m.k,
                df: m.diagnostics.criteria.map_or(m.k as f64, |c| c.df),
                value: mean,
                se: Some(var.sqrt()),
                fold_errors: Some(e.clone()),
            }
        })
        .collect();
    let minimum = argmin(curve.iter().map(|c| c.value));
    let chosen = match criterion {
        Criterion::Cv1se => {
            let bar = curve[minimum].value + curve[minimum].se.unwrap_or(0.0);
            curve.iter().position(|c| c.value <= bar).unwrap_or(minimum)
        }
        _ => minimum,
    };
    Ok(Selection {
        criterion: criterion.name().into(),
        chosen,
        chosen_k: curve.get(chosen).map_or(0, |c| c.k),
        minimum: (criterion == Criterion::Cv1se).then_some(minimum),
        curve,
        fold_sizes: Some(folds.iter().map(Stats::n).collect()),
        df_rule: df_rule(req).into(),
        notes: Vec::new(),
    })
}
