//! From a file to a model, the way a library user does it: read a CSV in batches, fold each
//! batch into running statistics as an ndarray view, extract a Lasso with k nonzeros, predict,
//! and keep the statistics (JSON) to extract other models later without the file.
//!
//! ```sh
//! cargo run --release -p ravel-lm --example file_to_model
//! ```

use ndarray::{ArrayView1, ArrayView2, s};
use ravel_core::Task;
use ravel_core::data::{Budget, OpenOptions, Plan, RowReader};
use ravel_core::solve::{Estimator, Request, penalized::Lasso};
use ravel_core::stats::{AlphaSchedule, RunningStats};
use ravel_core::synthetic::SyntheticSpec;
use std::io::Write;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A CSV of paper 003's design: 20 features, 4 true ones, 5000 rows, target last.
    let spec: SyntheticSpec = "p=20,k=4,n=5000,seed=2".parse()?;
    let path = std::env::temp_dir().join(format!("ravel-example-{}.csv", std::process::id()));
    write_csv(&spec, 5000, &path)?;

    // 1. Open the file: only its header is read, and checked against a memory budget.
    let plan = Plan::Stats {
        task: Task::Regression,
        batch_rows: 1024,
    };
    let mut reader = RowReader::open(&path, &OpenOptions::new(Budget::unlimited(plan)))?;
    let p = reader.p;

    // 2. Fold it in batches: each batch is a standard-layout view over the reader's buffer,
    //    handed to the kernel without a copy.
    let mut stats = RunningStats::new(p, AlphaSchedule::Plain);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    loop {
        x.clear();
        y.clear();
        let rows = reader.next_batch(1024, &mut x, &mut y)?;
        if rows == 0 {
            break;
        }
        let xv = ArrayView2::from_shape((rows, p), &x)?;
        stats.update(xv, ArrayView1::from(&y))?;
    }
    println!("folded {} rows of {p} features", stats.n());

    // 3. Any model from the statistics alone: here the Lasso with 4 nonzeros (refitted by OLS).
    let lasso = Request::from(Estimator::Lasso(Lasso::k(4)));
    let model = stats.extract_named(&lasso, reader.names.as_deref())?;
    for c in &model.coefficients {
        println!("  {:>4} = {:+.4}", c.feature, c.value);
    }
    let found: Vec<usize> = model.coefficients.iter().map(|c| c.index).collect();
    assert_eq!(found, spec.support(), "the true features");

    // 4. Predict: b0 + X b on any array of rows.
    let all = ArrayView2::from_shape((x.len() / p, p), &x)?;
    let some = all.slice(s![..3.min(all.nrows()), ..]);
    println!("predictions for 3 rows: {:.3}", model.predict_rows(some));

    // 5. Keep the statistics, not the file: another model later, from the JSON.
    let saved = serde_json::to_string(&stats)?;
    let loaded: RunningStats = serde_json::from_str(&saved)?;
    let ridge = loaded.extract(&Request::ridge(0.1))?;
    println!(
        "ridge from the saved statistics: {} nonzeros, r2 {:.4}",
        ridge.k, ridge.diagnostics.r2
    );
    assert_eq!(loaded, stats);

    std::fs::remove_file(&path)?;
    Ok(())
}

fn write_csv(spec: &SyntheticSpec, n: usize, path: &std::path::Path) -> std::io::Result<()> {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    spec.rows().fill(n, &mut x, &mut y);
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    let header: Vec<String> = (0..spec.p).map(|j| format!("x{j}")).collect();
    writeln!(out, "{},y", header.join(","))?;
    for (row, yi) in x.chunks_exact(spec.p).zip(&y) {
        let cells: Vec<String> = row.iter().map(|v| v.to_string()).collect();
        writeln!(out, "{},{yi}", cells.join(","))?;
    }
    out.flush()
}

#[test]
fn example_runs() {
    main().unwrap();
}
