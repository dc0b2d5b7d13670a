//! Streams declared at run time over HTTP (issue 49; the design is `crate::declared`'s):
//! `PUT /v1/streams/{name}` with the stream's `[[streams]]` table as JSON, `DELETE
//! /v1/streams/{name}?state=keep|drop`, and `GET /v1/streams/{name}/declaration` (where a
//! stream's declaration came from: the file or the API), and `GET /v1/topics/{topic}/fields`
//! (a topic's fields, to declare a stream from: `crate::propose`). PUT, DELETE and the
//! fields carry the admin token
//! (`http.admin_token`, not `http.token`): without it 401, and 403 when none is configured
//! (declarations over the API are off). Every change is logged with who (the peer's address)
//! and what (`crate::declared`). A stream's PUT is checked against its topic's data
//! (`crate::declared::data`): fields none of its latest events carry are a 422 unless
//! `?absent_fields=accept`, and the answer says what the check found (`fields_check`).

use super::AppState;
use super::auth::same;
use super::error::{ApiError, Code};
use crate::declared::{Declarations, Origin, Put, Refusal};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{ConnectInfo, FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use utoipa::ToSchema;

/// A caller that presented the admin token; `who` names it in the log.
pub struct Admin {
    who: String,
}

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Admin, ApiError> {
        let token = st.admin_token.expose();
        if token.is_empty() {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                Code::Forbidden,
                "streams are not declared over the API here: set http.admin_token to allow \
                 PUT and DELETE /v1/streams/{name} (or declare the stream in the config file)",
            ));
        }
        let given = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !given.is_some_and(|t| same(t.trim().as_bytes(), token.as_bytes())) {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                Code::Unauthorized,
                "declaring or retiring a stream needs the admin token: send it as \
                 `Authorization: Bearer <token>` (http.admin_token)",
            ));
        }
        let who = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map_or_else(|| "unknown peer".to_string(), |c| c.0.to_string());
        Ok(Admin {
            who: format!("admin token from {who}"),
        })
    }
}

/// A stream's (or a scorer's) declaration and where it came from.
#[derive(Serialize, ToSchema)]
pub struct Declaration {
    name: String,
    /// `file` (the config file) or `api` (declared over HTTP).
    origin: String,
    /// API declarations: who declared it (the admin request's peer).
    #[serde(skip_serializing_if = "Option::is_none")]
    by: Option<String>,
    /// API declarations: when (Unix ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    at_ms: Option<u64>,
    /// The stream's (scorer's) table, as `[[streams]]` (`[[scorers]]`) of the config file
    /// holds it.
    #[schema(value_type = Object)]
    declaration: serde_json::Value,
    /// PUT: `created`, `replaced` (a changed declaration: a stream starts afresh from its
    /// `start`, a scorer is restarted) or `unchanged`.
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<String>,
    /// A stream's PUT that declared or changed it: its fields against its topic's latest
    /// messages (with `absent_accepted`, the warning).
    #[serde(skip_serializing_if = "Option::is_none")]
    fields_check: Option<crate::declared::data::FieldsChecked>,
}

impl Declaration {
    fn of<T: Serialize>(name: &str, o: Origin<T>, outcome: Option<&str>) -> Declaration {
        Declaration {
            name: name.to_string(),
            origin: o.origin.to_string(),
            by: o.by,
            at_ms: o.at_ms,
            declaration: serde_json::to_value(&o.declaration).unwrap_or_default(),
            outcome: outcome.map(str::to_string),
            fields_check: None,
        }
    }
}

/// A retired stream.
#[derive(Serialize, ToSchema)]
pub struct Retired {
    name: String,
    /// Streams: `kept` (its checkpoint stays: a PUT of the same declaration resumes from it)
    /// or `dropped` (deleted). Scorers and feature streams: `stopped`.
    state: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RetireQuery {
    state: Option<String>,
}

fn refused(r: Refusal) -> ApiError {
    match r {
        Refusal::Invalid(m) => ApiError::new(StatusCode::BAD_REQUEST, Code::InvalidDeclaration, m),
        Refusal::Absent(m) => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, Code::AbsentFields, m)
        }
        Refusal::Unknown(m) => ApiError::new(StatusCode::NOT_FOUND, Code::UnknownStream, m),
        Refusal::Conflict(m) => ApiError::new(StatusCode::CONFLICT, Code::DeclarationConflict, m),
        Refusal::Failed(m) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, Code::Internal, m),
    }
}

/// Runs a declaration off the runtime (it writes `state.dir` and may read a checkpoint).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Refusal> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                Code::Internal,
                format!("the declaration's thread failed: {e}"),
            )
        })?
        .map_err(refused)
}

/// One kind of declared resource (a stream, a scorer, a feature stream): what the
/// declarations do for it and how a name that is not there is answered. Each route below is
/// its kind's one line over the generic `put`, `delete` and `get`.
trait Kind {
    /// The declaration, as the config file's table holds it.
    type Declared: Serialize;
    /// Declares it; `accept_absent`: a stream's fields absent from its topic's data are
    /// accepted (`crate::declared::data`).
    fn put(
        d: &Declarations,
        name: &str,
        body: &[u8],
        by: &str,
        accept_absent: bool,
    ) -> Result<Checked, Refusal>;
    /// Retires it (`drop_state`: streams only, their checkpoint deleted).
    fn delete(d: &Declarations, name: &str, drop_state: bool, by: &str) -> Result<(), Refusal>;
    fn origin(d: &Declarations, name: &str) -> Option<Origin<Self::Declared>>;
    /// The 404 of a name the service does not have.
    fn unknown(name: &str) -> ApiError;
    /// A refusal of a DELETE, as this kind answers it.
    fn refused_delete(e: ApiError) -> ApiError {
        e
    }
}

struct Stream;
struct Scorer;
struct FeatureStream;

/// What a PUT did, and for a stream its fields' check.
type Checked = (Put, Option<crate::declared::data::FieldsChecked>);

impl Kind for Stream {
    type Declared = crate::config::StreamConfig;
    fn put(
        d: &Declarations,
        name: &str,
        body: &[u8],
        by: &str,
        accept_absent: bool,
    ) -> Result<Checked, Refusal> {
        d.put(name, body, by, accept_absent)
    }
    fn delete(d: &Declarations, name: &str, drop_state: bool, by: &str) -> Result<(), Refusal> {
        d.delete(name, drop_state, by)
    }
    fn origin(d: &Declarations, name: &str) -> Option<Origin<Self::Declared>> {
        d.origin(name)
    }
    fn unknown(name: &str) -> ApiError {
        ApiError::unknown_stream(name)
    }
}

impl Kind for Scorer {
    type Declared = crate::config::scorers::ScorerConfig;
    fn put(
        d: &Declarations,
        name: &str,
        body: &[u8],
        by: &str,
        _: bool,
    ) -> Result<Checked, Refusal> {
        Ok((d.put_scorer(name, body, by)?, None))
    }
    fn delete(d: &Declarations, name: &str, _: bool, by: &str) -> Result<(), Refusal> {
        d.delete_scorer(name, by)
    }
    fn origin(d: &Declarations, name: &str) -> Option<Origin<Self::Declared>> {
        d.scorer_origin(name)
    }
    fn unknown(name: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            Code::UnknownScorer,
            format!(
                "no scorer named '{name}': [[scorers]] of the config file and PUT /v1/scorers/{{name}} declare them"
            ),
        )
    }
    fn refused_delete(e: ApiError) -> ApiError {
        if e.code == Code::UnknownStream {
            ApiError::new(StatusCode::NOT_FOUND, Code::UnknownScorer, e.message)
        } else {
            e
        }
    }
}

impl Kind for FeatureStream {
    type Declared = crate::config::FeatureStreamConfig;
    fn put(
        d: &Declarations,
        name: &str,
        body: &[u8],
        by: &str,
        _: bool,
    ) -> Result<Checked, Refusal> {
        Ok((d.put_feature_stream(name, body, by)?, None))
    }
    fn delete(d: &Declarations, name: &str, _: bool, by: &str) -> Result<(), Refusal> {
        d.delete_feature_stream(name, by)
    }
    fn origin(d: &Declarations, name: &str) -> Option<Origin<Self::Declared>> {
        d.feature_origin(name)
    }
    fn unknown(name: &str) -> ApiError {
        ApiError::unknown_stream(name)
    }
}

/// A declaration of kind `K` and where it came from, with a PUT's outcome.
fn declaration<K: Kind>(
    st: &AppState,
    name: &str,
    outcome: Option<&str>,
) -> Result<Declaration, ApiError> {
    let origin = K::origin(&st.declarations, name).ok_or_else(|| K::unknown(name))?;
    Ok(Declaration::of(name, origin, outcome))
}

/// PUT of kind `K`: declared (201), or changed or unchanged (200).
async fn put<K: Kind>(
    st: AppState,
    name: String,
    admin: Admin,
    body: Bytes,
    accept_absent: bool,
) -> Result<(StatusCode, Json<Declaration>), ApiError> {
    let d = st.declarations.clone();
    let n = name.clone();
    let (put, fields_check) =
        blocking(move || K::put(&d, &n, &body, &admin.who, accept_absent)).await?;
    let (status, outcome) = answered(put);
    let mut answer = declaration::<K>(&st, &name, Some(outcome))?;
    answer.fields_check = fields_check;
    Ok((status, Json(answer)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PutQuery {
    absent_fields: Option<String>,
}

/// DELETE of kind `K`, once retired.
async fn delete<K: Kind>(
    st: AppState,
    name: String,
    drop_state: bool,
    admin: Admin,
) -> Result<(), ApiError> {
    let d = st.declarations.clone();
    blocking(move || K::delete(&d, &name, drop_state, &admin.who))
        .await
        .map_err(K::refused_delete)
}

/// Declares a stream, or changes one declared over the API.
///
/// Its named fields and target are checked against its topic's latest messages (10 a partition, at most 200, within 3 s):
/// fields none of them carry refuse it (422, each named with the closest keys) unless
/// `absent_fields=accept`; an empty topic has nothing to check (`fields_check` says so).
#[utoipa::path(put, path = "/v1/streams/{name}", tag = "declarations",
    params(
        ("name" = String, Path, description = "The stream's name"),
        ("absent_fields" = Option<String>, Query, description = "`refuse` (default): a declared field or target that none of the topic's latest events carry refuses the PUT; `accept`: declared anyway, the warning in `fields_check`"),
    ),
    request_body(content = Object, description = "The stream's table, as `[[streams]]` of the config file (`name` may be left out)"),
    responses(
        (status = 201, description = "Declared", body = Declaration),
        (status = 200, description = "Changed (the stream starts afresh) or unchanged", body = Declaration),
        (status = 400, description = "`invalid_declaration`: the message names the key; `invalid_query`: absent_fields is neither refuse nor accept", body = super::error::ErrorBody),
        (status = 422, description = "`absent_fields`: declared fields or the target are in none of the topic's latest events; the message names each with the closest keys", body = super::error::ErrorBody),
        (status = 401, description = "`unauthorized`: no admin token", body = super::error::ErrorBody),
        (status = 403, description = "`forbidden`: no http.admin_token configured", body = super::error::ErrorBody),
        (status = 409, description = "`declaration_conflict`: a name of the config file, or no state.dir", body = super::error::ErrorBody),
    ))]
pub(super) async fn put_stream(
    State(st): State<AppState>,
    Path(name): Path<String>,
    query: Result<Query<PutQuery>, QueryRejection>,
    admin: Admin,
    body: Bytes,
) -> Result<(StatusCode, Json<Declaration>), ApiError> {
    let Query(q) = query?;
    let accept_absent = match q.absent_fields.as_deref() {
        None | Some("refuse") => false,
        Some("accept") => true,
        Some(other) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                Code::InvalidQuery,
                format!(
                    "absent_fields = '{other}': use refuse (the default) or accept{}",
                    crate::config::explain::did_you_mean(
                        other,
                        &["refuse".to_string(), "accept".to_string()]
                    )
                ),
            ));
        }
    };
    put::<Stream>(st, name, admin, body, accept_absent).await
}

/// Retires a stream declared over the API: ingest stops reading it; its state is kept
/// (`state=keep`, the default) or deleted (`state=drop`).
#[utoipa::path(delete, path = "/v1/streams/{name}", tag = "declarations",
    params(
        ("name" = String, Path, description = "The stream's name"),
        ("state" = Option<String>, Query, description = "`keep` (default) or `drop` its checkpoint"),
    ),
    responses(
        (status = 200, description = "Retired", body = Retired),
        (status = 401, description = "`unauthorized`: no admin token", body = super::error::ErrorBody),
        (status = 403, description = "`forbidden`: no http.admin_token configured", body = super::error::ErrorBody),
        (status = 404, description = "`unknown_stream`", body = super::error::ErrorBody),
        (status = 409, description = "`declaration_conflict`: declared in the config file", body = super::error::ErrorBody),
    ))]
pub(super) async fn delete_stream(
    State(st): State<AppState>,
    Path(name): Path<String>,
    query: Result<Query<RetireQuery>, QueryRejection>,
    admin: Admin,
) -> Result<Json<Retired>, ApiError> {
    let Query(q) = query?;
    let drop_state = match q.state.as_deref() {
        None | Some("keep") => false,
        Some("drop") => true,
        Some(other) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                Code::InvalidQuery,
                format!("state = '{other}': use keep (the default) or drop"),
            ));
        }
    };
    delete::<Stream>(st, name.clone(), drop_state, admin).await?;
    Ok(Json(Retired {
        name,
        state: if drop_state { "dropped" } else { "kept" }.into(),
    }))
}

/// A PUT's status and outcome.
fn answered(put: Put) -> (StatusCode, &'static str) {
    match put {
        Put::Created => (StatusCode::CREATED, "created"),
        Put::Replaced => (StatusCode::OK, "replaced"),
        Put::Unchanged => (StatusCode::OK, "unchanged"),
    }
}

/// Declares a scorer, or changes one declared over the API (the old one stops, the new one
/// starts).
#[utoipa::path(put, path = "/v1/scorers/{name}", tag = "declarations",
    params(("name" = String, Path, description = "The scorer's name")),
    request_body(content = Object, description = "The scorer's table, as `[[scorers]]` of the config file (`name` may be left out; \
        `interval`: each prediction written with its intervals at that level, as `POST .../predict` with `interval`)",
        examples(
            ("scorer" = (value = json!({"stream": "sales", "topic": "listings", "output_topic": "listings.predicted"}))),
            ("with intervals" = (value = json!({"stream": "sales", "topic": "listings", "output_topic": "listings.predicted",
                "model": {"method": "ols"}, "interval": 0.95}))),
        )),
    responses(
        (status = 201, description = "Declared and started", body = Declaration),
        (status = 200, description = "Changed (restarted) or unchanged", body = Declaration),
        (status = 400, description = "`invalid_declaration`: the message names the key, the stream or the topic", body = super::error::ErrorBody),
        (status = 401, description = "`unauthorized`: no admin token", body = super::error::ErrorBody),
        (status = 403, description = "`forbidden`: no http.admin_token configured", body = super::error::ErrorBody),
        (status = 409, description = "`declaration_conflict`: a name of the config file, or no state.dir", body = super::error::ErrorBody),
    ))]
pub(super) async fn put_scorer(
    State(st): State<AppState>,
    Path(name): Path<String>,
    admin: Admin,
    body: Bytes,
) -> Result<(StatusCode, Json<Declaration>), ApiError> {
    put::<Scorer>(st, name, admin, body, false).await
}

/// Retires a scorer declared over the API: it stops (what it scored committed) before the
/// answer.
#[utoipa::path(delete, path = "/v1/scorers/{name}", tag = "declarations",
    params(("name" = String, Path, description = "The scorer's name")),
    responses(
        (status = 200, description = "Retired", body = Retired),
        (status = 401, description = "`unauthorized`: no admin token", body = super::error::ErrorBody),
        (status = 403, description = "`forbidden`: no http.admin_token configured", body = super::error::ErrorBody),
        (status = 404, description = "`unknown_scorer`", body = super::error::ErrorBody),
        (status = 409, description = "`declaration_conflict`: declared in the config file", body = super::error::ErrorBody),
    ))]
pub(super) async fn delete_scorer(
    State(st): State<AppState>,
    Path(name): Path<String>,
    admin: Admin,
) -> Result<Json<Retired>, ApiError> {
    delete::<Scorer>(st, name.clone(), false, admin).await?;
    Ok(Json(Retired {
        name,
        state: "stopped".into(),
    }))
}

/// Where a scorer's declaration came from: the config file or the API.
#[utoipa::path(get, path = "/v1/scorers/{name}", tag = "declarations",
    params(("name" = String, Path, description = "The scorer's name")),
    responses(
        (status = 200, description = "The declaration", body = Declaration),
        (status = 404, description = "`unknown_scorer`", body = super::error::ErrorBody),
    ))]
pub(super) async fn get_scorer(
    State(st): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Declaration>, ApiError> {
    Ok(Json(declaration::<Scorer>(&st, &name, None)?))
}

/// Declares a feature stream, or changes one declared over the API (it starts afresh from
/// its topic's beginning).
#[utoipa::path(put, path = "/v1/feature-streams/{name}", tag = "declarations",
    params(("name" = String, Path, description = "The feature stream's name")),
    request_body(content = Object, description = "The feature stream's table, as `[[feature_streams]]` of the config file (`name` may be left out; not `wide`)"),
    responses(
        (status = 201, description = "Declared", body = Declaration),
        (status = 200, description = "Changed (read afresh) or unchanged", body = Declaration),
        (status = 400, description = "`invalid_declaration`: the message names the key or the topic", body = super::error::ErrorBody),
        (status = 401, description = "`unauthorized`: no admin token", body = super::error::ErrorBody),
        (status = 403, description = "`forbidden`: no http.admin_token configured", body = super::error::ErrorBody),
        (status = 409, description = "`declaration_conflict`: a name of the config file, or no state.dir", body = super::error::ErrorBody),
    ))]
pub(super) async fn put_feature_stream(
    State(st): State<AppState>,
    Path(name): Path<String>,
    admin: Admin,
    body: Bytes,
) -> Result<(StatusCode, Json<Declaration>), ApiError> {
    put::<FeatureStream>(st, name, admin, body, false).await
}

/// Retires a feature stream declared over the API: ingest stops reading it.
#[utoipa::path(delete, path = "/v1/feature-streams/{name}", tag = "declarations",
    params(("name" = String, Path, description = "The feature stream's name")),
    responses(
        (status = 200, description = "Retired", body = Retired),
        (status = 401, description = "`unauthorized`: no admin token", body = super::error::ErrorBody),
        (status = 403, description = "`forbidden`: no http.admin_token configured", body = super::error::ErrorBody),
        (status = 404, description = "`unknown_stream`", body = super::error::ErrorBody),
        (status = 409, description = "`declaration_conflict`: declared in the config file", body = super::error::ErrorBody),
    ))]
pub(super) async fn delete_feature_stream(
    State(st): State<AppState>,
    Path(name): Path<String>,
    admin: Admin,
) -> Result<Json<Retired>, ApiError> {
    delete::<FeatureStream>(st, name.clone(), false, admin).await?;
    Ok(Json(Retired {
        name,
        state: "stopped".into(),
    }))
}

/// Where a feature stream's declaration came from: the config file or the API.
#[utoipa::path(get, path = "/v1/feature-streams/{name}/declaration", tag = "declarations",
    params(("name" = String, Path, description = "The feature stream's name")),
    responses(
        (status = 200, description = "The declaration", body = Declaration),
        (status = 404, description = "`unknown_stream`", body = super::error::ErrorBody),
    ))]
pub(super) async fn get_feature_declaration(
    State(st): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Declaration>, ApiError> {
    Ok(Json(declaration::<FeatureStream>(&st, &name, None)?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FieldsQuery {
    events: Option<usize>,
    format: Option<String>,
    target: Option<String>,
}

/// The fields of a topic's latest messages, to declare a stream from (`crate::propose`): each
/// leaf path with its kind and in how many events it held a value, and a declaration to start
/// from. Read by assignment at each partition's end, never committed; admin token.
#[utoipa::path(get, path = "/v1/topics/{name}/fields", tag = "declarations",
    params(
        ("name" = String, Path, description = "The Kafka topic"),
        ("events" = Option<usize>, Query, description = "How many of its latest messages (1 to 1000, default 100)"),
        ("format" = Option<String>, Query, description = "`avro`, `protobuf` or `json-schema` for Confluent-framed values (default: JSON events)"),
        ("target" = Option<String>, Query, description = "The target's path: the proposal names it and leaves it out of the features (default: a field named `y`, `target` or `label`, if just one is)"),
    ),
    responses(
        (status = 200, description = "The fields", body = crate::propose::TopicFields),
        (status = 400, description = "`invalid_query`: events out of range, an unknown format, or no such topic", body = super::error::ErrorBody),
        (status = 401, description = "`unauthorized`: no admin token", body = super::error::ErrorBody),
        (status = 403, description = "`forbidden`: no http.admin_token configured", body = super::error::ErrorBody),
    ))]
pub(super) async fn topic_fields(
    State(st): State<AppState>,
    Path(topic): Path<String>,
    query: Result<Query<FieldsQuery>, QueryRejection>,
    _admin: Admin,
) -> Result<Json<crate::propose::TopicFields>, ApiError> {
    let Query(q) = query?;
    let sampler = st.sampler.clone();
    let fields = blocking(move || {
        sampler
            .fields(
                &topic,
                q.events.unwrap_or(100),
                q.format.as_deref(),
                q.target.as_deref(),
            )
            .map_err(Refusal::Invalid)
    })
    .await
    .map_err(|e| {
        if e.code == Code::InvalidDeclaration {
            ApiError::new(StatusCode::BAD_REQUEST, Code::InvalidQuery, e.message)
        } else {
            e
        }
    })?;
    Ok(Json(fields))
}

/// Where a stream's declaration came from: the config file or the API.
#[utoipa::path(get, path = "/v1/streams/{name}/declaration", tag = "declarations",
    params(("name" = String, Path, description = "The stream's name")),
    responses(
        (status = 200, description = "The declaration", body = Declaration),
        (status = 404, description = "`unknown_stream`", body = super::error::ErrorBody),
    ))]
pub(super) async fn get_declaration(
    State(st): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Declaration>, ApiError> {
    Ok(Json(declaration::<Stream>(&st, &name, None)?))
}
