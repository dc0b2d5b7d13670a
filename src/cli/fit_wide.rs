//! `ravel fit --wide`: paper 004's Frank-Wolfe Lasso path on the raw sparse columns of a wide
//! file (p far above n, up to millions of features), where the running statistics' p x p
//! matrix cannot exist. The file is held column-major (`ravel_core::data::csc`, checked
//! against --max-memory from its nonzeros before it is allocated) and `ravel_core::wide` runs
//! the path; this file turns the flags into its options and its points into the answer: the
//! JSON on stdout (one object, as `ravel fit` prints), a short table on stderr.
//!
//! `ravel fit` never switches to this path by itself: a file whose statistics would not fit
//! is refused with a message that names --wide (`data::budget`), because the two answer
//! different questions (any method at any k or lambda from the statistics, against one
//! constrained Lasso path here).

use crate::cli::fit::FitArgs;
use ravel_core::data::csc::{Csc, CscOptions, for_each_row, read_csc, wide_bytes};
use ravel_core::data::{Format, Plan};
use ravel_core::memory::ByteSize;
use ravel_core::wide::{
    Checked, Sampling, Spelling, WidePath, WidePoint, WideProblem, WideSettings, run_path,
};
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::time::Instant;

/// One point of the answer.
#[derive(Serialize)]
struct PointOut {
    delta: f64,
    objective: f64,
    gap: f64,
    lambda: f64,
    nonzeros: usize,
    iterations: usize,
    dot_products: u64,
    converged: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    test_mse: Option<f64>,
    intercept: f64,
    /// Feature (the file's index) -> coefficient.
    coefficients: Map<String, Value>,
}

/// Refuses the flags of the statistics' methods, which do not apply to the raw-data path.
fn check_flags(args: &FitArgs) -> anyhow::Result<()> {
    let e = &args.extract;
    if let Some(m) = &e.method
        && m != "fw-lasso"
    {
        anyhow::bail!(
            "--wide fits the Frank-Wolfe Lasso path (--method fw-lasso), not --method {m}"
        );
    }
    let refused: &[(&str, bool)] = &[
        ("--k", e.k.is_some()),
        ("--lambda", e.lambda.is_some()),
        ("--l1-ratio", e.l1_ratio.is_some()),
        ("--gamma", e.gamma.is_some()),
        ("--refit", e.refit || e.no_refit),
        (
            "--no-standardize (the columns are never standardized)",
            e.no_standardize,
        ),
        (
            "--no-intercept (the wide path always fits an intercept)",
            e.no_intercept,
        ),
        (
            "--delta (the path covers every delta; --delta-max sets its end)",
            e.delta.is_some(),
        ),
        ("--select", e.select.is_some()),
        ("--inference", e.inference),
        ("--level", e.level.is_some()),
        ("--sigma", e.sigma.is_some()),
        ("--prequential", args.prequential.is_some()),
        ("--folds", args.folds.is_some()),
        (
            "--compact-features (empty columns cost nothing here)",
            args.compact_features,
        ),
        ("--categorical", !args.columns.categorical.is_empty()),
        ("--hashed", !args.columns.hashed.is_empty()),
        ("--stream", args.columns.stream.is_some()),
        (
            "--task classification",
            args.task != ravel_core::Task::Regression,
        ),
    ];
    for &(flag, given) in refused {
        if given {
            anyhow::bail!("{flag} does not apply to --wide");
        }
    }
    if args.alpha != "plain" {
        anyhow::bail!("--alpha does not apply to --wide: every row weighs the same");
    }
    Ok(())
}

/// The flags checked (`WideSettings`: the API's rules and messages, with the flags' names).
/// Paper 004's step rule by default (issue 59: the gap rule alone took 85 s where 004's took
/// 5.2 s for the same best test MSE); --gap-rule for the gap alone.
/// `used`: the file's columns with a nonzero (the randomized rule draws among them).
fn settings(args: &FitArgs, used: usize) -> anyhow::Result<Checked> {
    let e = &args.extract;
    WideSettings {
        variant: e.variant.clone(),
        kappa: e.kappa,
        sample_fraction: args.wide.sample_fraction,
        seed: e.seed,
        tol: e.tol,
        max_iterations: e.max_iterations,
        away_steps: Some(!e.no_away_steps),
        step_rule: !args.wide.gap_rule,
        step_tol: args.wide.step_tol,
        path_points: e.path_points,
        delta_min_ratio: e.delta_min_ratio,
        lambda_min_ratio: e.lambda_min_ratio,
        delta_max: args.wide.delta_max,
    }
    .check(used, Spelling::Flag)
    .map_err(anyhow::Error::msg)
}

/// The test MSE of every point of the path, the test file read once, row by row, against the
/// points' sparse coefficients (004's Figures 5-6). Nothing of the file is kept: per row, the
/// prediction of each point, then its squared error added to that point's sum. A training
/// column is matched by the file's index (LIBSVM) or position (NPY, CSV); a test feature the
/// training file does not have has no coefficient. Memory: the path's coefficients again, by
/// feature, and a row.
fn test_mses(
    path: &std::path::Path,
    opts: &CscOptions,
    train: &Csc,
    points: &[WidePoint],
) -> anyhow::Result<Vec<f64>> {
    // (file index, point, coefficient), by file index: each feature's coefficients along the
    // path, found by a binary search of its index.
    let mut entries: Vec<(usize, u32, f64)> = points
        .iter()
        .enumerate()
        .flat_map(|(k, pt)| pt.coefficients.iter().map(move |&(j, v)| (j, k, v)))
        .map(|(j, k, v)| (train.first_index + j, k as u32, v))
        .collect();
    entries.sort_by_key(|e| (e.0, e.1));
    let mut pred = vec![0.0; points.len()];
    let mut sse = vec![0.0; points.len()];
    let n = for_each_row(path, opts, |label, row| {
        for (p, pt) in pred.iter_mut().zip(points) {
            *p = pt.intercept;
        }
        for &(idx, a) in row {
            let start = entries.partition_point(|e| e.0 < idx);
            for &(_, k, v) in entries[start..].iter().take_while(|e| e.0 == idx) {
                pred[k as usize] += v * a;
            }
        }
        for (s, p) in sse.iter_mut().zip(&pred) {
            *s += (p - label) * (p - label);
        }
    })?;
    Ok(sse.into_iter().map(|s| s / n as f64).collect())
}

/// Runs `ravel fit --wide` and returns the JSON to print.
pub fn run(args: &FitArgs) -> anyhow::Result<String> {
    check_flags(args)?;
    // The settings that do not depend on the file's width are refused before it is read.
    settings(args, 1)?;
    let limit = args.memory.limit();
    let format = args.format.as_deref().map(|f| match f {
        "csv" => Format::Csv,
        "npy" => Format::Npy,
        _ => Format::Libsvm,
    });
    let budget = limit.budget(Plan::Rows { batch_rows: 1 });
    let t0 = Instant::now();
    let x = read_csc(
        &args.file,
        &CscOptions {
            target: args.target.as_deref(),
            format,
            p: args.wide.features,
            budget: budget.clone(),
        },
    )?;
    let read_seconds = t0.elapsed().as_secs_f64();
    let Checked {
        options: opt,
        spec,
        kappa,
    } = settings(args, x.p - x.empty_columns)?;
    let test_opts = CscOptions {
        target: args.target.as_deref(),
        format,
        p: None,
        budget: budget.clone(),
    };
    if let Some(test) = &args.wide.test {
        // A bad test file is refused before the path, not after it: one read that checks its
        // rows and keeps nothing (the second, after the path, scores them).
        for_each_row(test, &test_opts, |_, _| {})?;
    }
    let t1 = Instant::now();
    let pr = WideProblem::new(&x);
    let WidePath {
        delta_max,
        search,
        points: path,
    } = run_path(&pr, spec, opt);
    let solve_seconds = t1.elapsed().as_secs_f64();
    let t2 = Instant::now();
    let mses = match &args.wide.test {
        None => None,
        Some(test) => Some(test_mses(test, &test_opts, &x, &path)?),
    };
    let test_seconds = t2.elapsed().as_secs_f64();
    let mut out = Vec::with_capacity(path.len());
    let mut best: Option<(usize, f64)> = None;
    for (k, pt) in path.iter().enumerate() {
        let mse = mses.as_ref().map(|m| m[k]);
        if let Some(m) = mse
            && best.is_none_or(|b| m < b.1)
        {
            best = Some((k, m));
        }
        let coefficients = pt
            .coefficients
            .iter()
            .map(|&(j, v)| (x.name(j), json!(v)))
            .collect();
        out.push(PointOut {
            delta: pt.delta,
            objective: pt.objective,
            gap: pt.gap,
            lambda: pt.lambda,
            nonzeros: pt.coefficients.len(),
            iterations: pt.iterations,
            dot_products: pt.dot_products,
            converged: pt.converged,
            test_mse: mse,
            intercept: pt.intercept,
            coefficients,
        });
    }
    let iterations: usize = path.iter().map(|p| p.iterations).sum();
    let dots: u64 = path.iter().map(|p| p.dot_products).sum();
    let mean_active = if path.is_empty() {
        0.0
    } else {
        path.iter().map(|p| p.coefficients.len()).sum::<usize>() as f64 / path.len() as f64
    };
    let not_converged = path.iter().filter(|p| !p.converged).count();
    let mut notes = Vec::new();
    if not_converged > 0 {
        let by = match opt.step_tol {
            Some(eps) => format!(
                "at --step-tol {eps} or --max-iterations {}",
                opt.max_iterations
            ),
            None => format!("at --max-iterations {}", opt.max_iterations),
        };
        notes.push(format!(
            "{not_converged} of the {} points stopped {by} before the gap met --tol {}: their \
             gaps say how far they may be from the optimum",
            path.len(),
            opt.tol
        ));
    }
    if x.empty_columns > 0 {
        notes.push(format!(
            "{} of the {} columns have no nonzero (indices the file never uses): they are \
             never selected",
            x.empty_columns, x.p
        ));
    }
    if delta_max == 0.0 {
        notes.push("y is constant or every column is: the model is the mean of y".into());
    }
    let variant = match opt.sampling {
        Sampling::Full => "deterministic",
        Sampling::Randomized { .. } => "randomized",
    };
    let answer = json!({
        "method": "fw-lasso",
        "wide": true,
        "variant": variant,
        "kappa": kappa,
        "seed": match opt.sampling { Sampling::Randomized { seed, .. } => Some(seed), _ => None },
        "tol": opt.tol,
        "step_tol": opt.step_tol,
        "away_steps": opt.away_steps,
        "n": x.n,
        "p": x.p,
        "nnz": x.nnz(),
        "empty_columns": x.empty_columns,
        "memory_estimate": wide_bytes(x.n as u64, x.p as u64, x.nnz() as u64),
        "lambda_max": search.as_ref().map(|s| s.lambda_max),
        "delta_max": delta_max,
        "delta_max_from": if search.is_some() { "search" } else { "--delta-max" },
        "delta_max_search": search.as_ref().map(|s| json!({
            "deltas_tried": s.tried,
            "iterations": s.iterations,
            "dot_products": s.dot_products,
        })),
        "iterations": iterations,
        "dot_products": dots,
        "mean_active_features": mean_active,
        "seconds": { "read": read_seconds, "path": solve_seconds, "test": mses.as_ref().map(|_| test_seconds) },
        "best": best.map(|(k, m)| json!({
            "index": k,
            "delta": path[k].delta,
            "test_mse": m,
            "nonzeros": path[k].coefficients.len(),
        })),
        "notes": notes,
        "path": out,
    });
    summary(&args.file, &x, &answer, &path, best, mses.is_some());
    Ok(serde_json::to_string(&answer)?)
}

/// The human-readable summary on stderr: the file, every tenth point and the best.
fn summary(
    file: &std::path::Path,
    x: &Csc,
    answer: &Value,
    path: &[WidePoint],
    best: Option<(usize, f64)>,
    test: bool,
) {
    let mut s = format!(
        "{}: n = {}, p = {}, {} nonzeros ({} in memory); {} path, {} points, delta_max {:.6} ({})\n",
        file.display(),
        x.n,
        x.p,
        x.nnz(),
        ByteSize(x.bytes()),
        answer["variant"].as_str().unwrap_or(""),
        path.len(),
        answer["delta_max"].as_f64().unwrap_or(0.0),
        answer["delta_max_from"].as_str().unwrap_or("")
    );
    s.push_str(&format!(
        "{:>5} {:>12} {:>12} {:>10} {:>8} {:>6} {:>12}{}\n",
        "point",
        "delta",
        "objective",
        "gap",
        "nonzeros",
        "iters",
        "dot products",
        if test { "     test MSE" } else { "" }
    ));
    let step = (path.len() / 10).max(1);
    for (k, pt) in path.iter().enumerate() {
        if !k.is_multiple_of(step) && k + 1 != path.len() && best.is_none_or(|b| b.0 != k) {
            continue;
        }
        let mse = match test {
            true => format!(
                " {:>12.6}",
                answer["path"][k]["test_mse"].as_f64().unwrap_or(f64::NAN)
            ),
            false => String::new(),
        };
        s.push_str(&format!(
            "{:>5} {:>12.6} {:>12.6e} {:>10.3e} {:>8} {:>6} {:>12}{mse}{}\n",
            k,
            pt.delta,
            pt.objective,
            pt.gap,
            pt.coefficients.len(),
            pt.iterations,
            pt.dot_products,
            if best.is_some_and(|b| b.0 == k) {
                "  <- best"
            } else {
                ""
            }
        ));
    }
    s.push_str(&format!(
        "total: {} iterations, {} dot products, {:.1} active features on average",
        answer["iterations"],
        answer["dot_products"],
        answer["mean_active_features"].as_f64().unwrap_or(0.0)
    ));
    eprintln!("{s}");
}
