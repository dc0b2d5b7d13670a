//! `ParamError`: why a request cannot be served, in words that say what to change (the
//! service maps each variant to its HTTP error code).

use super::*;

/// A request that cannot be served; the message says what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamError {
    /// A method name no estimator has.
    #[error("{0}")]
    UnknownMethod(String),
    /// k > p.
    #[error("k = {k} is larger than the number of features p = {p}")]
    KTooLarge {
        /// The k asked for.
        k: usize,
        /// Features p.
        p: usize,
    },
    /// k = 0.
    #[error("k must be at least 1")]
    KZero,
    /// A parameter that must be finite and >= 0 is not.
    #[error("{name} must be a finite number >= 0, got {value}")]
    Negative {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: f64,
    },
    /// A parameter beyond its bound (`limits`).
    #[error("{name} = {value} is out of bounds: {bound}")]
    OutOfBounds {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: String,
        /// The bound, in words.
        bound: String,
    },
    /// Any other invalid combination, in words.
    #[error("{0}")]
    Invalid(String),
    /// A field no parameter of the method claims.
    #[error("{0}")]
    UnknownField(String),
    /// The statistics cannot define a problem (no rows, one class).
    #[error(transparent)]
    Problem(#[from] ProblemError),
}

/// The checks every family's parameters share.
pub(crate) mod check {
    use super::ParamError;

    pub fn nonneg(name: &'static str, v: Option<f64>) -> Result<(), ParamError> {
        match v {
            Some(x) if !(x.is_finite() && x >= 0.0) => Err(ParamError::Negative { name, value: x }),
            _ => Ok(()),
        }
    }
    pub fn k(k: usize, p: usize) -> Result<(), ParamError> {
        match k {
            0 => Err(ParamError::KZero),
            k if k > p => Err(ParamError::KTooLarge { k, p }),
            _ => Ok(()),
        }
    }
    /// `v` within [lo, hi] (a range, said in the message).
    pub fn within<T: PartialOrd + std::fmt::Display + Copy>(
        name: &'static str,
        v: Option<T>,
        lo: T,
        hi: T,
    ) -> Result<(), ParamError> {
        match v {
            Some(x) if !(x >= lo && x <= hi) => Err(ParamError::OutOfBounds {
                name,
                value: x.to_string(),
                bound: format!("it must lie in [{lo}, {hi}]"),
            }),
            _ => Ok(()),
        }
    }
    pub fn tol(v: Option<f64>) -> Result<(), ParamError> {
        within("tol", v, super::limits::MIN_TOL, 1.0)
    }
    pub fn iterations(name: &'static str, v: Option<usize>, max: usize) -> Result<(), ParamError> {
        within(name, v, 1, max)
    }
    /// Neither k nor lambda when the whole path is asked for.
    pub fn no_point(path: bool, k: Option<usize>, lambda: Option<f64>) -> Result<(), ParamError> {
        if path && (k.is_some() || lambda.is_some()) {
            return Err(ParamError::Invalid(
                "the path covers every lambda: drop k and lambda (ask for one model instead)"
                    .into(),
            ));
        }
        Ok(())
    }
    /// A method without a path refuses a path request.
    pub fn has_no_path(path: bool, method: super::Method) -> Result<(), ParamError> {
        if path {
            return Err(ParamError::Invalid(format!(
                "{method} has no path; paths are for lasso, elastic-net, mcp, scad and fw-lasso"
            )));
        }
        Ok(())
    }
}
