//! Asynchronous parallel online substitution (Asy-OS), 000 Algorithms 2-3, on threads.
//!
//! q workers, each with its own retained set S(t) of size s/q (`Selector`), and a central
//! state u_C = b0 + X w summing every worker's contribution. A worker receives a feature,
//! reads u_C (Algorithm 3 line 4), takes the OS step on its own set with the gradient at that
//! read (lines 5-11), and pushes the change of its contribution (line 12). Nothing else is
//! shared and nothing waits: between a worker's read and its push other workers may push;
//! that count is the staleness tau of Assumption 2, measured per step and reported.
//!
//! Which worker gets a feature (Algorithm 3 line 3: "receive a feature from the pool"): a
//! feature that no worker holds goes to a pool shared by all workers (a multi-consumer
//! channel), and whichever worker is free takes it. A feature some worker holds (or is
//! stepping on) goes to that worker's own queue, so the S(t) stay disjoint and a returning
//! feature takes its full step where its weight lives. `Owners` records who holds what; a
//! worker claims a feature in it before stepping and releases it when the step drops it. An
//! earlier version routed feature j to worker j mod q, which capped recall: a worker whose
//! residue class held more than s/q of the true features had to leave the rest out (recall
//! about 0.92 at q = 2 against 0.95 for OS at 000's settings; `tests/features_asy.rs` prints
//! both curves). With one worker everything goes through its own queue, in arrival order, so
//! q = 1 is OS exactly.
//!
//! u_C without a lock (`centre`): `Centre` keeps u_C as q per-worker partial sums c_t, each
//! the running sum of worker t's pushed deltas, so u_C = sum_t c_t (Algorithm 2 with its
//! accumulator split by sender). Only worker t ever writes c_t, so "c_t += du(t)" is a plain
//! store of the new contribution X_S(t) w_S(t), element by element into `AtomicU64`s holding
//! f64 bits: no compare-and-swap loop, no lost update, no lock, and no cache line written by
//! two workers.
//! A reader pays q n loads instead of n, less than the 2 n s/q flops of the step while
//! q^2 < 2 s. A shared single accumulator updated by CAS adds would cost n contended
//! read-modify-writes per push instead. A read can mix entries from before and after a
//! concurrent push: exactly the asynchrony the analysis allows, counted in the staleness.
//!
//! Boundary for workers as separate processes (Kafka consumers): a worker's contacts with the
//! rest are (1) the features it receives: the pool is a topic read by a consumer group, and
//! the owners' queues are per-worker topics (or partitions) that the dispatcher writes a
//! returning feature to after a look-up in `Owners`, which would then live with the
//! dispatcher; and (2) the `CentralState` trait, `read` (pull u_C) and `push` (send the new
//! contribution). `Centre` implements it in memory; a remote centre would implement the same
//! two calls (for example pushes on a deltas topic keyed by worker, with the whole
//! contribution and a sequence number so that a redelivered message is harmless, and reads
//! from the centre's latest sum). `worker_loop` is the body such a consumer would run.

// Also at their old place, `features::asy::{CentralState, Centre}`, for the library's users.
pub use super::centre::{CentralState, Centre};
use super::selector::{Counters, Outcome, Selector};
use super::snapshot::{SelectionSnapshot, sum_counters};
use super::{FeatureError, Labels, OsParams, PassLog, Selected, Staleness, Summary};
use crossbeam_channel::{Receiver, Select, Sender, bounded};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Features queued per worker before `push` blocks, by default. Deep enough that a worker
/// never waits for the dispatcher on two cores (4 left the workers idle about 10% of the
/// time at n = 10,000), and a bound on memory: s columns plus at most `queue * q` columns in
/// flight, whatever the stream length.
pub const DEFAULT_QUEUE: usize = 16;

/// A poisoned lock still holds consistent data here (every critical section is one map or
/// counter operation), so take it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Who holds (or is stepping on) which feature: at most s entries plus the features in
/// flight. A feature with no entry is in the pool.
#[derive(Default)]
struct Owners(Mutex<HashMap<usize, usize>>);

impl Owners {
    fn owner(&self, index: usize) -> Option<usize> {
        lock(&self.0).get(&index).copied()
    }

    /// Worker `worker` takes `index` unless another worker holds it (possible only when the
    /// same feature is queued twice at once, a stream shorter than the queues).
    fn claim(&self, index: usize, worker: usize) -> bool {
        *lock(&self.0).entry(index).or_insert(worker) == worker
    }

    /// `index` left `worker`'s set (or never entered it): back to the pool.
    fn release(&self, index: usize, worker: usize) {
        let mut map = lock(&self.0);
        if map.get(&index) == Some(&worker) {
            map.remove(&index);
        }
    }
}

/// Features queued (by the dispatcher, or handed from worker to worker) and not yet applied,
/// so that a reader can wait for every feature sent before its question: with a pool, no
/// single queue orders them. A hand-off is counted before the feature that caused it is
/// done, so the count reaches 0 only when nothing is left anywhere.
#[derive(Default)]
struct Progress {
    pending: Mutex<u64>,
    changed: Condvar,
}

impl Progress {
    fn queued(&self) {
        *lock(&self.pending) += 1;
    }

    fn done(&self) {
        let mut pending = lock(&self.pending);
        *pending = pending.saturating_sub(1);
        if *pending == 0 {
            self.changed.notify_all();
        }
    }
}

/// What the workers share besides u_C.
struct Shared {
    owners: Owners,
    progress: Progress,
    /// Each worker's floor (`Selector::floor`, f64 bits): what a newcomer must beat there.
    floors: Vec<AtomicU64>,
    /// Each worker's hand-off queue, written by the other workers with `try_send` (a worker
    /// never waits for another).
    handoffs: Vec<Sender<Msg>>,
}

impl Shared {
    /// The worker other than `worker` with the lowest floor, if `weight` beats it.
    fn taker(&self, worker: usize, weight: f64) -> Option<usize> {
        let (t, floor) = self
            .floors
            .iter()
            .enumerate()
            .filter(|&(t, _)| t != worker)
            .map(|(t, f)| (t, f64::from_bits(f.load(Ordering::Relaxed))))
            .min_by(|a, b| a.1.total_cmp(&b.1))?;
        (weight > floor).then_some(t)
    }
}

enum Msg {
    Feature {
        index: usize,
        name: String,
        values: Arc<[f64]>,
        /// Times it was handed from worker to worker (0 from the dispatcher).
        hops: usize,
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

/// The queues a worker reads.
struct Inbox {
    /// Its own queue: the features it holds, and questions. Closed by the dispatcher.
    own: Receiver<Msg>,
    /// The pool (none with one worker). Closed by the dispatcher.
    pool: Option<Receiver<Msg>>,
    /// Features other workers dropped and hand over. Never closed (the workers hold its
    /// senders); empty when the dispatcher closes the others after `settle`.
    handoff: Receiver<Msg>,
}

impl Inbox {
    /// The next message, or none once the dispatcher's queues are closed and drained.
    fn next(&mut self, own_open: &mut bool) -> Option<Msg> {
        loop {
            let mut select = Select::new();
            let own = own_open.then(|| select.recv(&self.own));
            let pool = self.pool.as_ref().map(|p| select.recv(p));
            if own.is_none() && pool.is_none() {
                return self.handoff.try_recv().ok();
            }
            let handoff = select.recv(&self.handoff);
            let op = select.select();
            let i = op.index();
            let got = if Some(i) == own {
                op.recv(&self.own)
            } else if Some(i) == pool {
                op.recv(self.pool.as_ref().expect("selected"))
            } else {
                debug_assert_eq!(i, handoff);
                op.recv(&self.handoff)
            };
            match got {
                Ok(msg) => return Some(msg),
                // Closed and drained: go on with the others.
                Err(_) if Some(i) == own => *own_open = false,
                Err(_) => self.pool = None,
            }
        }
    }
}

/// Algorithm 3 for worker `worker`: take a feature (its own queue, the pool, or a hand-off),
/// read u_C, step, push; until the dispatcher closes its queues.
fn worker_loop(
    worker: usize,
    mut sel: Selector,
    labels: Arc<Labels>,
    centre: Arc<dyn CentralState>,
    mut inbox: Inbox,
    shared: Arc<Shared>,
) -> (Selector, Staleness) {
    let mut u = vec![0.0; labels.n()];
    let mut st = StalenessAcc::default();
    let mut own_open = true;
    let workers = shared.floors.len();
    if workers > 1 {
        sel.keep_dropped();
    }
    while let Some(msg) = inbox.next(&mut own_open) {
        match msg {
            Msg::Feature {
                index,
                name,
                values,
                hops,
            } => {
                let owners = &shared.owners;
                if sel.contains(index) || owners.claim(index, worker) {
                    let read_at = centre.read(&mut u);
                    let outcome = sel.step(index, &name, &values, &u, labels.values());
                    match outcome {
                        Outcome::Entered { evicted } => {
                            if let Some(k) = evicted {
                                owners.release(k, worker);
                            }
                        }
                        Outcome::Updated => {}
                        Outcome::Rejected | Outcome::Constant | Outcome::Skipped => {
                            owners.release(index, worker)
                        }
                    }
                    if !matches!(outcome, Outcome::Constant | Outcome::Skipped) {
                        let pushed_at = centre.push(worker, sel.own());
                        let tau = pushed_at - read_at;
                        st.steps += 1;
                        st.sum += tau;
                        st.max = st.max.max(tau);
                    }
                    shared.floors[worker].store(sel.floor().to_bits(), Ordering::Relaxed);
                    // The projection drops what this worker's s/q cannot keep. Algorithm 3
                    // loses it until its next arrival; offering it to the worker whose set it
                    // beats brings the per-worker projections closer to the projection onto
                    // all s (at most q - 1 hops, never waiting on a full queue).
                    if let Some(d) = sel.take_dropped()
                        && hops + 1 < workers
                        && let Some(t) = shared.taker(worker, d.weight)
                    {
                        shared.progress.queued();
                        let handed = shared.handoffs[t].try_send(Msg::Feature {
                            index: d.index,
                            name: d.name,
                            values: d.values.unwrap_or_else(|| values.clone()),
                            hops: hops + 1,
                        });
                        match handed {
                            Ok(()) => sel.count_handoff(),
                            Err(_) => shared.progress.done(),
                        }
                    }
                }
                shared.progress.done();
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
    /// Each worker's own queue: the features it holds, and questions.
    senders: Vec<Sender<Msg>>,
    /// The pool of features nobody holds; none with one worker (its own queue keeps the
    /// arrival order, so one worker is OS exactly).
    pool: Option<Sender<Msg>>,
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<(Selector, Staleness)>>,
    passes: Mutex<PassLog>,
}

impl AsyncSubstitution {
    /// Starts `workers` threads; worker t keeps s/q features (the first s mod q keep one
    /// more), and worker 0 owns the intercept. Queues hold `DEFAULT_QUEUE` features per
    /// worker.
    pub fn start(
        labels: Labels,
        params: &OsParams,
        workers: usize,
    ) -> Result<AsyncSubstitution, FeatureError> {
        Self::start_with_queue(labels, params, workers, DEFAULT_QUEUE)
    }

    /// `start` with `queue` features queued per worker at most (the pool holds `queue * q`).
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
        let (pool_tx, pool_rx) = if workers > 1 {
            let (tx, rx) = bounded(queue.max(1) * workers);
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let (handoffs, mut handoff_rxs): (Vec<_>, Vec<_>) =
            (0..workers).map(|_| bounded(queue.max(1))).unzip();
        let shared = Arc::new(Shared {
            owners: Owners::default(),
            progress: Progress::default(),
            floors: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            handoffs,
        });
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
            let (tx, rx) = bounded(queue.max(1));
            let (labels, centre) = (labels.clone(), centre.clone() as Arc<dyn CentralState>);
            let inbox = Inbox {
                own: rx,
                pool: pool_rx.clone(),
                handoff: handoff_rxs.remove(0),
            };
            let shared = shared.clone();
            let handle = std::thread::Builder::new()
                .name(format!("asy-os-{t}"))
                .spawn(move || worker_loop(t, sel, labels, centre, inbox, shared))
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
            pool: pool_tx,
            shared,
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

    /// Feature `index` arrives; it is queued for the worker that holds it, or in the pool
    /// (blocking while that queue is full). Bad values are an error and change nothing.
    pub fn push(&self, index: usize, name: &str, values: Arc<[f64]>) -> Result<(), FeatureError> {
        self.labels.check_feature(name, &values)?;
        let mut passes = lock(&self.passes);
        if passes.starts_pass(index) {
            self.close_pass(&mut passes)?;
        }
        let msg = Msg::Feature {
            index,
            name: name.to_string(),
            values,
            hops: 0,
        };
        let progress = &self.shared.progress;
        progress.queued();
        let sent = match (&self.pool, self.shared.owners.owner(index)) {
            (Some(pool), None) => pool
                .send(msg)
                .map_err(|_| FeatureError::WorkerGone("every worker is gone".into())),
            (_, t) => {
                let t = t.unwrap_or(0);
                self.senders[t]
                    .send(msg)
                    .map_err(|_| FeatureError::WorkerGone(format!("worker {t} is gone")))
            }
        };
        if sent.is_err() {
            progress.done();
        }
        sent?;
        passes.record();
        Ok(())
    }

    /// Closes the current pass once every queued feature has been applied, recording the
    /// loss at u_C.
    pub fn end_pass(&self) -> Result<(), FeatureError> {
        let mut passes = lock(&self.passes);
        self.close_pass(&mut passes)
    }

    fn close_pass(&self, passes: &mut PassLog) -> Result<(), FeatureError> {
        let reports = self.reports()?;
        let subs = reports.iter().map(|r| r.counters.substitutions).sum();
        passes.close(self.loss(), subs);
        Ok(())
    }

    /// Waits until the workers have applied every feature queued so far, hand-offs included
    /// (call with the `passes` lock held, so that none is added meanwhile).
    fn settle(&self) -> Result<(), FeatureError> {
        let progress = &self.shared.progress;
        let mut pending = lock(&progress.pending);
        while *pending > 0 {
            if let Some(t) = self.handles.iter().position(|h| h.is_finished()) {
                return Err(FeatureError::WorkerGone(format!("worker {t} stopped")));
            }
            pending = progress
                .changed
                .wait_timeout(pending, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        Ok(())
    }

    /// Asks every worker for its state, once every queued feature is applied.
    fn reports(&self) -> Result<Vec<WorkerReport>, FeatureError> {
        self.settle()?;
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
        let passes = lock(&self.passes);
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
        // Every feature and hand-off applied first: then no worker hands anything over after
        // its queues close.
        {
            let _passes = lock(&self.passes);
            self.settle()?;
        }
        self.senders.clear();
        self.pool = None;
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
        let passes = std::mem::take(&mut *lock(&self.passes));
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
        let passes = lock(&self.passes);
        self.settle()?;
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
        self.pool = None;
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// A stopped Asy-OS stream: the workers' sets, u_C and the pass log, frozen.
pub type AsyncFinished = SelectionSnapshot;
