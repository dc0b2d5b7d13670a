//! `Windows` in a checkpoint or a state record: the spec, the clock and every bucket, read
//! back through `WindowSpec::new`'s checks and refusing two buckets at one start. Kept apart
//! so the bucket arithmetic in `super` reads without the serde plumbing.

use super::{Bucket, WindowSpec, Windows};
use crate::stats::Stats;
use crate::task::Task;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// `Windows` as stored in a checkpoint or a state record.
#[derive(Serialize)]
struct StoredRef<'a> {
    bucket_ms: i64,
    keep_ms: i64,
    task: Task,
    p: usize,
    now_ms: Option<i64>,
    buckets: Vec<BucketRef<'a>>,
}

#[derive(Serialize)]
struct BucketRef<'a> {
    start_ms: i64,
    width_ms: i64,
    stats: &'a Stats,
}

#[derive(Deserialize)]
struct Stored {
    bucket_ms: i64,
    keep_ms: i64,
    task: Task,
    p: usize,
    now_ms: Option<i64>,
    buckets: Vec<StoredBucket>,
}

#[derive(Deserialize)]
struct StoredBucket {
    start_ms: i64,
    width_ms: i64,
    stats: Stats,
}

impl Serialize for Windows {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        StoredRef {
            bucket_ms: self.spec.bucket_ms,
            keep_ms: self.spec.keep_ms,
            task: self.task,
            p: self.p,
            now_ms: self.now_ms,
            buckets: self
                .buckets
                .iter()
                .map(|(&start_ms, b)| BucketRef {
                    start_ms,
                    width_ms: b.width,
                    stats: &b.stats,
                })
                .collect(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Windows {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Stored::deserialize(d)?;
        let spec = WindowSpec::new(s.bucket_ms, s.keep_ms).map_err(serde::de::Error::custom)?;
        let mut w = Windows::new(spec, s.task, s.p);
        w.now_ms = s.now_ms;
        for b in s.buckets {
            let dup = w.buckets.insert(
                b.start_ms,
                Bucket {
                    width: b.width_ms,
                    stats: Arc::new(b.stats),
                },
            );
            if dup.is_some() {
                return Err(serde::de::Error::custom(format!(
                    "two buckets start at {}",
                    b.start_ms
                )));
            }
        }
        Ok(w)
    }
}
