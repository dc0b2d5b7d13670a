//! A refused message, on either kind of stream: counted by reason, logged (at most one line
//! every `dlq::LOG_EVERY` per stream, with the number of rejections held back) and copied to
//! the dead-letter topic. Shared by the row fold and the feature-stream dispatch.

use super::dlq::{Copy, DeadLetters, LOG_EVERY};
use super::log_rate::RateLimit;
use crate::metrics::Metrics;
use crate::reason::Rejection;
use crate::state::arrivals::Arrivals;
use rdkafka::message::{BorrowedMessage, Message};
use std::sync::Arc;
use std::time::Instant;

/// Rejection logging, limited to one line every `LOG_EVERY` per stream.
pub struct Warnings {
    limit: RateLimit,
}

impl Default for Warnings {
    fn default() -> Self {
        Warnings {
            limit: RateLimit::new(LOG_EVERY),
        }
    }
}

impl Warnings {
    /// Says how many rejections were held back when no rejection came since to say it.
    pub fn overdue(&mut self, stream: &str) {
        if let Some(n) = self.limit.overdue(Instant::now()) {
            tracing::warn!(stream = %stream, suppressed = n, "{n} more messages rejected (copied to the dead-letter topic)");
        }
    }

    /// Counts a refused message (in the metrics, and in the stream's `arrivals` when given,
    /// which its copy carries to count its delivery), logs it (rate-limited) and copies it to
    /// the dead-letter topic. Returns whether a copy was sent.
    pub fn reject(
        &mut self,
        stream: &str,
        metrics: &Metrics,
        arrivals: Option<&Arc<Arrivals>>,
        dead_letters: Option<&DeadLetters>,
        msg: &BorrowedMessage<'_>,
        rej: &Rejection,
    ) -> bool {
        metrics
            .ingest
            .messages_rejected
            .with_label_values(&[stream, rej.reason.as_str()])
            .inc();
        if let Some(a) = arrivals {
            a.rejected(rej.reason);
        }
        if let Some(suppressed) = self.limit.admit(Instant::now()) {
            tracing::warn!(
                stream = %stream, topic = %msg.topic(), partition = msg.partition(), offset = msg.offset(),
                reason = rej.reason.as_str(), error = %rej.message, suppressed,
                "message rejected (copied to the dead-letter topic)"
            );
        }
        match dead_letters {
            Some(d) => {
                d.send(
                    Copy::new(
                        stream,
                        msg.topic(),
                        msg.partition(),
                        msg.offset(),
                        msg.key(),
                        msg.payload().unwrap_or(&[]),
                        rej,
                    )
                    .with_headers(msg.headers())
                    .counted_in(arrivals.cloned()),
                );
                true
            }
            None => false,
        }
    }
}
