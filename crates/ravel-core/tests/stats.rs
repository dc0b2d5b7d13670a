//! Running statistics: row-by-row, mini-batch and sharded-then-merged updates agree, under
//! every weight schedule; bad rows change nothing; the averages equal the direct averages.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ravel_core::gram::Moments;
use ravel_core::stats::{AlphaSchedule, ClassStats, RunningStats, StatsError};

fn rows(seed: u64, n: usize, p: usize) -> (Vec<f64>, Vec<f64>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let x: Vec<f64> = (0..n * p)
        .map(|i| rng.random_range(-2.0..2.0) + (i % p) as f64 * 0.3)
        .collect();
    let y: Vec<f64> = (0..n)
        .map(|i| x[i * p] * 2.0 - x[i * p + 1] + rng.random_range(-1.0..1.0) + 5.0)
        .collect();
    (x, y)
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / a.abs().max(b.abs()).max(1e-300)
}

/// Compares the means and the centred moments (what the statistics hold, around their shift;
/// the raw moments recombined from them carry the shift's rounding on small entries).
fn assert_close(a: &RunningStats, b: &RunningStats, tol: f64) {
    assert_eq!(a.n(), b.n());
    let p = a.p();
    let mut worst: f64 = 0.0;
    worst = worst
        .max(rel(a.mean_y(), b.mean_y()))
        .max(rel(a.var_y(), b.var_y()));
    for j in 0..p {
        worst = worst
            .max(rel(a.mean_x()[j], b.mean_x()[j]))
            .max(rel(a.cov_xy(j), b.cov_xy(j)));
        for i in 0..p {
            worst = worst.max(rel(a.cov_at(i, j), b.cov_at(i, j)));
        }
    }
    assert!(
        worst <= tol,
        "statistics differ by {worst:e} relative (tol {tol:e})"
    );
}

/// The adaptive ones refresh their reference from the statistics mid-batch; the second one,
/// with a loose false-alarm rate, also raises alarms on these rows.
const SCHEDULES: [&str; 6] = [
    "plain",
    "fixed:0.01",
    "fixed:0.3",
    "floor:0.02",
    "adaptive",
    "adaptive:fa=0.5,refresh=50,warmup=20,shift=1.2",
];

#[test]
fn batch_equals_row_by_row_under_every_schedule() {
    let (p, n) = (7, 503);
    let (x, y) = rows(1, n, p);
    for s in SCHEDULES {
        let sched: AlphaSchedule = s.parse().unwrap();
        let mut one = RunningStats::new(p, sched.clone());
        for i in 0..n {
            one.update(&x[i * p..(i + 1) * p], y[i]).unwrap();
        }
        // Uneven batch sizes, including 1 and a large one.
        let mut batched = RunningStats::new(p, sched.clone());
        let mut at = 0;
        for (k, size) in [1usize, 2, 64, 3, 200, 1, 100].iter().cycle().enumerate() {
            if at >= n || k > 1000 {
                break;
            }
            let end = (at + size).min(n);
            batched
                .update_batch(&x[at * p..end * p], &y[at..end])
                .unwrap();
            at = end;
        }
        assert_close(&one, &batched, 1e-12);
        assert!(
            (one.total_weight() - batched.total_weight()).abs() < 1e-12,
            "{s}"
        );
        assert_eq!(one.drift_alarms(), batched.drift_alarms(), "{s}");
        assert_eq!(
            one.last_drift_alarm_row(),
            batched.last_drift_alarm_row(),
            "{s}"
        );
        if s.contains("fa=0.5") {
            assert!(
                one.drift_alarms() > 0,
                "{s}: expected some alarms to exercise the jump"
            );
        }
    }
}

#[test]
fn plain_averages_are_the_direct_averages() {
    let (p, n) = (4, 300);
    let (x, y) = rows(2, n, p);
    let mut s = RunningStats::new(p, AlphaSchedule::Plain);
    s.update_batch(&x, &y).unwrap();
    for j in 0..p {
        let mean: f64 = (0..n).map(|i| x[i * p + j]).sum::<f64>() / n as f64;
        assert!(rel(mean, s.mean_x()[j]) < 1e-13);
        for k in 0..p {
            let m: f64 = (0..n).map(|i| x[i * p + j] * x[i * p + k]).sum::<f64>() / n as f64;
            assert!(rel(m, s.sxx_at(j, k)) < 1e-13, "sxx[{j},{k}]");
        }
        let m: f64 = (0..n).map(|i| x[i * p + j] * y[i]).sum::<f64>() / n as f64;
        assert!(rel(m, s.sxy()[j]) < 1e-13);
    }
    let m: f64 = y.iter().map(|v| v * v).sum::<f64>() / n as f64;
    assert!(rel(m, s.syy()) < 1e-13);
}

#[test]
fn fixed_alpha_is_a_normalized_exponential_average() {
    // With W tracked, a fixed alpha gives sum_i a (1-a)^(n-1-i) x_i / sum_i a (1-a)^(n-1-i).
    let (p, n, a) = (3, 50, 0.1);
    let (x, y) = rows(3, n, p);
    let mut s = RunningStats::new(p, AlphaSchedule::Fixed { alpha: a });
    s.update_batch(&x, &y).unwrap();
    let w: Vec<f64> = (0..n)
        .map(|i| a * (1.0 - a).powi((n - 1 - i) as i32))
        .collect();
    let total: f64 = w.iter().sum();
    for j in 0..p {
        let m: f64 = (0..n).map(|i| w[i] * x[i * p + j]).sum::<f64>() / total;
        assert!(rel(m, s.mean_x()[j]) < 1e-12);
    }
    assert!(rel(total, s.total_weight()) < 1e-12);
}

#[test]
fn merge_of_shards_equals_one_stream() {
    let (p, n) = (6, 1000);
    let (x, y) = rows(4, n, p);
    let mut whole = RunningStats::new(p, AlphaSchedule::Plain);
    whole.update_batch(&x, &y).unwrap();
    // Three uneven shards, merged in a different order than they were cut.
    let cuts = [0, 137, 702, n];
    let shards: Vec<RunningStats> = cuts
        .windows(2)
        .map(|c| {
            let mut s = RunningStats::new(p, AlphaSchedule::Plain);
            s.update_batch(&x[c[0] * p..c[1] * p], &y[c[0]..c[1]])
                .unwrap();
            s
        })
        .collect();
    let mut merged = RunningStats::new(p, AlphaSchedule::Plain);
    for i in [2, 0, 1] {
        merged.merge(&shards[i]).unwrap();
    }
    assert_close(&whole, &merged, 1e-12);
}

#[test]
fn bad_rows_change_nothing() {
    let p = 3;
    let mut s = RunningStats::new(p, AlphaSchedule::Plain);
    s.update_batch(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[1.0, 2.0])
        .unwrap();
    let before = s.clone();
    let nan = [1.0, 2.0, 3.0, 4.0, f64::NAN, 6.0];
    assert_eq!(
        s.update_batch(&nan, &[1.0, 2.0]),
        Err(StatsError::NonFinite { row: 1 })
    );
    assert!(matches!(
        s.update_batch(&[1.0, 2.0], &[1.0]),
        Err(StatsError::Dimension {
            expected: 3,
            got: 2
        })
    ));
    assert!(s.update_batch(&[1.0, 2.0, 3.0], &[f64::INFINITY]).is_err());
    assert!(s.update_batch(&[1.0, 2.0, 3.0, 4.0], &[1.0, 2.0]).is_err());
    let other = RunningStats::new(4, AlphaSchedule::Plain);
    assert!(s.merge(&other).is_err());
    assert_eq!(s, before);
    let mut c = ClassStats::new(p, AlphaSchedule::Plain);
    assert!(matches!(
        c.update_batch(&[1.0, 2.0, 3.0, 1.0, 1.0, 1.0], &[1.0, 0.5]),
        Err(StatsError::Label { row: 1, .. })
    ));
    assert_eq!(c.n(), 0);
}

#[test]
fn schedules_parse_and_reject_nonsense() {
    assert_eq!(
        "plain".parse::<AlphaSchedule>().unwrap(),
        AlphaSchedule::Plain
    );
    assert_eq!(
        "fixed:0.01".parse::<AlphaSchedule>().unwrap(),
        AlphaSchedule::Fixed { alpha: 0.01 }
    );
    assert_eq!(
        "floor:0.001".parse::<AlphaSchedule>().unwrap(),
        AlphaSchedule::Floor { alpha_min: 0.001 }
    );
    assert_eq!(
        "adaptive".parse::<AlphaSchedule>().unwrap(),
        AlphaSchedule::adaptive()
    );
    for bad in [
        "fixed",
        "fixed:0",
        "fixed:1.5",
        "fixed:-0.1",
        "floor:nan",
        "sometimes",
        "fixed:x",
        "adaptive:x=1",
    ] {
        assert!(
            bad.parse::<AlphaSchedule>().is_err(),
            "{bad} should be refused"
        );
    }
}

#[test]
fn class_stats_split_by_label_and_merge() {
    let (p, n) = (5, 400);
    let (x, y) = rows(5, n, p);
    let labels: Vec<f64> = y
        .iter()
        .map(|v| if *v > 5.0 { 1.0 } else { -1.0 })
        .collect();
    let mut c = ClassStats::new(p, AlphaSchedule::Plain);
    c.update_batch(&x, &labels).unwrap();
    let npos = labels.iter().filter(|v| **v > 0.0).count() as u64;
    assert_eq!(c.pos.n(), npos);
    assert_eq!(c.neg.n(), n as u64 - npos);
    let mut a = ClassStats::new(p, AlphaSchedule::Plain);
    let mut b = ClassStats::new(p, AlphaSchedule::Plain);
    a.update_batch(&x[..100 * p], &labels[..100]).unwrap();
    b.update_batch(&x[100 * p..], &labels[100..]).unwrap();
    a.merge(&b).unwrap();
    assert_close(&a.pos, &c.pos, 1e-12);
    assert_close(&a.neg, &c.neg, 1e-12);
}

/// Issue 10: a finite but huge value (1e200) used to pass, turn E[x x^T] and E[y^2] into
/// infinity for good and make every feature look constant. Rows beyond +-1e150
/// (`MAX_ABS_VALUE`) are refused, naming the row, and nothing changes.
#[test]
fn huge_values_are_refused_as_overflow_and_change_nothing() {
    use ravel_core::stats::MAX_ABS_VALUE;
    let p = 5;
    let (x, y) = rows(4, 300, p);
    for s in SCHEDULES {
        let mut stats = RunningStats::new(p, s.parse().unwrap());
        stats.update_batch(&x[..100 * p], &y[..100]).unwrap();
        let before = stats.clone();
        for (at, huge) in [
            (Some(37 * p + 2), 1e200),
            (None, -1e200),
            (Some(3), -1.5e150),
        ] {
            let (mut xb, mut yb) = (x[100 * p..].to_vec(), y[100..].to_vec());
            let row = match at {
                Some(i) => {
                    xb[i] = huge;
                    i / p
                }
                None => {
                    yb[150] = huge;
                    150
                }
            };
            assert_eq!(
                stats.update_batch(&xb, &yb),
                Err(StatsError::Overflow { row }),
                "{s}"
            );
            assert_eq!(stats, before, "{s}: the statistics changed");
            assert_eq!(
                stats.update(&xb[row * p..(row + 1) * p], yb[row]),
                Err(StatsError::Overflow { row: 0 })
            );
            assert_eq!(stats, before, "{s}: the statistics changed (one row)");
        }
        // The bound itself is accepted, and the moments stay finite.
        let (mut xb, yb) = (x[100 * p..110 * p].to_vec(), y[100..110].to_vec());
        xb[0] = MAX_ABS_VALUE;
        xb[p] = -MAX_ABS_VALUE;
        stats.update_batch(&xb, &yb).unwrap();
        assert!(stats.is_finite() && stats.sxx_at(0, 0).is_finite(), "{s}");
    }
}

/// E[x x^T] is stored as its lower triangle: every schedule, row by row and in batches large
/// enough for the parallel kernel, and a merge, load back bit for bit (so the fold never
/// leaves anything in the upper triangle); the full matrix of older checkpoints still loads.
#[test]
fn serialized_statistics_hold_the_lower_triangle_and_load_back_exactly() {
    let p = 40;
    let (x, y) = rows(9, 3000, p);
    for s in SCHEDULES {
        let sched: AlphaSchedule = s.parse().unwrap();
        let mut st = RunningStats::new(p, sched.clone());
        for i in 0..5 {
            st.update(&x[i * p..(i + 1) * p], y[i]).unwrap();
        }
        st.update_batch(&x[5 * p..], &y[5..]).unwrap();
        if sched == AlphaSchedule::Plain {
            let mut other = RunningStats::new(p, sched.clone());
            other.update_batch(&x[..100 * p], &y[..100]).unwrap();
            st.merge(&other).unwrap();
        }
        let json = serde_json::to_value(&st).unwrap();
        let packed = json["sxx_lower"].as_array().unwrap();
        assert_eq!(packed.len(), p * (p + 1) / 2, "{s}");
        assert!(json.get("sxx").is_none(), "{s}");
        let back: RunningStats = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, st, "{s}");
        // The same statistics in the earlier form: the full column-major matrix.
        let mut full = vec![0.0; p * p];
        let mut at = 0;
        for j in 0..p {
            for i in j..p {
                full[j * p + i] = packed[at].as_f64().unwrap();
                at += 1;
            }
        }
        let mut old = json.clone();
        let obj = old.as_object_mut().unwrap();
        obj.remove("sxx_lower");
        obj.insert("sxx".into(), serde_json::json!(full));
        let back: RunningStats = serde_json::from_value(old).unwrap();
        assert_eq!(back, st, "{s}");
        // A triangle of the wrong length is refused by validate, not unpacked.
        let mut short = json;
        short["sxx_lower"].as_array_mut().unwrap().pop();
        let bad: RunningStats = serde_json::from_value(short).unwrap();
        assert!(bad.validate().is_err(), "{s}");
    }
}

/// The effective sample size reported is Kish's (sum w)^2 / sum w^2 over the rows' final
/// weights, computed here by brute force from the schedule's alphas (row i's weight: alpha_i
/// times the (1 - alpha_j) of every later row): n for plain averages, 0 for an empty stream,
/// under every schedule and batch size; the averages are those weights' average (so they are
/// the weights the statistics use); merges, and stored statistics with or without the figure.
/// The solvers' effective n is what it was (min(n, W'/alpha)): no statistic changes.
#[test]
fn effective_sample_size_is_kish_of_the_rows_weights() {
    let p = 3;
    let (x, y) = rows(11, 700, p);
    let batches = [1usize, 7, 64, 3, 200, 25, 400];
    for schedule in [
        AlphaSchedule::Plain,
        AlphaSchedule::Fixed { alpha: 0.01 },
        AlphaSchedule::Fixed { alpha: 0.3 },
        AlphaSchedule::Floor { alpha_min: 0.05 },
    ] {
        let mut stats = RunningStats::new(p, schedule.clone());
        assert_eq!(stats.effective_sample_size(), 0.0, "{schedule}: empty");
        assert_eq!(stats.drift_status().effective_sample_size, 0.0);
        let mut weights: Vec<f64> = vec![];
        let mut at = 0;
        for &b in &batches {
            let b = b.min(700 - at);
            if b == 0 {
                break;
            }
            // The old solvers' n, before the fold: min(n, ((1 - a) W + a) / a).
            let a = stats.current_alpha();
            let span = ((1.0 - a) * stats.total_weight() + a) / a;
            if stats.n() > 0 {
                assert_eq!(stats.effective_n(), (stats.n() as f64).min(span));
            }
            stats
                .update_batch(&x[at * p..(at + b) * p], &y[at..at + b])
                .unwrap();
            for i in at..at + b {
                let a = schedule.current_alpha(i as u64);
                weights.iter_mut().for_each(|w| *w *= 1.0 - a);
                weights.push(a);
            }
            at += b;
            let (sum, sq) = (
                weights.iter().sum::<f64>(),
                weights.iter().map(|w| w * w).sum::<f64>(),
            );
            let kish = sum * sum / sq;
            let got = stats.effective_sample_size();
            assert!(
                rel(got, kish) < 1e-9,
                "{schedule} at n = {at}: {got} vs brute force {kish}"
            );
            assert_eq!(stats.drift_status().effective_sample_size, got);
            if schedule == AlphaSchedule::Plain {
                assert!(
                    (got - at as f64).abs() < 1e-9 * at as f64,
                    "{got} != n = {at}"
                );
            }
            // The averages are these weights' average.
            let mean0: f64 = (0..at).map(|i| weights[i] * x[i * p]).sum::<f64>() / sum;
            assert!(rel(stats.mean_x()[0], mean0) < 1e-9, "{schedule}");
        }
        if let AlphaSchedule::Fixed { alpha } = schedule {
            // Far beyond 1/alpha rows: (2 - alpha) / alpha, not 1/alpha.
            if alpha > 0.1 {
                let limit = (2.0 - alpha) / alpha;
                assert!(rel(stats.effective_sample_size(), limit) < 1e-9);
            }
        }
        // Stored and loaded: the same figure; stored before it was kept: plain averages get
        // n exactly, the others the figure reported then, min(n, W'/alpha).
        let json = serde_json::to_value(&stats).unwrap();
        let back: RunningStats = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back.effective_sample_size(), stats.effective_sample_size());
        let mut old = json;
        old.as_object_mut().unwrap().remove("sum_sq_shares");
        let old: RunningStats = serde_json::from_value(old).unwrap();
        let a = stats.current_alpha();
        let span = ((1.0 - a) * stats.total_weight() + a) / a;
        let expect = match schedule {
            AlphaSchedule::Plain => 700.0,
            _ => span.min(700.0),
        };
        assert!(
            rel(old.effective_sample_size(), expect) < 1e-9,
            "{schedule}"
        );
        assert!(old.validate().is_ok());
    }
    // Shards of plain averages merged: n1 + n2; classification: the classes' sum, n.
    let fold = |r: std::ops::Range<usize>| {
        let mut s = RunningStats::new(p, AlphaSchedule::Plain);
        s.update_batch(&x[r.start * p..r.end * p], &y[r]).unwrap();
        s
    };
    let mut a = fold(0..300);
    a.merge(&fold(300..650)).unwrap();
    assert!((a.effective_sample_size() - 650.0).abs() < 1e-9);
    let mut c = ClassStats::new(p, AlphaSchedule::Plain);
    let labels: Vec<f64> = (0..700)
        .map(|i| if i % 3 == 0 { 1.0 } else { -1.0 })
        .collect();
    c.update_batch(&x, &labels).unwrap();
    let d = ravel_core::stats::Stats::Classification(c).drift_status();
    assert!((d.effective_sample_size - 700.0).abs() < 1e-9, "{d:?}");
}

/// The adaptive schedule tracks the same Kish size for its warm-up: the two agree.
#[test]
fn effective_sample_size_agrees_with_the_adaptive_schedules_own() {
    let p = 3;
    let (x, y) = rows(12, 900, p);
    let mut stats = RunningStats::new(p, "adaptive".parse().unwrap());
    for at in (0..900).step_by(150) {
        stats
            .update_batch(&x[at * p..(at + 150) * p], &y[at..at + 150])
            .unwrap();
        let AlphaSchedule::Adaptive(a) = stats.schedule() else {
            unreachable!()
        };
        let own = a.kish_size(stats.n());
        assert!(rel(stats.effective_sample_size(), own) < 1e-9, "{own}");
    }
}
