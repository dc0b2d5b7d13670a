//! The Gram-form problem every solver works on, built from running averages alone.
//!
//! Regression (003 section 2.2, Prop. 3.1): (1/2n)||y - b0 - X b||^2 equals
//! 1/2 b^T Q b - c^T b + yy/2 with Q = S_xx - mu_x mu_x^T, c = S_xy - mu_y mu_x and
//! yy = S_yy - mu_y^2, once the intercept is profiled out. Classification (003 eqs. 4-5):
//! the class-weighted loss w_p E_p[(x b + b0 - 1)^2]/2 + w_n E_n[(x b + b0 + 1)^2]/2 is also a
//! quadratic in (b, b0); profiling b0 out gives the same form. Standardization divides column j
//! by sigma_j at extraction; constant columns are dropped from the problem, never divided by 0.
//!
//! Without an intercept (a model through the origin, R's `y ~ x - 1`, scikit-learn's
//! `fit_intercept=False`) nothing is profiled out: Q = E[x x^T], c = E[x y] and yy = E[y^2],
//! the raw moments (`Problem::through_origin`); only all-zero columns are dropped (a constant
//! column is a regressor there), and the loss's yy makes R^2 the uncentred one.
//!
//! This module sits below both `stats` and `solve`: it reads the moments through the small
//! [`Moments`] trait, so the statistics can use the Gram form (the drift detector's reference
//! model) without a dependency circle. `linear` holds the subset least-squares solve that the
//! solvers, the feature selection and the drift detector share.

pub mod extended;
pub mod linear;

pub use crate::model::Duplicate;
pub use extended::Extended;
pub use linear::{LsSolution, largest_eigenvalue, solve_subset};

/// The low-order parts of moments kept in double-double (`Moments::low`): each moment is the
/// double-double (its double, this part), in the layout of the doubles (`dxx` column-major
/// p x p, lower triangle).
#[derive(Debug, Clone, Copy)]
pub struct LowMoments<'a> {
    /// Of E[x - s].
    pub dx: &'a [f64],
    /// Of E[y - t].
    pub dy: f64,
    /// Of E[(x - s)(x - s)^T].
    pub dxx: &'a [f64],
    /// Of E[(x - s)(y - t)].
    pub dxy: &'a [f64],
    /// Of E[(y - t)^2].
    pub dyy: f64,
}

/// The running averages a Gram problem is built from (`stats::RunningStats` implements it),
/// held around a shift (s, t) near the data: raw moments of data far from 0 lose the variance
/// to cancellation (stats/mod.rs), so the required methods are the shifted moments and every
/// consumer reads the centred ones (`cov_at`, `cov_xy`, `var_y`), differences of numbers of
/// the data's own spread. Raw moments are the case s = 0, t = 0.
pub trait Moments {
    /// Rows seen.
    fn n(&self) -> u64;
    /// Number of features p.
    fn p(&self) -> usize;
    /// The shift s of x.
    fn shift_x(&self) -> &[f64];
    /// The shift t of y.
    fn shift_y(&self) -> f64;
    /// E[x - s].
    fn dx(&self) -> &[f64];
    /// E[y - t].
    fn dy(&self) -> f64;
    /// E[(x_i - s_i)(x_j - s_j)].
    fn dxx_at(&self, i: usize, j: usize) -> f64;
    /// E[(x - s)(y - t)].
    fn dxy(&self) -> &[f64];
    /// E[(y - t)^2].
    fn dyy(&self) -> f64;

    /// The low-order parts of the moments, when they are kept in double-double (statistics
    /// of few features, stats/extended.rs); None: the doubles are the moments.
    fn low(&self) -> Option<LowMoments<'_>> {
        None
    }

    /// The sample size the information criteria and standard errors use: the rows, or fewer
    /// when a forgetting schedule weights old rows down (`RunningStats` overrides it).
    fn effective_n(&self) -> f64 {
        self.n() as f64
    }
    /// Kish's effective sample size (sum w)^2 / sum w^2 of the rows' weights: the sample size
    /// of the standard errors and the inference summary (the rows for plain averages).
    fn kish_n(&self) -> f64 {
        self.n() as f64
    }
    /// E\[x\].
    fn mean_x(&self) -> Vec<f64> {
        self.shift_x()
            .iter()
            .zip(self.dx())
            .map(|(s, d)| s + d)
            .collect()
    }
    /// E\[y\].
    fn mean_y(&self) -> f64 {
        self.shift_y() + self.dy()
    }
    /// Cov(x_i, x_j) = E[(x_i - s_i)(x_j - s_j)] - E[x_i - s_i] E[x_j - s_j].
    fn cov_at(&self, i: usize, j: usize) -> f64 {
        let d = self.dx();
        self.dxx_at(i, j) - d[i] * d[j]
    }
    /// Cov(x_j, y).
    fn cov_xy(&self, j: usize) -> f64 {
        self.dxy()[j] - self.dx()[j] * self.dy()
    }
    /// Var(y) (clamped at 0).
    fn var_y(&self) -> f64 {
        (self.dyy() - self.dy() * self.dy()).max(0.0)
    }
    /// Var(x_j), clamped at 0.
    fn variances(&self) -> Vec<f64> {
        (0..self.p()).map(|j| self.cov_at(j, j).max(0.0)).collect()
    }
    /// Whether column j is constant: its variance is within rounding of 0. The variance is
    /// E[(x - s)^2] - E[x - s]^2, whose rounding error is a few eps times E[(x - s)^2] (the
    /// shifted scale, not E[x^2]): below `CONSTANT_TOL` times that it is rounding.
    fn is_constant(&self, j: usize) -> bool {
        self.cov_at(j, j) <= CONSTANT_TOL * self.dxx_at(j, j).max(f64::MIN_POSITIVE)
    }
}

/// 1/2 b^T q b - c^T b + yy/2 over the m active (non-constant) columns, in solver units.
#[derive(Debug, Clone)]
pub struct Gram {
    /// Active columns m.
    pub m: usize,
    /// Full symmetric m x m, column-major.
    pub q: Vec<f64>,
    /// The linear term c (length m): the covariances of x with y in solver units.
    pub c: Vec<f64>,
    /// The constant: Var(y) in solver units.
    pub yy: f64,
}

impl Gram {
    /// Column j of q.
    #[inline]
    pub fn col(&self, j: usize) -> &[f64] {
        &self.q[j * self.m..(j + 1) * self.m]
    }
    /// q_ij.
    #[inline]
    pub fn at(&self, i: usize, j: usize) -> f64 {
        self.q[i + j * self.m]
    }
    /// The loss 1/2 b^T q b - c^T b + yy/2 for a dense b; O(s^2) in the nonzeros.
    pub fn loss(&self, b: &[f64]) -> f64 {
        let support: Vec<usize> = (0..self.m).filter(|&j| b[j] != 0.0).collect();
        let mut quad = 0.0;
        let mut lin = 0.0;
        for &j in &support {
            let col = self.col(j);
            let qb: f64 = support.iter().map(|&k| col[k] * b[k]).sum();
            quad += b[j] * qb;
            lin += self.c[j] * b[j];
        }
        0.5 * quad - lin + 0.5 * self.yy
    }
    /// Gradient q b - c.
    pub fn gradient(&self, b: &[f64]) -> Vec<f64> {
        let mut g: Vec<f64> = self.c.iter().map(|v| -v).collect();
        for (j, &bj) in b.iter().enumerate() {
            if bj != 0.0 {
                for (gi, qij) in g.iter_mut().zip(self.col(j)) {
                    *gi += qij * bj;
                }
            }
        }
        g
    }
}

/// A Gram problem plus what is needed to map a solution back to the user's features.
#[derive(Debug, Clone)]
pub struct Problem {
    /// The quadratic over the active columns.
    pub gram: Gram,
    /// Original index of each active column.
    pub active: Vec<usize>,
    /// sigma_j per active column (1 when not standardized).
    pub scale: Vec<f64>,
    /// Number of features of the stream (active or not).
    pub p: usize,
    /// Rows seen.
    pub n: u64,
    /// The sample size of the criteria (`Moments::effective_n`).
    pub n_eff: f64,
    /// The sample size of the standard errors and the inference summary (`Moments::kish_n`).
    pub n_kish: f64,
    /// The class-weighted classification problem (no standard errors there).
    pub classification: bool,
    /// intercept = intercept_base - sum_j intercept_slope[j] * beta_j (original indices).
    intercept_base: f64,
    intercept_slope: Vec<f64>,
    /// Whether the columns were scaled to unit variance.
    pub standardized: bool,
    /// Whether the model has an intercept (false: the raw-moment problem through the origin,
    /// `Problem::through_origin`; the intercept is 0 and takes no degree of freedom).
    pub intercept: bool,
    /// The population sd of y when the problem is a standardized regression (elastic net's
    /// l2 term is taken in units of it, as glmnet standardizes y: `Penalty::for_problem`),
    /// else 1.
    pub y_scale: f64,
    /// The same problem in double-double, when the moments were kept so (regression of few
    /// features): least squares, its residuals and standard errors are computed from it.
    pub extended: Option<Box<Extended>>,
}

/// Why a problem could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProblemError {
    /// No row was folded yet.
    #[error("the stream has no observations yet")]
    Empty,
    /// A classification stream with one class only.
    #[error("classification needs both classes; positives: {pos}, negatives: {neg}")]
    OneClass {
        /// Rows of the positive class.
        pos: u64,
        /// Rows of the negative class.
        neg: u64,
    },
}

/// Below this variance relative to the shifted second moment a column counts as constant: a
/// constant column's variance is exactly 0 when the shift is one of its values (stats/mod.rs)
/// and otherwise rounding, a few eps (2.2e-16) per row folded at worst; a column that varies
/// has a ratio near 1 when the shift is near its mean. 1e-10 is far from both.
const CONSTANT_TOL: f64 = 1e-10;

/// Below this 1 - correlation^2 two columns count as duplicates (`Problem::without_duplicates`):
/// the same column twice gives 1 - rho^2 of a few eps (rounding of the moments); a pair the data
/// can tell apart in double precision at all sits far above (a least-squares solve on the pair
/// already counts 1e-10 as singular, `linear::RCOND_TOL`).
pub const DUPLICATE_TOL: f64 = 1e-12;

impl Problem {
    /// The regression problem of a stream.
    pub fn regression(stats: &impl Moments, standardize: bool) -> Result<Problem, ProblemError> {
        if stats.n() == 0 {
            return Err(ProblemError::Empty);
        }
        let p = stats.p();
        let mx = stats.mean_x();
        let my = stats.mean_y();
        let active: Vec<usize> = (0..p).filter(|&j| !stats.is_constant(j)).collect();
        let scale: Vec<f64> = active
            .iter()
            .map(|&j| {
                if standardize {
                    stats.cov_at(j, j).sqrt()
                } else {
                    1.0
                }
            })
            .collect();
        let m = active.len();
        let mut q = vec![0.0; m * m];
        for (b, &jb) in active.iter().enumerate() {
            for (a, &ja) in active.iter().enumerate().skip(b) {
                let v = stats.cov_at(ja, jb) / (scale[a] * scale[b]);
                q[a + b * m] = v;
                q[b + a * m] = v;
            }
        }
        let c = active
            .iter()
            .zip(&scale)
            .map(|(&j, s)| stats.cov_xy(j) / s)
            .collect();
        let yy = stats.var_y();
        let extended = stats
            .low()
            .map(|low| Box::new(Extended::of(stats, low, &active, &scale, false)));
        Ok(Problem {
            extended,
            gram: Gram { m, q, c, yy },
            active,
            scale,
            p,
            n: stats.n(),
            n_eff: stats.effective_n(),
            n_kish: stats.kish_n(),
            classification: false,
            intercept_base: my,
            intercept_slope: mx,
            standardized: standardize,
            intercept: true,
            y_scale: if standardize && yy > 0.0 {
                yy.sqrt()
            } else {
                1.0
            },
        })
    }

    /// The class-weighted classification problem (003 eqs. 4-5) with the intercept profiled
    /// out. Standardization uses the negatives' standard deviation, as the paper does
    /// (falling back to the pooled one for a column that is constant among negatives).
    pub fn classification(
        pos: &impl Moments,
        neg: &impl Moments,
        w_pos: f64,
        w_neg: f64,
        standardize: bool,
    ) -> Result<Problem, ProblemError> {
        let (sp, sn) = (pos, neg);
        if sp.n() == 0 || sn.n() == 0 {
            return Err(ProblemError::OneClass {
                pos: sp.n(),
                neg: sn.n(),
            });
        }
        let p = sp.p();
        let wt = w_pos + w_neg;
        let (mp, mn) = (sp.mean_x(), sn.mean_x());
        let mbar: Vec<f64> = (0..p).map(|j| w_pos * mp[j] + w_neg * mn[j]).collect();
        // A = w_p S^p + w_n S^n and Q = A - mbar mbar^T / W, in centred form:
        // Q = w_p C^p + w_n C^n + (w_p w_n / W) dm dm^T with dm = mu^p - mu^n, taken from the
        // shifts and the shifted means so that no large raw moments are subtracted.
        let dm: Vec<f64> = (0..p)
            .map(|j| (sp.shift_x()[j] - sn.shift_x()[j]) + (sp.dx()[j] - sn.dx()[j]))
            .collect();
        let kappa = w_pos * w_neg / wt;
        let qfull = |a: usize, b: usize| {
            w_pos * sp.cov_at(a, b) + w_neg * sn.cov_at(a, b) + kappa * dm[a] * dm[b]
        };
        let diag: Vec<f64> = (0..p).map(|j| qfull(j, j)).collect();
        // Rounding-aware constancy (as `Moments::is_constant`): each term's rounding is a few
        // eps of its shifted second moment.
        let scale_of = |j: usize| {
            (w_pos * sp.dxx_at(j, j) + w_neg * sn.dxx_at(j, j) + kappa * dm[j] * dm[j])
                .max(f64::MIN_POSITIVE)
        };
        let active: Vec<usize> = (0..p)
            .filter(|&j| diag[j] > CONSTANT_TOL * scale_of(j))
            .collect();
        let var_neg = sn.variances();
        let scale: Vec<f64> = active
            .iter()
            .map(|&j| {
                if !standardize {
                    1.0
                } else if !sn.is_constant(j) {
                    var_neg[j].sqrt()
                } else {
                    (diag[j] / wt).sqrt()
                }
            })
            .collect();
        let m = active.len();
        let mut q = vec![0.0; m * m];
        for (b, &jb) in active.iter().enumerate() {
            for (a, &ja) in active.iter().enumerate().skip(b) {
                let v = qfull(ja, jb) / (scale[a] * scale[b]);
                q[a + b * m] = v;
                q[b + a * m] = v;
            }
        }
        let dw = w_pos - w_neg;
        // w_p mu^p - w_n mu^n - mbar (w_p - w_n) / W = 2 (w_p w_n / W) dm.
        let c = active
            .iter()
            .zip(&scale)
            .map(|(&j, s)| 2.0 * kappa * dm[j] / s)
            .collect();
        let yy = wt - dw * dw / wt;
        Ok(Problem {
            gram: Gram { m, q, c, yy },
            active,
            scale,
            p,
            n: sp.n() + sn.n(),
            n_eff: sp.effective_n() + sn.effective_n(),
            n_kish: sp.kish_n() + sn.kish_n(),
            classification: true,
            intercept_base: dw / wt,
            intercept_slope: mbar.iter().map(|v| v / wt).collect(),
            standardized: standardize,
            intercept: true,
            // Labels are +1/-1 already; glmnet's binomial family does not rescale them either.
            y_scale: 1.0,
            extended: None,
        })
    }

    /// The regression problem of a model without an intercept (module header): Q = E[x x^T],
    /// c = E[x y], yy = E[y^2], each the centred moment plus the product of the means. Only
    /// all-zero columns are left out. Standardized columns are divided by their standard
    /// deviation, as glmnet does with `intercept = FALSE`, and a constant (nonzero) column by
    /// its root mean square |value|.
    pub fn through_origin(
        stats: &impl Moments,
        standardize: bool,
    ) -> Result<Problem, ProblemError> {
        if stats.n() == 0 {
            return Err(ProblemError::Empty);
        }
        let p = stats.p();
        let mx = stats.mean_x();
        let my = stats.mean_y();
        // `cov_at` is read with its first index the larger (the lower triangle).
        let raw = |i: usize, j: usize| stats.cov_at(i.max(j), i.min(j)) + mx[i] * mx[j];
        let active: Vec<usize> = (0..p).filter(|&j| raw(j, j) > 0.0).collect();
        let scale: Vec<f64> = active
            .iter()
            .map(|&j| match (standardize, stats.is_constant(j)) {
                (false, _) => 1.0,
                (true, false) => stats.cov_at(j, j).sqrt(),
                (true, true) => raw(j, j).sqrt(),
            })
            .collect();
        let m = active.len();
        let mut q = vec![0.0; m * m];
        for (b, &jb) in active.iter().enumerate() {
            for (a, &ja) in active.iter().enumerate().skip(b) {
                let v = raw(ja, jb) / (scale[a] * scale[b]);
                q[a + b * m] = v;
                q[b + a * m] = v;
            }
        }
        let c = active
            .iter()
            .zip(&scale)
            .map(|(&j, s)| (stats.cov_xy(j) + mx[j] * my) / s)
            .collect();
        let var_y = stats.var_y();
        let extended = stats
            .low()
            .map(|low| Box::new(Extended::of(stats, low, &active, &scale, true)));
        Ok(Problem {
            extended,
            gram: Gram {
                m,
                q,
                c,
                yy: var_y + my * my,
            },
            active,
            scale,
            p,
            n: stats.n(),
            n_eff: stats.effective_n(),
            n_kish: stats.kish_n(),
            classification: false,
            intercept_base: 0.0,
            intercept_slope: vec![0.0; p],
            standardized: standardize,
            intercept: false,
            y_scale: if standardize && var_y > 0.0 {
                var_y.sqrt()
            } else {
                1.0
            },
        })
    }

    /// The class-weighted classification problem without an intercept: the loss
    /// w_p E_p[(x b - 1)^2]/2 + w_n E_n[(x b + 1)^2]/2 itself, Q = w_p E_p[x x^T] +
    /// `w_n E_n[x x^T]`, `c = w_p E_p[x] - w_n E_n[x]`, `yy = w_p + w_n`. Standardization as
    /// `classification` (the negatives' standard deviation), a column constant in both classes
    /// by its root mean square.
    pub fn classification_through_origin(
        pos: &impl Moments,
        neg: &impl Moments,
        w_pos: f64,
        w_neg: f64,
        standardize: bool,
    ) -> Result<Problem, ProblemError> {
        let (sp, sn) = (pos, neg);
        if sp.n() == 0 || sn.n() == 0 {
            return Err(ProblemError::OneClass {
                pos: sp.n(),
                neg: sn.n(),
            });
        }
        let p = sp.p();
        let wt = w_pos + w_neg;
        let (mp, mn) = (sp.mean_x(), sn.mean_x());
        // E[x_a x_b] of each class, `cov_at` read with its first index the larger.
        let qfull = |a: usize, b: usize| {
            let (hi, lo) = (a.max(b), a.min(b));
            w_pos * (sp.cov_at(hi, lo) + mp[a] * mp[b])
                + w_neg * (sn.cov_at(hi, lo) + mn[a] * mn[b])
        };
        let active: Vec<usize> = (0..p).filter(|&j| qfull(j, j) > 0.0).collect();
        let scale: Vec<f64> = active
            .iter()
            .map(|&j| {
                if !standardize {
                    1.0
                } else if !sn.is_constant(j) {
                    sn.cov_at(j, j).max(0.0).sqrt()
                } else {
                    (qfull(j, j) / wt).sqrt()
                }
            })
            .collect();
        let m = active.len();
        let mut q = vec![0.0; m * m];
        for (b, &jb) in active.iter().enumerate() {
            for (a, &ja) in active.iter().enumerate().skip(b) {
                let v = qfull(ja, jb) / (scale[a] * scale[b]);
                q[a + b * m] = v;
                q[b + a * m] = v;
            }
        }
        let c = active
            .iter()
            .zip(&scale)
            .map(|(&j, s)| (w_pos * mp[j] - w_neg * mn[j]) / s)
            .collect();
        Ok(Problem {
            gram: Gram { m, q, c, yy: wt },
            active,
            scale,
            p,
            n: sp.n() + sn.n(),
            n_eff: sp.effective_n() + sn.effective_n(),
            n_kish: sp.kish_n() + sn.kish_n(),
            classification: true,
            intercept_base: 0.0,
            intercept_slope: vec![0.0; p],
            standardized: standardize,
            intercept: false,
            y_scale: 1.0,
            extended: None,
        })
    }

    /// The problem without duplicate columns, and which were left out (original indices).
    /// Columns a and b are duplicates when Q_ab^2 >= (1 - `DUPLICATE_TOL`) Q_aa Q_bb: their
    /// correlation is +-1 to rounding, so in solver units one is the other times a constant,
    /// x_b = t x_a. The group keeps its column with the largest Q_aa (the lowest index among
    /// equals: with standardized columns, the first): any model that puts weight on the others
    /// fits exactly as well with that weight moved to it (w_a + t w_b, |t| <= 1), and the move
    /// never raises an l1, MCP or SCAD penalty or a count of nonzeros. O(m^2).
    pub fn without_duplicates(&self) -> (Problem, Vec<Duplicate>) {
        let g = &self.gram;
        let m = g.m;
        let mut group: Vec<Option<usize>> = vec![None; m];
        let mut found = false;
        for a in 0..m {
            let qa = g.at(a, a);
            if group[a].is_some() || qa <= 0.0 {
                continue;
            }
            let col = g.col(a);
            for b in a + 1..m {
                let qb = g.at(b, b);
                if group[b].is_none()
                    && qb > 0.0
                    && col[b] * col[b] >= (1.0 - DUPLICATE_TOL) * qa * qb
                {
                    group[b] = Some(a);
                    group[a] = Some(a);
                    found = true;
                }
            }
        }
        if !found {
            return (self.clone(), Vec::new());
        }
        // The representative of each group: the largest diagonal, then the lowest index.
        let mut keeper: Vec<usize> = (0..m).collect();
        for (b, of) in group.iter().enumerate() {
            if let Some(a) = *of {
                let k = keeper[a];
                if g.at(b, b) > g.at(k, k) {
                    keeper[a] = b;
                }
            }
        }
        let mut kept = Vec::with_capacity(m);
        let mut dropped = Vec::new();
        for (b, of) in group.iter().enumerate() {
            let rep = of.map_or(b, |a| keeper[a]);
            if rep == b {
                kept.push(b);
            } else {
                dropped.push(Duplicate {
                    index: self.active[b],
                    of: self.active[rep],
                });
            }
        }
        let k = kept.len();
        let mut q = vec![0.0; k * k];
        for (j, &b) in kept.iter().enumerate() {
            for (i, &a) in kept.iter().enumerate() {
                q[i + j * k] = g.at(a, b);
            }
        }
        let reduced = Problem {
            gram: Gram {
                m: k,
                q,
                c: kept.iter().map(|&a| g.c[a]).collect(),
                yy: g.yy,
            },
            active: kept.iter().map(|&a| self.active[a]).collect(),
            scale: kept.iter().map(|&a| self.scale[a]).collect(),
            extended: self.extended.as_ref().map(|e| Box::new(e.restrict(&kept))),
            ..self.clone()
        };
        dropped.sort_by_key(|d| d.index);
        (reduced, dropped)
    }

    /// E\[x\] of every feature (regression; the weighted class mean for classification): how
    /// the intercept moves with the coefficients (zeros without an intercept).
    pub fn mean_x(&self) -> &[f64] {
        &self.intercept_slope
    }

    /// Coefficients in original units (length p) and the intercept, from a solution in
    /// solver units (length m).
    pub fn to_original(&self, b: &[f64]) -> (Vec<f64>, f64) {
        let mut beta = vec![0.0; self.p];
        for (a, &j) in self.active.iter().enumerate() {
            beta[j] = b[a] / self.scale[a];
        }
        let intercept = match &self.extended {
            Some(ext) => ext.intercept(&self.active.iter().map(|&j| beta[j]).collect::<Vec<_>>()),
            None => {
                self.intercept_base
                    - beta
                        .iter()
                        .zip(&self.intercept_slope)
                        .map(|(b, m)| b * m)
                        .sum::<f64>()
            }
        };
        (beta, intercept)
    }

    /// The residual mean square RSS / n of a solution `b` in solver units: from the
    /// double-double problem when there is one (no cancellation when R^2 is near 1), else
    /// 2 x the Gram loss; clamped at 0.
    pub fn mse(&self, b: &[f64]) -> f64 {
        match &self.extended {
            Some(ext) => ext.mse(b),
            None => (2.0 * self.gram.loss(b)).max(0.0),
        }
    }

    /// Whether a residual mean square `mse` is zero to working precision: an exact fit, whose
    /// standard errors are 0 (not rounding noise). In double-double, below (64 eps)^2 E[y^2]
    /// (what rounding y to doubles leaves: NIST's Wampler1 and Wampler2); in doubles, below
    /// 1e-13 Var(y), where RSS = Syy - b'Sxy holds no correct digit any more.
    pub fn is_exact_fit(&self, mse: f64) -> bool {
        if self.classification || self.gram.yy.is_nan() || self.gram.yy <= 0.0 {
            return false;
        }
        let tol = if self.extended.is_some() {
            let eps = 64.0 * f64::EPSILON;
            eps * eps * (self.gram.yy + self.intercept_base * self.intercept_base)
        } else {
            1e-13 * self.gram.yy
        };
        mse <= tol
    }
}
