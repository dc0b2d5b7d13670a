//! Running-average statistics ("RAVEs", paper 003 section 2): the whole state an observation
//! stream keeps, from which every model is extracted.
//!
//! `RunningStats` holds n, the total weight W, E\[x\], E\[y\], E\[x x^T\] (lower triangle),
//! E[x y] and E[y^2]. Rows are folded in one at a time (`update`) or as a mini-batch with one
//! symmetric rank-B update (`update_batch`, the ingest hot path); both give the same numbers
//! under every `AlphaSchedule`. `merge` combines shards exactly. `ClassStats` keeps one
//! `RunningStats` per class for imbalanced classification (003 section 3.6).
//!
//! The moments are accumulated around a shift (s, t) near the data: the state holds
//! E[x - s], E[y - t], E[(x - s)(x - s)^T], E[(x - s)(y - t)] and E[(y - t)^2], and the
//! centred moments the Gram problem needs (`Moments::cov_at`, `cov_xy`, `var_y`) are
//! differences of numbers of the data's own spread. Raw moments lose everything to
//! cancellation once |mean| / sd nears 1e8 (timestamps, prices in cents): Var = E\[x^2\] - E\[x\]^2
//! subtracts two numbers near mean^2 whose rounding error, eps mean^2, is then the size of the
//! variance itself (issue 11). The shift is the first batch's value nearest its mean in each
//! column (a value of the data: a constant column is exactly 0 after the shift, its variance
//! exactly 0), and moves to the mean whenever the mean has moved more than a standard deviation
//! from it (`follow_mean`, issue 58): the fold's rounding, eps E[(x - s)^2], then stays within
//! twice the variance's own in any row order. Streams of at most `EXTENDED_MAX_P` features keep
//! every moment in double-double (`extended`), where neither the shift nor the order shows in
//! the digits a double holds. The kernel subtracts the shift while it packs a block
//! (stats/syrk.rs); shards with different shifts are re-centred algebraically before a merge
//! (`recentre`), which is exact up to rounding.
//!
//! The stored averages are always normalized (they are proper weighted means even for a fixed
//! alpha at the start of a stream): with W_n = (1 - alpha_n) W_{n-1} + alpha_n the row gets
//! the effective weight alpha_n / W_n. For plain averages W = 1 and nothing changes.
//!
//! A drift-adaptive schedule (`adaptive`) watches the rows through a reference model refreshed
//! from these statistics; `update_batch` cuts a batch where the schedule asks for a refresh, so
//! batches still equal row-by-row updates. `drift_status` reports what it sees.
//! Files: `error` (`StatsError`, `MAX_ABS_VALUE`, the batch checks), `running` (`RunningStats`
//! and its accessors), `fold` (how a batch is folded: weights, shift, `Chunk`), `syrk` (the
//! AVX2 + FMA kernel, all the `unsafe` of the statistics) and `portable` (its faer twin),
//! `strided` (`StridedRows`), `merge` (exact shard merges), `extended` (the moments of p <= 16
//! in double-double: their fold, merge and re-centring), `centred` (the stable pairwise
//! merge of plain statistics in centred form, Chan et al.), `windows` (statistics per time
//! bucket with geometric roll-up, merged over any span), `stored` (the serialized form and
//! `validate`), `class` (`ClassStats`), `by_task` (the owning `Stats` enum), `schedule`,
//! `adaptive`, `folds` and `observations`.

pub mod adaptive;
mod by_task;
pub mod centred;
mod class;
mod error;
mod extended;
mod fold;
pub mod folds;
mod low;
mod merge;
mod observations;
mod portable;
mod running;
mod schedule;
mod stored;
mod strided;
#[allow(unsafe_code)] // intrinsics, inline assembly, raw pointers (see its header)
mod syrk;
pub mod windows;

pub use adaptive::{AdaptiveConfig, Cusum};
pub use by_task::Stats;
pub use class::ClassStats;
pub use error::{MAX_ABS_VALUE, StatsError, extend_within_limit, within_limit};
pub use fold::Chunk;
pub use folds::{FoldSet, Folds};
pub use low::EXTENDED_MAX_P;
pub use observations::Observations;
pub use running::{DriftStatus, RunningStats};
pub use schedule::{AlphaSchedule, AlphaSpec};
pub use strided::StridedRows;
pub use windows::{WindowSpec, Windows};

use error::check_batch;

/// Test data: a linear congruential generator of values uniform in [-1, 3), reproducible
/// from `seed` (this module's tests and `folds`').
#[cfg(test)]
pub(crate) fn uniform(seed: u64) -> impl FnMut() -> f64 {
    let mut state = seed;
    move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 1.0
    }
}
