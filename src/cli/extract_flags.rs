//! The extraction flags of `ravel fit` and `ravel select` (`--method`, `--k`, `--lambda`,
//! `--select` ...): one flag per field of the HTTP API's request body, turned into that JSON
//! object and parsed by the same `solve::Request`, so the command line and the API accept and
//! refuse the same things, in the flags' own words.

use ravel_core::solve::{self, Method, Request};

/// The extraction flags: one per field of the API's request body (`--l1-ratio` is
/// `"l1_ratio"`), turned into that JSON object and parsed by the same `solve::Request`, so the
/// CLI and the API accept and refuse the same things. A flag the method does not take is
/// refused by name.
#[derive(Debug, Clone, clap::Args)]
pub struct ExtractArgs {
    /// The estimator: ols, ridge, olsth, fsa, lasso, elastic-net, mcp, scad, fw-lasso, iht, htp
    /// or k-support (docs/methods.md "Estimators"). Without it, --select chooses along OLSth's k-path
    /// k = 1..=min(p, 300, n / 2) (or to --k).
    #[arg(long)]
    pub method: Option<String>,
    /// Exactly k nonzero coefficients (olsth, fsa, iht, htp, k-support; lasso, elastic-net,
    /// mcp, scad instead of --lambda).
    #[arg(long)]
    pub k: Option<usize>,
    /// Penalty level lambda (objective (1/2n)||y - b0 - Xb||^2 + P_lambda(b)); olsth: ridge
    /// of the first fit; iht/htp: the ridge of the certificate.
    #[arg(long, allow_negative_numbers = true)]
    pub lambda: Option<f64>,
    /// Elastic-net mixing: 1 is Lasso, towards 0 is ridge (default 0.9).
    #[arg(long, allow_negative_numbers = true)]
    pub l1_ratio: Option<f64>,
    /// MCP / SCAD concavity (defaults 3 and 3.7).
    #[arg(long, allow_negative_numbers = true)]
    pub gamma: Option<f64>,
    /// Refit OLS on the selected support (penalized methods; the default with --k, as paper
    /// 003 Alg. 3 does).
    #[arg(long, conflicts_with = "no_refit")]
    pub refit: bool,
    /// Penalized methods: no OLS refit (with --k: the penalized estimate at the lambda that
    /// selects k).
    #[arg(long)]
    pub no_refit: bool,
    /// Fit on raw columns (then lasso/elastic-net equal scikit-learn's on the same rows).
    #[arg(long)]
    pub no_standardize: bool,
    /// A model without an intercept, through the origin (R's y ~ x - 1, scikit-learn's
    /// fit_intercept=False): fitted on the raw moments, R^2 uncentred, n - p residual degrees
    /// of freedom.
    #[arg(long)]
    pub no_intercept: bool,
    /// Number of points on the path (default 100).
    #[arg(long)]
    pub path_points: Option<usize>,
    /// lambda_min / lambda_max of the path (default 1e-4 when n > p, else 1e-2).
    #[arg(long)]
    pub lambda_min_ratio: Option<f64>,
    /// Convergence tolerance (penalized, fw-lasso, iht/htp, k-support).
    #[arg(long, allow_negative_numbers = true)]
    pub tol: Option<f64>,
    /// FSA iterations T (default 1000) and annealing parameter mu (default 10): the columns
    /// kept after step t are k + (p - k) max(0, (T - t) / (t mu + T)).
    #[arg(long)]
    pub fsa_iterations: Option<usize>,
    /// FSA annealing parameter mu (default 10; larger prunes sooner).
    #[arg(long, allow_negative_numbers = true)]
    pub fsa_mu: Option<f64>,
    /// Classification: weight of the positive and negative class (default 1 each).
    #[arg(long, allow_negative_numbers = true)]
    pub w_pos: Option<f64>,
    #[arg(long, allow_negative_numbers = true)]
    pub w_neg: Option<f64>,
    /// fw-lasso: the l1 radius delta (standardized units unless --no-standardize).
    #[arg(long, allow_negative_numbers = true)]
    pub delta: Option<f64>,
    /// fw-lasso: deterministic or randomized.
    #[arg(long, value_parser = ["deterministic", "randomized"])]
    pub variant: Option<String>,
    /// fw-lasso randomized: coordinates sampled per iteration, and the seed.
    #[arg(long)]
    pub kappa: Option<usize>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// fw-lasso: no away steps.
    #[arg(long)]
    pub no_away_steps: bool,
    /// fw-lasso path: delta_min / delta_max (default 0.01).
    #[arg(long)]
    pub delta_min_ratio: Option<f64>,
    /// Choose the model along the path: aic, bic, ebic (information criteria from the
    /// statistics), cv or cv_1se (exact K-fold cross-validation, --folds). Replaces --k /
    /// --lambda for lasso, elastic-net, mcp, scad, fw-lasso; for olsth, fsa, iht, htp --k is
    /// the largest k tried (k = 1..=k; without --k, min(300, p, n / 2)). With --path: the
    /// whole path and the selection.
    #[arg(long, value_name = "CRITERION")]
    pub select: Option<String>,
    /// EBIC's gamma in [0, 1] (default 1 - ln n / (2 ln p), clipped).
    #[arg(long, allow_negative_numbers = true)]
    pub ebic_gamma: Option<f64>,
    /// The regression summary: standard errors, t statistics, p-values, confidence intervals,
    /// VIFs, adjusted R^2, F test, log-likelihood, AIC / BIC, condition numbers (ols, ridge,
    /// refitted models; selective inference for a refitted Lasso at a fixed --lambda).
    #[arg(long)]
    pub inference: bool,
    /// With --inference: the confidence level of the intervals (default 0.95).
    #[arg(long, allow_negative_numbers = true)]
    pub level: Option<f64>,
    /// With --inference on a refitted Lasso at a fixed --lambda: the noise standard deviation
    /// of the selective inference (default: from the full OLS residual).
    #[arg(long, allow_negative_numbers = true)]
    pub sigma: Option<f64>,
    /// fw-lasso, iht/htp, k-support: the most iterations.
    #[arg(long)]
    pub max_iterations: Option<usize>,
    /// iht/htp: gradient steps before the first threshold (default 20) and DIHT iterations
    /// (default 200).
    #[arg(long)]
    pub warmup: Option<usize>,
    #[arg(long)]
    pub dual_iterations: Option<usize>,
}

impl ExtractArgs {
    /// The request these flags describe, parsed as the API parses its body.
    pub fn request(&self) -> anyhow::Result<Request> {
        let method: Method = match (&self.method, &self.select) {
            (Some(m), _) => m.parse().map_err(anyhow::Error::msg)?,
            (None, Some(_)) => solve::select::DEFAULT_METHOD,
            (None, None) => anyhow::bail!(
                "--method is required: one of {}; or --select CRITERION alone, which chooses \
                 along OLSth's k-path",
                Method::estimator_list()
            ),
        };
        let mut obj = serde_json::Map::new();
        let mut put = |key: &str, v: Option<serde_json::Value>| {
            if let Some(v) = v {
                obj.insert(key.to_string(), v);
            }
        };
        use serde_json::json;
        put("method", Some(json!(method.name())));
        let k = match self.default_k() {
            true => Some(self.k.unwrap_or(solve::select::DEFAULT_K_MAX)),
            false => self.k,
        };
        put("k", k.map(|v| json!(v)));
        put("lambda", self.lambda.map(|v| json!(v)));
        put("l1_ratio", self.l1_ratio.map(|v| json!(v)));
        put("gamma", self.gamma.map(|v| json!(v)));
        put(
            "refit",
            (self.refit || self.no_refit).then_some(json!(self.refit)),
        );
        put("standardize", self.no_standardize.then_some(json!(false)));
        put("intercept", self.no_intercept.then_some(json!(false)));
        put("path_points", self.path_points.map(|v| json!(v)));
        put("lambda_min_ratio", self.lambda_min_ratio.map(|v| json!(v)));
        put("tol", self.tol.map(|v| json!(v)));
        put("fsa_iterations", self.fsa_iterations.map(|v| json!(v)));
        put("fsa_mu", self.fsa_mu.map(|v| json!(v)));
        put("w_pos", self.w_pos.map(|v| json!(v)));
        put("w_neg", self.w_neg.map(|v| json!(v)));
        put("delta", self.delta.map(|v| json!(v)));
        put("variant", self.variant.as_ref().map(|v| json!(v)));
        put("kappa", self.kappa.map(|v| json!(v)));
        put("seed", self.seed.map(|v| json!(v)));
        put("away_steps", self.no_away_steps.then_some(json!(false)));
        put("delta_min_ratio", self.delta_min_ratio.map(|v| json!(v)));
        put("max_iterations", self.max_iterations.map(|v| json!(v)));
        put("warmup", self.warmup.map(|v| json!(v)));
        put("dual_iterations", self.dual_iterations.map(|v| json!(v)));
        if let Some(c) = &self.select {
            let c: solve::Criterion = c.parse().map_err(anyhow::Error::msg)?;
            put("select", Some(json!(c.name())));
        }
        put("ebic_gamma", self.ebic_gamma.map(|v| json!(v)));
        put("inference", self.inference.then_some(json!(true)));
        put("level", self.level.map(|v| json!(v)));
        put("sigma", self.sigma.map(|v| json!(v)));
        serde_json::from_value(serde_json::Value::Object(obj)).map_err(|e| {
            // serde names the JSON field; the user typed the flag.
            let msg = flag_names(&e.to_string());
            anyhow::anyhow!("--method {method}: {msg}")
        })
    }
}

impl ExtractArgs {
    /// Whether --select came without --method (`select::DEFAULT_METHOD`'s k-path).
    pub fn default_method(&self) -> bool {
        self.method.is_none() && self.select.is_some()
    }

    /// Whether the k-path's largest k is the default: --select without --k, and without
    /// --method or with one whose path runs over k (`select::selects_over_k`).
    fn default_k(&self) -> bool {
        self.select.is_some()
            && self.k.is_none()
            && self
                .method
                .as_deref()
                .is_none_or(|m| m.parse::<Method>().is_ok_and(solve::select::selects_over_k))
    }

    /// `request` for a file of p features and (once read) n rows: the default k-path to
    /// `select::default_k_max(p, n)` (p alone before the rows are read), and the note its
    /// answer carries.
    pub fn request_for(
        &self,
        p: usize,
        n: Option<u64>,
    ) -> anyhow::Result<(Request, Option<String>)> {
        let mut req = self.request()?;
        if !self.default_method() && !self.default_k() {
            return Ok((req, None));
        }
        let k_max = |k: usize| match n {
            Some(n) => solve::select::default_k_max(p, n as f64),
            None => k.min(p).max(1),
        };
        let mut note = None;
        if self.default_method() {
            if let (solve::Estimator::Olsth(o), Some(c)) = (&mut req.estimator, req.select) {
                if self.k.is_none() {
                    o.k = k_max(o.k);
                }
                note = Some(solve::select::default_method_note(c, o.k));
            }
            return Ok((req, note));
        }
        // A method whose path runs over k, without --k: the default largest k.
        let (method, select) = (req.estimator.method(), req.select);
        let k = match &mut req.estimator {
            solve::Estimator::Olsth(e) => Some(&mut e.k),
            solve::Estimator::Fsa(e) => Some(&mut e.k),
            solve::Estimator::Iht(e) => Some(&mut e.0.k),
            solve::Estimator::Htp(e) => Some(&mut e.0.k),
            _ => None,
        };
        if let (Some(k), Some(c)) = (k, select) {
            *k = k_max(*k);
            note = Some(format!(
                "{} over {}'s k-path k = 1..{k} (no --k given: the default largest k, at most \
                 {}, p and n / 2)",
                c.name(),
                method.name(),
                solve::select::DEFAULT_K_MAX
            ));
        }
        Ok((req, note))
    }
}

/// The note of a defaulted method first among the selection's notes.
pub(crate) fn note_default(selection: Option<&mut solve::Selection>, note: &Option<String>) {
    if let (Some(sel), Some(note)) = (selection, note) {
        sel.notes.insert(0, note.clone());
    }
}

/// A refused request in the flags' words.
pub(crate) fn flag_error(e: solve::ParamError) -> anyhow::Error {
    anyhow::anyhow!(flag_names(&e.to_string()))
}

/// "unknown field `l1_ratio`" -> "unknown field `--l1-ratio`" in serde's messages.
fn flag_names(msg: &str) -> String {
    let mut out = String::new();
    let mut rest = msg;
    while let Some(i) = rest.find('`') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let Some(j) = after.find('`') else {
            out.push_str(&rest[i..]);
            return out;
        };
        let word = &after[..j];
        if word
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            out.push_str(&format!("`--{}`", word.replace('_', "-")));
        } else {
            out.push_str(&format!("`{word}`"));
        }
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_field_names_become_flag_names() {
        assert_eq!(
            flag_names("unknown field `l1_ratio`, expected `k` or `lambda`"),
            "unknown field `--l1-ratio`, expected `--k` or `--lambda`"
        );
        assert_eq!(flag_names("no backticks"), "no backticks");
    }
}
