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

use crate::Task;
use crate::spec::Spec;
use crate::stats::{AlphaSchedule, RunningStats};

/// A synthetic design. As a table, `{ p = 1000, k = 100, n = 3000, seed = 1 }`; as a shorthand,
/// `p=1000,k=100,n=3000,signal=1,noise=1,rho=0.5,seed=1,task=regression` (any subset, the
/// rest default).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SyntheticSpec {
    /// Features p.
    pub p: usize,
    /// True features k.
    pub k: usize,
    /// Rows to generate (None: endless).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n: Option<u64>,
    /// Size of the true coefficients.
    pub signal: f64,
    /// Noise standard deviation.
    pub noise: f64,
    /// Pairwise correlation of the features.
    pub rho: f64,
    /// Random seed.
    pub seed: u64,
    /// Classification: y = sign(x^T beta* + noise) in {+1, -1}.
    pub task: Task,
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
            task: Task::Regression,
        }
    }
}

impl Spec for SyntheticSpec {
    fn check(&self) -> Result<(), String> {
        if self.p == 0 || self.k > self.p {
            return Err(format!(
                "need 0 < p and k <= p, got p = {}, k = {}",
                self.p, self.k
            ));
        }
        if !(0.0..1.0).contains(&self.rho) {
            return Err(format!("rho must lie in [0, 1), got {}", self.rho));
        }
        if !self.noise.is_finite() || self.noise < 0.0 {
            return Err(format!("noise must be finite and >= 0, got {}", self.noise));
        }
        if !self.signal.is_finite() {
            return Err(format!("signal must be finite, got {}", self.signal));
        }
        Ok(())
    }
}

impl FromStr for SyntheticSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse_checked(s)
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
    /// All n rows folded into plain running averages, `batch` rows per `update_batch` (the
    /// statistics tests and benchmarks extract from, as the service would).
    pub fn running_stats(&self, batch: usize) -> RunningStats {
        let mut s = RunningStats::new(self.p, AlphaSchedule::Plain);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        let mut rows = self.rows();
        while rows.fill(batch.max(1), &mut x, &mut y) > 0 {
            s.update_batch(&x, &y)
                .expect("synthetic rows are finite and of width p");
            x.clear();
            y.clear();
        }
        s
    }
    /// A generator of the rows.
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
            y.push(if self.spec.task == Task::Classification {
                if t >= 0.0 { 1.0 } else { -1.0 }
            } else {
                t
            });
        }
        self.made += rows as u64;
        rows
    }
}

/// The design of a demo feature stream (paper 000 section 5), `{ n = 200, p = 500, s = 10,
/// passes = 3, seed = 1 }` or `n=200,p=500,s=10,passes=3,seed=1`: n samples, p features with
/// N(0, 1) values, the true ones every p/s-th (p/s - 1, 2 p/s - 1, ...) with weights of size 1
/// to 2 and alternating signs, y = X w + N(0, 0.1^2) (weights large enough to stand out of the
/// noise). Each column is a function of (seed, j), so a pass regenerates it instead of holding
/// n p values.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FeatureDesign {
    /// Samples n.
    pub n: usize,
    /// Features p.
    pub p: usize,
    /// True features s.
    pub s: usize,
    /// Passes over the columns.
    pub passes: usize,
    /// Random seed.
    pub seed: u64,
}

impl Default for FeatureDesign {
    fn default() -> Self {
        FeatureDesign {
            n: 200,
            p: 500,
            s: 10,
            passes: 3,
            seed: 1,
        }
    }
}

impl Spec for FeatureDesign {
    fn check(&self) -> Result<(), String> {
        if self.n < 2 || self.s == 0 || self.p < self.s || self.passes == 0 {
            return Err(format!(
                "need n >= 2, 1 <= s <= p and passes >= 1; got n = {}, p = {}, s = {}, passes = {}",
                self.n, self.p, self.s, self.passes
            ));
        }
        Ok(())
    }
}

impl FromStr for FeatureDesign {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse_checked(s)
    }
}

impl FeatureDesign {
    /// The true features, increasing.
    pub fn support(&self) -> Vec<usize> {
        let step = self.p / self.s;
        (1..=self.s).map(|k| k * step - 1).collect()
    }
    fn weight(k: usize) -> f64 {
        let size = 1.0 + (k % 5) as f64 / 4.0;
        if k.is_multiple_of(2) { size } else { -size }
    }
    /// Column j's n values.
    pub fn column(&self, j: usize) -> Vec<f64> {
        let mut rng =
            StdRng::seed_from_u64(self.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ j as u64);
        (0..self.n)
            .map(|_| StandardNormal.sample(&mut rng))
            .collect()
    }
    /// The labels y of the n samples.
    pub fn labels(&self) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(self.seed ^ 0x5EED_1AB3_1500_0000);
        let mut y: Vec<f64> = (0..self.n)
            .map(|_| 0.1 * Distribution::<f64>::sample(&StandardNormal, &mut rng))
            .collect();
        for (k, j) in self.support().into_iter().enumerate() {
            let w = Self::weight(k);
            for (yi, xi) in y.iter_mut().zip(self.column(j)) {
                *yi += w * xi;
            }
        }
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn designs_read_the_same_from_shorthand_and_table() {
        let short: SyntheticSpec = "p=20,k=4,n=50,rho=0.2,task=classification".parse().unwrap();
        let table: SyntheticSpec = serde_json::from_str(
            r#"{"p": 20, "k": 4, "n": 50, "rho": 0.2, "task": "classification"}"#,
        )
        .unwrap();
        assert_eq!(short, table);
        assert_eq!(short.task, Task::Classification);
        assert!(serde_json::from_str::<SyntheticSpec>(r#"{"pp": 3}"#).is_err());
        for (text, want) in [
            ("p=3,k=4", "k <= p"),
            ("rho=1", "rho"),
            ("noise=-1", "noise"),
            ("q=1", "unknown field `q`"),
        ] {
            let e = text.parse::<SyntheticSpec>().unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
        let f: FeatureDesign = "n=10,p=20,s=2".parse().unwrap();
        assert_eq!((f.n, f.p, f.s, f.passes, f.seed), (10, 20, 2, 3, 1));
        assert_eq!(f.support(), vec![9, 19]);
        assert!(
            "n=1"
                .parse::<FeatureDesign>()
                .unwrap_err()
                .contains("n >= 2")
        );
        assert!("m=1".parse::<FeatureDesign>().unwrap_err().contains("`m`"));
    }
}
