//! A log line rate limit: at most one line per interval for one kind of event of one stream,
//! the number of events held back since the last line carried in the next one. Rejections and
//! dead-letter failures come in bursts (a misconfigured producer sends thousands of bad
//! messages a second); the log must say what happens without one line per message.

use std::time::{Duration, Instant};

/// One kind of event of one stream: whether the next one may be logged.
#[derive(Debug, Clone)]
pub struct RateLimit {
    every: Duration,
    last: Option<Instant>,
    /// Events not logged since the last line.
    suppressed: u64,
}

impl RateLimit {
    pub fn new(every: Duration) -> RateLimit {
        RateLimit {
            every,
            last: None,
            suppressed: 0,
        }
    }

    /// One event at `now`: `Some(suppressed)` when it may be logged (with the number held back
    /// since the last line, which it should say), `None` when it is held back.
    pub fn admit(&mut self, now: Instant) -> Option<u64> {
        if self
            .last
            .is_some_and(|t| now.saturating_duration_since(t) < self.every)
        {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }

    /// `Some(n)` when `n > 0` events were held back and the interval is over: the caller logs a
    /// line saying so, so that the last events of a burst are not left unsaid.
    pub fn overdue(&mut self, now: Instant) -> Option<u64> {
        if self
            .last
            .is_some_and(|t| now.saturating_duration_since(t) < self.every)
        {
            return None;
        }
        self.rest(now)
    }

    /// `Some(n)` when `n > 0` events were held back, interval over or not (at shutdown).
    pub fn rest(&mut self, now: Instant) -> Option<u64> {
        if self.suppressed == 0 {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_with_the_count_held_back() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut r = RateLimit::new(Duration::from_secs(5));
        assert_eq!(r.admit(t0), Some(0), "the first event is logged");
        for i in 1..=1000 {
            assert_eq!(r.admit(t0 + Duration::from_millis(i)), None);
        }
        assert_eq!(r.overdue(t0 + 4 * s), None, "not yet");
        assert_eq!(
            r.admit(t0 + 5 * s),
            Some(1000),
            "the next line says how many"
        );
        assert_eq!(r.admit(t0 + 6 * s), None);
        assert_eq!(r.overdue(t0 + 9 * s), None);
        assert_eq!(
            r.overdue(t0 + 10 * s),
            Some(1),
            "the tail of a burst is said"
        );
        assert_eq!(r.overdue(t0 + 20 * s), None, "nothing held back");
        assert_eq!(r.admit(t0 + 20 * s), Some(0));
        assert_eq!(r.admit(t0 + 21 * s), None);
        assert_eq!(r.rest(t0 + 21 * s), Some(1), "at shutdown, at once");
        assert_eq!(r.rest(t0 + 21 * s), None);
    }
}
