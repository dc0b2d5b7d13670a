//! ravel: sparse linear models learned from streams.
//!
//! Rows (x, y) are folded into running-average statistics; any model (OLS, ridge, OLSth, FSA,
//! Lasso, elastic net, MCP, SCAD; regression or class-weighted classification) is extracted
//! from those statistics alone, at any sparsity k or penalty lambda, and equals the offline
//! method on all rows (paper 003). The library knows nothing of Kafka or HTTP.
//!
//! # Layout
//! - [`stats`]: `RunningStats`, `AlphaSchedule`, `ClassStats`: the state of an observation
//!   stream, batch updates (symmetric rank-B) and exact shard merges.
//! - [`solve`]: the Gram-form problem (standardization, classes) and one solver family per
//!   file; `model_from_stats` / `extract` return the `Model` JSON shared by CLI and API.
//! - [`data`]: streaming readers for CSV, LIBSVM and NPY files.
//! - [`fit`]: `ravel fit`, the offline entry point.
//! - [`features`]: feature streams (paper 000): online substitution (OS) and asynchronous
//!   parallel OS (Asy-OS) keep the best s of a stream of columns in O(n s) memory.
//! - [`select`]: `ravel select`, the offline form of a feature stream.
//! - [`synthetic`]: the simulated design of paper 003 (demo stream, tests, benchmarks).

pub mod data;
pub mod features;
pub mod fit;
pub mod select;
pub mod solve;
pub mod synthetic;
pub mod stats;
