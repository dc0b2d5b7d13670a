//! Which k, answered by each selection rule (issues 17 and 34), from the library alone: the
//! detection rate, support size and false positives of the model each rule chooses, next to
//! the oracle, on paper 003's Table 2 design and the demo's, with the extraction time.
//! `scripts/detection_select.py` runs the same rules end to end through `ravel fit`; this is
//! the quick form (no files, no process per fit), the figures of docs/selection.md:
//!
//!     cargo run --release -p ravel-lm --example detection_select [-- SEEDS]
//!
//! Designs (`SyntheticSpec`: x = z 1 + u, pairwise correlation 0.5, beta*_j = 1 at
//! j = (p / k*) i + p / k* - 1, y = x beta* + N(0, 1)): table2 (p = 1000, k* = 100,
//! n = 1000, 3000, 10000), demo (p = 100, k* = 10, n = 2000, 20000) and strong (p = 200,
//! k* = 20, n = 4000). Cross-validation: 5 folds by `select::fold_of` of the row index, as
//! `ravel fit --folds 5`.

use ravel_core::solve::select::{self, chosen_model, cross_validate, fold_of};
use ravel_core::solve::{Request, model_from_stats};
use ravel_core::stats::{AlphaSchedule, Stats};
use ravel_core::synthetic::SyntheticSpec;
use ravel_core::task::Task;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Instant;

/// The statistics of the whole design and of its 5 folds.
fn statistics(spec: &SyntheticSpec) -> (Stats, Vec<Stats>) {
    let folds_n = 5;
    let mut folds: Vec<Stats> = (0..folds_n)
        .map(|_| Stats::new(Task::Regression, spec.p, AlphaSchedule::Plain))
        .collect();
    let mut rows = spec.rows();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    let mut index = 0u64;
    let mut parts: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); folds_n];
    while rows.fill(1000, &mut x, &mut y) > 0 {
        for (i, yi) in y.iter().enumerate() {
            let f = fold_of(index, folds_n);
            parts[f]
                .0
                .extend_from_slice(&x[i * spec.p..(i + 1) * spec.p]);
            parts[f].1.push(*yi);
            index += 1;
        }
        for (f, (px, py)) in parts.iter_mut().enumerate() {
            folds[f].update_batch(px, py).unwrap();
            px.clear();
            py.clear();
        }
        x.clear();
        y.clear();
    }
    let mut total = folds[0].clone();
    for f in &folds[1..] {
        total.merge(f).unwrap();
    }
    (total, folds)
}

fn rules(p: usize, k: usize, n: u64) -> Vec<(String, Value)> {
    let default_k = select::default_k_max(p, n as f64);
    vec![
        (
            format!("oracle: lasso k = {k}"),
            json!({"method": "lasso", "k": k}),
        ),
        (
            format!("oracle: olsth k = {k}"),
            json!({"method": "olsth", "k": k}),
        ),
        (
            "default: select ebic (olsth k-path)".into(),
            json!({"method": "olsth", "k": default_k, "select": "ebic"}),
        ),
        (
            "default: select cv_1se (olsth k-path)".into(),
            json!({"method": "olsth", "k": default_k, "select": "cv_1se"}),
        ),
        (
            "lasso ebic (refitted path, the default)".into(),
            json!({"method": "lasso", "select": "ebic"}),
        ),
        (
            "lasso ebic, penalized (refit false)".into(),
            json!({"method": "lasso", "refit": false, "select": "ebic"}),
        ),
        (
            "lasso cv_1se (refitted path)".into(),
            json!({"method": "lasso", "select": "cv_1se"}),
        ),
        (
            "mcp ebic (refitted path)".into(),
            json!({"method": "mcp", "select": "ebic"}),
        ),
    ]
}

fn main() {
    let seeds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let designs = [
        ("table2", 1000, 100, vec![1000u64, 3000, 10000]),
        ("demo", 100, 10, vec![2000, 20000]),
        ("strong", 200, 20, vec![4000]),
    ];
    println!("{seeds} seeds each; ms is the extraction from the statistics (median)\n");
    println!(
        "| design | n | rule | DR % | mean size | mean false positives | most false positives | ms |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (name, p, k, ns) in designs {
        for n in ns {
            let rs = rules(p, k, n);
            let mut acc: Vec<Vec<(f64, f64, f64, f64)>> = vec![Vec::new(); rs.len()];
            let mut notes: Vec<BTreeSet<String>> = vec![BTreeSet::new(); rs.len()];
            for seed in 1..=seeds {
                let spec = SyntheticSpec {
                    p,
                    k,
                    n: Some(n),
                    seed,
                    ..SyntheticSpec::default()
                };
                let truth: BTreeSet<usize> = spec.support().into_iter().collect();
                let (total, folds) = statistics(&spec);
                for (r, (_, body)) in rs.iter().enumerate() {
                    let req: Request = serde_json::from_value(body.clone()).unwrap();
                    let t = Instant::now();
                    let model = if req.select.is_some_and(|c| c.is_cv()) {
                        let checked = req.check_path(p).unwrap();
                        chosen_model(cross_validate(&total, &folds, &checked, None).unwrap())
                            .unwrap()
                    } else {
                        model_from_stats(&total, &req.check(p).unwrap(), None).unwrap()
                    };
                    let ms = t.elapsed().as_secs_f64() * 1e3;
                    let chosen: BTreeSet<usize> =
                        model.coefficients.iter().map(|c| c.index).collect();
                    let hits = chosen.intersection(&truth).count();
                    acc[r].push((
                        hits as f64 / k as f64,
                        chosen.len() as f64,
                        (chosen.len() - hits) as f64,
                        ms,
                    ));
                    if let Some(sel) = &model.selection {
                        for note in &sel.notes {
                            if note.contains("much larger") {
                                notes[r].insert("sparser model noted".into());
                            }
                        }
                    }
                }
            }
            for (r, (rule, _)) in rs.iter().enumerate() {
                let a = &acc[r];
                let m = |f: fn(&(f64, f64, f64, f64)) -> f64| {
                    a.iter().map(f).sum::<f64>() / a.len() as f64
                };
                let mut ms: Vec<f64> = a.iter().map(|v| v.3).collect();
                ms.sort_by(f64::total_cmp);
                let worst = a.iter().map(|v| v.2).fold(0.0, f64::max);
                let noted = if notes[r].is_empty() {
                    String::new()
                } else {
                    " (note: sparser model)".into()
                };
                println!(
                    "| {name} (p = {p}, k* = {k}) | {n} | {rule}{noted} | {:.1} | {:.1} | {:.1} | {worst:.0} | {:.0} |",
                    100.0 * m(|v| v.0),
                    m(|v| v.1),
                    m(|v| v.2),
                    ms[ms.len() / 2]
                );
            }
        }
    }
}
