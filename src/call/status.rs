//! What a status callback hears while a call goes through the pipeline.

use serde::Serialize;

use crate::native::Progress;
use crate::runner::{Process, Stream};

/// The phases of a call, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Checking the arguments.
    Validate,
    /// Applying the rules, asking for approval if needed.
    Authorize,
    /// The tool is running.
    Execute,
    /// The call is over (whatever the outcome).
    Complete,
}

/// What a status callback hears about a call.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Status<'a> {
    /// A phase begins.
    Phase(Phase),
    /// The tool's process started; `pid` is also its process group id.
    Spawned {
        /// The process id.
        pid: u32,
        /// The process: keep a clone to cancel the call ([`Process::kill`]).
        process: &'a Process,
    },
    /// Output as it arrives, secrets masked.
    Output {
        /// stdout or stderr.
        stream: Stream,
        /// The bytes.
        chunk: &'a [u8],
    },
    /// A native tool reported how far it has got (its phase, percent, time left).
    Progress(&'a Progress),
}
