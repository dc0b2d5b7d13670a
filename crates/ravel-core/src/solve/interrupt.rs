//! Cooperative interruption of an extraction: a deadline and a cancel flag that the solvers'
//! iteration loops poll, so that a caller (the HTTP API) can bound the time an extraction
//! costs and stop the work of a client that went away or of a server that stops.
//!
//! The running `Interrupt` is a thread-local set by `Interrupt::run` around one extraction
//! (solvers run on the calling thread), so the solvers' signatures stay as they are: each
//! loop calls `stop()` once per iteration (a flag load and a clock read) and breaks; `run`
//! then reports the interruption instead of the partial answer. An extraction that finished
//! without a solver seeing the interrupt keeps its answer, however late. Extractions outside `run`
//! (the library, `ravel fit`) never stop early.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Why an extraction stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interruption {
    /// The deadline passed; the duration is the budget it had.
    Deadline(Duration),
    /// `cancel` was called (the client went away, or the server stops).
    Cancelled,
}

impl std::fmt::Display for Interruption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Interruption::Deadline(d) => write!(
                f,
                "the extraction did not finish within its deadline of {} ms; ask for less work \
                 (fewer path_points, a looser tol, fewer iterations) or raise http.extraction_timeout_ms",
                d.as_millis()
            ),
            Interruption::Cancelled => f.write_str("the extraction was cancelled"),
        }
    }
}

/// A deadline and a cancel flag for one extraction; clones share the flag.
#[derive(Debug, Clone)]
pub struct Interrupt {
    cancelled: Arc<AtomicBool>,
    /// A flag shared with others (a server's "stopping"), checked like `cancelled`.
    linked: Option<Arc<AtomicBool>>,
    started: Instant,
    budget: Option<Duration>,
}

impl Interrupt {
    /// No deadline when `budget` is None.
    pub fn new(budget: Option<Duration>) -> Self {
        Interrupt {
            cancelled: Arc::new(AtomicBool::new(false)),
            linked: None,
            started: Instant::now(),
            budget,
        }
    }
    /// Also stops when `flag` is set (one flag can stop every extraction of a server).
    pub fn linked(mut self, flag: Arc<AtomicBool>) -> Self {
        self.linked = Some(flag);
        self
    }
    /// Asks the extraction to stop at its next iteration.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }
    /// Why the extraction should stop now, if it should.
    pub fn fired(&self) -> Option<Interruption> {
        if self.cancelled.load(Ordering::Relaxed)
            || self
                .linked
                .as_ref()
                .is_some_and(|f| f.load(Ordering::Relaxed))
        {
            return Some(Interruption::Cancelled);
        }
        match self.budget {
            Some(b) if self.started.elapsed() >= b => Some(Interruption::Deadline(b)),
            _ => None,
        }
    }
    /// Runs `f` (an extraction) under this interrupt on the current thread: its solvers stop
    /// at their next iteration once the interrupt fires, and the result is then the
    /// interruption, never a partial answer.
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> Result<R, Interruption> {
        struct Restore(Option<(Interrupt, Option<Interruption>)>);
        impl Drop for Restore {
            fn drop(&mut self) {
                CURRENT.with(|c| *c.borrow_mut() = self.0.take());
            }
        }
        let restore = Restore(CURRENT.with(|c| c.borrow_mut().replace((self.clone(), None))));
        let result = f();
        let seen = CURRENT.with(|c| c.borrow().as_ref().and_then(|(_, seen)| *seen));
        drop(restore);
        match seen {
            Some(why) => Err(why),
            None => Ok(result),
        }
    }
}

thread_local! {
    /// The interrupt of the extraction running on this thread, and what a solver saw of it.
    static CURRENT: RefCell<Option<(Interrupt, Option<Interruption>)>> = const { RefCell::new(None) };
}

/// Whether the extraction running on this thread should stop (solvers call it once per
/// iteration and break; the answer is then discarded by `Interrupt::run`).
pub(crate) fn stop() -> bool {
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        let Some((interrupt, seen)) = c.as_mut() else {
            return false;
        };
        if seen.is_none() {
            *seen = interrupt.fired();
        }
        seen.is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_run_nothing_stops_and_inside_a_fired_interrupt_wins() {
        assert!(!stop());
        let i = Interrupt::new(None);
        assert_eq!(i.run(stop), Ok(false));
        i.cancel();
        assert_eq!(i.run(stop), Err(Interruption::Cancelled));
        assert!(!stop(), "the thread's interrupt is restored after run");
        let stopping = Arc::new(AtomicBool::new(false));
        let l = Interrupt::new(None).linked(stopping.clone());
        assert_eq!(l.fired(), None);
        stopping.store(true, Ordering::Relaxed);
        assert_eq!(l.fired(), Some(Interruption::Cancelled));
        // Late but finished without a solver seeing it: the answer stands.
        let d = Interrupt::new(Some(Duration::ZERO));
        assert_eq!(d.run(|| 7), Ok(7));
        assert!(matches!(d.run(stop), Err(Interruption::Deadline(_))));
    }
}

#[cfg(test)]
mod solver_tests {
    use super::*;
    use crate::solve::{Request, model_from_stats, path_from_stats};
    use crate::stats::Stats;
    use crate::synthetic::SyntheticSpec;

    fn stats() -> Stats {
        let spec: SyntheticSpec = "p=60,k=6,n=200,seed=3".parse().unwrap();
        Stats::from(spec.running_stats(100))
    }

    /// Every family with an iteration loop stops under a fired interrupt, and the caller gets
    /// the interruption, not a partial model; without one the same request answers.
    #[test]
    fn every_iterative_family_stops_when_the_interrupt_fires() {
        let st = stats();
        let models = [
            serde_json::json!({"method": "lasso", "k": 5}),
            serde_json::json!({"method": "mcp", "lambda": 0.01}),
            serde_json::json!({"method": "fsa", "k": 5}),
            serde_json::json!({"method": "fw-lasso", "delta": 1.0}),
            serde_json::json!({"method": "iht", "k": 5, "lambda": 0.01}),
            serde_json::json!({"method": "k-support", "k": 5, "lambda": 0.01}),
        ];
        for body in models {
            let r = serde_json::from_value::<Request>(body.clone())
                .unwrap()
                .check(60)
                .unwrap();
            assert!(model_from_stats(&st, &r, None).is_ok(), "{body}");
            let i = Interrupt::new(None);
            i.cancel();
            assert_eq!(
                i.run(|| model_from_stats(&st, &r, None)).err(),
                Some(Interruption::Cancelled),
                "{body}"
            );
        }
        let r = serde_json::from_value::<Request>(serde_json::json!({"method": "lasso"}))
            .unwrap()
            .check_path(60)
            .unwrap();
        let i = Interrupt::new(Some(Duration::ZERO));
        assert!(matches!(
            i.run(|| path_from_stats(&st, &r, None)),
            Err(Interruption::Deadline(_))
        ));
    }
}
