//! The OpenAPI 3.1 description of the HTTP API, served at `/openapi.json`.
//!
//! Generated, not written: each handler carries its operation (`#[utoipa::path]`), the types
//! it takes and returns derive `utoipa::ToSchema` (ravel-core's with its `openapi` feature),
//! and `api::router_and_openapi` registers every route through `utoipa_axum::routes!`, so a
//! route cannot be served without being described. This module holds what is not per route:
//! the document's info and the handler that serves the document built at start-up.
//!
//! The web console (`/` and `/ui/{file}`, `api::console`) is a page for people, not an API
//! operation: it is served beside the document's routes and is not in it; the browser test
//! (`tests/console.rs`) checks that every request the page makes is an operation here.

use axum::Extension;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use utoipa::openapi::{InfoBuilder, OpenApi, OpenApiBuilder};

/// The serialized document, built once with the router.
#[derive(Clone)]
pub struct Spec(pub Arc<String>);

/// The document's header; paths and schemas are added by the routes.
pub fn base() -> OpenApi {
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("ravel")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "Sparse linear models learned from Kafka streams: stream statistics, models \
                     at any sparsity or penalty, paths, predictions and feature streams. Every \
                     error is {\"error\": {\"code\", \"message\"}} with a stable code.",
                ))
                .build(),
        )
        .build()
}

/// The document, without a running service (what `/openapi.json` serves).
#[cfg(test)]
pub fn document() -> OpenApi {
    super::routes().into_openapi()
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "The OpenAPI 3.1 description of this API",
        content_type = "application/json")))]
pub(super) async fn serve(Extension(Spec(spec)): Extension<Spec>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        spec.as_str().to_owned(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_document_is_openapi_3_1_with_schemas() {
        let doc = serde_json::to_value(super::document()).unwrap();
        if let Ok(path) = std::env::var("RAVEL_DUMP_OPENAPI") {
            std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        }
        assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
        assert!(doc["components"]["schemas"]["Model"].is_object());
    }
}
