//! Asy-OS's central machine (000 Algorithm 2): u_C = b0 + X w, read and pushed by the workers
//! (`CentralState`), kept in memory without a lock as per-worker partial sums (`Centre`; the
//! design is in `asy`'s module comment). Apart from the workers because it is the one
//! boundary a remote centre would implement.

use std::sync::atomic::{AtomicU64, Ordering};

/// Algorithm 2's central machine, as seen by a worker.
pub trait CentralState: Send + Sync {
    /// Pull u_C into `out` (Algorithm 3 line 4). Returns the number of pushes so far.
    fn read(&self, out: &mut [f64]) -> u64;
    /// Worker `worker` pushes: its contribution to u_C becomes `part` (the sum of all its
    /// deltas; Algorithm 2 line 4 and Algorithm 3 line 12). Returns the number of pushes
    /// before this one.
    fn push(&self, worker: usize, part: &[f64]) -> u64;
}

/// u_C in memory, as per-worker partial sums (see the module comment).
pub struct Centre {
    parts: Vec<Box<[AtomicU64]>>,
    pushes: AtomicU64,
}

impl Centre {
    /// u_C for `workers` workers over n samples; worker 0's part starts at `b0` (it owns the
    /// intercept), the others at 0.
    pub fn new(n: usize, workers: usize, b0: f64) -> Centre {
        let parts = (0..workers)
            .map(|t| {
                let v = if t == 0 { b0 } else { 0.0 };
                (0..n).map(|_| AtomicU64::new(v.to_bits())).collect()
            })
            .collect();
        Centre {
            parts,
            pushes: AtomicU64::new(0),
        }
    }
}

impl CentralState for Centre {
    fn read(&self, out: &mut [f64]) -> u64 {
        // Acquire: every element stored before the push we count is visible.
        let version = self.pushes.load(Ordering::Acquire);
        for (o, c) in out.iter_mut().zip(self.parts[0].iter()) {
            *o = f64::from_bits(c.load(Ordering::Relaxed));
        }
        for part in &self.parts[1..] {
            for (o, c) in out.iter_mut().zip(part.iter()) {
                *o += f64::from_bits(c.load(Ordering::Relaxed));
            }
        }
        version
    }

    fn push(&self, worker: usize, part: &[f64]) -> u64 {
        for (c, v) in self.parts[worker].iter().zip(part) {
            c.store(v.to_bits(), Ordering::Relaxed);
        }
        self.pushes.fetch_add(1, Ordering::Release)
    }
}
