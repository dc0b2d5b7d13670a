#![deny(missing_docs)]
// `unsafe` only where it is needed: the AVX2 + FMA kernel (`stats::syrk`) and the NPY memory
// map (`data::npy`) allow it, and each of their unsafe blocks says why it holds.
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]
//! ravel-core: the mathematics of ravel, sparse linear models learned from streams.
//!
//! Rows (x, y) are folded into running-average statistics; any model (OLS, ridge, OLSth, FSA,
//! Lasso, elastic net, MCP, SCAD, Frank-Wolfe Lasso, IHT / HTP with an optimality certificate,
//! k-support norm; regression or class-weighted classification) is extracted
//! from those statistics alone, at any sparsity k or penalty lambda, and equals the offline
//! method on all rows (paper 003). Feature streams keep the best s of a stream of columns
//! (paper 000). This crate knows nothing of Kafka, HTTP or the command line: its dependencies
//! hold that boundary (`cargo tree -p ravel-lm`).
//! Papers are cited by short name ("003 eq. 6"); docs/references.md in the repository
//! lists them (authors, title, venue, year).
//!
//! # Layout
//! Modules are listed bottom-up; each imports only modules above it in this list, and no
//! files or folders import each other in a circle (checked by the workspace's
//! tests/layout.rs, which reads this list).
//! - [`linalg`]: the dense vector kernels (dot, axpy).
//! - [`dd`]: double-double arithmetic (about 32 digits from error-free sums and products), for
//!   the statistics and the least-squares solve of small p.
//! - [`task`]: `Task`, regression or classification.
//! - [`memory`]: the bytes the statistics, an extraction, the rows read or a selection need,
//!   from dimensions alone (files and configured streams are refused before allocating), and
//!   `ByteSize`, the `4GiB` amounts limits are given in.
//! - [`spec`]: settings given as a table or a `key=value,...` shorthand, one parser for both.
//! - [`fields`]: named fields to feature columns: numeric, categorical (one-hot on declared
//!   levels after a reference level, plus `other`) and hashed (FeatureHasher's MurmurHash3)
//!   blocks, and the missing-value policies (`reject`, `skip_row`, `indicator`).
//! - [`model`]: `Model`, `Coefficient`, `Diagnostics`, `PathModel`: what an extraction returns
//!   (coefficients and predictions also as ndarray arrays: `coef`, `predict_rows`);
//!   `Method`, the names of the methods a model can come from, generated from the one list of
//!   names and aliases (`estimator_names!`) that `solve`'s `Estimator` is generated from too.
//! - [`gram`]: the Gram-form problem (`Problem`, `Gram`) built from any [`gram::Moments`],
//!   and the subset least-squares solve every method shares.
//! - [`stats`]: `RunningStats`, `ClassStats`, the owning `Stats` enum, `AlphaSchedule`: the
//!   state of an observation stream, batch updates (symmetric rank-B) and exact shard merges;
//!   rows in as slices or ndarray views (`Observations`: no copy in standard layout);
//!   `stats::adaptive`, the drift-adaptive schedule (CUSUM on test-then-train errors);
//!   `stats::folds`, K cross-validation folds weighted as the stream weighs its rows. One
//!   concern per file: `error`, `running`, `fold` (with the kernel `syrk` and its `portable`
//!   twin), `strided`, `merge`, `stored`, `class`, `by_task` (the `Stats` enum), `centred`
//!   (the stable pairwise merge of plain statistics in centred form, Chan et al.) and
//!   `windows` (statistics per time bucket, rolled up geometrically, merged over any span;
//!   `spec`: the bucket width, retention and roll-up ladder; `stored`: buckets in a checkpoint).
//! - [`solve`]: typed estimators (`Estimator`, one variant per method; `Request` adds how the
//!   problem is built), checked once into `Checked` before `extract` / `model_from_stats`
//!   return a `Model`; one solver family per file. `solve::select` chooses along a path
//!   (AIC / BIC / EBIC from the exact RSS, K-fold CV from fold statistics; `select::kpath`
//!   the fast k-paths and refits on one updated factor), `solve::inference`
//!   gives standard errors of least-squares models; `solve::penalized` is split into `penalty`,
//!   `cd`, `path`, `nonconvex` and `params`.
//! - [`features`]: feature streams (paper 000): online substitution (OS) and asynchronous
//!   parallel OS (Asy-OS) keep the best s of a stream of columns in O(n s) memory; one API
//!   for both (`features::Substitution`).
//! - `linfa_traits` (feature `linfa`): linfa's `Fit` for `Request` and `Estimator`,
//!   `PredictInplace` for `Model`.
//! - [`prequential`]: test-then-train replay, to compare weight schedules offline.
//! - [`data`]: streaming readers for CSV, LIBSVM and NPY files, one file per format
//!   (`data::npy` holds the memory map) and the memory budget (`data::budget`); `data::csc`
//!   holds a wide file column-major and sparse (`Csc`) in O(nnz + n + p) memory.
//! - [`wide`]: paper 004's raw-data Frank-Wolfe Lasso path (Algorithm 2, randomized or
//!   deterministic) on a `Csc`, for files whose Gram matrix cannot exist; `wide::path` the
//!   path over delta with warm starts and the search for delta_max.
//! - [`synthetic`]: the simulated design of paper 003 (demo stream, tests, benchmarks).
//! - [`scenarios`]: the same design with drifting coefficients (drift checks and report).

pub mod data;
pub mod dd;
pub mod features;
pub mod fields;
pub mod gram;
pub mod linalg;
#[cfg(feature = "linfa")]
pub mod linfa_traits;
pub mod memory;
pub mod model;
pub mod prequential;
pub mod scenarios;
pub mod solve;
pub mod spec;
pub mod stats;
pub mod synthetic;
pub mod task;
pub mod wide;

pub use stats::Observations;

// The README's example runs as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;
pub use model::Model;
pub use stats::{RunningStats, Stats};
pub use task::Task;
