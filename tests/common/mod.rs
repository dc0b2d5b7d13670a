//! Shared by the service tests, by concern: `service` (a real service, `server::run`, on
//! 127.0.0.1:0 in its own runtime, and the configuration builders), `config_file` (the
//! `ravel.toml` of a child service, built key by key), `procs` (the `ravel`
//! binary as child processes: brokers, services, commands), `http` (`get`, `post`), `broker` (producing and reading
//! topics, offsets), `data` (synthetic designs, CSV files, the Python of `target/pyenv`),
//! `assertions` (models equal, polling with generous deadlines: group joins can take 8 s on a
//! slow machine; every error message an HTTP helper receives checked for Rust's type names), `docs` (the documentation's sections and commands) and `tls` (certificates).
//! Everything is re-exported here, so a test says `common::name`.

#![allow(dead_code)]

use std::time::Duration;

pub const DEADLINE: Duration = Duration::from_secs(60);

mod assertions;
mod broker;
mod config_file;
mod data;
mod docs;
mod http;
mod procs;
mod service;
mod tls;

#[allow(unused_imports)]
pub use assertions::*;
#[allow(unused_imports)]
pub use broker::*;
#[allow(unused_imports)]
pub use config_file::*;
#[allow(unused_imports)]
pub use data::*;
#[allow(unused_imports)]
pub use docs::*;
#[allow(unused_imports)]
pub use http::*;
#[allow(unused_imports)]
pub use procs::*;
#[allow(unused_imports)]
pub use service::*;
#[allow(unused_imports)]
pub use tls::*;
