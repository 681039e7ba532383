//! Crashes and restarts of the runner's own clients (`crash client-1`, `restart client-1`).
//! The workload's clients live in the runner's process, so a crash is not a signal: the client
//! abandons the call it is waiting on (it stays open in the history: its effect is unknown),
//! forgets the files it holds open, and stops its node (transport and machine, so mgmtd stops
//! hearing from it and drops its session after the session timeout, and meta prunes its write
//! sessions). A restart connects again with a fresh identity, a new incarnation, and the
//! operation stream goes on, as a simulated client's does.
//!
//! Invariant: a client's state is one `watch` value (up or down) per scenario client; crashing a
//! crashed client or restarting a running one does nothing, as in the simulator. Not here: what
//! a client does while down (its loop, `workload.rs` and `namespace.rs`).

use std::sync::Arc;

use tokio::sync::watch;

/// Every scenario client's up/down switch.
#[derive(Clone)]
pub struct Lives {
    tx: Arc<Vec<watch::Sender<bool>>>,
}

/// One client's view of its switch.
#[derive(Clone)]
pub struct Life {
    rx: watch::Receiver<bool>,
}

impl Lives {
    /// `n` clients, all up.
    pub fn new(n: u32) -> Self {
        Self {
            tx: Arc::new((0..n).map(|_| watch::channel(true).0).collect()),
        }
    }

    /// Sets client `k` up or down; `Ok(false)` when it already was.
    pub fn set(&self, k: u32, up: bool) -> Result<bool, String> {
        let tx = self
            .tx
            .get(k as usize)
            .ok_or_else(|| format!("no client-{k}: the scenario has {} clients", self.tx.len()))?;
        Ok(tx.send_if_modified(|v| std::mem::replace(v, up) != up))
    }

    /// Restarts every crashed client (the liveness phase); returns their indexes.
    pub fn restart_all(&self) -> Vec<u32> {
        (0..self.tx.len() as u32)
            .filter(|k| self.set(*k, true) == Ok(true))
            .collect()
    }

    /// Client `k`'s switch (a client beyond the scenario's is always up).
    pub fn of(&self, k: u32) -> Life {
        let rx = match self.tx.get(k as usize) {
            Some(tx) => tx.subscribe(),
            None => watch::channel(true).1,
        };
        Life { rx }
    }
}

impl Life {
    /// Whether the client is up now.
    pub fn is_up(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves once the client is down (never, if its switch is gone).
    pub async fn crashed(&mut self) {
        if self.rx.wait_for(|up| !*up).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Resolves once the client is up again.
    pub async fn restarted(&mut self) {
        if self.rx.wait_for(|up| *up).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_crash_wakes_the_client_and_a_restart_brings_it_back() {
        let lives = Lives::new(2);
        let mut life = lives.of(1);
        assert!(life.is_up());
        assert_eq!(lives.set(1, false), Ok(true));
        assert_eq!(
            lives.set(1, false),
            Ok(false),
            "crashing a crashed client does nothing"
        );
        life.crashed().await;
        assert!(!life.is_up());
        assert_eq!(lives.restart_all(), vec![1]);
        life.restarted().await;
        assert!(life.is_up() && lives.of(0).is_up());
        assert!(lives.set(5, false).unwrap_err().contains("2 clients"));
    }
}
