//! Graceful shutdown: SIGTERM (`docker stop`, Kubernetes, systemd) or SIGINT (Ctrl-C) asks the server and the
//! worker to stop at a safe point — the server after its in-flight requests, the worker after the hour it is
//! storing — and a bound makes sure the process ends even if that point never comes.

use std::time::Duration;

use tokio::sync::watch;

/// Whether a stop was asked for; cheap to clone and to poll.
#[derive(Debug, Clone)]
pub struct Stop(watch::Receiver<bool>);

/// The side that asks for a stop.
#[derive(Debug)]
pub struct StopHandle(watch::Sender<bool>);

/// A stop signal and the handle that triggers it.
pub fn channel() -> (StopHandle, Stop) {
    let (tx, rx) = watch::channel(false);
    (StopHandle(tx), Stop(rx))
}

impl StopHandle {
    pub fn request(&self) {
        self.0.send_replace(true);
    }
}

impl Stop {
    /// A stop that is never asked for.
    pub fn never() -> Stop {
        let (tx, rx) = watch::channel(false);
        // a dropped sender would make `requested` return at once; keeping it alive keeps "never" true
        std::mem::forget(tx);
        Stop(rx)
    }

    pub fn is_requested(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once a stop is asked for (at once if it was already).
    pub async fn requested(&self) {
        let mut rx = self.0.clone();
        if rx.wait_for(|stop| *stop).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Resolves with the signal's name on the first SIGTERM or SIGINT.
pub async fn signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
            (Ok(mut term), Ok(mut int)) => tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            },
            _ => {
                let _ = tokio::signal::ctrl_c().await;
                "SIGINT"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "SIGINT"
    }
}

/// Listens for SIGTERM/SIGINT in the background: the first asks for a stop; a second signal, or `grace` passing
/// without the process having ended, exits with status 1 (what is interrupted then is a transaction, which rolls
/// back: nothing half-written stays).
pub fn on_signals(what: &'static str, grace: Duration) -> Stop {
    let (handle, stop) = channel();
    tokio::spawn(async move {
        let sig = signal().await;
        tracing::info!(signal = sig, grace = ?grace, "stopping {what}");
        handle.request();
        tokio::select! {
            sig = signal() => tracing::error!(signal = sig, "second signal: exiting now"),
            () = tokio::time::sleep(grace) => tracing::error!(grace = ?grace, "{what} did not stop in time: exiting now"),
        }
        std::process::exit(1);
    });
    stop
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_requested_stop_resolves_and_never_does_not() {
        let (handle, stop) = channel();
        assert!(!stop.is_requested());
        let waiter = tokio::spawn({
            let stop = stop.clone();
            async move { stop.requested().await }
        });
        handle.request();
        tokio::time::timeout(Duration::from_secs(5), waiter).await.unwrap().unwrap();
        assert!(stop.is_requested());
        let never = Stop::never();
        assert!(tokio::time::timeout(Duration::from_millis(50), never.requested()).await.is_err());
        assert!(!never.is_requested());
    }
}
