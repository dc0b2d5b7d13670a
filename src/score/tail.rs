//! The exactly-once scorer's reader of its output's tail: where an input partition resumes is
//! right after the last source offset its output partition holds (the output topic is the
//! truth, the committed offset a lower bound). Apart from the scorer's loop because it is a
//! consumer of its own, assigned one output partition at a time.

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::time::{Duration, Instant};

/// At most this many messages of an output partition are read back to find where its input
/// partition resumes, when the last commit recorded no output end (`out=`).
const MAX_TAIL: i64 = 10_000;
/// How long reading an output partition's tail may take.
const TAIL_WAIT: Duration = Duration::from_secs(30);

/// Exactly once: reads the tail of the output partitions.
pub(super) struct Tail {
    /// A consumer that assigns itself one output partition at a time (`KafkaClients::reader`).
    pub(super) reader: BaseConsumer,
    pub(super) scorer: String,
    pub(super) topic: String,
    pub(super) output: String,
}

impl Tail {
    /// The offset after the last source offset of input partition `p` that output partition
    /// `p` holds from offset `hint` on (from `MAX_TAIL` before its end without one); None when
    /// it holds none there.
    pub(super) fn resume(&self, p: i32, hint: Option<i64>) -> Result<Option<i64>, String> {
        let (low, high) = self
            .reader
            .fetch_watermarks(&self.output, p, Duration::from_secs(10))
            .map_err(|e| format!("cannot read the end of {}/{p}: {e}", self.output))?;
        let from = match hint {
            Some(h) => h.clamp(low, high),
            None => (high - MAX_TAIL).max(low),
        };
        if from >= high {
            return Ok(None);
        }
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.output, p, Offset::Offset(from))
            .map_err(|e| e.to_string())?;
        self.reader.assign(&tpl).map_err(|e| e.to_string())?;
        let start = Instant::now();
        let mut last = None;
        let outcome = loop {
            if start.elapsed() > TAIL_WAIT {
                break Err(format!(
                    "{}/{p} not read from {from} to its end {high} within {} s",
                    self.output,
                    TAIL_WAIT.as_secs()
                ));
            }
            match self.reader.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => {
                    if let Some(o) = self.source_offset(&m, p) {
                        last = Some(last.map_or(o, |l: i64| l.max(o)));
                    }
                    if m.offset() >= high - 1 {
                        break Ok(last.map(|o| o + 1));
                    }
                }
                Some(Err(e)) => break Err(format!("cannot read {}/{p}: {e}", self.output)),
                None => {}
            }
        };
        let _ = self.reader.unassign();
        outcome
    }

    /// The source offset of a prediction of this scorer of input partition `p`.
    fn source_offset(&self, m: &BorrowedMessage<'_>, p: i32) -> Option<i64> {
        let headers = m.headers()?;
        let get = |key: &str| {
            headers
                .iter()
                .find(|h| h.key == key)
                .and_then(|h| h.value)
                .and_then(|v| std::str::from_utf8(v).ok())
        };
        (get("ravel-scorer")? == self.scorer
            && get("ravel-source-topic")? == self.topic
            && get("ravel-source-partition")?.parse::<i32>().ok()? == p)
            .then(|| get("ravel-source-offset")?.parse().ok())
            .flatten()
    }
}
