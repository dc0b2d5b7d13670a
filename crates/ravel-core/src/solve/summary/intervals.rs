//! Intervals of predictions (issue 60 item 2), as statsmodels' `get_prediction(x)
//! .summary_frame(alpha)`: the mean b0 + x^T b has variance sigma^2 / n + (x - mu)^T Cov(beta)
//! (x - mu) (the intercept's variance and its covariance with the slopes, written through the
//! centred row), the mean's interval is mean +- t se and the prediction interval of a new
//! observation mean +- t sqrt(se^2 + sigma^2), t the quantile of Student's t with df_resid
//! degrees of freedom. Needs the model's covariance, which an `inference` request keeps.

use super::dist::t_quantile;
use crate::model::{Model, PredictionInterval};

/// The intervals of each row's prediction at confidence `level`; rows hold the model's p
/// features. An error in words when the model carries no covariance (no `inference`) or the
/// level is out of (0, 1).
pub fn prediction_intervals(
    model: &Model,
    rows: &[&[f64]],
    level: f64,
) -> Result<Vec<PredictionInterval>, String> {
    if !(level.is_finite() && level > 0.0 && level < 1.0) {
        return Err(format!(
            "the interval level must lie strictly between 0 and 1 (0.95 for 95 % intervals), \
             got {level}"
        ));
    }
    let Some(cov) = model.inference.as_ref().and_then(|i| i.covariance.as_ref()) else {
        return Err(
            "prediction intervals need the model's covariance: a least-squares model (ols, \
             ridge, a refitted model) extracted with inference"
                .into(),
        );
    };
    let s = cov.index.len();
    let tq = t_quantile(1.0 - (1.0 - level) / 2.0, cov.df_resid);
    let mut centred = vec![0.0; s];
    Ok(rows
        .iter()
        .map(|x| {
            for (k, (&j, m)) in cov.index.iter().zip(&cov.mean).enumerate() {
                centred[k] = x[j] - m;
            }
            let mut quad = 0.0;
            for j in 0..s {
                let col = &cov.cov[j * s..(j + 1) * s];
                let cj: f64 = col.iter().zip(&centred).map(|(c, d)| c * d).sum();
                quad += centred[j] * cj;
            }
            let var_mean = (cov.sigma2 / cov.n + quad).max(0.0);
            let mean = model.predict(x);
            let se = var_mean.sqrt();
            let se_obs = (var_mean + cov.sigma2).sqrt();
            PredictionInterval {
                mean,
                mean_se: se,
                mean_ci_lower: mean - tq * se,
                mean_ci_upper: mean + tq * se,
                obs_ci_lower: mean - tq * se_obs,
                obs_ci_upper: mean + tq * se_obs,
            }
        })
        .collect())
}
