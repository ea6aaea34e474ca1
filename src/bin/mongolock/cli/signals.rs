//! The termination signals `mongolock` catches (SIGINT, SIGTERM, SIGHUP, SIGQUIT), so it
//! can pass them on to the command or clean up before exiting.

use nix::sys::signal::Signal;
use tokio::signal::unix::{SignalKind, signal};

use super::CliError;

/// Receives the termination signals sent to `mongolock`. Once installed, these signals no
/// longer terminate the process: whoever holds this decides what they mean.
#[derive(Debug)]
pub(crate) struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers. Must be called inside the Tokio runtime.
    pub(crate) fn install() -> Result<Self, CliError> {
        let listen = |kind: SignalKind| {
            signal(kind).map_err(|error| {
                CliError::Internal(format!("cannot install a signal handler: {error}"))
            })
        };
        Ok(Self {
            interrupt: listen(SignalKind::interrupt())?,
            terminate: listen(SignalKind::terminate())?,
            hangup: listen(SignalKind::hangup())?,
            quit: listen(SignalKind::quit())?,
        })
    }

    /// The next termination signal. Cancel-safe.
    pub(crate) async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.interrupt.recv() => Signal::SIGINT,
            _ = self.terminate.recv() => Signal::SIGTERM,
            _ = self.hangup.recv() => Signal::SIGHUP,
            _ = self.quit.recv() => Signal::SIGQUIT,
        }
    }
}

/// The error for a signal that arrived while no command ran.
pub(crate) fn interrupted(signal: Signal) -> CliError {
    CliError::Interrupted {
        signal: signal as i32,
        name: signal.as_str(),
    }
}
