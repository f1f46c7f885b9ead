//! What a call produced: [`ToolResult`], and [`Failure`] when the tool ran and failed.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::call::mask::Secrets;

/// What a call produced. A tool that ran and failed is a result with `ok: false`
/// and a [`Failure`], never an error of the caller.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ToolResult {
    /// The tool's name.
    pub tool: String,
    /// True when the exit code was allowed, the output shaped, and no timeout hit.
    pub ok: bool,
    /// The exit code (None when killed by a signal, and for a native tool that failed).
    pub exit_code: Option<i32>,
    /// stdout after shaping, for the model.
    pub output: String,
    /// `output` cut to `max_chars` characters, for a person or speech.
    pub display: String,
    /// The tail of the tool's stderr.
    pub stderr: String,
    /// Wall time of the process.
    pub duration_ms: u64,
    /// stdout was longer than `max_output_bytes` and was cut.
    pub truncated: bool,
    /// Whether a voice front-end should speak the result (the manifest's `output.speak`).
    pub speak: bool,
    /// Bytes of stdout kept (all of it unless `truncated`).
    #[serde(skip)]
    pub stdout_kept_bytes: u64,
    /// The manifest's `output.include_stderr`: [`ToolResult::for_model`] appends stderr.
    #[serde(skip)]
    pub include_stderr: bool,
    /// Everything the tool wrote to stdout, in bytes (more than was kept when `truncated`).
    #[serde(skip)]
    pub stdout_bytes: u64,
    /// Everything the tool wrote to stderr, in bytes (`stderr` keeps the tail).
    #[serde(skip)]
    pub stderr_bytes: u64,
    /// The timeout killed the tool's process group.
    pub timed_out: bool,
    /// Why `ok` is false, when it is (the [`Failure`] as text, secrets masked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why `ok` is false, as a value to match on.
    #[serde(skip)]
    pub failure: Option<Failure>,
    /// The JSON value `output` holds, for a tool whose output format is `json` (or
    /// `jsonl`: the array of its lines' values) and whose output no template rewrote
    /// (after `extract_field`): parsed once, kept
    /// for MCP `structuredContent`, `packs call` and library callers.
    #[serde(skip)]
    pub json: Option<Value>,
}

/// Why a tool that ran did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Failure {
    /// It exited with a code its policy does not allow.
    #[error("the tool exited with code {code} (allowed exit codes: {allowed:?})")]
    ExitCode {
        /// The exit code.
        code: i32,
        /// The policy's `allowed_exit_codes`.
        allowed: Vec<i32>,
    },
    /// A signal ended it.
    #[error("the tool was killed by signal {signal} (allowed exit codes: {allowed:?})")]
    Signal {
        /// The signal number.
        signal: i32,
        /// The policy's `allowed_exit_codes`.
        allowed: Vec<i32>,
    },
    /// It ended without an exit code or a signal.
    #[error("the tool ended abnormally (allowed exit codes: {allowed:?})")]
    Abnormal {
        /// The policy's `allowed_exit_codes`.
        allowed: Vec<i32>,
    },
    /// The timeout killed its process group.
    #[error("timed out after {}", human_duration(*.0))]
    Timeout(Duration),
    /// Its JSON output was cut at `max_output_bytes`, so it cannot be parsed.
    #[error("the tool's JSON output is larger than max_output_bytes ({0})")]
    OutputTooLarge(u64),
    /// Its output could not be shaped (invalid JSON, a missing field, a failing template).
    #[error("{0}")]
    Output(String),
    /// A native tool reported an error.
    #[error("{0}")]
    Native(String),
    /// The caller cancelled the call (its token, or the async entry's future dropped): a
    /// process tool's group was killed, a native tool's token set.
    #[error("the call was cancelled")]
    Cancelled,
}

impl Failure {
    /// `timeout`, `cancelled` or `execution`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Timeout(_) => "timeout",
            Self::Cancelled => "cancelled",
            _ => "execution",
        }
    }

    /// Whether the same call may succeed when tried again (a timeout may; a tool that
    /// failed will fail the same way).
    pub fn retryable(&self) -> bool {
        matches!(self, Self::Timeout(_))
    }

    pub(crate) fn masked(self, secrets: &Secrets) -> Self {
        match self {
            Self::Output(m) => Self::Output(secrets.mask(&m)),
            Self::Native(m) => Self::Native(secrets.mask(&m)),
            other => other,
        }
    }
}

impl ToolResult {
    /// The text a model receives for a successful run: `output`, then, when stdout was cut,
    /// a line saying so and how much was kept, then, with `output.include_stderr`, the
    /// tool's stderr after a `[stderr]` line. `packs call` and `packs serve` send this;
    /// `packs run` prints `output` and reports the rest on stderr.
    pub fn for_model(&self) -> String {
        let mut text = self.output.clone();
        let mut line = |s: &str| {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(s);
        };
        if self.truncated {
            line(&format!(
                "[packs: the output was cut: {} of {} bytes kept (policy.max_output_bytes)]\n",
                self.stdout_kept_bytes, self.stdout_bytes
            ));
        }
        if self.include_stderr && !self.stderr.is_empty() {
            line("[stderr]\n");
            line(&self.stderr);
        }
        text
    }

    /// A failed run as the error a model can act on: `{"error": {"kind": "execution" |
    /// "timeout", "message", "exit_code", "elapsed_ms", "stderr" (its last 2,000
    /// characters), "output", "retryable"}}`.
    pub fn error_json(&self) -> Value {
        let chars: Vec<char> = self.stderr.chars().collect();
        let tail: String = chars[chars.len().saturating_sub(2000)..].iter().collect();
        serde_json::json!({"error": {
            "kind": self.failure.as_ref().map_or("execution", Failure::kind),
            "message": self.error,
            "exit_code": self.exit_code,
            "elapsed_ms": self.duration_ms,
            "stderr": tail,
            "output": self.display,
            "truncated": self.truncated,
            "retryable": self.failure.as_ref().is_some_and(Failure::retryable),
        }})
    }
}

/// `30s`, or `1500ms` when not a whole number of seconds.
pub(crate) fn human_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 { format!("{}s", d.as_secs()) } else { format!("{}ms", d.as_millis()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(output: &str, stderr: &str) -> ToolResult {
        ToolResult {
            tool: "t".into(),
            ok: true,
            exit_code: Some(0),
            output: output.into(),
            display: output.into(),
            stderr: stderr.into(),
            duration_ms: 7,
            truncated: false,
            speak: false,
            stdout_kept_bytes: output.len() as u64,
            include_stderr: false,
            stdout_bytes: output.len() as u64,
            stderr_bytes: stderr.len() as u64,
            timed_out: false,
            error: None,
            failure: None,
            json: None,
        }
    }

    #[test]
    fn the_model_reads_the_output_then_the_cut_then_stderr_each_on_its_own_line() {
        assert_eq!(result("abc", "err").for_model(), "abc");
        let cut = ToolResult { truncated: true, stdout_kept_bytes: 3, stdout_bytes: 10, ..result("abc", "") };
        assert_eq!(cut.for_model(), "abc\n[packs: the output was cut: 3 of 10 bytes kept (policy.max_output_bytes)]\n");
        let with =
            |output: &str, stderr: &str| ToolResult { include_stderr: true, ..result(output, stderr) }.for_model();
        assert_eq!(with("abc", "err"), "abc\n[stderr]\nerr");
        assert_eq!(with("abc\n", "err"), "abc\n[stderr]\nerr");
        assert_eq!(with("", "err"), "[stderr]\nerr");
        assert_eq!(with("abc\n", ""), "abc\n");
    }

    #[test]
    fn a_failure_says_whether_it_was_a_timeout_and_whether_to_retry() {
        let timeout = Failure::Timeout(Duration::from_millis(1500));
        let exit = Failure::ExitCode { code: 2, allowed: vec![0] };
        assert_eq!((timeout.kind(), timeout.retryable()), ("timeout", true));
        assert_eq!((exit.kind(), exit.retryable()), ("execution", false));
        assert_eq!(timeout.to_string(), "timed out after 1500ms");
        assert_eq!(Failure::Timeout(Duration::from_secs(2)).to_string(), "timed out after 2s");
        let failed = ToolResult {
            ok: false,
            error: Some(timeout.to_string()),
            failure: Some(timeout),
            timed_out: true,
            ..result("partial", &format!("{}tail", "x".repeat(2500)))
        };
        let e = failed.error_json();
        assert_eq!(e["error"]["kind"], "timeout");
        assert_eq!(e["error"]["retryable"], true);
        assert_eq!(e["error"]["message"], "timed out after 1500ms");
        assert_eq!(e["error"]["output"], "partial");
        let tail = e["error"]["stderr"].as_str().unwrap();
        assert_eq!((tail.chars().count(), tail.ends_with("xtail")), (2000, true));
        let e = ToolResult { failure: Some(exit), ..result("", "") }.error_json();
        assert_eq!((&e["error"]["kind"], &e["error"]["retryable"]), (&"execution".into(), &false.into()));
    }

    #[test]
    fn a_failures_own_text_is_masked() {
        let secrets = Secrets::new(&["k3y".to_owned()]);
        assert_eq!(Failure::Output("bad k3y".into()).masked(&secrets), Failure::Output("bad ***".into()));
        assert_eq!(Failure::Native("bad k3y".into()).masked(&secrets), Failure::Native("bad ***".into()));
        let exit = Failure::ExitCode { code: 1, allowed: vec![0] };
        assert_eq!(exit.clone().masked(&secrets), exit);
    }
}
