//! Asynchronous parallel online substitution (Asy-OS), 000 Algorithms 2-3, on threads.
//!
//! q workers, each with its own retained set S(t) of size s/q (`Selector`), and a central
//! state u_C = b0 + X w summing every worker's contribution. A worker reads u_C (Algorithm 3
//! line 4), takes the OS step on its own set with the gradient at that read (lines 5-11), and
//! pushes the change of its contribution (line 12). Nothing else is shared and nothing waits:
//! between a worker's read and its push other workers may push; that count is the staleness
//! tau of Assumption 2, measured per step and reported.
//!
//! u_C without a lock: `Centre` keeps u_C as q per-worker partial sums c_t, each the running
//! sum of worker t's pushed deltas, so u_C = sum_t c_t (Algorithm 2 with its accumulator split
//! by sender). Only worker t ever writes c_t, so "c_t += du(t)" is a plain store of the new
//! contribution X_S(t) w_S(t), element by element into `AtomicU64`s holding f64 bits: no
//! compare-and-swap loop, no lost update, no lock, and no cache line written by two workers.
//! A reader pays q n loads instead of n, less than the 2 n s/q flops of the step while
//! q^2 < 2 s. A shared single accumulator updated by CAS adds would cost n contended
//! read-modify-writes per push instead. A read can mix entries from before and after a
//! concurrent push: exactly the asynchrony the analysis allows, counted in the staleness.
//!
//! Boundary for workers as separate processes (Kafka consumers): the only two contacts a
//! worker has with the rest are (1) the features it receives, routed by `worker_of(index)`,
//! which is what a topic keyed by feature and consumed by a group gives (worker t = consumer
//! of partition t: a feature always reaches the same worker, so the S(t) stay disjoint), and
//! (2) the `CentralState` trait, `read` (pull u_C) and `push` (send the new contribution).
//! `Centre` implements it in memory; a remote centre would implement the same two calls
//! (for example pushes on a deltas topic keyed by worker, with the whole contribution and a
//! sequence number so that a redelivered message is harmless, and reads from the centre's
//! latest sum). `worker_loop` is the body such a consumer would run.

use super::selector::{Counters, Outcome, Selector};
use super::snapshot::{SelectionSnapshot, sum_counters};
use super::{FeatureError, Labels, OsParams, PassLog, Selected, Staleness, Summary};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Features queued per worker before `push` blocks, by default. Deep enough that a worker
/// never waits for the dispatcher on two cores (4 left the workers idle about 10% of the
/// time at n = 10,000), and a bound on memory: s columns plus at most `queue * q` columns in
/// flight, whatever the stream length.
pub const DEFAULT_QUEUE: usize = 16;

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

/// The worker a feature goes to: a stable function of its index, as a keyed topic's
/// partitioner is, so a returning feature finds the set that may hold it.
pub fn worker_of(index: usize, workers: usize) -> usize {
    index % workers
}

enum Msg {
    Feature {
        index: usize,
        name: String,
        values: Arc<[f64]>,
    },
    Report(SyncSender<WorkerReport>),
    /// A copy of the worker's set, after the features queued before the ask.
    Copy(SyncSender<(Selector, Staleness)>),
}

/// What a worker tells the dispatcher when asked (after the features queued before the ask).
struct WorkerReport {
    selected: Vec<Selected>,
    /// sum_j w_j mean_j / scale_j over its set, and b0 if it owns the intercept.
    offset: f64,
    b0: Option<f64>,
    counters: Counters,
    eta: f64,
    staleness: Staleness,
}

#[derive(Default)]
struct StalenessAcc {
    steps: u64,
    sum: u64,
    max: u64,
}

impl StalenessAcc {
    fn of(&self, worker: usize) -> Staleness {
        Staleness {
            worker,
            steps: self.steps,
            mean: if self.steps > 0 {
                self.sum as f64 / self.steps as f64
            } else {
                0.0
            },
            max: self.max,
        }
    }
}

fn report(worker: usize, sel: &Selector, st: &StalenessAcc) -> WorkerReport {
    WorkerReport {
        selected: super::selected_of(std::iter::once((worker, sel))),
        offset: sel.retained().map(|(e, w, _)| w * e.mean / e.scale).sum(),
        b0: sel.intercept(),
        counters: sel.counters(),
        eta: sel.eta(),
        staleness: st.of(worker),
    }
}

/// Algorithm 3 for worker `worker`: read u_C, step, push; until the feature channel closes.
fn worker_loop(
    worker: usize,
    mut sel: Selector,
    labels: Arc<Labels>,
    centre: Arc<dyn CentralState>,
    rx: Receiver<Msg>,
) -> (Selector, Staleness) {
    let mut u = vec![0.0; labels.n()];
    let mut st = StalenessAcc::default();
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Feature {
                index,
                name,
                values,
            } => {
                let read_at = centre.read(&mut u);
                let outcome = sel.step(index, &name, &values, &u, labels.values());
                if matches!(outcome, Outcome::Constant | Outcome::Skipped) {
                    continue; // nothing moved: nothing to push
                }
                let pushed_at = centre.push(worker, sel.own());
                let tau = pushed_at - read_at;
                st.steps += 1;
                st.sum += tau;
                st.max = st.max.max(tau);
            }
            Msg::Report(reply) => {
                let _ = reply.send(report(worker, &sel, &st));
            }
            Msg::Copy(reply) => {
                let _ = reply.send((sel.clone(), st.of(worker)));
            }
        }
    }
    let staleness = st.of(worker);
    (sel, staleness)
}

/// A running Asy-OS stream: q worker threads, fed by `push`.
pub struct AsyncSubstitution {
    labels: Arc<Labels>,
    params: OsParams,
    eta_start: f64,
    centre: Arc<Centre>,
    senders: Vec<SyncSender<Msg>>,
    handles: Vec<JoinHandle<(Selector, Staleness)>>,
    passes: Mutex<PassLog>,
}

impl AsyncSubstitution {
    /// Starts `workers` threads; worker t keeps s/q features (the first s mod q keep one
    /// more), and worker 0 owns the intercept. Queues hold `DEFAULT_QUEUE` features.
    pub fn start(
        labels: Labels,
        params: &OsParams,
        workers: usize,
    ) -> Result<AsyncSubstitution, FeatureError> {
        Self::start_with_queue(labels, params, workers, DEFAULT_QUEUE)
    }

    /// `start` with `queue` features queued per worker at most.
    pub fn start_with_queue(
        labels: Labels,
        params: &OsParams,
        workers: usize,
        queue: usize,
    ) -> Result<AsyncSubstitution, FeatureError> {
        params.check_for(&labels)?;
        if workers == 0 || workers > params.s {
            return Err(FeatureError::Params(format!(
                "workers must lie in 1..=s (each keeps s/q features); got {workers} with s = {}",
                params.s
            )));
        }
        let n = labels.n();
        // The same eta as OS with budget s: Theorem 2 asks for a smaller one only as the
        // staleness grows, and the curvature check guards each step.
        let eta = params.eta_for();
        let b0 = labels.null_intercept();
        let labels = Arc::new(labels);
        let centre = Arc::new(Centre::new(n, workers, b0));
        let (mut senders, mut handles) = (vec![], vec![]);
        for t in 0..workers {
            let budget = params.s / workers + usize::from(t < params.s % workers);
            let sel = Selector::new(
                n,
                budget,
                params.loss,
                eta,
                params.m,
                (t == 0).then_some(b0),
            );
            let (tx, rx) = sync_channel(queue.max(1));
            let (labels, centre) = (labels.clone(), centre.clone() as Arc<dyn CentralState>);
            let handle = std::thread::Builder::new()
                .name(format!("asy-os-{t}"))
                .spawn(move || worker_loop(t, sel, labels, centre, rx))
                .map_err(|e| FeatureError::WorkerGone(format!("cannot start worker {t}: {e}")))?;
            senders.push(tx);
            handles.push(handle);
        }
        Ok(AsyncSubstitution {
            labels,
            params: params.clone(),
            eta_start: eta,
            centre,
            senders,
            handles,
            passes: Mutex::new(PassLog::default()),
        })
    }

    /// Number of worker threads q.
    pub fn workers(&self) -> usize {
        self.senders.len()
    }

    /// The labels y.
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// Feature `index` arrives; it is queued for its worker (blocking while that worker's
    /// queue is full). Bad values are an error and change nothing.
    pub fn push(&self, index: usize, name: &str, values: Arc<[f64]>) -> Result<(), FeatureError> {
        self.labels.check_feature(name, &values)?;
        let mut passes = self.passes.lock().unwrap_or_else(|e| e.into_inner());
        if passes.starts_pass(index) {
            self.close_pass(&mut passes)?;
        }
        let t = worker_of(index, self.workers());
        self.senders[t]
            .send(Msg::Feature {
                index,
                name: name.to_string(),
                values,
            })
            .map_err(|_| FeatureError::WorkerGone(format!("worker {t} is gone")))?;
        passes.record();
        Ok(())
    }

    /// Closes the current pass once every queued feature has been applied, recording the
    /// loss at u_C.
    pub fn end_pass(&self) -> Result<(), FeatureError> {
        let mut passes = self.passes.lock().unwrap_or_else(|e| e.into_inner());
        self.close_pass(&mut passes)
    }

    fn close_pass(&self, passes: &mut PassLog) -> Result<(), FeatureError> {
        let reports = self.reports()?;
        let subs = reports.iter().map(|r| r.counters.substitutions).sum();
        passes.close(self.loss(), subs);
        Ok(())
    }

    /// Asks every worker for its state; each answers after the features queued before.
    fn reports(&self) -> Result<Vec<WorkerReport>, FeatureError> {
        let mut rxs = vec![];
        for (t, tx) in self.senders.iter().enumerate() {
            let (rtx, rrx) = sync_channel(1);
            tx.send(Msg::Report(rtx))
                .map_err(|_| FeatureError::WorkerGone(format!("worker {t} is gone")))?;
            rxs.push(rrx);
        }
        rxs.into_iter()
            .enumerate()
            .map(|(t, rx)| {
                rx.recv()
                    .map_err(|_| FeatureError::WorkerGone(format!("worker {t} did not answer")))
            })
            .collect()
    }

    /// L(u_C) now.
    pub fn loss(&self) -> f64 {
        let mut u = vec![0.0; self.labels.n()];
        self.centre.read(&mut u);
        self.labels.loss().mean(&u, self.labels.values())
    }

    /// The state after every feature pushed so far.
    pub fn summary(&self) -> Result<Summary, FeatureError> {
        let passes = self.passes.lock().unwrap_or_else(|e| e.into_inner());
        let reports = self.reports()?;
        let loss = self.loss();
        let mut selected: Vec<Selected> = reports
            .iter()
            .flat_map(|r| r.selected.iter().cloned())
            .collect();
        selected.sort_by(|a, b| {
            b.weight
                .abs()
                .total_cmp(&a.weight.abs())
                .then(a.index.cmp(&b.index))
        });
        let b0 = reports.iter().find_map(|r| r.b0).unwrap_or(0.0);
        Ok(Summary {
            method: "asy-os".into(),
            loss_name: self.params.loss,
            s: self.params.s,
            workers: self.workers(),
            n: self.labels.n(),
            selected,
            intercept: b0 - reports.iter().map(|r| r.offset).sum::<f64>(),
            loss,
            loss_per_pass: passes.losses(loss),
            passes: passes.passes(),
            features_seen: passes.seen(),
            counters: sum_counters(reports.iter().map(|r| r.counters)),
            eta: reports.iter().map(|r| r.eta).fold(f64::INFINITY, f64::min),
            eta_start: self.eta_start,
            m: self.params.m,
            staleness: reports.iter().map(|r| r.staleness).collect(),
        })
    }

    /// Stops the workers once they have applied every queued feature, and returns the final
    /// state.
    pub fn finish(mut self) -> Result<AsyncFinished, FeatureError> {
        self.senders.clear();
        let handles = std::mem::take(&mut self.handles);
        let mut selectors = vec![];
        let mut staleness = vec![];
        for (t, h) in handles.into_iter().enumerate() {
            let (sel, st) = h
                .join()
                .map_err(|_| FeatureError::WorkerGone(format!("worker {t} panicked")))?;
            selectors.push(sel);
            staleness.push(st);
        }
        let passes = std::mem::take(&mut *self.passes.lock().unwrap_or_else(|e| e.into_inner()));
        Ok(self.frozen(selectors, staleness, passes))
    }

    /// The snapshot of the workers' copied sets, with u_C read now (every worker idle).
    fn frozen(
        &self,
        selectors: Vec<Selector>,
        staleness: Vec<Staleness>,
        passes: PassLog,
    ) -> SelectionSnapshot {
        let mut u = vec![0.0; self.labels.n()];
        self.centre.read(&mut u);
        SelectionSnapshot {
            method: "asy-os",
            labels: self.labels.clone(),
            params: self.params.clone(),
            eta_start: self.eta_start,
            selectors,
            staleness,
            u,
            passes,
        }
    }

    /// A frozen copy of the state after every feature pushed so far, while the workers go on:
    /// each worker copies its set once it has applied the features queued before the ask.
    /// Pushes wait meanwhile (the pass log is held), so u_C is read with every worker idle.
    pub fn snapshot(&self) -> Result<SelectionSnapshot, FeatureError> {
        let passes = self.passes.lock().unwrap_or_else(|e| e.into_inner());
        let mut rxs = vec![];
        for (t, tx) in self.senders.iter().enumerate() {
            let (rtx, rrx) = sync_channel(1);
            tx.send(Msg::Copy(rtx))
                .map_err(|_| FeatureError::WorkerGone(format!("worker {t} is gone")))?;
            rxs.push(rrx);
        }
        let (mut selectors, mut staleness) = (vec![], vec![]);
        for (t, rx) in rxs.into_iter().enumerate() {
            let (sel, st) = rx
                .recv()
                .map_err(|_| FeatureError::WorkerGone(format!("worker {t} did not answer")))?;
            selectors.push(sel);
            staleness.push(st);
        }
        Ok(self.frozen(selectors, staleness, passes.clone()))
    }
}

impl Drop for AsyncSubstitution {
    /// Closing the channels stops the workers; wait for them so no thread outlives the state.
    fn drop(&mut self) {
        self.senders.clear();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// A stopped Asy-OS stream: the workers' sets, u_C and the pass log, frozen.
pub type AsyncFinished = SelectionSnapshot;
