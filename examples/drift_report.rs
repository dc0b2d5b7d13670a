//! The numbers and plots of docs/drift.md: prequential RMSE and alpha over time of the
//! drift-adaptive schedule against fixed alphas and plain averaging, on the scenarios of
//! crates/ravel-core/src/scenarios.rs (abrupt change, gradual rotation, paper 003 section 5.2) plus the false
//! alarms on a stationary stream.
//!
//! ```sh
//! cargo run --release --example drift_report               # everything, writes docs/drift-*.svg
//! cargo run --release --example drift_report -- --only abrupt --adaptive adaptive:jump=0.05
//! ```
//! Options: `--only abrupt|gradual|paper|calibration|stationary`, `--adaptive SPEC` (the adaptive schedule
//! to use, default `adaptive`), `--seed S` (default 1), `--seeds N` (also tabulate adaptive
//! against the best fixed alpha for seeds 1..N), `--model ols|ridge:L` (prediction model of
//! the p = 50 scenarios, default ridge:0.01), `--no-plots`.

use plotters::prelude::*;
use ravel_core::prequential::{Prequential, WindowRecord};
use ravel_core::scenarios::{Drift, DriftingStream};
use ravel_core::solve::Request;
use ravel_core::stats::{AdaptiveConfig, AlphaSchedule, RunningStats};
use std::time::Instant;

/// One schedule replayed over a scenario.
struct Run {
    schedule: String,
    records: Vec<WindowRecord>,
    overall: f64,
    alarm_rows: Vec<u64>,
}

/// Replays one generated stream through every schedule at once (the same rows for all).
fn replay(
    mut stream: DriftingStream,
    schedules: &[String],
    model: &Request,
    window: u64,
    refit: u64,
) -> Vec<Run> {
    let p = stream.p;
    let mut replays: Vec<Prequential> = schedules
        .iter()
        .map(|s| {
            let sched: AlphaSchedule = s.parse().expect("schedule");
            Prequential::new(RunningStats::new(p, sched), model.clone(), window, refit)
                .expect("params")
        })
        .collect();
    let mut runs: Vec<Run> = schedules
        .iter()
        .map(|s| Run {
            schedule: s.clone(),
            records: vec![],
            overall: 0.0,
            alarm_rows: vec![],
        })
        .collect();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    loop {
        x.clear();
        y.clear();
        // Small batches so that alarm rows are seen one by one.
        if stream.fill(20, &mut x, &mut y) == 0 {
            break;
        }
        for (r, run) in replays.iter_mut().zip(runs.iter_mut()) {
            let before = r.stats().drift_status().alarms;
            r.push(&x, &y, &mut run.records).expect("rows are valid");
            if r.stats().drift_status().alarms > before {
                run.alarm_rows
                    .push(r.stats().drift_status().last_alarm_row.unwrap_or(0));
            }
        }
    }
    for (r, run) in replays.iter_mut().zip(runs.iter_mut()) {
        run.records.extend(r.finish());
        run.overall = r.overall_rmse();
    }
    runs
}

/// RMSE over the windows whose end lies after row `from`.
fn rmse_after(run: &Run, from: u64, window: u64) -> f64 {
    let w: Vec<&WindowRecord> = run
        .records
        .iter()
        .filter(|r| r.rows > from && r.rows % window == 0)
        .collect();
    (w.iter().map(|r| r.rmse * r.rmse).sum::<f64>() / w.len() as f64).sqrt()
}

/// Line colours: the adaptive schedule first (drawn thicker), then the others.
const COLORS: [RGBColor; 6] = [
    RGBColor(220, 20, 60),
    RGBColor(0, 114, 178),
    RGBColor(0, 158, 115),
    RGBColor(230, 159, 0),
    RGBColor(128, 0, 128),
    RGBColor(100, 100, 100),
];

fn plot(path: &str, title: &str, runs: &[Run], n: u64) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (900, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(350);
    // Clip the RMSE axis at 3x the best overall RMSE so the interesting part stays readable.
    let top_rmse = runs
        .iter()
        .flat_map(|r| r.records.iter().map(|w| w.rmse))
        .fold(1.0f64, f64::max);
    let ymax = top_rmse.min(3.0 * runs.iter().map(|r| r.overall).fold(f64::INFINITY, f64::min));
    let clipped = if ymax < top_rmse {
        format!(" (axis clipped at {ymax:.1})")
    } else {
        String::new()
    };
    let rows = |v: &f64| format!("{v:.0}");
    let mut chart = ChartBuilder::on(&top)
        .caption(
            format!("{title}: prequential RMSE per window{clipped}"),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..n as f64, 0f64..ymax * 1.05)?;
    chart
        .configure_mesh()
        .x_desc("rows")
        .y_desc("RMSE")
        .x_label_formatter(&rows)
        .draw()?;
    for (i, run) in runs.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts = run
            .records
            .iter()
            .map(|w| (w.rows as f64, w.rmse.min(ymax * 1.05)));
        chart
            .draw_series(LineSeries::new(
                pts,
                color.stroke_width(if i == 0 { 2 } else { 1 }),
            ))?
            .label(run.schedule.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()?;
    let amin = runs
        .iter()
        .flat_map(|r| r.records.iter().map(|w| w.alpha))
        .fold(1.0f64, f64::min)
        .max(1e-7);
    let mut chart = ChartBuilder::on(&bottom)
        .caption(
            format!("{title}: alpha of the next row, at each window's end"),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..n as f64, (amin * 0.5..1.0f64).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("rows")
        .y_desc("alpha (log scale)")
        .x_label_formatter(&rows)
        .y_label_formatter(&|v| format!("{v:.0e}"))
        .draw()?;
    // Adaptive last, so that it stays visible where it coincides with plain averaging.
    for (i, run) in runs.iter().enumerate().rev() {
        let color = COLORS[i % COLORS.len()];
        let pts = run
            .records
            .iter()
            .map(|w| (w.rows as f64, w.alpha.max(amin * 0.5)));
        chart.draw_series(LineSeries::new(
            pts,
            color.stroke_width(if i == 0 { 2 } else { 1 }),
        ))?;
    }
    root.present()?;
    Ok(())
}

fn table(runs: &[Run], extra: &str, extra_of: &dyn Fn(&Run) -> String) {
    println!("| schedule | overall RMSE | {extra} | alarms | first alarms (row) |");
    println!("|---|---|---|---|---|");
    for r in runs {
        let first: Vec<String> = r.alarm_rows.iter().take(4).map(|a| a.to_string()).collect();
        println!(
            "| `{}` | {:.4} | {} | {} | {} |",
            r.schedule,
            r.overall,
            extra_of(r),
            r.alarm_rows.len(),
            if first.is_empty() {
                "-".into()
            } else {
                first.join(", ")
            }
        );
    }
    println!();
}

/// `--model ols` or `--model ridge:L` (default ridge:0.01 for the p = 50 scenarios).
fn model(spec: Option<&str>) -> Request {
    match spec {
        None => Request::ridge(0.01),
        Some("ols") => Request::ols(),
        Some(s) => {
            let l = s
                .strip_prefix("ridge:")
                .and_then(|l| l.parse().ok())
                .expect("--model ols or ridge:L");
            Request::ridge(l)
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let only = opt("--only");
    let adaptive = opt("--adaptive").unwrap_or_else(|| "adaptive".into());
    let seed: u64 = opt("--seed")
        .map(|s| s.parse().expect("--seed S"))
        .unwrap_or(1);
    let seeds: u64 = opt("--seeds")
        .map(|s| s.parse().expect("--seeds N"))
        .unwrap_or(0);
    let small = model(opt("--model").as_deref());
    let plots = !args.iter().any(|a| a == "--no-plots");
    let want = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/docs");
    let grid: Vec<String> = [
        adaptive.as_str(),
        "fixed:0.1",
        "fixed:0.01",
        "fixed:0.001",
        "fixed:0.0001",
        "plain",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let refit = Prequential::default_refit(50);
    let abrupt = |seed| DriftingStream::new(50, 5, Drift::Abrupt { at: 20_000 }, 40_000, seed);
    let gradual =
        |seed| DriftingStream::new(50, 5, Drift::Rotation { period: 200_000.0 }, 100_000, seed);

    if want("abrupt") {
        let (n, at, window) = (40_000, 20_000, 500);
        let t = Instant::now();
        let runs = replay(abrupt(seed), &grid, &small, window, refit);
        println!(
            "## abrupt: p = 50, k = 5, coefficients replaced at row {at} of {n}, window {window}, seed {seed} ({:.1} s)\n",
            t.elapsed().as_secs_f64()
        );
        table(&runs, "RMSE after the change", &|r| {
            format!("{:.4}", rmse_after(r, at, window))
        });
        if plots {
            plot(
                &format!("{docs}/drift-abrupt.svg"),
                "abrupt change at row 20000",
                &runs,
                n,
            )
            .expect("plot");
        }
    }
    if want("gradual") {
        let (n, window) = (100_000, 1000);
        let t = Instant::now();
        let runs = replay(gradual(seed), &grid, &small, window, refit);
        println!(
            "## gradual: p = 50, k = 5, coefficients rotating with period 200000 rows, {n} rows, window {window}, seed {seed} ({:.1} s)\n",
            t.elapsed().as_secs_f64()
        );
        table(&runs, "RMSE second half", &|r| {
            format!("{:.4}", rmse_after(r, n / 2, window))
        });
        if plots {
            plot(
                &format!("{docs}/drift-gradual.svg"),
                "gradual rotation",
                &runs,
                n,
            )
            .expect("plot");
        }
    }
    if seeds > 0 && (want("abrupt") || want("gradual")) {
        println!(
            "## adaptive / best fixed alpha of the grid, overall prequential RMSE, seeds 1..{seeds}\n"
        );
        println!(
            "| seed | abrupt: adaptive | best fixed | ratio | first alarm | gradual: adaptive | best fixed | ratio | alarms |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for s in 1..=seeds {
            let a = replay(abrupt(s), &grid, &small, 500, refit);
            let g = replay(gradual(s), &grid, &small, 1000, refit);
            let best = |runs: &[Run]| {
                runs[1..5]
                    .iter()
                    .map(|r| r.overall)
                    .fold(f64::INFINITY, f64::min)
            };
            let (ba, bg) = (best(&a), best(&g));
            println!(
                "| {s} | {:.4} | {ba:.4} | {:.3} | {} | {:.4} | {bg:.4} | {:.3} | {} |",
                a[0].overall,
                a[0].overall / ba,
                a[0].alarm_rows
                    .first()
                    .map_or("-".into(), |r| r.to_string()),
                g[0].overall,
                g[0].overall / bg,
                g[0].alarm_rows.len()
            );
        }
        println!();
    }
    if want("paper") {
        // 003 section 5.2: 1000 time steps of 1000 rows; the paper's alpha = 0.01 per time step
        // is fixed:1e-5 per row ((1 - 1e-5)^1000 = 0.99); OLS refit once per step.
        let (steps, per_step) = (1000u64, 1000u64);
        let n = steps * per_step;
        let drift = Drift::Cosine {
            a: 5.0,
            b: 5.0,
            period_steps: 1000.0,
            rows_per_step: per_step,
        };
        let scheds: Vec<String> = [
            adaptive.as_str(),
            "fixed:0.00001",
            "fixed:0.001",
            "fixed:0.01",
            "plain",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let t = Instant::now();
        let stream = DriftingStream::new(100, 10, drift, n, seed);
        let runs = replay(stream, &scheds, &Request::ols(), per_step, per_step);
        println!(
            "## paper 003 section 5.2: p = 100, k = 10, {steps} steps of {per_step} rows, OLS refit every step, seed {seed} ({:.1} s)\n",
            t.elapsed().as_secs_f64()
        );
        table(&runs, "RMSE last 300 steps", &|r| {
            format!("{:.4}", rmse_after(r, n - 300 * per_step, per_step))
        });
        if plots {
            plot(
                &format!("{docs}/drift-paper.svg"),
                "paper 003 section 5.2",
                &runs,
                n,
            )
            .expect("plot");
        }
    }
    if want("calibration") {
        // The detector alone on iid N(0, 1) standardized errors (the null it is built for), and
        // its delay after the error variance rises r-fold, against h / D(r).
        use rand::SeedableRng;
        use rand_distr::{Distribution, StandardNormal};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let rows = 10_000_000u64;
        let def = AdaptiveConfig::default();
        println!(
            "## CUSUM calibration (default shift {}, clip {})\n",
            def.shift, def.clip
        );
        println!(
            "| fa | h = ln(1/fa) | false alarms in {rows} iid N(0,1) rows | measured rate | bound |"
        );
        println!("|---|---|---|---|---|");
        for fa in [1e-2, 1e-3, 1e-4, 1e-5] {
            let c = AdaptiveConfig {
                false_alarm_rate: fa,
                ..AdaptiveConfig::default()
            }
            .cusum();
            let (mut st, mut alarms) = (0.0, 0u64);
            for _ in 0..rows {
                let z: f64 = StandardNormal.sample(&mut rng);
                alarms += c.step(&mut st, z * z) as u64;
            }
            println!(
                "| {fa:e} | {:.2} | {alarms} | {:.2e} | {fa:e} |",
                c.threshold(),
                alarms as f64 / rows as f64
            );
        }
        println!();
        let c = AdaptiveConfig::default().cusum();
        println!(
            "| variance ratio r | mean delay (rows, 1000 runs, default fa = 1e-9) | h / D(r) |"
        );
        println!("|---|---|---|");
        for r in [1.5f64, 2.0, 3.0, 5.0, 11.0] {
            let d = r / 2.0 * (1.0 - 1.0 / def.shift) - 0.5 * def.shift.ln();
            let mut total = 0u64;
            for _ in 0..1000 {
                let mut st = 0.0;
                loop {
                    total += 1;
                    let z: f64 = StandardNormal.sample(&mut rng);
                    if c.step(&mut st, r * z * z) {
                        break;
                    }
                }
            }
            println!(
                "| {r} | {:.1} | {:.1} |",
                total as f64 / 1000.0,
                c.threshold() / d
            );
        }
        println!();
    }
    if want("stationary") {
        let n = 1_000_000;
        for spec in [
            adaptive.clone(),
            "adaptive:fa=1e-4".to_string(),
            "adaptive:fa=1e-3".to_string(),
        ] {
            let t = Instant::now();
            let mut stream = DriftingStream::new(50, 5, Drift::None, n, seed);
            let mut stats = RunningStats::new(50, spec.parse().expect("schedule"));
            let (mut x, mut y) = (Vec::new(), Vec::new());
            while {
                x.clear();
                y.clear();
                stream.fill(1000, &mut x, &mut y) > 0
            } {
                stats.update_batch(&x, &y).expect("valid rows");
            }
            let fa = match stats.schedule() {
                AlphaSchedule::Adaptive(a) => a.config.false_alarm_rate,
                _ => f64::NAN,
            };
            println!(
                "- stationary, p = 50, {n} rows, `{spec}`: {} false alarms (documented bound on the mean: {}) ({:.1} s)",
                stats.drift_alarms(),
                fa * n as f64,
                t.elapsed().as_secs_f64()
            );
        }
        println!();
    }
}
