//! Feature-stream benchmarks (a bench binary that prints a table; run with
//! `cargo bench --bench features`, or `cargo bench --bench features -- n=2000` for another
//! sample size): features/s of OS at n = 10,000 samples and s = 100, of Asy-OS with 1, 2 and
//! 4 worker threads, the speed-up over OS, the loss each reaches after two passes, and the
//! peak resident memory (VmHWM) of the process.
//!
//! Asy-OS with q workers keeps s/q features per worker, so each of its steps does about 1/q
//! of OS's work: its speed-up over OS is that saving times the parallel one. The row "OS,
//! s = 50" does exactly one 2-worker Asy-OS worker's work per feature, so Asy-OS (2 workers)
//! over that row is the part of the speed-up that comes from running on two cores.
//!
//! Data: paper 000's design (X ~ N(0, 1), 100 true features with N(0, 1) weights, noise sd
//! 0.1), p = 1,000 columns generated up front (80 MB at n = 10,000, shared by the runs, so
//! that column generation is not timed and Asy-OS's dispatcher costs only a queue push). The
//! first s features of a stream only fill S; rates are given over two whole passes (2,000
//! features) and over the second pass alone (steady state, S full).

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::index::sample;
use rand_distr::{Distribution, StandardNormal};
use ravel_core::features::{Labels, Loss, OsParams, Substitution};
use std::sync::Arc;
use std::time::Instant;

const P: usize = 1_000;
const S: usize = 100;
const PASSES: usize = 2;

fn status(key: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_else(|| "n/a".into())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Seconds for the whole stream and for its last pass, and the final loss.
struct Run {
    total: f64,
    last_pass: f64,
    loss: f64,
}

/// OS (`workers = None`) with budget `s`, or Asy-OS on `workers` threads with budget `S`.
fn run(cols: &[Arc<[f64]>], y: &[f64], s: usize, workers: Option<usize>) -> Run {
    let labels = Labels::new(y.to_vec(), Loss::Squared).unwrap();
    let params = OsParams::new(s, Loss::Squared);
    let mut sel = match workers {
        None => Substitution::os(labels, &params),
        Some(q) => Substitution::asy(labels, &params, q),
    }
    .unwrap();
    let start = Instant::now();
    let mut last = start;
    for _ in 0..PASSES {
        last = Instant::now();
        for (j, c) in cols.iter().enumerate() {
            sel.push(j, "", c.clone()).unwrap();
        }
        sel.end_pass().unwrap();
    }
    let (total, last_pass) = (start.elapsed().as_secs_f64(), last.elapsed().as_secs_f64());
    let loss = sel.finish().unwrap().loss();
    Run {
        total,
        last_pass,
        loss,
    }
}

fn main() {
    let mut rng = StdRng::seed_from_u64(11);
    let support = sample(&mut rng, P, S).into_vec();
    // `cargo bench --bench features -- n=2000` runs another sample size (10,000 by default).
    let n_arg =
        std::env::args().find_map(|a| a.strip_prefix("n=").and_then(|v| v.parse::<usize>().ok()));
    let n = n_arg.unwrap_or(10_000);
    let mut y = vec![0.0; n];
    let cols: Vec<Arc<[f64]>> = (0..P)
        .map(|_| {
            (0..n)
                .map(|_| StandardNormal.sample(&mut rng))
                .collect::<Vec<f64>>()
                .into()
        })
        .collect();
    for &j in &support {
        let w: f64 = StandardNormal.sample(&mut rng);
        for (yi, xi) in y.iter_mut().zip(cols[j].iter()) {
            *yi += w * xi;
        }
    }
    for yi in y.iter_mut() {
        let e: f64 = StandardNormal.sample(&mut rng);
        *yi += 0.1 * e;
    }
    let rss_data = status("VmRSS:");
    let reps = 3;
    println!(
        "n = {n}, s = {S}, p = {P} columns, {PASSES} passes, median of {reps} runs; cores: {}",
        std::thread::available_parallelism()
            .map(|v| v.get())
            .unwrap_or(1)
    );
    println!(
        "{:<28} {:>14} {:>18} {:>10} {:>12}",
        "method", "features/s", "features/s (S full)", "speed-up", "final loss"
    );
    let rate = |runs: &[Run]| {
        let total = median(runs.iter().map(|r| r.total).collect());
        let last = median(runs.iter().map(|r| r.last_pass).collect());
        (
            (PASSES * P) as f64 / total,
            P as f64 / last,
            median(runs.iter().map(|r| r.loss).collect()),
        )
    };
    let os_runs: Vec<Run> = (0..reps).map(|_| run(&cols, &y, S, None)).collect();
    let (os_rate, os_steady, os_loss) = rate(&os_runs);
    println!(
        "{:<28} {:>14.0} {:>18.0} {:>10} {:>12.4e}",
        "OS", os_rate, os_steady, "1.00x", os_loss
    );
    // One Asy-OS worker of two does the work of OS with budget s/2: the ratio of Asy-OS (2
    // workers) to this row is the speed-up that comes from running in parallel alone.
    let half: Vec<Run> = (0..reps).map(|_| run(&cols, &y, S / 2, None)).collect();
    let (half_rate, half_steady, half_loss) = rate(&half);
    println!(
        "{:<28} {:>14.0} {:>18.0} {:>10} {:>12.4e}",
        format!("OS, s = {} (one worker's work)", S / 2),
        half_rate,
        half_steady,
        format!("{:.2}x", half_steady / os_steady),
        half_loss
    );
    let mut parallel = 0.0;
    for q in [1, 2, 4] {
        let runs: Vec<Run> = (0..reps).map(|_| run(&cols, &y, S, Some(q))).collect();
        let (r, steady, loss) = rate(&runs);
        if q == 2 {
            parallel = steady / half_steady;
        }
        println!(
            "{:<28} {:>14.0} {:>18.0} {:>10} {:>12.4e}",
            format!("Asy-OS, {q} worker{}", if q > 1 { "s" } else { "" }),
            r,
            steady,
            format!("{:.2}x", steady / os_steady),
            loss
        );
    }
    println!(
        "speed-up: steady-state features/s relative to OS with s = {S} (Asy-OS keeps s/q per worker, total s)"
    );
    println!(
        "parallel part of the 2-worker speed-up (vs OS with s = {}): {parallel:.2}x",
        S / 2
    );
    println!(
        "memory: VmRSS after generating the data {rss_data}; peak VmHWM {}",
        status("VmHWM:")
    );
    println!(
        "        (the data are {} MB; each stream holds at most s columns = {:.1} MB plus O(n) vectors)",
        P * n * 8 / 1_000_000,
        (S * n * 8) as f64 / 1e6
    );
}
