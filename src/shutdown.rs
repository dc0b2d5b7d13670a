//! Graceful shutdown as one small type passed down (as in mini-redis), not a global.
//!
//! `ShutdownTrigger` fires once (on SIGTERM/SIGINT in `ravel serve`, or from a test); every
//! `Shutdown` clone sees it: the ingest thread polls `is_triggered`, async tasks await `wait`.
//! Dropping the trigger counts as firing it, so nothing outlives its owner by accident.

use tokio::sync::watch;

#[derive(Debug)]
pub struct ShutdownTrigger {
    tx: watch::Sender<bool>,
}

#[derive(Debug, Clone)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

pub fn channel() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger { tx }, Shutdown { rx })
}

impl ShutdownTrigger {
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }
    /// Another handle on the same signal.
    pub fn subscribe(&self) -> Shutdown {
        Shutdown {
            rx: self.tx.subscribe(),
        }
    }
}

impl Shutdown {
    pub fn is_triggered(&self) -> bool {
        *self.rx.borrow() || self.rx.has_changed().is_err()
    }
    /// Resolves once shutdown is triggered (or the trigger is gone).
    pub async fn wait(mut self) {
        while !*self.rx.borrow_and_update() {
            if self.rx.changed().await.is_err() {
                return;
            }
        }
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => tracing::info!("SIGINT received: shutting down"),
        _ = term => tracing::info!("SIGTERM received: shutting down"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn trigger_reaches_every_clone() {
        let (trigger, shutdown) = channel();
        let other = shutdown.clone();
        assert!(!shutdown.is_triggered());
        let waiter = tokio::spawn(other.wait());
        trigger.trigger();
        waiter.await.unwrap();
        assert!(shutdown.is_triggered());
        assert!(trigger.subscribe().is_triggered());
    }

    #[tokio::test]
    async fn dropped_trigger_counts_as_fired() {
        let (trigger, shutdown) = channel();
        drop(trigger);
        assert!(shutdown.is_triggered());
        shutdown.wait().await;
    }
}
