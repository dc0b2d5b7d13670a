//! What a stream learns: regression on y, or classification on +1/-1 labels. One small type
//! below everything else, shared by the statistics, the solvers, the CLI and the service.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Regression on y, or classification on +1/-1 labels (0 counts as -1).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// A real-valued target.
    #[default]
    Regression,
    /// Labels +1 / -1.
    Classification,
}

impl Task {
    /// Both tasks.
    pub const ALL: [Task; 2] = [Task::Regression, Task::Classification];
    /// `regression` or `classification`.
    pub fn name(&self) -> &'static str {
        match self {
            Task::Regression => "regression",
            Task::Classification => "classification",
        }
    }
}

impl fmt::Display for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Task {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Task::ALL
            .into_iter()
            .find(|t| t.name() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| format!("unknown task '{s}': expected regression or classification"))
    }
}
