//! Decoding ahead: a few long-lived threads that decode messages while the ingest thread is
//! still polling, folding, or applying earlier feature-stream columns, so that parsing JSON
//! (the cost of JSON ingest, and about half of a feature column's) overlaps the rest of the
//! loop instead of adding to it.
//!
//! Jobs go to the workers in turn and their results are taken back in the same turn, so they
//! come back in the order they were submitted (the order the messages were read). The ingest
//! thread takes exactly one result per job; a job whose worker is gone answers `None` and the
//! caller decodes the message itself, so a lost thread costs speed, never a message.
//!
//! `Grouped` hands small jobs over in groups: a channel round trip and a thread wake-up cost
//! a few microseconds, about what decoding a 2 kB message costs, so a stream of small messages
//! goes to the threads a group of at least some tens of kB at a time, still one result per job
//! and in order.

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

type Job<T> = Box<dyn FnOnce() -> T + Send>;

struct Worker<T> {
    jobs: Option<Sender<Job<T>>>,
    results: Receiver<T>,
    thread: Option<JoinHandle<()>>,
}

/// Worker threads that run jobs in turn; results come back in submission order.
pub struct Ahead<T> {
    workers: Vec<Worker<T>>,
    submitted: usize,
    taken: usize,
}

impl<T: Send + 'static> Ahead<T> {
    /// `threads` workers (at least one) named `name-k`; fewer if a thread cannot start.
    pub fn new(name: &str, threads: usize) -> Ahead<T> {
        let mut workers = Vec::new();
        for k in 0..threads.max(1) {
            let (job_tx, job_rx) = channel::<Job<T>>();
            let (result_tx, result_rx) = channel();
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{k}"))
                .spawn(move || {
                    while let Ok(job) = job_rx.recv() {
                        if result_tx.send(job()).is_err() {
                            break;
                        }
                    }
                });
            match spawned {
                Ok(thread) => workers.push(Worker {
                    jobs: Some(job_tx),
                    results: result_rx,
                    thread: Some(thread),
                }),
                Err(e) => tracing::warn!(error = %e, "cannot start a decoding thread"),
            }
        }
        Ahead {
            workers,
            submitted: 0,
            taken: 0,
        }
    }

    /// Whether jobs can be submitted (some worker started).
    pub fn available(&self) -> bool {
        !self.workers.is_empty()
    }

    /// Queues a job; its result is the one `take` returns after those of the jobs before it.
    pub fn submit(&mut self, job: impl FnOnce() -> T + Send + 'static) {
        let k = self.submitted % self.workers.len().max(1);
        self.submitted += 1;
        if let Some(jobs) = self.workers.get(k).and_then(|w| w.jobs.as_ref()) {
            // A worker that is gone answers `None` in `take`.
            let _ = jobs.send(Box::new(job));
        }
    }

    /// The result of the oldest job not taken yet (waits for it); `None` if its worker is gone
    /// or no job is pending.
    pub fn take(&mut self) -> Option<T> {
        if self.taken == self.submitted {
            return None;
        }
        let k = self.taken % self.workers.len().max(1);
        self.taken += 1;
        self.workers.get(k)?.results.recv().ok()
    }
}

/// `Ahead` for jobs handed over in groups of at least `min_bytes` of input (a job at least that
/// large goes alone, at once); `take` still answers one result per job, in submission order.
pub struct Grouped<T> {
    ahead: Ahead<Vec<T>>,
    min_bytes: usize,
    /// Jobs not handed over yet, and their input bytes.
    group: Vec<Job<T>>,
    group_bytes: usize,
    /// The number of jobs of each group handed over and not taken yet, oldest first.
    sizes: VecDeque<usize>,
    /// The results of the oldest group taken back, not taken by the caller yet (`None`: its
    /// worker is gone).
    results: VecDeque<Option<T>>,
}

impl<T: Send + 'static> Grouped<T> {
    /// `threads` workers named `name-k` (as `Ahead::new`), groups of at least `min_bytes`.
    pub fn new(name: &str, threads: usize, min_bytes: usize) -> Grouped<T> {
        Grouped {
            ahead: Ahead::new(name, threads),
            min_bytes,
            group: Vec::new(),
            group_bytes: 0,
            sizes: VecDeque::new(),
            results: VecDeque::new(),
        }
    }

    /// Whether jobs can be submitted (some worker started).
    pub fn available(&self) -> bool {
        self.ahead.available()
    }

    /// Queues a job with `bytes` of input; the group goes to a worker once it holds
    /// `min_bytes` (or when `take` needs one of its results).
    pub fn submit(&mut self, bytes: usize, job: impl FnOnce() -> T + Send + 'static) {
        self.group.push(Box::new(job));
        self.group_bytes += bytes;
        if self.group_bytes >= self.min_bytes {
            self.hand_over();
        }
    }

    fn hand_over(&mut self) {
        if self.group.is_empty() {
            return;
        }
        let jobs = std::mem::take(&mut self.group);
        self.group_bytes = 0;
        self.sizes.push_back(jobs.len());
        self.ahead
            .submit(move || jobs.into_iter().map(|job| job()).collect());
    }

    /// The result of the oldest job not taken yet (waits for it, handing its group over
    /// first if it is still queued here); `None` if its worker is gone or no job is pending.
    pub fn take(&mut self) -> Option<T> {
        if self.results.is_empty() {
            if self.sizes.is_empty() {
                self.hand_over();
            }
            let size = self.sizes.pop_front()?;
            match self.ahead.take() {
                Some(results) => self.results.extend(results.into_iter().map(Some)),
                None => self.results.extend((0..size).map(|_| None)),
            }
        }
        self.results.pop_front().flatten()
    }
}

impl<T> Drop for Ahead<T> {
    /// Closing the job channels stops the workers; wait for them so none outlives ingest.
    fn drop(&mut self) {
        for w in &mut self.workers {
            w.jobs = None;
        }
        for w in &mut self.workers {
            if let Some(t) = w.thread.take() {
                let _ = t.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_submission_order() {
        let mut ahead = Ahead::new("test-ahead", 3);
        assert!(ahead.available());
        assert_eq!(ahead.take(), None);
        for i in 0..100u64 {
            // Later jobs finish first on some workers: the order must not depend on it.
            ahead.submit(move || {
                std::thread::sleep(std::time::Duration::from_micros((100 - i) % 7 * 50));
                i * i
            });
        }
        let got: Vec<u64> = (0..100).map(|_| ahead.take().unwrap()).collect();
        assert_eq!(got, (0..100u64).map(|i| i * i).collect::<Vec<_>>());
        assert_eq!(ahead.take(), None);
    }

    #[test]
    fn grouped_results_come_back_one_per_job_in_submission_order() {
        let mut grouped = Grouped::new("test-grouped", 2, 100);
        assert!(grouped.available());
        assert_eq!(grouped.take(), None);
        // Jobs of 1 to 60 bytes: groups of several jobs, and a few alone.
        let sizes: Vec<usize> = (0..200u64).map(|i| (i * 37 % 60 + 1) as usize).collect();
        let mut got = Vec::new();
        for (i, &bytes) in sizes.iter().enumerate() {
            grouped.submit(bytes, move || {
                std::thread::sleep(std::time::Duration::from_micros((i as u64 * 13) % 7 * 20));
                i * 3
            });
            // Take some results while later jobs are still queued, in a group not handed over.
            if i % 17 == 5 {
                got.push(grouped.take().unwrap());
            }
        }
        while let Some(r) = grouped.take() {
            got.push(r);
        }
        assert_eq!(got, (0..200).map(|i| i * 3).collect::<Vec<_>>());
        // A job of at least `min_bytes` goes at once, alone; the next one waits for `take`.
        grouped.submit(100, || 1);
        grouped.submit(1, || 2);
        assert_eq!(grouped.sizes, VecDeque::from([1]));
        assert_eq!(grouped.take(), Some(1));
        assert_eq!(grouped.take(), Some(2));
        assert_eq!(grouped.take(), None);
    }

    #[test]
    fn a_lost_grouped_worker_answers_none_for_each_job_of_its_group() {
        let mut grouped: Grouped<u32> = Grouped::new("test-grouped", 2, 10);
        grouped.submit(4, || 1);
        grouped.submit(4, || panic!("a decoding job panics"));
        grouped.submit(4, || 3);
        // That group went to worker 0; the next one to worker 1.
        grouped.submit(10, || 4);
        assert_eq!(
            (0..4).map(|_| grouped.take()).collect::<Vec<_>>(),
            vec![None, None, None, Some(4)]
        );
        assert_eq!(grouped.take(), None);
    }

    #[test]
    fn a_lost_worker_answers_none_and_the_others_go_on() {
        let mut ahead: Ahead<u32> = Ahead::new("test-ahead", 2);
        ahead.submit(|| panic!("a decoding job panics"));
        ahead.submit(|| 2);
        ahead.submit(|| 3);
        assert_eq!(ahead.take(), None);
        assert_eq!(ahead.take(), Some(2));
        assert_eq!(ahead.take(), None);
    }
}
