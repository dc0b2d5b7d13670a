//! Extraction: a checked request on a problem built from statistics (or their folds) gives a
//! `Model` or a path of them, with the diagnostics and notes a reader needs.

use super::*;

/// Extracts the model a checked request asks for from a problem. `names` labels the
/// coefficients.
pub fn extract(
    problem: &Problem,
    req: &Checked,
    names: Option<&[String]>,
) -> Result<Model, ParamError> {
    req.same_p(problem)?;
    summary::check_names(&req.request, names, problem.p)?;
    let start = Instant::now();
    if let Some(criterion) = req.request.select {
        if criterion.is_cv() {
            return Err(no_folds());
        }
        let mut model = select::chosen_model(path_of_problem(problem, &req.request, names)?)?;
        model.diagnostics.elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
        return Ok(model);
    }
    let solver = req.request.estimator.solver();
    let (reduced, duplicates) = for_solver(problem, solver);
    let fit = solver.fit(&reduced);
    Ok(to_model(
        &reduced,
        &req.request,
        fit,
        &duplicates,
        names,
        start,
        false,
    ))
}

/// The error of a cv request where no fold statistics exist.
pub(crate) fn no_folds() -> ParamError {
    ParamError::Invalid(
        "select = cv needs fold statistics: set cv.folds = K on the stream (ravel fit: --folds K)"
            .into(),
    )
}

/// The problem `solver` works on: without duplicate columns when it merges them.
pub(crate) fn for_solver(problem: &Problem, solver: &dyn Solver) -> (Problem, Vec<Duplicate>) {
    if solver.merges_duplicates() {
        problem.without_duplicates()
    } else {
        (problem.clone(), Vec::new())
    }
}

/// The whole warm-started path of a method that has one.
pub fn extract_path(
    problem: &Problem,
    req: &CheckedPath,
    names: Option<&[String]>,
) -> Result<PathModel, ParamError> {
    let req = &req.0;
    req.same_p(problem)?;
    summary::check_names(&req.request, names, problem.p)?;
    if req.request.select.is_some_and(|c| c.is_cv()) {
        return Err(no_folds());
    }
    path_of_problem(problem, &req.request, names)
}

/// The path (the k-path of an l0 family asked to select), each point with its information
/// criteria, and the selection of an aic / bic / ebic request.
pub(crate) fn path_of_problem(
    problem: &Problem,
    req: &Request,
    names: Option<&[String]>,
) -> Result<PathModel, ParamError> {
    path_choosing(problem, req, names, |points| {
        Ok(match req.select {
            Some(c) if !c.is_cv() => Some(select::select_by_criterion(points, req, c)),
            _ => None,
        })
    })
}

/// The path with the selection `choose` makes from its points. Standard errors (`inference`)
/// are computed for the chosen point only, not for every point of the path.
pub(crate) fn path_choosing(
    problem: &Problem,
    req: &Request,
    names: Option<&[String]>,
    choose: impl FnOnce(&[Model]) -> Result<Option<Selection>, ParamError>,
) -> Result<PathModel, ParamError> {
    let start = Instant::now();
    let solver = req.estimator.solver();
    let (reduced, duplicates) = for_solver(problem, solver);
    let fits = if req.select.is_some() {
        select::path_fits(&reduced, req)
    } else {
        solver.path(&reduced)
    };
    let plain = Request {
        inference: false,
        ..req.clone()
    };
    let mut points: Vec<Model> = fits
        .iter()
        .map(|fit| {
            let at = Instant::now();
            to_model(&reduced, &plain, fit.clone(), &duplicates, names, at, true)
        })
        .collect();
    let mut selection = choose(&points)?;
    if let Some(sel) = &mut selection
        && matches!(
            req.estimator,
            Estimator::Lasso(_) | Estimator::ElasticNet(_)
        )
        && !reduced.classification
        && let Some(fit) = fits.get(sel.chosen)
    {
        let chosen = fit.b.iter().filter(|v| **v != 0.0).count();
        sel.notes.extend(select::sparser_comparable(
            &reduced,
            chosen,
            reduced.gram.loss(&fit.b),
        ));
    }
    if let (true, Some(sel)) = (req.inference, &selection)
        && let Some(fit) = fits.get(sel.chosen)
    {
        let at = Instant::now();
        points[sel.chosen] = to_model(&reduced, req, fit.clone(), &duplicates, names, at, true);
    }
    Ok(PathModel {
        method: req.method(),
        n: problem.n,
        points,
        selection,
        elapsed_ms: start.elapsed().as_secs_f64() * 1e3,
    })
}

/// k clamped to the columns left in the problem (neither constant nor duplicates), with a
/// note when it had to be.
pub(crate) fn usable_k(k: usize, g: &Gram, notes: &mut Vec<String>) -> usize {
    if k > g.m {
        notes.push(format!(
            "k = {k} but only {} columns are neither constant nor duplicates; returning {} \
             nonzeros",
            g.m, g.m
        ));
        return g.m;
    }
    k
}

/// The note a least-squares solve's jitter deserves (see `linear::solve_subset`), and the ridge
/// for `Diagnostics::singular_ridge` (the largest of a fit's solves).
pub(crate) fn jitter_note(jitter: f64, notes: &mut Vec<String>) -> Option<f64> {
    if jitter == f64::INFINITY {
        notes.push(
            "the least-squares system is singular even with jitter; coefficients set to 0".into(),
        );
        None
    } else if jitter > 0.0 {
        notes.push(format!(
            "the least-squares system is singular (p > n or collinear columns); added ridge {jitter:.3e}"
        ));
        Some(jitter)
    } else {
        None
    }
}

/// A fit as the `Model` users see: original units, names, diagnostics; with `criteria` the
/// information criteria of `select`, and the standard errors when the request asks.
#[allow(clippy::too_many_arguments)]
pub(crate) fn to_model(
    problem: &Problem,
    req: &Request,
    mut fit: Fit,
    duplicates: &[Duplicate],
    names: Option<&[String]>,
    start: Instant,
    criteria: bool,
) -> Model {
    let g = &problem.gram;
    let mse = problem.mse(&fit.b);
    let exact_fit = problem.is_exact_fit(mse);
    let criteria = criteria.then(|| {
        let n = problem.n_eff;
        let gamma = req
            .ebic_gamma
            .unwrap_or_else(|| select::default_ebic_gamma(n, problem.p));
        let nonzeros = fit.b.iter().filter(|v| **v != 0.0).count();
        select::criteria(
            n,
            problem.p,
            select::df_of(problem, req, &fit),
            nonzeros,
            mse,
            gamma,
        )
    });
    let inference = if req.inference {
        match summary::inference(problem, req, &fit, mse, names) {
            Ok(inf) => Some(Box::new(inf)),
            Err(why) => {
                fit.notes.push(format!("no inference: {why}"));
                None
            }
        }
    } else {
        None
    };
    let r2 = if g.yy > 0.0 { 1.0 - mse / g.yy } else { 0.0 };
    let (beta, intercept) = problem.to_original(&fit.b);
    let coefficients: Vec<Coefficient> = beta
        .iter()
        .enumerate()
        .filter(|(_, v)| **v != 0.0)
        .map(|(index, &value)| Coefficient {
            feature: names
                .and_then(|n| n.get(index).cloned())
                .unwrap_or_else(|| index.to_string()),
            index,
            value,
        })
        .collect();
    let nonzeros = coefficients.len();
    let excluded_constant = (0..problem.p)
        .filter(|j| problem.active.binary_search(j).is_err())
        .filter(|j| duplicates.iter().all(|d| d.index != *j))
        .collect();
    let method = req.method();
    Model {
        method,
        k: nonzeros,
        lambda: fit.lambda,
        intercept,
        coefficients,
        n: problem.n,
        diagnostics: Diagnostics {
            method,
            lambda: fit.lambda,
            l1_ratio: fit.l1_ratio,
            gamma: fit.gamma,
            delta: fit.delta,
            certificate: fit.certificate,
            nonzeros,
            requested_k: fit.requested_k,
            k_exact: fit.k_exact,
            iterations: fit.iterations,
            duality_gap: fit.gap,
            convergence: fit.convergence,
            converged: fit.converged,
            train_mse: mse,
            r2,
            standardize: problem.standardized,
            intercept: problem.intercept,
            refit: fit.refit,
            excluded_constant,
            excluded_duplicate: duplicates.to_vec(),
            singular_ridge: fit.singular_ridge,
            exact_fit,
            notes: low_r2_note(r2, nonzeros, fit.notes),
            criteria,
            elapsed_ms: start.elapsed().as_secs_f64() * 1e3,
        },
        selection: None,
        inference,
    }
}

/// Below this R^2 a model with nonzeros gets a note (issue 11 items 5 and 9): elastic net at
/// a k that leaves it a near-null model, or least squares under heavy-tailed noise (Cauchy
/// noise on paper 003's design: R^2 about 0.03, 20% detection) answer without any other sign.
pub const LOW_R2: f64 = 0.05;

/// `notes` with the low-R^2 warning added when it applies. Why no tail test: the running
/// statistics are moments up to the second (E[x x^T], E[x y], E[y^2]); a residual's kurtosis
/// needs fourth moments of x and y, which are not kept.
pub(crate) fn low_r2_note(r2: f64, nonzeros: usize, mut notes: Vec<String>) -> Vec<String> {
    if nonzeros > 0 && r2 < LOW_R2 {
        notes.push(format!(
            "R^2 = {r2:.3}: the model explains almost none of the variance of y; heavy-tailed \
             noise or outliers (least squares is not robust to them, and the statistics hold \
             no fourth moments to test the tails), a target unrelated to the features, or a \
             penalty that shrinks too much (elastic net: try l1_ratio near 1) can cause it"
        ));
    }
    notes
}

/// The Gram problem `stats` define under `req` (standardization, intercept, class weights).
pub fn problem_of(stats: &Stats, req: &Request) -> Result<Problem, ParamError> {
    Ok(stats.problem(
        req.standardize,
        req.intercept,
        req.w_pos.unwrap_or(1.0),
        req.w_neg.unwrap_or(1.0),
    )?)
}

/// Builds the problem and extracts the model; `elapsed_ms` covers both.
pub fn model_from_stats(
    stats: &Stats,
    req: &Checked,
    names: Option<&[String]>,
) -> Result<Model, ParamError> {
    let start = Instant::now();
    let problem = problem_of(stats, &req.request)?;
    let mut model = extract(&problem, req, names)?;
    model.diagnostics.elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(model)
}

/// `model_from_stats` for a stream that may keep cross-validation folds: with folds, a
/// select = cv | cv_1se request is answered from them (`select::cross_validate_folds`);
/// everything else as `model_from_stats`.
pub fn model_from_folds(
    stats: &Stats,
    folds: Option<&crate::stats::FoldSet>,
    req: &Checked,
    names: Option<&[String]>,
) -> Result<Model, ParamError> {
    match folds {
        Some(f) if req.request.select.is_some_and(|c| c.is_cv()) => {
            let path = select::cross_validate_folds(stats, f, &CheckedPath(req.clone()), names)?;
            select::chosen_model(path)
        }
        _ => model_from_stats(stats, req, names),
    }
}

/// `path_from_stats` for a stream that may keep cross-validation folds (`model_from_folds`).
pub fn path_from_folds(
    stats: &Stats,
    folds: Option<&crate::stats::FoldSet>,
    req: &CheckedPath,
    names: Option<&[String]>,
) -> Result<PathModel, ParamError> {
    match folds {
        Some(f) if req.0.request.select.is_some_and(|c| c.is_cv()) => {
            select::cross_validate_folds(stats, f, req, names)
        }
        _ => path_from_stats(stats, req, names),
    }
}

/// Builds the problem and extracts the whole path; `elapsed_ms` covers both.
pub fn path_from_stats(
    stats: &Stats,
    req: &CheckedPath,
    names: Option<&[String]>,
) -> Result<PathModel, ParamError> {
    let start = Instant::now();
    let problem = problem_of(stats, &req.0.request)?;
    let mut path = extract_path(&problem, req, names)?;
    path.elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(path)
}

// The library's one-call forms, on the statistics types (stats sits below solve: the methods
// live here).
impl RunningStats {
    /// Extracts the model `request` asks for from these statistics (checked against p first):
    /// the library's one-call form of `solve::model_from_stats`.
    ///
    /// ```
    /// use ndarray::array;
    /// use ravel_core::solve::{Estimator, Request, penalized::Lasso};
    /// use ravel_core::stats::{AlphaSchedule, RunningStats};
    ///
    /// let x = array![[1.0, 0.0, 0.3], [0.0, 1.0, 0.1], [1.0, 1.0, 0.7], [2.0, 1.0, 0.2], [0.5, 0.0, 0.9]];
    /// let y = array![1.0, 2.0, 3.0, 4.0, 0.5];
    /// let mut stats = RunningStats::new(3, AlphaSchedule::Plain);
    /// stats.update(x.view(), y.view())?;
    /// let lasso = Request::from(Estimator::Lasso(Lasso::k(2)));
    /// let model = stats.extract(&lasso)?;
    /// assert_eq!(model.k, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn extract(&self, request: &Request) -> Result<Model, ParamError> {
        self.extract_named(request, None)
    }

    /// `extract`, with the coefficients labelled by `names` (one per feature; else by index).
    pub fn extract_named(
        &self,
        request: &Request,
        names: Option<&[String]>,
    ) -> Result<Model, ParamError> {
        let checked = request.check(self.p())?;
        let start = std::time::Instant::now();
        let problem = if request.intercept {
            Problem::regression(self, request.standardize)?
        } else {
            Problem::through_origin(self, request.standardize)?
        };
        let mut model = extract(&problem, &checked, names)?;
        model.diagnostics.elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
        Ok(model)
    }
}

impl Stats {
    /// Checks `request` against these statistics and extracts its model, whichever the task
    /// (`Request::model` without feature names).
    ///
    /// ```
    /// use ndarray::array;
    /// use ravel_core::{Stats, Task};
    /// use ravel_core::solve::Request;
    /// use ravel_core::stats::AlphaSchedule;
    ///
    /// let mut stats = Stats::new(Task::Classification, 1, AlphaSchedule::Plain);
    /// stats.update(array![[1.0], [2.0], [-1.0], [-2.0]].view(), array![1.0, 1.0, -1.0, 0.0].view())?;
    /// let model = stats.extract(&Request::ols())?;
    /// assert!(model.coefficients[0].value > 0.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn extract(&self, request: &Request) -> Result<Model, ParamError> {
        request.model(self, None)
    }
}
