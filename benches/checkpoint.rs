//! Checkpoint cost at p = 100 and p = 1000 (`cargo bench --bench checkpoint`): the bytes of a
//! checkpoint and the time to write it durably (encode, write, fsync, rename) in the binary
//! format, next to the JSON of the previous version (full E[x x^T], written the same way);
//! and what remains on the ingest thread, the copy of the statistics into the writer's job.
//! Then a stream with `windows = { bucket = "1m", keep = "7d" }` at p = 100 holding a full
//! week (a day of minute buckets, six of hours): each bucket is a file (file store) or a
//! record (Kafka store) of its own, so the first checkpoint writes every bucket and the next,
//! one row later, that row's bucket and the checkpoint or state record only (for the Kafka
//! store the bytes and the time to encode them; the broker's acknowledgement is not measured
//! here). Medians of 7 on the
//! machine's temporary directory.

use ravel::Stats;
use ravel::checkpoint::{self, Checkpoint};
use ravel_core::Task;
use ravel_core::stats::AlphaSchedule;
use ravel_core::synthetic::SyntheticSpec;
use std::io::Write;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn time(mut f: impl FnMut()) -> f64 {
    median(
        (0..7)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    )
}

/// The previous version's content: the checkpoint as JSON with the full matrix.
fn old_json(cp: &Checkpoint, p: usize) -> serde_json::Value {
    let mut v = serde_json::to_value(cp).unwrap();
    let lower: Vec<f64> = v["stats"]["sxx_lower"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let mut full = vec![0.0; p * p];
    let mut at = 0;
    for j in 0..p {
        for i in j..p {
            full[j * p + i] = lower[at];
            at += 1;
        }
    }
    let stats = v["stats"].as_object_mut().unwrap();
    stats.remove("sxx_lower");
    stats.insert("sxx".into(), serde_json::json!(full));
    v
}

/// Writes it as the previous version did (buffered JSON, flush, fsync); returns the bytes.
fn write_json(dir: &std::path::Path, v: &serde_json::Value) -> usize {
    let path = dir.join("old.json");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    serde_json::to_writer(&mut f, v).unwrap();
    f.flush().unwrap();
    f.get_ref().sync_all().unwrap();
    std::fs::metadata(&path).unwrap().len() as usize
}

/// A checkpoint of `stats` (six partitions read to offset 1,000,000), without folds or
/// windows.
fn checkpoint_of(stats: Stats) -> Checkpoint {
    Checkpoint {
        version: checkpoint::VERSION,
        stream: "s".into(),
        topic: "t".into(),
        cluster_id: Some("c".into()),
        offsets: (0..6).map(|i| (i, 1_000_000)).collect(),
        last_update_ms: Some(1),
        as_of_ms: Some(1),
        stats,
        folds: None,
        windows: None,
        bucket_files: None,
    }
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    println!(
        "{:<8} {:>12} {:>12} {:>14} {:>14} {:>16}",
        "p", "binary MB", "JSON MB", "binary write", "JSON write", "ingest thread"
    );
    for p in [100, 1000] {
        let spec: SyntheticSpec = format!("p={p},k=10,n=4000,seed=1").parse().unwrap();
        let (mut x, mut y) = (vec![], vec![]);
        spec.rows().fill(4000, &mut x, &mut y);
        let mut stats = Stats::new(Task::Regression, p, AlphaSchedule::Plain);
        stats.update_batch(&x, &y).unwrap();
        let mut cp = checkpoint_of(stats);
        let binary = time(|| checkpoint::write(dir.path(), &mut cp).unwrap());
        let bytes = std::fs::metadata(checkpoint::path(dir.path(), "s"))
            .unwrap()
            .len() as f64;
        // The previous version serialized the statistics directly: the full-matrix value is
        // built outside the clock.
        let old = old_json(&cp, p);
        let mut json_bytes = 0;
        let json = time(|| json_bytes = write_json(dir.path(), &old));
        let copy = time(|| {
            std::hint::black_box(cp.stats.clone());
        });
        println!(
            "{:<8} {:>12.2} {:>12.2} {:>11.1} ms {:>11.1} ms {:>13.2} ms",
            p,
            bytes / 1e6,
            json_bytes as f64 / 1e6,
            binary,
            json,
            copy
        );
    }
    windows_checkpoint(dir.path());
}

/// A checkpoint of a p = 100 stream holding a week of one-minute buckets (rolled up past a
/// day): its bytes, the durable write, the copy on the ingest thread, and the share of it one
/// bucket is.
fn windows_checkpoint(dir: &std::path::Path) {
    use ravel_core::stats::windows::{WindowSpec, Windows};
    // Three rows a minute over the week before `now` (a bucket of one row has zero centred
    // moments, which CBOR writes in 3 bytes each: that would understate a bucket).
    let (p, minutes, per_minute) = (100usize, 7 * 1440usize, 3usize);
    let n = minutes * per_minute;
    let spec: SyntheticSpec = format!("p={p},k=10,n={n},seed=2").parse().unwrap();
    let (mut x, mut y) = (vec![], vec![]);
    spec.rows().fill(n, &mut x, &mut y);
    let now: i64 = 1_700_006_400_000;
    let stamps: Vec<i64> = (0..n)
        .map(|i| now - (minutes - i / per_minute) as i64 * 60_000 + 1 + i as i64 % 3)
        .collect();
    let mut w = Windows::new(WindowSpec::parse("1m", "7d").unwrap(), Task::Regression, p);
    let folded = w.fold(now, &stamps, &x, &y).unwrap();
    assert_eq!(folded.rows, n, "every row in a bucket");
    let mut stats = Stats::new(Task::Regression, p, AlphaSchedule::Plain);
    stats.update_batch(&x, &y).unwrap();
    let mut cp = checkpoint_of(stats);
    checkpoint::write(dir, &mut cp).unwrap();
    let bare = std::fs::metadata(checkpoint::path(dir, "s")).unwrap().len() as f64;
    let buckets = w.len();
    cp.windows = Some(w);
    let mut first = None;
    let write = time(|| first = checkpoint::write_with(dir, &mut cp, None).unwrap());
    let files = bucket_files(dir);
    let bytes = std::fs::metadata(checkpoint::path(dir, "s")).unwrap().len() as f64
        + files.values().sum::<u64>() as f64;
    let copy = time(|| {
        std::hint::black_box(cp.windows.clone());
    });
    println!();
    println!(
        "{:<44} {:>8} {:>12} {:>14} {:>16} {:>12}",
        "windows 1m/7d, p=100, a full week",
        "buckets",
        "MB",
        "durable write",
        "ingest-thread copy",
        "KB a bucket"
    );
    println!(
        "{:<44} {:>8} {:>12.1} {:>11.1} ms {:>13.1} ms {:>12.1}",
        "file store, first checkpoint (every bucket)",
        buckets,
        bytes / 1e6,
        write,
        copy,
        (bytes - bare) / buckets as f64 / 1e3
    );
    // One row into the current minute: the next checkpoint writes that bucket's file and the
    // checkpoint (which names every file).
    let x: Vec<f64> = (0..p).map(|j| j as f64 * 0.01).collect();
    cp.stats.update_batch(&x, &[1.0]).unwrap();
    let w = cp.windows.as_mut().unwrap();
    w.fold(now, &[now - 30_000], &x, &[1.0]).unwrap();
    let next = time(|| {
        checkpoint::write_with(dir, &mut cp, first.as_ref()).unwrap();
    });
    let now_files = bucket_files(dir);
    let new: Vec<u64> = now_files
        .iter()
        .filter(|(name, _)| !files.contains_key(*name))
        .map(|(_, b)| *b)
        .collect();
    let bytes = std::fs::metadata(checkpoint::path(dir, "s")).unwrap().len() as f64
        + new.iter().sum::<u64>() as f64;
    println!(
        "{:<44} {:>8} {:>12.3} {:>11.1} ms",
        "file store, next checkpoint, one row later",
        new.len(),
        bytes / 1e6,
        next
    );
    kafka_records(cp, now, p);
}

/// The bucket files of stream "s" and their bytes.
fn bucket_files(dir: &std::path::Path) -> std::collections::BTreeMap<String, u64> {
    std::fs::read_dir(dir.join("s.buckets"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, e.metadata().unwrap().len())
        })
        .collect()
}

/// The same partition's state as the Kafka store writes it: its first checkpoint (every
/// bucket a record), then the next after one row into the current minute (one bucket record
/// and the state record, which names every bucket).
fn kafka_records(cp: Checkpoint, now: i64, p: usize) {
    use ravel::state_records::{PartitionState, VERSION, buckets::Refresh, encode_with_buckets};
    let mut state = PartitionState {
        version: VERSION,
        stream: "s".into(),
        topic: "t".into(),
        partition: 0,
        next_offset: 1_000_000,
        last_update_ms: Some(1),
        as_of_ms: Some(1),
        writer: "h/1".into(),
        stats: cp.stats,
        folds: None,
        windows: cp.windows,
        buckets: None,
        saved: None,
        epoch: 0,
    };
    let never = Refresh {
        sent: 0,
        after: u64::MAX,
    };
    let bytes = |e: &ravel::state_records::Encoded| -> f64 {
        e.records
            .iter()
            .map(|r| r.key.len() + r.value.as_ref().map_or(0, Vec::len))
            .sum::<usize>() as f64
    };
    let mut first = None;
    let first_ms =
        time(|| first = Some(encode_with_buckets(&mut state, 900_000, 1, never).unwrap()));
    let first = first.unwrap();
    state.saved = first.saved.clone();
    let x: Vec<f64> = (0..p).map(|j| j as f64 * 0.01).collect();
    state.stats.update_batch(&x, &[1.0]).unwrap();
    let w = state.windows.as_mut().unwrap();
    w.fold(now, &[now - 30_000], &x, &[1.0]).unwrap();
    let mut next = None;
    let next_ms = time(|| next = Some(encode_with_buckets(&mut state, 900_000, 2, never).unwrap()));
    let next = next.unwrap();
    println!();
    println!(
        "{:<44} {:>8} {:>8} {:>12} {:>14}",
        "kafka store, the same partition", "buckets", "records", "MB", "encode"
    );
    for (what, e, ms) in [
        ("first checkpoint (every bucket)", &first, first_ms),
        ("next checkpoint, one row later", &next, next_ms),
    ] {
        println!(
            "{:<44} {:>8} {:>8} {:>12.3} {:>11.1} ms",
            what,
            e.buckets_written,
            e.records.len() + e.after.len(),
            bytes(e) / 1e6,
            ms
        );
    }
}
