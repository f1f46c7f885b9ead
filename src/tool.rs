//! `Tool`: the one view both kinds of tool share.
//!
//! Everything a front-end needs (describe JSON, help, the argv of a call) is
//! derived from this value, so it cannot drift from what runs.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use crate::argv::CommandTemplate;
use crate::describe::{self, Describe};
use crate::manifest::{Loaded, Manifest};
use crate::output::{self, OutputSpec};
use crate::policy::Policy;
use crate::source::{Diagnostic, FieldPath, Severity};
use crate::template::Template;

/// The two kinds of tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolKind {
    /// Declared in a `*.tool.json` / `*.tool.toml` manifest.
    Manifest,
    /// An executable that answers `--describe`.
    Executable,
}

impl ToolKind {
    /// `manifest` or `executable`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Manifest => "manifest",
            Self::Executable => "executable",
        }
    }
}

#[derive(Debug)]
pub(crate) enum Body {
    Manifest { manifest: Box<Manifest>, command: Box<CommandTemplate> },
    Executable,
}

/// A tool of either kind, ready to be described and called.
#[derive(Debug)]
pub struct Tool {
    describe: OnceLock<Describe>,
    pub(crate) body: Body,
    policy: Policy,
    output: OutputSpec,
    output_template: Option<Template>,
    source: PathBuf,
    validation_schema: OnceLock<Value>,
    validator: OnceLock<Result<jsonschema::Validator, String>>,
}

impl Tool {
    /// Build a manifest tool, compiling its templates. Errors name the file,
    /// line, column and field of each bad template.
    pub fn from_manifest(loaded: Loaded) -> Result<(Self, Vec<Diagnostic>), Vec<Diagnostic>> {
        let Loaded { manifest, source, warnings } = loaded;
        let params: Vec<&str> = manifest.parameters.keys().map(String::as_str).collect();
        let template_error = |path: &FieldPath, e: crate::template::TemplateError| {
            let offset = source
                .locate_in_string(path, e.offset)
                .or_else(|| source.locate_nearest(path, crate::source::Target::Value).map(|r| r.start));
            let mut d = Diagnostic::file(Severity::Error, "invalid-template", &source.path, e.message)
                .at_offset(&source, offset);
            d.field = Some(path.to_string());
            d
        };
        let command = CommandTemplate::compile(&manifest.command, &params);
        let output_template = manifest
            .output
            .template
            .as_deref()
            .map(|t| Template::parse(t, output::TEMPLATE_NAMES))
            .transpose()
            .map_err(|e| template_error(&FieldPath::dotted("output.template"), e));
        let mut errors: Vec<Diagnostic> = match &command {
            Err(errs) => errs.iter().map(|(p, e)| template_error(p, e.clone())).collect(),
            Ok(_) => Vec::new(),
        };
        errors.extend(output_template.as_ref().err().cloned());
        let (Ok(command), Ok(output_template)) = (command, output_template) else {
            return Err(errors);
        };
        // Handlebars syntax (only templates with blocks or helpers reach it) is checked
        // at load too, so a broken template is reported before any call.
        let hb_errors: Vec<Diagnostic> = command
            .templates()
            .into_iter()
            .chain(output_template.iter().map(|t| (FieldPath::dotted("output.template"), t)))
            .filter_map(|(path, t)| t.check().err().map(|e| template_error(&path, e)))
            .collect();
        if !hb_errors.is_empty() {
            return Err(hb_errors);
        }
        let tool = Self {
            validation_schema: OnceLock::new(),
            describe: OnceLock::new(),
            policy: manifest.policy.clone(),
            output: manifest.output.clone(),
            output_template,
            source: source.path,
            body: Body::Manifest { manifest: Box::new(manifest), command: Box::new(command) },
            validator: OnceLock::new(),
        };
        Ok((tool, warnings))
    }

    /// Build an executable tool from its describe JSON.
    pub fn from_executable(path: PathBuf, describe: Describe) -> Result<Self, String> {
        let output = describe.output.clone().unwrap_or_default();
        let output_template = output
            .template
            .as_deref()
            .map(|t| Template::parse(t, output::TEMPLATE_NAMES))
            .transpose()
            .map_err(|e| format!("its output template is invalid: {e}"))?;
        Ok(Self {
            policy: describe.policy.clone().unwrap_or_else(Policy::executable_default),
            output,
            output_template,
            validation_schema: OnceLock::from(describe.parameters.clone()),
            describe: OnceLock::from(describe),
            body: Body::Executable,
            source: path,
            validator: OnceLock::new(),
        })
    }

    /// The declared name.
    pub fn name(&self) -> &str {
        match &self.body {
            Body::Manifest { manifest, .. } => &manifest.name,
            Body::Executable => &self.describe().name,
        }
    }

    /// The description.
    pub fn description(&self) -> &str {
        match &self.body {
            Body::Manifest { manifest, .. } => &manifest.description,
            Body::Executable => &self.describe().description,
        }
    }

    /// The `--describe` value (synthesized on first use for a manifest tool).
    pub fn describe(&self) -> &Describe {
        self.describe.get_or_init(|| match &self.body {
            Body::Manifest { manifest, .. } => describe::synthesize(manifest),
            Body::Executable => unreachable!("an executable tool is built with its describe"),
        })
    }

    /// Manifest or executable.
    pub fn kind(&self) -> ToolKind {
        match self.body {
            Body::Manifest { .. } => ToolKind::Manifest,
            Body::Executable => ToolKind::Executable,
        }
    }

    /// The manifest, for a manifest tool.
    pub fn manifest(&self) -> Option<&Manifest> {
        match &self.body {
            Body::Manifest { manifest, .. } => Some(manifest),
            Body::Executable => None,
        }
    }

    /// The compiled command, for a manifest tool.
    pub fn command(&self) -> Option<&CommandTemplate> {
        match &self.body {
            Body::Manifest { command, .. } => Some(command),
            Body::Executable => None,
        }
    }

    /// Execution policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The permission tier (stated or derived, see [`Policy::tier`]).
    pub fn tier(&self) -> crate::policy::Tier {
        let has_path =
            self.manifest().is_some_and(|m| m.parameters.values().any(|p| p.format.as_deref() == Some("path")));
        self.policy.tier(has_path)
    }

    /// Output shaping rules.
    pub fn output_spec(&self) -> &OutputSpec {
        &self.output
    }

    pub(crate) fn output_template(&self) -> Option<&Template> {
        self.output_template.as_ref()
    }

    /// The file the tool came from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// The JSON Schema calls are validated against (context values filled in first).
    pub fn validation_schema(&self) -> &Value {
        self.validation_schema.get_or_init(|| match &self.body {
            Body::Manifest { manifest, .. } => describe::validation_schema(manifest),
            Body::Executable => self.describe().parameters.clone(),
        })
    }

    /// The compiled validator (compiled on first use, then reused).
    ///
    /// A manifest's schema uses only draft-7 keywords, and draft 7's meta-schema is
    /// about three times cheaper to prepare than 2020-12's, which is most of the
    /// first call's cost in a fresh `packs run`. An executable's schema follows its
    /// own `$schema` (default 2020-12).
    pub fn validator(&self) -> Result<&jsonschema::Validator, String> {
        self.validator
            .get_or_init(|| {
                let schema = self.validation_schema();
                match self.body {
                    Body::Manifest { .. } => jsonschema::draft7::new(schema),
                    Body::Executable => jsonschema::validator_for(schema),
                }
                .map_err(|e| format!("the tool's parameter schema is invalid: {e}"))
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}
