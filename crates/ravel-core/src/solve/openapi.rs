//! The OpenAPI schema of `Request`, the body of the service's model and path requests.
//!
//! Each family's parameters derive `utoipa::ToSchema`, but the request as serde reads it is
//! not what a derive over `Request` describes: the estimator is flattened into the request,
//! tagged by `method`, and each family refuses fields it does not take, which JSON Schema
//! can only express on the final object (`additionalProperties: false` on a part of an
//! `allOf` would refuse the other parts' fields). So this builds, from the families' derived
//! schemas, one closed object per method: its tag, its family's properties (flattened parts
//! merged in) and the request-wide `standardize`, `intercept`, `w_pos`, `w_neg`; `oneOf` these with
//! `method` as the discriminator. Adding a solver changes nothing here, unless its family
//! flattens a generic part whose schema utoipa does not list (`flattened` below; the test
//! names any reference left unresolved).

use super::{Request, variant_schemas};
use serde_json::{Map, Value, json};
use std::borrow::Cow;
use std::collections::BTreeMap;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::Schema;
use utoipa::{PartialSchema, ToSchema};

/// One estimator: its name and its parameters' schema with the components it refers to.
pub(crate) struct Variant {
    name: &'static str,
    schema: Value,
    components: Vec<(String, RefOr<Schema>)>,
}

impl Variant {
    pub(crate) fn of<T: ToSchema>(name: &'static str) -> Variant {
        let mut components = Vec::new();
        T::schemas(&mut components);
        Variant {
            name,
            schema: to_json(&T::schema()),
            components,
        }
    }
}

fn to_json(s: &RefOr<Schema>) -> Value {
    serde_json::to_value(s).expect("a schema serializes")
}

/// The schemas of the parts families flatten through a generic parameter: utoipa's derive
/// refers to them but does not list them among a generic type's components.
fn flattened() -> Vec<(String, RefOr<Schema>)> {
    use super::penalized::{ElasticNetParams, LassoParams, McpParams, ScadParams};
    fn entry<T: ToSchema>() -> (String, RefOr<Schema>) {
        (T::name().into_owned(), T::schema())
    }
    vec![
        entry::<LassoParams>(),
        entry::<ElasticNetParams>(),
        entry::<McpParams>(),
        entry::<ScadParams>(),
    ]
}

/// The properties and required names of `v`, with `allOf` parts (serde's flatten) merged and
/// references to `components` followed.
fn collect(
    v: &Value,
    components: &BTreeMap<String, Value>,
    props: &mut Map<String, Value>,
    required: &mut Vec<Value>,
) {
    if let Some(r) = v.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or(r);
        let target = components.get(name).unwrap_or_else(|| {
            panic!("schema {name} is flattened but not known: list it in `flattened`")
        });
        collect(target, components, props, required);
        return;
    }
    for part in v
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        collect(part, components, props, required);
    }
    if let Some(p) = v.get("properties").and_then(Value::as_object) {
        props.extend(p.clone());
    }
    if let Some(r) = v.get("required").and_then(Value::as_array) {
        required.extend(r.iter().cloned());
    }
}

/// The properties every request takes besides the estimator's.
fn request_properties() -> Map<String, Value> {
    let Value::Object(m) = json!({
        "standardize": {
            "type": "boolean",
            "default": true,
            "description": "Scale columns to unit variance before the fit (coefficients come back in original units)."
        },
        "intercept": {
            "type": "boolean",
            "default": true,
            "description": "Fit an intercept. false: the model through the origin (R's y ~ x - 1, scikit-learn's fit_intercept=False), fitted on the raw moments; its R^2 is the uncentred one and its residual degrees of freedom n - p."
        },
        "w_pos": {
            "type": ["number", "null"],
            "description": "Classification: weight of the positive class (default 1)."
        },
        "w_neg": {
            "type": ["number", "null"],
            "description": "Classification: weight of the negative class (default 1)."
        },
        "select": {
            "type": ["string", "null"],
            "enum": ["aic", "bic", "ebic", "cv", "cv_1se", null],
            "description": "Choose the model along the path instead of giving k or lambda (lasso, elastic-net, mcp, scad, fw-lasso: their path; olsth, fsa, iht, htp: k = 1..=k). cv and cv_1se need fold statistics (the stream's cv.folds). The answer carries `selection`: the criterion per point and the chosen one."
        },
        "ebic_gamma": {
            "type": ["number", "null"],
            "minimum": 0,
            "maximum": 1,
            "description": "EBIC's gamma (default 1 - ln n / (2 ln p), clipped to [0, 1])."
        },
        "inference": {
            "type": "boolean",
            "default": false,
            "description": "The regression summary: standard errors, t statistics, p-values, confidence intervals and VIFs of the coefficients, adjusted R^2, the F test, log-likelihood, AIC / BIC and condition numbers (ols, ridge, and models refitted on a selected support, marked post_selection; a Lasso at a fixed lambda refitted gets selective inference instead)."
        },
        "level": {
            "type": ["number", "null"],
            "exclusiveMinimum": 0,
            "exclusiveMaximum": 1,
            "description": "With inference: the confidence level of the intervals (default 0.95)."
        },
        "hypotheses": {
            "type": "array",
            "description": "With inference: hypotheses to test on the model. {\"drop\": [features]}: the nested model's F test (statsmodels' compare_f_test); {\"restrictions\": [{\"terms\": {\"x1\": 1, \"x2\": -1}, \"equals\": 0}]}: the Wald test of R b = r (statsmodels' f_test; `intercept` names the intercept).",
            "items": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "drop": {"type": "array", "items": {"type": "string"}},
                    "restrictions": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "additionalProperties": false,
                            "required": ["terms"],
                            "properties": {
                                "terms": {"type": "object", "additionalProperties": {"type": "number"}},
                                "equals": {"type": "number", "default": 0}
                            }
                        }
                    }
                }
            }
        },
        "sigma": {
            "type": ["number", "null"],
            "exclusiveMinimum": 0,
            "description": "With inference on a Lasso at a fixed lambda, refitted: the noise standard deviation of the selective inference (default: from the OLS residual on every column, n >= 2p)."
        }
    }) else {
        unreachable!("an object literal")
    };
    m
}

/// The closed object schema of each method, and the components their properties refer to.
fn build() -> (Value, Vec<(String, RefOr<Schema>)>) {
    let mut one_of = Vec::new();
    let mut referenced = Vec::new();
    for v in variant_schemas() {
        let components: BTreeMap<String, Value> = v
            .components
            .iter()
            .chain(flattened().iter())
            .map(|(n, s)| (n.clone(), to_json(s)))
            .collect();
        let mut props = Map::new();
        props.insert("method".into(), json!({"type": "string", "enum": [v.name]}));
        let mut required = vec![json!("method")];
        collect(&v.schema, &components, &mut props, &mut required);
        props.extend(request_properties());
        let description = v.schema.get("description").cloned().unwrap_or(Value::Null);
        let mut object = json!({
            "title": v.name,
            "type": "object",
            "properties": props,
            "required": required,
            "additionalProperties": false,
        });
        if !description.is_null() {
            object["description"] = description;
        }
        one_of.push(object);
        referenced.extend(v.components);
    }
    let schema = json!({
        "description": "What to extract: `method` names the estimator (aliases accepted: elasticnet, enet, frank-wolfe, fw, ksupport; case and _ / - do not matter) and the other fields are its parameters, plus standardize, intercept and the class weights. A field the method does not take is refused.",
        "oneOf": one_of,
        "discriminator": {"propertyName": "method"},
    });
    (schema, referenced)
}

impl PartialSchema for Request {
    fn schema() -> RefOr<Schema> {
        serde_json::from_value(build().0).expect("the request schema is a schema")
    }
}

impl ToSchema for Request {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Request")
    }
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.extend(build().1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_method_is_a_closed_object_with_its_own_parameters() {
        let (schema, _) = build();
        let one_of = schema["oneOf"].as_array().unwrap();
        assert_eq!(one_of.len(), crate::model::Method::ESTIMATORS.len());
        let find = |m: &str| {
            one_of
                .iter()
                .find(|o| o["properties"]["method"]["enum"][0] == m)
                .unwrap_or_else(|| panic!("{m} missing"))
        };
        let mcp = find("mcp");
        assert_eq!(mcp["additionalProperties"], false);
        for key in [
            "k",
            "lambda",
            "gamma",
            "refit",
            "path_points",
            "standardize",
            "intercept",
        ] {
            assert!(mcp["properties"].get(key).is_some(), "mcp lacks {key}");
        }
        assert!(mcp["properties"].get("l1_ratio").is_none());
        assert!(find("elastic-net")["properties"].get("l1_ratio").is_some());
        assert!(find("lasso")["properties"].get("gamma").is_none());
        // Required fields come from the families (ridge needs lambda).
        assert!(
            find("ridge")["required"]
                .as_array()
                .unwrap()
                .contains(&json!("lambda"))
        );
        assert!(find("iht")["properties"].get("k").is_some());
        // And the whole thing is a utoipa schema.
        let _ = Request::schema();
    }
}
