//! Checkpoint cost at p = 100 and p = 1000 (`cargo bench --bench checkpoint`): the bytes of a
//! checkpoint and the time to write it durably (encode, write, fsync, rename) in the binary
//! format, next to the JSON of the previous version (full E[x x^T], written the same way);
//! and what remains on the ingest thread, the copy of the statistics into the writer's job.
//! Medians of 7 on the machine's temporary directory.

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
        let cp = Checkpoint {
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
        };
        let binary = time(|| checkpoint::write(dir.path(), &cp).unwrap());
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
}
