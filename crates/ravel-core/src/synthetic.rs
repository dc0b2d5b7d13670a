//! Synthetic observation streams: the design of paper 003's simulations (ALGORITHMS.md
//! section 2), used by the demo producer, `ravel produce --synthetic`, tests and benchmarks.
//!
//! Rows x = c z 1 + u with z ~ N(0, 1), u ~ N(0, I) and c = sqrt(rho / (1 - rho)), so the
//! pairwise correlation is rho; rho = 0.5 is 003's x = z 1 + u exactly. True
//! coefficients `signal` at j = p/k * i (i = 0..k, 003's j = 10 i for p = 1000, k = 100) and
//! y = x^T beta* + noise N(0, noise^2).

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, StandardNormal};
use std::str::FromStr;

/// A synthetic design: `p=1000,k=100,n=3000,signal=1,noise=1,rho=0.5,seed=1` (any subset).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SyntheticSpec {
    pub p: usize,
    pub k: usize,
    /// Rows to generate (None: endless).
    pub n: Option<u64>,
    pub signal: f64,
    pub noise: f64,
    pub rho: f64,
    pub seed: u64,
    /// Classification: y = sign(x^T beta* + noise) in {+1, -1}.
    pub classification: bool,
}

impl Default for SyntheticSpec {
    fn default() -> Self {
        SyntheticSpec {
            p: 100,
            k: 10,
            n: None,
            signal: 1.0,
            noise: 1.0,
            rho: 0.5,
            seed: 1,
            classification: false,
        }
    }
}

impl FromStr for SyntheticSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut spec = SyntheticSpec::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, val) = part.split_once('=').ok_or_else(|| {
                format!("'{part}' is not key=value (keys: p, k, n, signal, noise, rho, seed, task)")
            })?;
            let bad = || format!("{key}: '{val}' is not a valid value");
            match key {
                "p" => spec.p = val.parse().map_err(|_| bad())?,
                "k" => spec.k = val.parse().map_err(|_| bad())?,
                "n" => spec.n = Some(val.parse().map_err(|_| bad())?),
                "signal" => spec.signal = val.parse().map_err(|_| bad())?,
                "noise" => spec.noise = val.parse().map_err(|_| bad())?,
                "rho" => spec.rho = val.parse().map_err(|_| bad())?,
                "seed" => spec.seed = val.parse().map_err(|_| bad())?,
                "task" => {
                    spec.classification = match val {
                        "classification" => true,
                        "regression" => false,
                        _ => return Err(bad()),
                    }
                }
                _ => {
                    return Err(format!(
                        "unknown key '{key}' (keys: p, k, n, signal, noise, rho, seed, task)"
                    ));
                }
            }
        }
        if spec.p == 0 || spec.k > spec.p {
            return Err(format!(
                "need 0 < p and k <= p, got p = {}, k = {}",
                spec.p, spec.k
            ));
        }
        if !(0.0..1.0).contains(&spec.rho)
            || !spec.noise.is_finite()
            || spec.noise < 0.0
            || !spec.signal.is_finite()
        {
            return Err("rho must lie in [0, 1), noise >= 0 and signal finite".into());
        }
        Ok(spec)
    }
}

impl SyntheticSpec {
    /// The true coefficient vector.
    pub fn beta(&self) -> Vec<f64> {
        let mut b = vec![0.0; self.p];
        for j in self.support() {
            b[j] = self.signal;
        }
        b
    }
    /// Indices of the true features.
    pub fn support(&self) -> Vec<usize> {
        if self.k == 0 {
            return vec![];
        }
        let step = self.p / self.k;
        (0..self.k).map(|i| i * step + step - 1).collect()
    }
    pub fn rows(&self) -> SyntheticRows {
        SyntheticRows {
            rng: StdRng::seed_from_u64(self.seed),
            beta: self.beta(),
            spec: self.clone(),
            made: 0,
        }
    }
}

/// Iterator-like generator of rows.
pub struct SyntheticRows {
    rng: StdRng,
    beta: Vec<f64>,
    spec: SyntheticSpec,
    made: u64,
}

impl SyntheticRows {
    /// Appends up to `rows` rows (row-major) to x and y; returns how many (0 when n is reached).
    pub fn fill(&mut self, rows: usize, x: &mut Vec<f64>, y: &mut Vec<f64>) -> usize {
        let rows = match self.spec.n {
            Some(n) => rows.min((n - self.made) as usize),
            None => rows,
        };
        let (a, b) = ((self.spec.rho / (1.0 - self.spec.rho)).sqrt(), 1.0);
        for _ in 0..rows {
            let z: f64 = StandardNormal.sample(&mut self.rng);
            let mut dot = 0.0;
            for j in 0..self.spec.p {
                let u: f64 = StandardNormal.sample(&mut self.rng);
                let v = a * z + b * u;
                dot += v * self.beta[j];
                x.push(v);
            }
            let e: f64 = StandardNormal.sample(&mut self.rng);
            let t = dot + self.spec.noise * e;
            y.push(if self.spec.classification {
                if t >= 0.0 { 1.0 } else { -1.0 }
            } else {
                t
            });
        }
        self.made += rows as u64;
        rows
    }
}
