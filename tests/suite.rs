//! The service crate's integration tests, as one test binary: each `tests/NAME.rs` is the
//! module `NAME` (its tests are `NAME::...`), all sharing `tests/common`. One binary compiles
//! and links `common` and the dependencies' generic code once instead of once a file (a clean
//! CI build spent minutes on those copies). `scripts/test_lanes.py` still runs each module in
//! a process of its own, a few at once. A file of `tests/` that is not declared here would not
//! be built at all: `layout::every_test_file_is_a_module_of_the_suite` fails on one.

mod common;

mod check;
mod checkpoints;
mod config_errors;
mod console;
mod dead_letter_burst;
mod dead_letter_size;
mod dead_letters;
mod declarations;
mod deploy;
mod devloop;
mod docs;
mod drift;
mod drift_service;
mod extraction_bounds;
mod feature_service;
mod features_select;
mod fidelity;
mod fields;
mod fit_wide;
mod freshness;
mod http_server;
mod inference;
mod interop;
mod interop_nisshi;
mod json_errors;
mod layout;
mod memory_limits;
mod nist;
mod openapi;
mod own_data;
mod ownership;
mod processes;
mod quality;
mod reference_sklearn;
mod retention;
mod scale_out;
mod schema_registry;
mod scoring;
mod secured_clients;
mod selection;
mod service;
mod start_checks;
mod stream_cv;
mod topics;
mod wide_service;
mod windows;
