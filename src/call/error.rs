//! Why a call did not produce a result: [`ToolError`], and the argument problems it carries.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::argv::RenderFailure;
use crate::call::Denial;
use crate::call::mask::Secrets;
use crate::catalog::LookupError;
use crate::policy::Tier;
use crate::runner::SpawnError;
use crate::sandbox::Unenforceable;

/// One problem with a call's arguments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldError {
    /// The argument (`count`, `tags/1`), or empty for the arguments as a whole.
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// The schema of that argument, so a model can correct its call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
}

/// Why a call did not produce a result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The name is not a cataloged tool, or is ambiguous.
    #[error(transparent)]
    NotFound(#[from] LookupError),
    /// The arguments are not a JSON object (or a JSON string holding one), or could not be built.
    #[error("invalid arguments for `{tool}`: {message}")]
    InvalidArguments {
        /// The tool's name.
        tool: String,
        /// What is wrong with them.
        message: String,
    },
    /// The arguments do not match the tool's schema.
    #[error("invalid arguments for `{tool}`: {}", errors.iter().map(|e| if e.field.is_empty() { e.message.clone() } else { format!("`{}`: {}", e.field, e.message) }).collect::<Vec<_>>().join("; "))]
    Validation {
        /// The tool's name.
        tool: String,
        /// Every problem found.
        errors: Vec<FieldError>,
    },
    /// A template could not be rendered with these values.
    #[error("{}: {failure}", file.display())]
    Render {
        /// The manifest.
        file: PathBuf,
        /// What failed.
        failure: RenderFailure,
    },
    /// The tool's own schema does not compile.
    #[error("tool `{tool}` is broken: {message}")]
    BrokenTool {
        /// The tool's name.
        tool: String,
        /// Why its schema does not compile.
        message: String,
    },
    /// The call is not allowed, or needed approval and did not get it.
    #[error("permission denied for `{tool}` (tier {tier}): {reason}")]
    PermissionDenied {
        /// The tool's name.
        tool: String,
        /// The tool's tier.
        tier: Tier,
        /// Which rule denied it.
        reason: Denial,
    },
    /// The kernel cannot enforce the tool's policy, and the sandbox mode is `enforce`.
    #[error("tool `{tool}`: {source}")]
    Unconfinable {
        /// The tool's name.
        tool: String,
        /// What the kernel lacks.
        #[source]
        source: Unenforceable,
    },
    /// The program could not be started.
    #[error("tool `{tool}`: {source}")]
    Spawn {
        /// The tool's name.
        tool: String,
        /// The OS error.
        #[source]
        source: SpawnError,
    },
}

impl ToolError {
    /// A stable kind name: `not_found`, `validation`, `invalid_tool` (a template or
    /// schema of the tool itself, or a missing secret), `permission_denied`,
    /// `sandbox_unavailable` (the kernel cannot enforce the tool's policy), `execution`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "not_found",
            Self::InvalidArguments { .. } | Self::Validation { .. } => "validation",
            Self::Render { .. } | Self::BrokenTool { .. } => "invalid_tool",
            Self::PermissionDenied { .. } => "permission_denied",
            Self::Unconfinable { .. } => "sandbox_unavailable",
            Self::Spawn { .. } => "execution",
        }
    }

    /// Whether the caller (a model) may fix the call and retry.
    pub fn retryable(&self) -> bool {
        matches!(self, Self::InvalidArguments { .. } | Self::Validation { .. })
    }

    /// The same error with every secret of the call in its text replaced by `***`: each
    /// text it holds (messages, field errors and their schemas, paths, the program, the
    /// OS error's message), so its `Display`, its JSON and whatever a front-end builds
    /// from its fields show none. The pipeline returns every error through this.
    pub(crate) fn masked(self, secrets: &Secrets) -> Self {
        if secrets.is_empty() {
            return self;
        }
        let m = |text: String| secrets.mask(&text);
        match self {
            Self::NotFound(e) => Self::NotFound(e),
            Self::InvalidArguments { tool, message } => Self::InvalidArguments { tool, message: m(message) },
            Self::Validation { tool, errors } => Self::Validation {
                tool,
                errors: errors
                    .into_iter()
                    .map(|e| FieldError {
                        field: m(e.field),
                        message: m(e.message),
                        schema: e.schema.map(|mut v| {
                            crate::call::mask_json(&mut v, secrets);
                            v
                        }),
                    })
                    .collect(),
            },
            Self::Render { file, failure } => Self::Render {
                file: PathBuf::from(m(file.to_string_lossy().into_owned())),
                failure: RenderFailure {
                    field: m(failure.field),
                    template: m(failure.template),
                    message: m(failure.message),
                },
            },
            Self::BrokenTool { tool, message } => Self::BrokenTool { tool, message: m(message) },
            Self::PermissionDenied { tool, tier, reason } => Self::PermissionDenied { tool, tier, reason },
            Self::Unconfinable { tool, source } => Self::Unconfinable {
                tool,
                source: Unenforceable { missing: source.missing.into_iter().map(m).collect() },
            },
            Self::Spawn { tool, source } => Self::Spawn {
                tool,
                source: match source {
                    SpawnError::Start { program, source } => {
                        SpawnError::Start { program: m(program), source: masked_io(source, secrets) }
                    }
                    SpawnError::Wait { program, source } => {
                        SpawnError::Wait { program: m(program), source: masked_io(source, secrets) }
                    }
                    other => other,
                },
            },
        }
    }

    /// The JSON form: `{"error": {"kind", "message", "retryable", "errors"?}}`.
    pub fn to_json(&self) -> Value {
        let mut e = Map::new();
        e.insert("kind".into(), self.kind().into());
        e.insert("message".into(), self.to_string().into());
        e.insert("retryable".into(), self.retryable().into());
        if let Self::Validation { errors, .. } = self {
            e.insert("errors".into(), serde_json::to_value(errors).unwrap_or_default());
        }
        if let Self::PermissionDenied { tier, reason, .. } = self {
            e.insert("tier".into(), tier.as_str().into());
            e.insert("reason".into(), reason.to_string().into());
        }
        serde_json::json!({ "error": e })
    }
}

/// `e`, or, when its message holds a secret, an error of the same kind with the message masked.
fn masked_io(e: std::io::Error, secrets: &Secrets) -> std::io::Error {
    let text = e.to_string();
    let masked = secrets.mask(&text);
    if masked == text { e } else { std::io::Error::new(e.kind(), masked) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_text_of_an_error_is_masked() {
        let secrets = Secrets::new(&["k3y".to_owned()]);
        let spawn = ToolError::Spawn {
            tool: "t".into(),
            source: SpawnError::Start {
                program: "/opt/k3y/bin".into(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no /srv/k3y"),
            },
        }
        .masked(&secrets);
        assert_eq!(spawn.to_string(), "tool `t`: cannot start `/opt/***/bin`: no /srv/***");
        let ToolError::Spawn { source: SpawnError::Start { source, .. }, .. } = &spawn else { panic!() };
        assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        let validation = ToolError::Validation {
            tool: "t".into(),
            errors: vec![FieldError {
                field: "p".into(),
                message: "\"x\" resolves to /srv/k3y/x".into(),
                schema: Some(serde_json::json!({"description": "k3y"})),
            }],
        }
        .masked(&secrets);
        assert!(!validation.to_json().to_string().contains("k3y"), "{}", validation.to_json());
        let unconfinable =
            ToolError::Unconfinable { tool: "t".into(), source: Unenforceable { missing: vec!["k3y".into()] } };
        assert!(!unconfinable.masked(&secrets).to_string().contains("k3y"));
        let render = ToolError::Render {
            file: "/p/k3y.json".into(),
            failure: RenderFailure { field: "f".into(), template: "k3y".into(), message: "k3y".into() },
        };
        assert!(!render.masked(&secrets).to_string().contains("k3y"));
    }

    #[test]
    fn an_errors_kind_and_retry_hint_follow_its_variant_and_its_json_carries_them() {
        let invalid = ToolError::InvalidArguments { tool: "t".into(), message: "not an object".into() };
        assert_eq!((invalid.kind(), invalid.retryable()), ("validation", true));
        assert_eq!(
            invalid.to_json(),
            serde_json::json!({"error": {"kind": "validation", "message": "invalid arguments for `t`: not an object",
                                         "retryable": true}})
        );
        let broken = ToolError::BrokenTool { tool: "t".into(), message: "bad schema".into() };
        assert_eq!((broken.kind(), broken.retryable()), ("invalid_tool", false));
        assert_eq!(broken.to_json()["error"]["message"], "tool `t` is broken: bad schema");
        let validation = ToolError::Validation {
            tool: "t".into(),
            errors: vec![FieldError { field: "n".into(), message: "too big".into(), schema: None }],
        };
        assert_eq!(validation.to_json()["error"]["errors"], serde_json::json!([{"field": "n", "message": "too big"}]));
    }

    #[test]
    fn an_os_error_without_a_secret_is_kept_as_it_was() {
        let secrets = Secrets::new(&["k3y".to_owned()]);
        let plain = std::io::Error::from_raw_os_error(libc::ENOENT);
        let kept = masked_io(plain, &secrets);
        assert_eq!(kept.raw_os_error(), Some(libc::ENOENT));
        let secret = masked_io(std::io::Error::other("in /k3y"), &secrets);
        assert_eq!(secret.to_string(), "in /***");
    }

    #[test]
    fn without_secrets_an_error_is_returned_as_it_was() {
        use std::os::unix::ffi::OsStrExt;
        let file = PathBuf::from(std::ffi::OsStr::from_bytes(b"/packs/caf\xe9.tool.json"));
        let failure = RenderFailure { field: "f".into(), template: "t".into(), message: "m".into() };
        let render = ToolError::Render { file: file.clone(), failure };
        let ToolError::Render { file: kept, .. } = render.masked(&Secrets::default()) else { panic!() };
        assert_eq!(kept, file, "a path that is not UTF-8 is kept as it was, byte for byte");
    }
}
