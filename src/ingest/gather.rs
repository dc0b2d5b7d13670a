//! Gathering a batch: what the consumer has buffered once a first message arrived, up to
//! `ingest.max_batch_rows` rows or `ingest.max_batch_wait_ms`, with JSON messages decoded
//! ahead on other threads while the loop goes on (`ahead`), and the Avro values of a stream
//! in the window decoded together (`Decoder::decode_batch`, through arrow-avro).

use super::rebalance::IngestContext;
use super::{AHEAD_MIN_BYTES, Early, Ingest, Target, WINDOW_BYTES, ahead};
use crate::codec::{Decoded, feature_format, format};
use crate::kafka::value_schema_id;
use rdkafka::consumer::BaseConsumer;
use rdkafka::message::{BorrowedMessage, Message};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A message in the window: decoded on an `ahead` thread, decoded with others of its batch
/// (`Ingest::decode_batched`), or to be decoded when accepted.
pub(super) enum Pending {
    Ahead,
    Ready(Decoded),
    Later,
}

impl Ingest {
    /// Reads one batch: waits up to 100 ms for a first message (so shutdown, checkpoints and
    /// snapshots are never late), then takes what the consumer has already buffered without
    /// waiting, and ends the batch as soon as nothing more is: a row of a quiet stream is
    /// folded at once instead of waiting for a batch that will not fill, and under load the
    /// batch grows by itself (messages keep arriving while the previous batch folds).
    /// `max_rows` rows (or feature-stream messages) and `max_wait` since the first message
    /// end it; the messages still in the window (at most `WINDOW_BYTES` of payload) join it,
    /// so a batch can pass `max_rows` by that much and by the last message's rows (a
    /// message's rows are never split). Returns the rows gathered; an error when a partition
    /// could not be positioned (`Change::Unpositioned`).
    ///
    /// Messages are accepted in the order read, each once `WINDOW_BYTES` of payload were read
    /// after it (or the batch ends): meanwhile the JSON ones are decoded on the `ahead`
    /// threads, so parsing overlaps polling, accepting and applying feature columns, on every
    /// core. Feature streams publish every `features::PUBLISH_EVERY` within a batch.
    pub(super) fn gather<'scope, 'c: 'scope>(
        &mut self,
        consumer: &'c BaseConsumer<IngestContext>,
        ahead: &mut ahead::Ahead<'scope, '_, Early>,
    ) -> anyhow::Result<usize> {
        let mut rows = 0;
        let mut deadline: Option<Instant> = None;
        let mut window: VecDeque<(Arc<BorrowedMessage<'c>>, Pending)> = VecDeque::new();
        let mut window_bytes = 0;
        loop {
            let timeout = match deadline {
                None => Duration::from_millis(100),
                Some(_) => Duration::ZERO,
            };
            let polled = consumer.poll(timeout);
            self.apply_changes()?;
            match polled {
                None => break,
                Some(Err(e)) => {
                    self.poll_error(e);
                    break;
                }
                Some(Ok(msg)) => {
                    let msg = Arc::new(msg);
                    let early = match self.decode_ahead(ahead, &msg) {
                        true => Pending::Ahead,
                        false => Pending::Later,
                    };
                    window_bytes += msg.payload_len();
                    window.push_back((msg, early));
                    while window_bytes > WINDOW_BYTES
                        && let Some((msg, early)) = window.pop_front()
                    {
                        window_bytes -= msg.payload_len();
                        rows += self.accept_pending(ahead, &msg, early, &mut window);
                    }
                    self.publish_features_due();
                    let due = *deadline.get_or_insert_with(|| Instant::now() + self.max_wait);
                    if rows >= self.max_rows || Instant::now() >= due {
                        break;
                    }
                }
            }
        }
        while let Some((msg, early)) = window.pop_front() {
            rows += self.accept_pending(ahead, &msg, early, &mut window);
        }
        Ok(rows)
    }

    /// Accepts a message taken from the window. A message of a stream decoded a batch at a
    /// time (`Decoder::batched`: Avro values) not decoded yet is decoded now with the others
    /// of its stream still in the window, whose decodings wait there for their turn.
    fn accept_pending(
        &mut self,
        ahead: &mut ahead::Ahead<'_, '_, Early>,
        msg: &BorrowedMessage<'_>,
        pending: Pending,
        window: &mut VecDeque<(Arc<BorrowedMessage<'_>>, Pending)>,
    ) -> usize {
        match pending {
            Pending::Ahead => self.accept_read(ahead, msg, true),
            Pending::Ready(d) => self.accept(msg, Some(Early::Rows(d))),
            Pending::Later => match self.decode_batched(msg, window) {
                Some(d) => self.accept(msg, Some(Early::Rows(d))),
                None => self.accept_read(ahead, msg, false),
            },
        }
    }

    /// The decoding of `msg` when its stream is decoded a batch at a time, with the messages
    /// of that stream waiting in `window` (marked `Ready`); None otherwise.
    fn decode_batched(
        &self,
        msg: &BorrowedMessage<'_>,
        window: &mut VecDeque<(Arc<BorrowedMessage<'_>>, Pending)>,
    ) -> Option<Decoded> {
        let Some(&Target::Rows(i)) = self.by_topic.get(msg.topic()) else {
            return None;
        };
        let handle = &self.streams[i].handle;
        if !handle.codec.batched() {
            return None;
        }
        let mine: Vec<usize> = window
            .iter()
            .enumerate()
            .filter(|(_, (m, p))| {
                matches!(p, Pending::Later)
                    && matches!(self.by_topic.get(m.topic()), Some(&Target::Rows(j)) if j == i)
            })
            .map(|(at, _)| at)
            .collect();
        let msgs: Vec<crate::codec::decoder::Message> =
            std::iter::once((msg.payload(), value_schema_id(msg.headers())))
                .chain(mine.iter().map(|&at| {
                    let m = &window[at].0;
                    (m.payload(), value_schema_id(m.headers()))
                }))
                .collect();
        let mut decoded = handle.codec.decode_batch(&msgs).into_iter();
        let first = decoded.next();
        for (at, d) in mine.into_iter().zip(decoded) {
            window[at].1 = Pending::Ready(d);
        }
        first
    }

    /// Hands a JSON message of a stream or feature stream to the `ahead` threads (the message
    /// itself, shared: they read its payload where librdkafka holds it); whether it did. Binary
    /// messages are a copy to decode: never.
    pub(super) fn decode_ahead<'scope, 'm: 'scope>(
        &mut self,
        ahead: &mut ahead::Ahead<'scope, '_, Early>,
        msg: &Arc<BorrowedMessage<'m>>,
    ) -> bool {
        let Some(payload) = msg.payload() else {
            return false;
        };
        if payload.len() < AHEAD_MIN_BYTES {
            return false;
        }
        let job_msg = Arc::clone(msg);
        match self.by_topic.get(msg.topic()) {
            Some(&Target::Rows(i))
                if !payload.starts_with(&format::BINARY_MAGIC)
                    && !self.streams[i].handle.codec.batched() =>
            {
                if !ahead.start() {
                    return false;
                }
                let handle = self.streams[i].handle.clone();
                ahead.submit(move || {
                    Early::Rows(
                        handle
                            .codec
                            .decode(job_msg.payload(), value_schema_id(job_msg.headers())),
                    )
                });
                true
            }
            Some(&Target::Features(i)) => {
                if !ahead.start() {
                    return false;
                }
                let n = self.features[i].live.handle.config.n;
                // The message's payload is the one just read (a message does not change).
                ahead.submit(move || {
                    Early::Feature(feature_format::decode(
                        job_msg.payload().unwrap_or_default(),
                        n,
                    ))
                });
                true
            }
            _ => false,
        }
    }

    /// Accepts a message read in `gather`, with its decoding if it was handed to `ahead`
    /// (taken even if the message is then dropped, so that results stay in step).
    pub(super) fn accept_read(
        &mut self,
        ahead: &mut ahead::Ahead<'_, '_, Early>,
        msg: &BorrowedMessage<'_>,
        early: bool,
    ) -> usize {
        let early = if early { ahead.take() } else { None };
        self.accept(msg, early)
    }
}
