//! The audit log: one JSON line per call (`--log FILE` or `PACKS_LOG`).
//!
//! Each line is written with a single `write` on a file opened for appending, so
//! concurrent packs processes never interleave within a line. A log that cannot be
//! opened stops the call before anything runs; a write that fails after a call ran
//! is kept for the front-end to report ([`AuditLog::take_failure`]).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

/// An open audit log.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<File>,
    failure: Mutex<Option<String>>,
}

/// One call, as logged. Secrets in `argv` are already masked.
#[derive(Debug, Clone, Serialize)]
pub struct Entry<'a> {
    /// RFC 3339 UTC time the call ended.
    pub time: String,
    /// The agent the call was made for.
    pub agent: Option<&'a str>,
    /// The tool's name, as called (a name that resolved to no tool too).
    pub tool: &'a str,
    /// Its tier.
    pub tier: &'a str,
    /// `allowed`, `approved`, `denied`, `deferred`; `ask` when the rules ask a person but the
    /// call failed before anyone was asked (bad arguments, a plan that failed); `none` when
    /// no rule applies (no tool of that name).
    pub decision: &'a str,
    /// The argv that ran (or would have), secrets masked; empty when the call failed before planning.
    pub argv: Vec<String>,
    /// How many bytes the program was given on stdin (`command.stdin`); never its text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdin_bytes: Option<u64>,
    /// What the kernel enforced: `enforced`, `partial`, `off`, `none` (nothing to confine),
    /// `in-process` (a native tool); absent when the call failed before planning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<&'a str>,
    /// How the kernel confined reads: `narrowed` (`policy.readable`), `credentials-denied`
    /// (the credential stores, the operator's list), `unconfined`; absent when `sandbox` is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reads: Option<&'a str>,
    /// The tool's exit code.
    pub exit_code: Option<i32>,
    /// Wall time of the process.
    pub duration_ms: Option<u64>,
    /// `ok`, `failed`, `timeout`, `denied`, or the error kind.
    pub outcome: &'a str,
    /// The error message, when there is one (secrets masked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl AuditLog {
    /// Open (creating if needed) `path` for appending. It must be a regular file or a
    /// character device (`/dev/stderr`, `/dev/null`): a FIFO, a socket, a directory or a
    /// block device is refused at once (opening a FIFO with no reader would block forever).
    pub fn open(path: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        // Non-blocking, so a FIFO without a reader fails (ENXIO) instead of hanging.
        let file = OpenOptions::new().create(true).append(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(
            |e| match e.raw_os_error() {
                Some(libc::ENXIO) => std::io::Error::other(
                    "it is a FIFO (a named pipe); the audit log must be a regular file or a character device",
                ),
                _ => e,
            },
        )?;
        let kind = file.metadata()?.file_type();
        if !(kind.is_file() || kind.is_char_device()) {
            let what = if kind.is_fifo() {
                "a FIFO (a named pipe)"
            } else if kind.is_socket() {
                "a socket"
            } else if kind.is_block_device() {
                "a block device"
            } else {
                "not a regular file"
            };
            return Err(std::io::Error::other(format!(
                "it is {what}; the audit log must be a regular file or a character device"
            )));
        }
        // Writes block as usual from here on (a full pipe or terminal is waited for).
        // SAFETY: fcntl on a descriptor this function owns; no memory is passed.
        let flags = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&file), libc::F_GETFL) };
        if flags >= 0 {
            // SAFETY: as above.
            unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&file), libc::F_SETFL, flags & !libc::O_NONBLOCK) };
        }
        Ok(Self { path: path.to_owned(), file: Mutex::new(file), failure: Mutex::new(None) })
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one line. A failure is also kept for [`AuditLog::take_failure`].
    pub fn record(&self, entry: &Entry<'_>) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        file.write_all(&line).inspect_err(|e| {
            let mut failure = self.failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            failure.get_or_insert_with(|| format!("cannot write the audit log {}: {e}", self.path.display()));
        })
    }

    /// The first write that failed since the last call of this (calls that ran but
    /// are missing from the log), as a message naming the file and the error.
    pub fn take_failure(&self) -> Option<String> {
        self.failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }
}

/// Now, as RFC 3339 UTC with milliseconds.
pub(crate) fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}
