//! Interrupts: Ctrl-C, SIGTERM and SIGHUP end every running tool's process group, then
//! packs, with the conventional status (128 + the signal: 130, 143, 129).
//!
//! Tools run in process groups of their own, so a terminal's Ctrl-C does not reach them;
//! without this they would outlive packs (and their timeout), orphaned. The mechanism is
//! in the runner (`runner::end_tools_on_interrupt`): no thread, a handler that wakes the
//! runs.

use std::io::Write;

/// From now on an interrupt ends the running tools, then packs. When the handler cannot
/// be installed, packs says so and goes on.
pub(super) fn end_tools_on_interrupt() {
    if let Err(e) = crate::runner::end_tools_on_interrupt() {
        let _ = writeln!(std::io::stderr().lock(), "warning: interrupts will not end running tools: {e}");
    }
}

/// The exit status of an interrupted packs (128 + the signal), once a signal ended tools.
pub(super) fn exit_status() -> Option<i32> {
    crate::runner::interrupted().map(|signal| {
        let name = match signal {
            libc::SIGINT => "SIGINT",
            libc::SIGTERM => "SIGTERM",
            _ => "SIGHUP",
        };
        let _ = writeln!(std::io::stderr().lock(), "packs: {name}: running tools were ended");
        128 + signal
    })
}
