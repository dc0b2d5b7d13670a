//! `POST /v1/streams/{name}/predict`: predictions from a model extracted for the request, with
//! their intervals when asked (issue 60).

use super::*;

/// Predictions and the model they came from.
#[derive(Serialize, ToSchema)]
pub struct PredictResponse {
    /// b0 + x^T b for each row.
    predictions: Vec<f64>,
    /// Classification: the predicted class (+1 or -1) of each row.
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: Option<Vec<f64>>,
    model: Model,
    /// Kafka timestamp (Unix ms) of the newest message in the statistics the model was
    /// extracted from; null before the first timestamped message.
    #[schema(examples(1_700_000_000_000_u64))]
    as_of: Option<u64>,
    /// With a `"window"` in `model`: the span of time the model's statistics cover.
    #[serde(skip_serializing_if = "Option::is_none")]
    window: Option<WindowAnswer>,
    /// With `interval`: each row's confidence interval of the mean and prediction interval
    /// (statsmodels' `get_prediction(x).summary_frame(alpha)` with alpha = 1 - interval).
    #[serde(skip_serializing_if = "Option::is_none")]
    intervals: Option<Vec<ravel_core::model::PredictionInterval>>,
}

/// Predictions b0 + x^T b from a model extracted for the request.
#[utoipa::path(post, path = "/v1/streams/{name}/predict", tag = "streams",
    params(("name" = String, Path, description = "The stream's name")),
    request_body(content = PredictRequest, description = "A model request and the rows",
        examples(
            ("rows" = (value = json!({"model": {"method": "ols"}, "rows": [[0.1, 0.2, 0.3]]}))),
            ("named" = (value = json!({"model": {"method": "lasso", "k": 2}, "features": [{"f0": 0.1, "f1": 0.2, "f2": 0.3}]}))),
        )),
    responses(
        (status = 200, description = "One prediction per row", body = PredictResponse),
        (status = 400, description = "the codes of `/model`, and `dimension`, `missing_feature`, \
            `field_type`", body = error::ErrorBody),
        (status = 404, description = "`unknown_stream`", body = error::ErrorBody),
        (status = 409, description = "`no_data`, `one_class`", body = error::ErrorBody),
        (status = 413, description = "`payload_too_large`", body = error::ErrorBody),
        (status = 415, description = "`unsupported_media_type`", body = error::ErrorBody),
        (status = 503, description = "`shutting_down`, `busy` (with Retry-After), `extraction_timeout`", body = error::ErrorBody),
    ))]
pub(in crate::api) async fn predict(
    State(st): State<AppState>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<PredictResponse>, ApiError> {
    let h = st.stream(&name)?;
    let Json(body) = body?;
    let mut req: PredictRequest = serde_json::from_value(body)
        .map_err(|e| ApiError::bad_request(Code::InvalidBody, e.to_string()))?;
    let window = take_window(&mut req.model)?;
    let (snap, answer) = windowed(&h, window)?;
    let interval = req.interval;
    if let Some(level) = interval {
        if !(level.is_finite() && level > 0.0 && level < 1.0) {
            return Err(ApiError::bad_request(
                Code::InvalidParams,
                format!(
                    "interval must lie strictly between 0 and 1 (0.95 for 95 % intervals), \
                     got {level}"
                ),
            ));
        }
        if let Some(obj) = req.model.as_object_mut() {
            obj.insert("inference".into(), Value::Bool(true));
        }
    }
    let params = parse_params(req.model.clone())?.check(h.p())?;
    no_cv_in_window(&answer, params.request().select)?;
    let rows = predict_rows(req, &h)?;
    let method = params.method().name();
    let at = extract_from(&st, &h, snap, "predict", method, move |snap, names| {
        model_from_folds(&snap.stats, snap.folds.as_ref(), &params, names)
    })
    .await?;
    let (model, as_of) = (at.answer, at.as_of);
    check_missing(&rows, h.codec.fields.as_ref(), &model, &at.snapshot.stats)?;
    let predictions: Vec<f64> = rows.iter().map(|r| model.predict(&r.x)).collect();
    let intervals = match interval {
        Some(level) => {
            let xs: Vec<&[f64]> = rows.iter().map(|r| r.x.as_slice()).collect();
            Some(
                ravel_core::solve::summary::prediction_intervals(&model, &xs, level).map_err(
                    |why| ApiError::bad_request(Code::InvalidParams, format!("interval: {why}")),
                )?,
            )
        }
        None => None,
    };
    let labels = (h.task() == Task::Classification).then(|| {
        predictions
            .iter()
            .map(|&s| if s >= 0.0 { 1.0 } else { -1.0 })
            .collect()
    });
    Ok(Json(PredictResponse {
        predictions,
        labels,
        model,
        as_of,
        window: answer,
        intervals,
    }))
}
