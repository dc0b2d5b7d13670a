//! A refused message, on either kind of stream: counted by reason, logged (at most one line a
//! second per stream, with the number of lines held back) and copied to the dead-letter
//! topic. Shared by the row fold and the feature-stream dispatch.

use super::dlq::{Copy, DeadLetters};
use crate::metrics::Metrics;
use crate::reason::{Reason, Rejection};
use rdkafka::message::{BorrowedMessage, Message};
use std::time::{Duration, Instant};

/// The rejection of a message without a payload (a tombstone).
pub fn no_payload() -> Rejection {
    Rejection {
        reason: Reason::Malformed,
        message: "message has no payload".into(),
    }
}

/// Rejection logging, limited to one line per second per stream.
#[derive(Default)]
pub struct Warnings {
    /// Rejections not logged yet.
    suppressed: u64,
    last: Option<Instant>,
}

impl Warnings {
    /// Counts a refused message, logs it (rate-limited) and copies it to the dead-letter topic.
    /// Returns whether a copy was sent.
    pub fn reject(
        &mut self,
        stream: &str,
        metrics: &Metrics,
        dead_letters: Option<&DeadLetters>,
        msg: &BorrowedMessage<'_>,
        rej: &Rejection,
    ) -> bool {
        metrics
            .messages_rejected
            .with_label_values(&[stream, rej.reason.as_str()])
            .inc();
        let now = Instant::now();
        if self
            .last
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            tracing::warn!(
                stream = %stream, topic = %msg.topic(), partition = msg.partition(), offset = msg.offset(),
                reason = rej.reason.as_str(), error = %rej.message, suppressed = self.suppressed,
                "message rejected (copied to the dead-letter topic)"
            );
            self.last = Some(now);
            self.suppressed = 0;
        } else {
            self.suppressed += 1;
        }
        match dead_letters {
            Some(d) => {
                d.send(Copy::new(
                    stream,
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.payload().unwrap_or(&[]),
                    rej,
                ));
                true
            }
            None => false,
        }
    }
}
