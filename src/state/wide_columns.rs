//! The columns a wide feature stream (`wide = true`) keeps for paper 004's Lasso path: every
//! feature it applied, sparse (its nonzero samples and their values), within the stream's
//! share of `limits.max_memory` (`Config::wide_budget`). Ingest is the one writer
//! (`WideColumns`); readers get an immutable `WideSnapshot` after each publish, and the API
//! builds the solver's column-major matrix (`ravel_core::data::csc::Csc`) from it once per
//! snapshot.
//!
//! Publishing costs O(p / CHUNK) pointer copies, not a copy of the columns: columns sit in
//! chunks of `CHUNK` shared pointers, a snapshot shares the chunks, and ingest copies a chunk
//! (its pointers, not the columns) only when it changes one a reader still holds.
//!
//! Memory: a column costs `column_bytes` (12 bytes a nonzero, its name and a fixed overhead);
//! a column is kept only if the kept columns plus the matrix a path request builds from them
//! and the solver's vectors (`wide_bytes`) stay within the budget. Otherwise the message is
//! refused (`memory_limit`), so the selection and the path always cover the same columns.

use ravel_core::data::csc::{Csc, wide_bytes};
use std::sync::{Arc, OnceLock};

/// Columns per chunk.
const CHUNK: usize = 4096;

/// Bytes of a kept column beyond its nonzeros and name: the shared pointer, two vectors'
/// headers, the name's header and its chunk slot.
const COLUMN_OVERHEAD: u64 = 104;

/// One kept feature: its name and its nonzeros (rows increasing).
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub name: String,
    pub rows: Vec<u32>,
    pub values: Vec<f64>,
}

impl Column {
    /// The nonzeros of a dense column of n values.
    pub fn from_dense(name: &str, values: &[f64]) -> Column {
        let (rows, values) = values
            .iter()
            .enumerate()
            .filter(|(_, v)| **v != 0.0)
            .map(|(i, v)| (i as u32, *v))
            .unzip();
        Column {
            name: name.to_string(),
            rows,
            values,
        }
    }

    /// What keeping it costs.
    pub fn bytes(&self) -> u64 {
        column_bytes(self.rows.len() as u64, self.name.len() as u64)
    }
}

/// Bytes of a kept column of `nnz` nonzeros named with `name_len` bytes.
pub fn column_bytes(nnz: u64, name_len: u64) -> u64 {
    nnz.saturating_mul(12)
        .saturating_add(name_len)
        .saturating_add(COLUMN_OVERHEAD)
}

/// Why a column was not kept.
#[derive(Debug, Clone, PartialEq)]
pub struct OverBudget {
    /// The bytes the stream would hold with it.
    pub needed: u64,
    pub budget: u64,
}

/// Ingest's side: the kept columns, by the selection's index (order of first arrival).
pub struct WideColumns {
    n: usize,
    budget: u64,
    y: Arc<Vec<f64>>,
    chunks: Vec<Arc<Vec<Arc<Column>>>>,
    p: usize,
    /// Kept columns without a nonzero.
    empty: usize,
    nnz: u64,
    kept_bytes: u64,
    refused: u64,
}

impl WideColumns {
    /// No column yet, for labels `y`, within `budget` bytes.
    pub fn new(y: Vec<f64>, budget: u64) -> WideColumns {
        WideColumns {
            n: y.len(),
            budget,
            y: Arc::new(y),
            chunks: Vec::new(),
            p: 0,
            empty: 0,
            nnz: 0,
            kept_bytes: 0,
            refused: 0,
        }
    }

    fn get(&self, index: usize) -> Option<&Arc<Column>> {
        self.chunks.get(index / CHUNK)?.get(index % CHUNK)
    }

    /// The bytes the stream holds with its columns plus the path's matrix and vectors.
    fn held(&self, p: usize, nnz: u64, kept: u64) -> u64 {
        kept.saturating_add(wide_bytes(self.n as u64, p as u64, nnz))
    }

    /// Whether `column` may become column `index` (a new one at the end, or a replacement):
    /// Err says what it would take. Changes nothing.
    pub fn check(&self, index: usize, column: &Column) -> Result<(), OverBudget> {
        let (p, nnz, kept) = match self.get(index) {
            Some(old) => (
                self.p,
                self.nnz - old.rows.len() as u64 + column.rows.len() as u64,
                self.kept_bytes - old.bytes() + column.bytes(),
            ),
            None => (
                self.p + 1,
                self.nnz + column.rows.len() as u64,
                self.kept_bytes + column.bytes(),
            ),
        };
        let needed = self.held(p, nnz, kept);
        if needed > self.budget {
            return Err(OverBudget {
                needed,
                budget: self.budget,
            });
        }
        Ok(())
    }

    /// Keeps `column` as column `index` (`check`ed before): index p appends, a smaller one
    /// replaces (a feature sent again).
    pub fn put(&mut self, index: usize, column: Column) {
        let column = Arc::new(column);
        if let Some(old) = self.get(index) {
            let (old_nnz, old_bytes) = (old.rows.len() as u64, old.bytes());
            self.empty = self.empty - (old_nnz == 0) as usize + column.rows.is_empty() as usize;
            self.nnz = self.nnz - old_nnz + column.rows.len() as u64;
            self.kept_bytes = self.kept_bytes - old_bytes + column.bytes();
            Arc::make_mut(&mut self.chunks[index / CHUNK])[index % CHUNK] = column;
            return;
        }
        debug_assert_eq!(index, self.p);
        self.empty += column.rows.is_empty() as usize;
        self.nnz += column.rows.len() as u64;
        self.kept_bytes += column.bytes();
        if self.p.is_multiple_of(CHUNK) {
            self.chunks.push(Arc::new(Vec::with_capacity(CHUNK)));
        }
        let last = self.chunks.last_mut().expect("a chunk");
        Arc::make_mut(last).push(column);
        self.p += 1;
    }

    /// Counts a column refused for the budget.
    pub fn refuse(&mut self) {
        self.refused += 1;
    }

    /// What readers see now.
    pub fn snapshot(&self) -> WideSnapshot {
        WideSnapshot {
            p: self.p,
            used: self.p - self.empty,
            nnz: self.nnz,
            bytes: self.held(self.p, self.nnz, self.kept_bytes),
            budget: self.budget,
            refused: self.refused,
            y: self.y.clone(),
            chunks: self.chunks.clone(),
            csc: OnceLock::new(),
        }
    }
}

/// The kept columns as readers see them, and the matrix built from them on first use.
pub struct WideSnapshot {
    /// Columns kept.
    pub p: usize,
    /// Kept columns with a nonzero: those paper 004's randomized rule draws from
    /// (`sample_fraction` is a fraction of them).
    pub used: usize,
    /// Their nonzeros.
    pub nnz: u64,
    /// Bytes counted against the budget: the columns, the matrix a path builds and its
    /// vectors.
    pub bytes: u64,
    /// The stream's share of `limits.max_memory`.
    pub budget: u64,
    /// Feature messages refused because their column would not fit (`memory_limit`).
    pub refused: u64,
    y: Arc<Vec<f64>>,
    chunks: Vec<Arc<Vec<Arc<Column>>>>,
    csc: OnceLock<Arc<Csc>>,
}

impl WideSnapshot {
    /// The columns, in the selection's index order.
    pub fn columns(&self) -> impl Iterator<Item = &Column> {
        self.chunks.iter().flat_map(|c| c.iter().map(|a| &**a))
    }

    /// The kept columns column-major with the labels as targets and the features' names,
    /// built by the first caller (a blocking request) and shared by the others.
    pub fn csc(&self) -> Arc<Csc> {
        self.csc
            .get_or_init(|| {
                let names = self.columns().map(|c| c.name.clone()).collect();
                Arc::new(Csc::from_columns(
                    self.y.to_vec(),
                    self.columns().map(|c| (&c.rows[..], &c.values[..])),
                    self.nnz as usize,
                    Some(names),
                ))
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, v: &[f64]) -> Column {
        Column::from_dense(name, v)
    }

    #[test]
    fn columns_are_kept_sparse_replaced_in_place_and_shared_with_snapshots() {
        let mut w = WideColumns::new(vec![1.0, 2.0, 3.0], u64::MAX);
        for j in 0..CHUNK + 2 {
            let c = col(&format!("f{j}"), &[0.0, j as f64 + 1.0, 0.0]);
            w.check(j, &c).unwrap();
            w.put(j, c);
        }
        let before = w.snapshot();
        let c = col("f1", &[5.0, 0.0, 6.0]);
        w.check(1, &c).unwrap();
        w.put(1, c);
        let after = w.snapshot();
        assert_eq!((before.p, before.nnz), (CHUNK + 2, CHUNK as u64 + 2));
        assert_eq!((after.p, after.nnz), (CHUNK + 2, CHUNK as u64 + 3));
        // The older snapshot still sees the old column.
        let old: Vec<&Column> = before.columns().collect();
        assert_eq!(
            (old[1].rows.clone(), old[1].values.clone()),
            (vec![1], vec![2.0])
        );
        let x = after.csc();
        assert_eq!((x.n, x.p, x.nnz()), (3, CHUNK + 2, CHUNK + 3));
        assert_eq!(x.column(1), (&[0u32, 2][..], &[5.0, 6.0][..]));
        assert_eq!(
            x.column(CHUNK + 1),
            (&[1u32][..], &[CHUNK as f64 + 2.0][..])
        );
        assert_eq!(x.name(CHUNK), format!("f{CHUNK}"));
        assert_eq!(x.y, vec![1.0, 2.0, 3.0]);
        assert!(Arc::ptr_eq(&x, &after.csc()), "built once per snapshot");
    }

    /// A column with no nonzero is kept but not used (the randomized rule never draws it);
    /// replaced by one with a nonzero it is used, and the other way round.
    #[test]
    fn snapshots_count_the_used_columns_through_replacements() {
        let mut w = WideColumns::new(vec![1.0, 2.0], u64::MAX);
        let (full, empty) = (col("a", &[0.0, 1.0]), col("b", &[0.0, 0.0]));
        for (j, c) in [&full, &empty, &full, &empty].into_iter().enumerate() {
            w.check(j, c).unwrap();
            w.put(j, c.clone());
        }
        let s = w.snapshot();
        assert_eq!((s.p, s.used), (4, 2));
        w.put(1, full.clone());
        w.put(2, empty.clone());
        w.put(0, empty.clone());
        let s = w.snapshot();
        assert_eq!((s.p, s.used), (4, 1));
        assert_eq!(s.csc().empty_columns, 3);
        w.put(3, full);
        assert_eq!((w.snapshot().used, s.used), (2, 1));
    }

    #[test]
    fn a_column_past_the_budget_is_refused_and_changes_nothing() {
        let c = col("a", &[1.0, 0.0, 2.0, 0.0]);
        let one = c.bytes() + wide_bytes(4, 1, 2);
        let mut w = WideColumns::new(vec![0.0; 4], one);
        w.check(0, &c).unwrap();
        w.put(0, c.clone());
        assert_eq!(w.snapshot().bytes, one);
        let e = w.check(1, &col("b", &[1.0, 0.0, 0.0, 0.0])).unwrap_err();
        assert!(e.needed > e.budget, "{e:?}");
        // A replacement with fewer nonzeros fits; one with more does not.
        w.check(0, &col("a", &[1.0, 0.0, 0.0, 0.0])).unwrap();
        assert!(w.check(0, &col("a", &[1.0, 1.0, 2.0, 0.0])).is_err());
        w.refuse();
        let s = w.snapshot();
        assert_eq!((s.p, s.nnz, s.refused), (1, 2, 1));
    }
}
