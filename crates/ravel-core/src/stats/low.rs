//! The low-order parts of the moments of small p (`Low`), apart from the double-double
//! arithmetic on them (stats/extended.rs): `RunningStats` and its stored form hold them, and
//! the arithmetic needs `RunningStats`, so the data has a file of its own below both.

use crate::gram::LowMoments;
use serde::{Deserialize, Serialize};

/// Streams of at most this many features keep their moments in double-double.
pub const EXTENDED_MAX_P: usize = 16;

/// The low-order parts of the moments of `RunningStats` (same layout as their high parts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Low {
    /// Of E[x - s].
    pub(super) dx: Vec<f64>,
    /// Of E[y - t].
    pub(super) dy: f64,
    /// Of E[(x - s)(x - s)^T], column-major p x p, lower triangle.
    pub(super) dxx: Vec<f64>,
    /// Of E[(x - s)(y - t)].
    pub(super) dxy: Vec<f64>,
    /// Of E[(y - t)^2].
    pub(super) dyy: f64,
}

impl Low {
    /// Zero lo parts for p features, when p is small enough to keep them.
    pub(super) fn for_p(p: usize) -> Option<Box<Low>> {
        (p <= EXTENDED_MAX_P).then(|| {
            Box::new(Low {
                dx: vec![0.0; p],
                dy: 0.0,
                dxx: vec![0.0; p * p],
                dxy: vec![0.0; p],
                dyy: 0.0,
            })
        })
    }

    /// Whether the lengths fit p and every value is finite (`validate`).
    pub(super) fn check(&self, p: usize) -> Result<(), String> {
        if self.dx.len() != p || self.dxy.len() != p || self.dxx.len() != p * p {
            return Err(format!(
                "the low-order parts do not fit p = {p} (mean_x {}, sxy {}, sxx {} values)",
                self.dx.len(),
                self.dxy.len(),
                self.dxx.len()
            ));
        }
        let all = self.dx.iter().chain(&self.dxx).chain(&self.dxy);
        if !(self.dy.is_finite() && self.dyy.is_finite() && all.clone().all(|v| v.is_finite())) {
            return Err("a low-order part of the moments is not finite".into());
        }
        Ok(())
    }

    /// The view the Gram problem reads.
    pub(super) fn view(&self) -> LowMoments<'_> {
        LowMoments {
            dx: &self.dx,
            dy: self.dy,
            dxx: &self.dxx,
            dxy: &self.dxy,
            dyy: self.dyy,
        }
    }
}
