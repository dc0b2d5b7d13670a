//! What arrived on an observation stream's topic since the service started: messages read,
//! refused by reason, and what became of their dead-letter copies. The ingest loop and the
//! dead-letter thread count here as they go (beside the Prometheus counters of the same
//! names), and the API's stream summary reads it, as it reads every other published state.

use crate::reason::Reason;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One stream's running tallies (shared: `Arc<Arrivals>` in its `StreamHandle` and in each of
/// its dead-letter copies).
#[derive(Debug, Default)]
pub struct Arrivals {
    messages: AtomicU64,
    /// By the position of the reason in `Reason::ROWS`.
    rejected: [AtomicU64; Reason::ROWS.len()],
    delivered: AtomicU64,
    failed: AtomicU64,
    skipped: AtomicU64,
}

/// The tallies at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally {
    pub messages: u64,
    /// Every row reason, 0 included.
    pub rejected: BTreeMap<&'static str, u64>,
    pub delivered: u64,
    pub failed: u64,
    pub skipped: u64,
}

impl Arrivals {
    /// A message read from the topic.
    pub fn message(&self) {
        self.messages.fetch_add(1, Relaxed);
    }

    /// A message refused for `reason` (a reason observation streams never give is not kept).
    pub fn rejected(&self, reason: Reason) {
        if let Some(i) = Reason::ROWS.iter().position(|r| *r == reason) {
            self.rejected[i].fetch_add(1, Relaxed);
        }
    }

    /// A dead-letter copy delivered.
    pub fn delivered(&self) {
        self.delivered.fetch_add(1, Relaxed);
    }

    /// A dead-letter copy's delivery that failed (it may be sent again).
    pub fn failed(&self) {
        self.failed.fetch_add(1, Relaxed);
    }

    /// A refused message moved past without a delivered copy (`dlq.on_failure = "skip"`).
    pub fn skipped(&self) {
        self.skipped.fetch_add(1, Relaxed);
    }

    pub fn tally(&self) -> Tally {
        Tally {
            messages: self.messages.load(Relaxed),
            rejected: Reason::ROWS
                .iter()
                .zip(&self.rejected)
                .map(|(r, n)| (r.as_str(), n.load(Relaxed)))
                .collect(),
            delivered: self.delivered.load(Relaxed),
            failed: self.failed.load(Relaxed),
            skipped: self.skipped.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_count_by_reason_and_keep_every_row_reason() {
        let a = Arrivals::default();
        a.message();
        a.message();
        a.rejected(Reason::Schema);
        a.rejected(Reason::Index); // a feature-stream reason: not a row reason, not kept
        a.delivered();
        a.failed();
        a.skipped();
        let t = a.tally();
        assert_eq!(t.messages, 2);
        assert_eq!(t.rejected.len(), Reason::ROWS.len());
        assert_eq!(t.rejected["schema"], 1);
        assert_eq!(t.rejected.values().sum::<u64>(), 1);
        assert_eq!((t.delivered, t.failed, t.skipped), (1, 1, 1));
    }
}
