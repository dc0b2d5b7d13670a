//! `[history]` and a stream's `history = { ... }`: the schema and bounds of the model
//! history's settings, resolved per stream into a `HistorySpec` (the ring itself and its
//! recorder are `state::history`'s). Here, below the streams, so that the configuration does
//! not import the state it configures.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[history]`: what the service keeps of each stream's default model over time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HistoryConfig {
    /// Time between two snapshots, in milliseconds.
    pub interval_ms: u64,
    /// Snapshots kept per stream (the oldest is dropped first).
    pub length: usize,
    /// Nonzeros of the default model (lasso), capped at the stream's p.
    pub k: usize,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            interval_ms: 10_000,
            length: 360,
            k: 10,
        }
    }
}

/// A stream's own `history = { ... }`: any field given replaces `[history]`'s.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HistoryOverride {
    pub interval_ms: Option<u64>,
    pub length: Option<usize>,
    pub k: Option<usize>,
}

/// Bounds of the history's settings.
pub const INTERVAL_MS: std::ops::RangeInclusive<u64> = 100..=86_400_000;
pub const LENGTH: std::ops::RangeInclusive<usize> = 1..=100_000;
pub const K: std::ops::RangeInclusive<usize> = 1..=1_000;

/// One stream's resolved history settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistorySpec {
    pub interval: Duration,
    pub length: usize,
    pub k: usize,
}

impl HistoryConfig {
    /// `[history]` with a stream's override, checked; k is capped at the stream's p.
    pub fn resolve(&self, o: Option<&HistoryOverride>, p: usize) -> Result<HistorySpec, String> {
        let o = o.cloned().unwrap_or_default();
        let interval_ms = o.interval_ms.unwrap_or(self.interval_ms);
        let length = o.length.unwrap_or(self.length);
        let k = o.k.unwrap_or(self.k);
        if !INTERVAL_MS.contains(&interval_ms) {
            return Err(format!(
                "interval_ms must lie in {}..={} (0.1 s to a day), got {interval_ms}",
                INTERVAL_MS.start(),
                INTERVAL_MS.end()
            ));
        }
        if !LENGTH.contains(&length) {
            return Err(format!(
                "length must lie in {}..={}, got {length}",
                LENGTH.start(),
                LENGTH.end()
            ));
        }
        if !K.contains(&k) {
            return Err(format!(
                "k must lie in {}..={}, got {k}",
                K.start(),
                K.end()
            ));
        }
        Ok(HistorySpec {
            interval: Duration::from_millis(interval_ms),
            length,
            k: k.min(p.max(1)),
        })
    }
}

/// Bytes of one point besides its coefficients (the struct and its two vectors' headers):
/// `size_of::<state::history::HistoryPoint>()`, which a test there holds equal.
pub const POINT_BYTES: u64 = 288;

impl HistorySpec {
    /// The most the ring can hold: `length` points of k coefficients (index and value).
    pub fn memory_bytes(&self) -> u64 {
        let per_point = POINT_BYTES + self.k as u64 * (4 + 8);
        (self.length as u64).saturating_mul(per_point)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_replace_fields_and_bounds_are_checked() {
        let c = HistoryConfig::default();
        let o = HistoryOverride {
            length: Some(7),
            k: Some(50),
            ..Default::default()
        };
        let s = c.resolve(Some(&o), 20).unwrap();
        assert_eq!((s.length, s.k), (7, 20), "k is capped at p");
        assert_eq!(s.interval, Duration::from_millis(c.interval_ms));
        let bad = |o: HistoryOverride| c.resolve(Some(&o), 20).unwrap_err();
        assert!(
            bad(HistoryOverride {
                interval_ms: Some(10),
                ..Default::default()
            })
            .contains("interval_ms")
        );
        assert!(
            bad(HistoryOverride {
                length: Some(0),
                ..Default::default()
            })
            .contains("length")
        );
        assert!(
            bad(HistoryOverride {
                k: Some(5000),
                ..Default::default()
            })
            .contains("k must")
        );
        // The bound on memory: length points of k coefficients.
        let big = c
            .resolve(
                Some(&HistoryOverride {
                    length: Some(100_000),
                    k: Some(1000),
                    ..Default::default()
                }),
                5000,
            )
            .unwrap();
        assert_eq!(big.memory_bytes(), 100_000 * (POINT_BYTES + 12_000));
    }
}
