//! A wide path's settings as people give them (`ravel fit --wide`'s flags, the body of a
//! feature stream's `POST .../wide/path`), checked into the solver's `WideOptions` and
//! `PathSpec` here, once: the same rules and the same messages for both, each message naming
//! the setting as its caller spells it (`--sample-fraction` on the command line,
//! `sample_fraction` in JSON: `Spelling`). `WideOptions`, the solver's own
//! settings (with `Sampling`), and `PathSpec`, the path's grid, live here beside them.

use crate::solve::limits::{MAX_FW_ITERATIONS, MAX_PATH_POINTS};

/// How the vertex is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// Every column each iteration (deterministic FW).
    Full,
    /// `kappa` columns drawn each iteration (004 Alg. 2), from `seed`.
    Randomized {
        /// Columns sampled per iteration.
        kappa: usize,
        /// The seed.
        seed: u64,
    },
}

/// The grid of a path: 004's settings (`ravel fit --wide`'s flags and the service's request).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathSpec {
    /// Points of the path (004: 100).
    pub points: usize,
    /// The smallest delta as a fraction of delta_max (004: 0.01).
    pub delta_min_ratio: f64,
    /// delta_max's multiplier: lambda_max times this (004: 0.01), when `delta_max` is None.
    pub lambda_min_ratio: f64,
    /// The largest delta, or None to find it (`find_delta_max`).
    pub delta_max: Option<f64>,
}

impl Default for PathSpec {
    fn default() -> Self {
        PathSpec {
            points: 100,
            delta_min_ratio: 0.01,
            lambda_min_ratio: 0.01,
            delta_max: None,
        }
    }
}

/// `step_tol`'s default where the step rule applies: paper 004's (glmnet's) 1e-3.
pub const DEFAULT_STEP_TOL: f64 = 1e-3;

/// Solver settings.
#[derive(Debug, Clone, Copy)]
pub struct WideOptions {
    /// Deterministic or randomized.
    pub sampling: Sampling,
    /// Stop at duality gap <= tol * objective.
    pub tol: f64,
    /// Iterations per delta at most.
    pub max_iterations: usize,
    /// Away steps (default true; 004's Algorithm 2 has none).
    pub away_steps: bool,
    /// 004's stopping rule: stop a point when an iteration moved no coefficient by more than
    /// this (None: the gap rule alone).
    pub step_tol: Option<f64>,
}

impl Default for WideOptions {
    fn default() -> Self {
        WideOptions {
            sampling: Sampling::Full,
            tol: 1e-3,
            max_iterations: 100_000,
            away_steps: true,
            step_tol: None,
        }
    }
}

/// The settings a message can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// `randomized` or `deterministic`.
    Variant,
    /// Columns sampled an iteration.
    Kappa,
    /// Columns sampled an iteration, as a fraction of the used (non-empty) columns.
    SampleFraction,
    /// The relative duality gap a point must meet.
    Tol,
    /// Iterations a point at most.
    MaxIterations,
    /// Paper 004's step rule's epsilon.
    StepTol,
    /// Points of the path.
    PathPoints,
    /// The smallest delta as a fraction of delta_max.
    DeltaMinRatio,
    /// delta_max's multiplier of lambda_max, when delta_max is found.
    LambdaMinRatio,
    /// The largest delta of the path.
    DeltaMax,
}

impl Setting {
    /// The setting's name as a JSON key (the API's body); its flag is the same words with
    /// dashes (`--sample-fraction`).
    pub fn key(self) -> &'static str {
        match self {
            Setting::Variant => "variant",
            Setting::Kappa => "kappa",
            Setting::SampleFraction => "sample_fraction",
            Setting::Tol => "tol",
            Setting::MaxIterations => "max_iterations",
            Setting::StepTol => "step_tol",
            Setting::PathPoints => "path_points",
            Setting::DeltaMinRatio => "delta_min_ratio",
            Setting::LambdaMinRatio => "lambda_min_ratio",
            Setting::DeltaMax => "delta_max",
        }
    }
}

/// How the caller names a setting in its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spelling {
    /// `sample_fraction`: a key of a JSON body.
    Key,
    /// `--sample-fraction`: a flag of the command line.
    Flag,
}

impl Spelling {
    fn name(self, s: Setting) -> String {
        match self {
            Spelling::Key => s.key().to_string(),
            Spelling::Flag => format!("--{}", s.key().replace('_', "-")),
        }
    }
}

/// The settings as given (None: the default). `step_rule` says whether a point stops by
/// paper 004's step rule (`step_tol`, default `DEFAULT_STEP_TOL`) or by the duality gap alone.
#[derive(Debug, Clone, Default)]
pub struct WideSettings {
    /// `randomized` (the default) or `deterministic`.
    pub variant: Option<String>,
    /// Randomized: columns sampled an iteration (default from `sample_fraction`).
    pub kappa: Option<usize>,
    /// Randomized: columns sampled an iteration as a fraction of the used (non-empty)
    /// columns, in (0, 1] (default 0.01); the draw is among them (`wide::sample`).
    pub sample_fraction: Option<f64>,
    /// Randomized: the sampling's seed (default 0).
    pub seed: Option<u64>,
    /// The relative duality gap, in (0, 1) (default 1e-3).
    pub tol: Option<f64>,
    /// Iterations a point at most (default 100,000).
    pub max_iterations: Option<usize>,
    /// Away steps (default true).
    pub away_steps: Option<bool>,
    /// Whether points stop by paper 004's step rule (else by the gap alone).
    pub step_rule: bool,
    /// The step rule's epsilon (default `DEFAULT_STEP_TOL`).
    pub step_tol: Option<f64>,
    /// Points of the path (default 100).
    pub path_points: Option<usize>,
    /// The smallest delta as a fraction of delta_max, in (0, 1) (default 0.01).
    pub delta_min_ratio: Option<f64>,
    /// delta_max's multiplier of lambda_max, in (0, 1) (default 0.01).
    pub lambda_min_ratio: Option<f64>,
    /// The largest delta (default: found).
    pub delta_max: Option<f64>,
}

/// The settings checked: the solver's options and the path's shape.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The solver's options.
    pub options: WideOptions,
    /// The path's shape.
    pub spec: PathSpec,
    /// The columns sampled an iteration (randomized).
    pub kappa: Option<usize>,
}

impl WideSettings {
    /// Checks the settings for a file of `used` used (non-empty) columns, the columns the
    /// randomized rule draws from (kappa is at most `used`); the error names the setting as
    /// `spelling` writes it and the range it must lie in.
    pub fn check(&self, used: usize, spelling: Spelling) -> Result<Checked, String> {
        let name = |s| spelling.name(s);
        let d = WideOptions::default();
        let sampling = match self.variant.as_deref() {
            Some("deterministic") => {
                if self.kappa.is_some() || self.sample_fraction.is_some() {
                    return Err(format!(
                        "{} and {} apply to {} randomized only",
                        name(Setting::Kappa),
                        name(Setting::SampleFraction),
                        name(Setting::Variant)
                    ));
                }
                Sampling::Full
            }
            None | Some("randomized") => {
                let kappa = match (self.kappa, self.sample_fraction) {
                    (Some(_), Some(_)) => {
                        return Err(format!(
                            "give {} or {}, not both",
                            name(Setting::Kappa),
                            name(Setting::SampleFraction)
                        ));
                    }
                    (Some(k), None) => k,
                    (None, f) => {
                        let f = f.unwrap_or(0.01);
                        if !(f > 0.0 && f <= 1.0) {
                            return Err(format!(
                                "{} {f}: it must lie in (0, 1]",
                                name(Setting::SampleFraction)
                            ));
                        }
                        ((f * used as f64).ceil() as usize).max(1)
                    }
                };
                if kappa == 0 {
                    return Err(format!("{} must be at least 1", name(Setting::Kappa)));
                }
                Sampling::Randomized {
                    kappa: kappa.min(used),
                    seed: self.seed.unwrap_or(0),
                }
            }
            Some(v) => {
                return Err(format!(
                    "{} \"{v}\": it is \"randomized\" or \"deterministic\"",
                    name(Setting::Variant)
                ));
            }
        };
        let tol = self.tol.unwrap_or(d.tol);
        if !(tol > 0.0 && tol < 1.0) {
            return Err(format!(
                "{} {tol}: it is a relative duality gap in (0, 1)",
                name(Setting::Tol)
            ));
        }
        let max_iterations = self.max_iterations.unwrap_or(d.max_iterations);
        if max_iterations == 0 || max_iterations > MAX_FW_ITERATIONS {
            return Err(format!(
                "{} {max_iterations}: it must lie in [1, {MAX_FW_ITERATIONS}]",
                name(Setting::MaxIterations)
            ));
        }
        if let Some(eps) = self.step_tol
            && !(eps > 0.0 && eps.is_finite())
        {
            return Err(format!(
                "{} {eps}: it must be a positive change of a coefficient",
                name(Setting::StepTol)
            ));
        }
        let points = self.path_points.unwrap_or(100);
        if points == 0 || points > MAX_PATH_POINTS {
            return Err(format!(
                "{} {points}: it must lie in [1, {MAX_PATH_POINTS}]",
                name(Setting::PathPoints)
            ));
        }
        if let Some(d) = self.delta_max
            && !(d.is_finite() && d > 0.0)
        {
            return Err(format!(
                "{} {d}: it must be a finite number > 0",
                name(Setting::DeltaMax)
            ));
        }
        let ratio = |setting, v: Option<f64>| {
            let r = v.unwrap_or(0.01);
            if r > 0.0 && r < 1.0 {
                Ok(r)
            } else {
                Err(format!("{} {r}: it must lie in (0, 1)", name(setting)))
            }
        };
        let kappa = match sampling {
            Sampling::Randomized { kappa, .. } => Some(kappa),
            Sampling::Full => None,
        };
        Ok(Checked {
            options: WideOptions {
                sampling,
                tol,
                max_iterations,
                away_steps: self.away_steps.unwrap_or(true),
                step_tol: self
                    .step_rule
                    .then(|| self.step_tol.unwrap_or(DEFAULT_STEP_TOL)),
            },
            spec: PathSpec {
                points,
                delta_min_ratio: ratio(Setting::DeltaMinRatio, self.delta_min_ratio)?,
                lambda_min_ratio: ratio(Setting::LambdaMinRatio, self.lambda_min_ratio)?,
                delta_max: self.delta_max,
            },
            kappa,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Setting; 10] = [
        Setting::Variant,
        Setting::Kappa,
        Setting::SampleFraction,
        Setting::Tol,
        Setting::MaxIterations,
        Setting::StepTol,
        Setting::PathPoints,
        Setting::DeltaMinRatio,
        Setting::LambdaMinRatio,
        Setting::DeltaMax,
    ];

    #[test]
    fn defaults_sample_one_percent_and_the_step_rule_is_the_callers_choice() {
        let c = WideSettings::default().check(1000, Spelling::Flag).unwrap();
        assert_eq!(c.kappa, Some(10));
        assert_eq!(c.options.step_tol, None);
        assert_eq!(c.spec.points, 100);
        let c = WideSettings {
            step_rule: true,
            ..Default::default()
        }
        .check(1000, Spelling::Flag)
        .unwrap();
        assert_eq!(c.options.step_tol, Some(DEFAULT_STEP_TOL));
    }

    #[test]
    fn each_refusal_names_the_setting_in_the_callers_spelling() {
        let cases: [(WideSettings, &str); 7] = [
            (
                WideSettings {
                    variant: Some("deterministic".into()),
                    kappa: Some(3),
                    ..Default::default()
                },
                "--kappa and --sample-fraction apply to --variant randomized only",
            ),
            (
                WideSettings {
                    kappa: Some(3),
                    sample_fraction: Some(0.1),
                    ..Default::default()
                },
                "give --kappa or --sample-fraction, not both",
            ),
            (
                WideSettings {
                    sample_fraction: Some(1.5),
                    ..Default::default()
                },
                "--sample-fraction 1.5: it must lie in (0, 1]",
            ),
            (
                WideSettings {
                    tol: Some(1.0),
                    ..Default::default()
                },
                "--tol 1: it is a relative duality gap in (0, 1)",
            ),
            (
                WideSettings {
                    step_tol: Some(-1.0),
                    ..Default::default()
                },
                "--step-tol -1: it must be a positive change of a coefficient",
            ),
            (
                WideSettings {
                    path_points: Some(0),
                    ..Default::default()
                },
                "--path-points 0: it must lie in [1, ",
            ),
            (
                WideSettings {
                    lambda_min_ratio: Some(0.0),
                    ..Default::default()
                },
                "--lambda-min-ratio 0: it must lie in (0, 1)",
            ),
        ];
        for (s, want) in cases {
            let e = s.check(100, Spelling::Flag).unwrap_err();
            assert!(e.starts_with(want), "{e:?} against {want:?}");
            // The API's words: the same message, with the keys for the flags.
            let key = s.check(100, Spelling::Key).unwrap_err();
            let mut as_keys = e.clone();
            for setting in ALL {
                as_keys = as_keys.replace(&Spelling::Flag.name(setting), setting.key());
            }
            assert_eq!(key, as_keys);
        }
    }
}
