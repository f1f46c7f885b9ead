//! Interrupts: Ctrl-C, SIGTERM and SIGHUP end every running tool's process group, then
//! packs, with the conventional status (128 + the signal: 130, 143, 129).
//!
//! Tools run in process groups of their own, so a terminal's Ctrl-C does not reach them;
//! without this they would outlive packs (and their timeout), orphaned.

use std::io::Write;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// How long after the first kill a second sweep runs, for a tool that was being
/// started while the signal arrived.
const SECOND_SWEEP: Duration = Duration::from_millis(50);

/// The signal that interrupted packs, once one did.
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

/// The exit status for an interrupted packs (128 + the signal), once a signal came.
pub(super) fn exit_status() -> Option<i32> {
    let signal = INTERRUPTED.load(Ordering::SeqCst);
    (signal != 0).then_some(128 + signal)
}

/// From now on, an interrupt ends every running tool and then packs. Best effort: when
/// the handler cannot be installed (no thread can be started), packs says so and goes on.
pub(super) fn end_tools_on_interrupt() {
    let installed = Signals::new([SIGINT, SIGTERM, SIGHUP]).and_then(|mut signals| {
        std::thread::Builder::new().name("packs-signals".into()).spawn(move || {
            if let Some(signal) = signals.forever().next() {
                // Recorded first: a command whose tool the kill ends exits with this status.
                INTERRUPTED.store(signal, Ordering::SeqCst);
                let ended = crate::runner::kill_all();
                std::thread::sleep(SECOND_SWEEP);
                crate::runner::kill_all();
                let name = match signal {
                    SIGINT => "SIGINT",
                    SIGTERM => "SIGTERM",
                    _ => "SIGHUP",
                };
                let _ = writeln!(std::io::stderr().lock(), "packs: {name}: ended {ended} running tool(s)");
                std::process::exit(128 + signal);
            }
        })
    });
    if let Err(e) = installed {
        let _ = writeln!(std::io::stderr().lock(), "warning: interrupts will not end running tools: {e}");
    }
}
