//! The web console (issue 18): one page at `/` and its assets under `/ui/`, embedded in the
//! binary with `include_str!` (no build step, no CDN, works with no internet access).
//!
//! The page is hand-written HTML, CSS and JavaScript drawing its charts as SVG; it reads only
//! the documented API (`/v1/...`, `/metrics`, `/readyz`, all in `/openapi.json`) by polling,
//! and writes (labels of a feature stream) only with the bearer token a person types in. The
//! page and its assets are not API operations, so they are served beside the OpenAPI
//! document's routes, not in it.

use super::error::ApiError;
use crate::api::error::Code;
use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

const INDEX: &str = include_str!("index.html");
const APP_JS: &str = include_str!("app.js");
const APP_CSS: &str = include_str!("app.css");

/// The assets, by name under `/ui/`, with their content types.
const ASSETS: [(&str, &str, &str); 2] = [
    ("app.js", "text/javascript; charset=utf-8", APP_JS),
    ("app.css", "text/css; charset=utf-8", APP_CSS),
];

/// `/` and `/ui/{file}`, for any router state.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/ui/{file}", get(asset))
}

fn page(ctype: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, ctype),
            // The page is small and changes with the binary: revalidate every load.
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

async fn index() -> Response {
    page("text/html; charset=utf-8", INDEX)
}

async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, ctype, body)) => page(ctype, body),
        None => ApiError::new(
            StatusCode::NOT_FOUND,
            Code::NotFound,
            format!(
                "no console asset '{file}'; the console is at / and its assets are {}",
                ASSETS.map(|a| format!("/ui/{}", a.0)).join(", ")
            ),
        )
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    /// Every asset the page names is served, and the page names no outside address.
    #[test]
    fn the_page_loads_only_its_own_assets() {
        for (name, _, _) in super::ASSETS {
            assert!(super::INDEX.contains(&format!("/ui/{name}")), "{name}");
        }
        for text in [super::INDEX, super::APP_JS, super::APP_CSS] {
            // The SVG namespace is a name, not an address the page loads.
            let text = text.replace("'http://www.w3.org/2000/svg'", "");
            assert!(!text.contains("http://") && !text.contains("https://"));
        }
    }
}
