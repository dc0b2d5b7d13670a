//! The commands of the `ravel` binary besides the service's own wiring: `serve` (the service
//! with its embedded broker and demo when no Kafka is configured), `fit` and `select` (files
//! through the same statistics, offline; `fit_wide`, `ravel fit --wide`: paper 004's Lasso
//! path on the raw sparse columns of a wide file), `produce` (rows to a topic), `check` (the
//! preflight: what the service needs from the cluster and the registry, and the declared
//! fields against the topics' latest messages), `replay` (dead letters produced again) and
//! the demo producer.
//! `args` holds what their clap arguments share, `extract_flags` the extraction flags
//! (`--method`, `--k`, `--select` ...) of `fit` and `select`. `src/main.rs` parses and dispatches.

pub mod args;
pub mod check;
pub mod demo;
mod extract_flags;
pub mod fit;
pub mod fit_wide;
pub mod produce;
pub mod replay;
mod schemad;
pub mod select;
pub mod serve;
