//! Drifting synthetic streams: the scenarios the drift-adaptive schedule is checked on
//! (tests/drift.rs) and reported with (docs/drift.md, examples/drift_report.rs).
//!
//! Rows follow paper 003's design (synthetic.rs): x = c z 1 + u with z ~ N(0, 1),
//! u ~ N(0, I), c = sqrt(rho / (1 - rho)) (pairwise correlation rho), and
//! y = x^T beta(t) + N(0, noise^2), where only the coefficients move with the row index t:
//! - `Drift::None`: beta fixed (003's support j = p/k i + p/k - 1, value `signal`).
//! - `Drift::Abrupt { at }`: from row `at` on, the coefficients are replaced by the same
//!   values on a support moved by half a step (disjoint from the old one when p/k >= 2).
//! - `Drift::Rotation { period }`: beta(t) = cos(2 pi t / period) beta_1 + sin(2 pi t /
//!   period) beta_2 with beta_1, beta_2 the old and new coefficients of `Abrupt`: a slow,
//!   steady drift of constant size.
//! - `Drift::Cosine`: paper 003 section 5.2, eq. (8): beta_ij = a cos(2 pi (i - 100 j) / T) + b
//!   for the j-th true feature (j = 1..k) at time step i, each step `rows_per_step` rows
//!   (003: a = b = 5, T = 1000, 1000 rows per step).

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, StandardNormal};

/// How the true coefficients move with the row index.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Drift {
    /// Fixed coefficients.
    None,
    /// The coefficients jump to a new draw at row `at`.
    Abrupt {
        /// The row of the jump.
        at: u64,
    },
    /// The coefficient vector rotates steadily.
    Rotation {
        /// Rows per full turn.
        period: f64,
    },
    /// Each coefficient moves as a + b cos(2 pi step / period_steps), in steps of rows.
    Cosine {
        /// The level a.
        a: f64,
        /// The amplitude b.
        b: f64,
        /// Steps per period.
        period_steps: f64,
        /// Rows per step.
        rows_per_step: u64,
    },
}

/// A drifting regression stream (regression only).
#[derive(Debug, Clone)]
pub struct DriftingStream {
    /// Features p.
    pub p: usize,
    /// True (nonzero) coefficients k.
    pub k: usize,
    /// Pairwise correlation of the features.
    pub rho: f64,
    /// Noise standard deviation.
    pub noise: f64,
    /// Size of the true coefficients.
    pub signal: f64,
    /// How the coefficients move.
    pub drift: Drift,
    /// Rows to generate.
    pub n: u64,
    rng: StdRng,
    made: u64,
}

impl DriftingStream {
    /// 003's design with correlation 0.5, noise 1 and signal 1.
    pub fn new(p: usize, k: usize, drift: Drift, n: u64, seed: u64) -> DriftingStream {
        assert!(k >= 1 && k <= p, "need 1 <= k <= p");
        DriftingStream {
            p,
            k,
            rho: 0.5,
            noise: 1.0,
            signal: 1.0,
            drift,
            n,
            rng: StdRng::seed_from_u64(seed),
            made: 0,
        }
    }

    fn step(&self) -> usize {
        self.p / self.k
    }
    /// The true features before a change (003: j = p/k i + p/k - 1).
    pub fn support(&self) -> Vec<usize> {
        (0..self.k)
            .map(|i| i * self.step() + self.step() - 1)
            .collect()
    }
    /// The true features after an `Abrupt` change: half a step earlier.
    pub fn new_support(&self) -> Vec<usize> {
        let shift = self.step() / 2;
        self.support().iter().map(|j| j - shift).collect()
    }

    /// The true coefficients of row t (0-based).
    pub fn beta_at(&self, t: u64) -> Vec<f64> {
        let mut b = vec![0.0; self.p];
        let (old, new) = (self.support(), self.new_support());
        let flip = old == new; // p/k = 1: no room to move, the change flips the signs instead
        match self.drift {
            Drift::None => old.iter().for_each(|&j| b[j] = self.signal),
            Drift::Abrupt { at } if t < at => old.iter().for_each(|&j| b[j] = self.signal),
            Drift::Abrupt { .. } => new
                .iter()
                .for_each(|&j| b[j] = if flip { -self.signal } else { self.signal }),
            Drift::Rotation { period } => {
                let th = 2.0 * std::f64::consts::PI * t as f64 / period;
                old.iter().for_each(|&j| b[j] += self.signal * th.cos());
                new.iter()
                    .for_each(|&j| b[j] += if flip { -1.0 } else { 1.0 } * self.signal * th.sin());
            }
            Drift::Cosine {
                a,
                b: offset,
                period_steps,
                rows_per_step,
            } => {
                // 003 eq. (8): time steps i and coefficients j count from 1.
                let i = (t / rows_per_step + 1) as f64;
                for (jj, &j) in old.iter().enumerate() {
                    let phase =
                        2.0 * std::f64::consts::PI * (i - 100.0 * (jj + 1) as f64) / period_steps;
                    b[j] = a * phase.cos() + offset;
                }
            }
        }
        b
    }

    /// Rows generated so far.
    pub fn made(&self) -> u64 {
        self.made
    }

    /// Appends up to `rows` rows (row-major x) to x and y; returns how many (0 at the end).
    pub fn fill(&mut self, rows: usize, x: &mut Vec<f64>, y: &mut Vec<f64>) -> usize {
        let rows = rows.min((self.n - self.made) as usize);
        let c = (self.rho / (1.0 - self.rho)).sqrt();
        let p = self.p;
        let mut beta = self.beta_at(self.made);
        let mut support: Vec<usize> = (0..p).filter(|&j| beta[j] != 0.0).collect();
        for r in 0..rows {
            let t = self.made + r as u64;
            let moving = match self.drift {
                Drift::None => false,
                Drift::Abrupt { at } => t == at,
                Drift::Rotation { .. } => true,
                Drift::Cosine { rows_per_step, .. } => t.is_multiple_of(rows_per_step),
            };
            if moving && r > 0 {
                beta = self.beta_at(t);
                support = (0..p).filter(|&j| beta[j] != 0.0).collect();
            }
            let z: f64 = StandardNormal.sample(&mut self.rng);
            let start = x.len();
            for _ in 0..p {
                let u: f64 = StandardNormal.sample(&mut self.rng);
                x.push(c * z + u);
            }
            let row = &x[start..];
            let dot: f64 = support.iter().map(|&j| row[j] * beta[j]).sum();
            let e: f64 = StandardNormal.sample(&mut self.rng);
            y.push(dot + self.noise * e);
        }
        self.made += rows as u64;
        rows
    }
}
