//! `Tool`: the one view all three kinds of tool share.
//!
//! Everything a front-end needs (describe JSON, help, the argv of a call) is
//! derived from this value, so it cannot drift from what runs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::argv::CommandTemplate;
use crate::code::Code;
use crate::describe::{self, Describe};
use crate::manifest::{Loaded, Manifest};
use crate::native::NativeTool;
use crate::output::{self, OutputSpec};
use crate::policy::Policy;
use crate::source::{Diagnostic, FieldPath, Severity};
use crate::template::{Ref, Template};

/// The kinds of tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ToolKind {
    /// Declared in a `*.tool.json` / `*.tool.toml` manifest.
    Manifest,
    /// An executable that answers `--describe`.
    Executable,
    /// A [`NativeTool`] registered by the program embedding packs.
    Native,
}

impl ToolKind {
    /// `manifest`, `executable` or `native`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Manifest => "manifest",
            Self::Executable => "executable",
            Self::Native => "native",
        }
    }
}

pub(crate) enum Body {
    /// The command's templates are checked when the manifest loads, but compiled again
    /// (and kept) only when a call renders them: a listing of thousands of tools does not
    /// hold thousands of compiled commands.
    Manifest {
        manifest: Box<Manifest>,
        command: OnceLock<Result<Box<CommandTemplate>, String>>,
    },
    Executable,
    Native(Arc<dyn NativeTool>),
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Manifest { manifest, .. } => f.debug_tuple("Manifest").field(&manifest.name).finish(),
            Self::Executable => f.write_str("Executable"),
            Self::Native(t) => f.debug_tuple("Native").field(&t.name()).finish(),
        }
    }
}

/// Why a native tool cannot be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NativeToolError {
    /// Its name is not snake_case or is too long.
    #[error("native tool name `{0}` is not snake_case (at most 64 characters)")]
    BadName(String),
    /// Its description is empty.
    #[error("native tool `{0}` has an empty description")]
    NoDescription(String),
    /// Its input schema is not an object schema, or does not compile.
    #[error("native tool `{tool}` has an invalid input schema: {message}")]
    BadSchema {
        /// The tool's name.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// Its output template does not parse.
    #[error("native tool `{tool}` has an invalid output template: {message}")]
    BadOutputTemplate {
        /// The tool's name.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// Another native tool of this catalog has the name.
    #[error("a native tool named `{0}` is already registered")]
    Duplicate(String),
}

/// A tool of any kind, ready to be described and called.
#[derive(Debug)]
pub struct Tool {
    // The parts a tool may never need are boxed: a catalog holds thousands of tools.
    describe: OnceLock<Box<Describe>>,
    pub(crate) body: Body,
    policy: Policy,
    output: OutputSpec,
    output_template: Option<Box<Template>>,
    source: PathBuf,
    validation_schema: OnceLock<Box<Value>>,
    validator: OnceLock<Result<jsonschema::Validator, String>>,
    /// `policy.writable`, compiled.
    writable: Vec<Template>,
    /// `policy.readable`, compiled (`None`: reads are not narrowed).
    readable: Option<Vec<Template>>,
    /// An executable's bytes as `--locked` checked them: the tool is started from them,
    /// never from its path again.
    image: OnceLock<crate::image::PinnedImage>,
    /// What the sandbox decided for this tool under the settings of the last context that
    /// asked, with those settings (the call pipeline's to read and write: `kept`).
    kept: std::sync::Mutex<Option<Arc<dyn std::any::Any + Send + Sync>>>,
}

impl Tool {
    /// Build a manifest tool, compiling its templates. Errors name the file,
    /// line, column and field of each bad template.
    pub(crate) fn from_manifest(loaded: Loaded) -> Result<(Self, Vec<Diagnostic>), Vec<Diagnostic>> {
        let Loaded { manifest, source, warnings } = loaded;
        let params: Vec<&str> = manifest.parameters.keys().map(String::as_str).collect();
        let template_error = |path: &FieldPath, e: crate::template::TemplateError| {
            let offset = source
                .locate_in_string(path, e.offset)
                .or_else(|| source.locate_nearest(path, crate::source::Target::Value).map(|r| r.start));
            let mut d = Diagnostic::file(Severity::Error, Code::InvalidTemplate, &source.path, e.message)
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
            .and_then(|t| match t.as_ref().map(secret_in_output).transpose() {
                Err(message) => Err(crate::template::TemplateError { message, offset: 0 }),
                Ok(_) => Ok(t),
            })
            .map_err(|e| template_error(&FieldPath::dotted("output.template"), e));
        let mut errors: Vec<Diagnostic> = match &command {
            Err(errs) => errs.iter().map(|(p, e)| template_error(p, e.clone())).collect(),
            Ok(_) => Vec::new(),
        };
        errors.extend(output_template.as_ref().err().cloned());
        let writable = writable_templates(&manifest.policy.writable, &params);
        errors.extend(
            writable
                .as_ref()
                .err()
                .map(|(i, e)| template_error(&FieldPath::dotted("policy.writable").index(*i), e.clone())),
        );
        let readable = manifest
            .policy
            .readable
            .as_deref()
            .map(|r| place_templates(r, &params, READABLE_NAMES, "a readable place"))
            .transpose();
        errors.extend(
            readable
                .as_ref()
                .err()
                .map(|(i, e)| template_error(&FieldPath::dotted("policy.readable").index(*i), e.clone())),
        );
        let (Ok(writable), Ok(readable)) = (writable, readable) else { return Err(errors) };
        let (Ok(command), Ok(output_template)) = (command, output_template) else {
            return Err(errors);
        };
        let loader_errors = loader_variables(&manifest, &command, &source);
        if !loader_errors.is_empty() {
            return Err(loader_errors);
        }
        // The syntax of blocks and helpers (only templates with them reach the parser) is checked
        // at load too, so a broken template is reported before any call.
        let hb_errors: Vec<Diagnostic> = command
            .templates()
            .into_iter()
            .map(|(site, t)| (site.path(), t))
            .chain(output_template.iter().map(|t| (FieldPath::dotted("output.template"), t)))
            .filter_map(|(path, t)| t.check().err().map(|e| template_error(&path, e)))
            .collect();
        if !hb_errors.is_empty() {
            return Err(hb_errors);
        }
        let mut warnings = warnings;
        if let Some(why) = awaiting_review(&manifest, &source.path) {
            let path = FieldPath::dotted("lint.review");
            warnings.push(
                Diagnostic::at(&source, Severity::Warning, Code::NeedsReview, &path, crate::source::Target::Key, why)
                    .with_help("check each entry (`packs lint` lists them), then remove it: the tool is offered and runs once none is left"),
            );
        }
        let tool = Self {
            validation_schema: OnceLock::new(),
            describe: OnceLock::new(),
            policy: manifest.policy.clone(),
            output: manifest.output.clone(),
            output_template: output_template.map(Box::new),
            source: source.path,
            body: Body::Manifest { manifest: Box::new(manifest), command: OnceLock::new() },
            validator: OnceLock::new(),
            writable,
            readable,
            image: OnceLock::new(),
            kept: std::sync::Mutex::default(),
        };
        Ok((tool, warnings))
    }

    /// Build an executable tool from its describe JSON.
    pub(crate) fn from_executable(path: PathBuf, describe: Describe) -> Result<Self, String> {
        let output = describe.output.clone().unwrap_or_default();
        let output_template = output
            .template
            .as_deref()
            .map(|t| Template::parse(t, output::TEMPLATE_NAMES))
            .transpose()
            .map_err(|e| format!("its output template is invalid: {e}"))?;
        output_template.as_ref().map(secret_in_output).transpose()?;
        let policy = describe.policy.clone().unwrap_or_else(Policy::executable_default);
        let writable = writable_templates(&policy.writable, &[])
            .map_err(|(i, e)| format!("its policy.writable.{i} is invalid: {e}"))?;
        let readable = policy
            .readable
            .as_deref()
            .map(|r| place_templates(r, &[], READABLE_NAMES, "a readable place"))
            .transpose()
            .map_err(|(i, e)| format!("its policy.readable.{i} is invalid: {e}"))?;
        Ok(Self {
            writable,
            readable,
            image: OnceLock::new(),
            kept: std::sync::Mutex::default(),
            policy,
            output,
            output_template: output_template.map(Box::new),
            validation_schema: OnceLock::from(Box::new(describe.parameters.clone())),
            describe: OnceLock::from(Box::new(describe)),
            body: Body::Executable,
            source: path,
            validator: OnceLock::new(),
        })
    }

    /// Build a native tool, checking its name, description, schema and output template.
    pub fn from_native(native: Arc<dyn NativeTool>) -> Result<Self, NativeToolError> {
        let name = native.name().to_owned();
        if !crate::names::is_snake_case(&name) || name.len() > crate::names::MAX_NAME_LEN {
            return Err(NativeToolError::BadName(name));
        }
        if native.description().trim().is_empty() {
            return Err(NativeToolError::NoDescription(name));
        }
        let parameters = native.input_schema();
        if parameters.get("type").and_then(Value::as_str) != Some("object") {
            let message = "it is not a JSON-Schema object (`\"type\": \"object\"`)".to_owned();
            return Err(NativeToolError::BadSchema { tool: name, message });
        }
        let policy = native.policy();
        let output = native.output();
        let output_template = output
            .template
            .as_deref()
            .map(|t| Template::parse(t, output::TEMPLATE_NAMES))
            .transpose()
            .map_err(|e| NativeToolError::BadOutputTemplate { tool: name.clone(), message: e.to_string() })?;
        if let Some(message) = output_template.as_ref().and_then(|t| secret_in_output(t).err()) {
            return Err(NativeToolError::BadOutputTemplate { tool: name, message });
        }
        let describe = Describe {
            name: name.clone(),
            description: native.description().to_owned(),
            parameters: parameters.clone(),
            policy: Some(policy.clone()),
            output: None,
        };
        let tool = Self {
            policy,
            output,
            output_template: output_template.map(Box::new),
            validation_schema: OnceLock::from(Box::new(parameters)),
            describe: OnceLock::from(Box::new(describe)),
            body: Body::Native(native),
            source: PathBuf::from(format!("<native {name}>")),
            validator: OnceLock::new(),
            writable: Vec::new(),
            readable: None,
            image: OnceLock::new(),
            kept: std::sync::Mutex::default(),
        };
        tool.validator().map_err(|message| NativeToolError::BadSchema { tool: name, message })?;
        Ok(tool)
    }

    /// The declared name.
    pub fn name(&self) -> &str {
        match &self.body {
            Body::Manifest { manifest, .. } => &manifest.name,
            Body::Executable | Body::Native(_) => &self.describe().name,
        }
    }

    /// The description.
    pub fn description(&self) -> &str {
        match &self.body {
            Body::Manifest { manifest, .. } => &manifest.description,
            Body::Executable | Body::Native(_) => &self.describe().description,
        }
    }

    /// The `--describe` value (synthesized on first use for a manifest tool).
    pub fn describe(&self) -> &Describe {
        self.describe.get_or_init(|| match &self.body {
            Body::Manifest { manifest, .. } => Box::new(describe::synthesize(manifest)),
            Body::Executable | Body::Native(_) => {
                unreachable!("executable and native tools are built with their describe")
            }
        })
    }

    /// `f` with the `--describe` value; a manifest's is synthesized for the moment and not
    /// kept when no one has asked for it yet, so a listing that writes thousands of tools
    /// one after another never holds all their describes.
    pub(crate) fn with_describe<R>(&self, f: impl FnOnce(&Describe) -> R) -> R {
        match (self.describe.get(), &self.body) {
            (None, Body::Manifest { manifest, .. }) => f(&describe::synthesize(manifest)),
            _ => f(self.describe()),
        }
    }

    /// Manifest, executable or native.
    pub fn kind(&self) -> ToolKind {
        match self.body {
            Body::Manifest { .. } => ToolKind::Manifest,
            Body::Executable => ToolKind::Executable,
            Body::Native(_) => ToolKind::Native,
        }
    }

    /// The native tool, for a native tool.
    pub fn native(&self) -> Option<&dyn NativeTool> {
        match &self.body {
            Body::Native(t) => Some(&**t),
            Body::Manifest { .. } | Body::Executable => None,
        }
    }

    /// A one-line summary: a native tool's own, else the description's first line.
    pub fn short_description(&self) -> &str {
        match &self.body {
            Body::Native(t) => t.short_description(),
            Body::Manifest { .. } | Body::Executable => self.description().lines().next().unwrap_or_default(),
        }
    }

    /// The version, when the tool states one.
    pub fn version(&self) -> Option<&str> {
        match &self.body {
            Body::Manifest { manifest, .. } => manifest.version.as_deref(),
            Body::Executable => None,
            Body::Native(t) => t.version(),
        }
    }

    /// Example calls in FunctionGemma syntax (`call:NAME{...}`), from a manifest's `examples`.
    pub fn examples(&self) -> &[String] {
        self.manifest().map_or(&[], |m| m.examples.as_slice())
    }

    /// The JSON Schema of the tool's output, when it states one (native tools).
    pub fn output_schema(&self) -> Option<Value> {
        self.native().and_then(NativeTool::output_schema)
    }

    /// The manifest, for a manifest tool.
    /// Whether the tool is offered in `mode`: its manifest's `modes` include it or `Global`
    /// (any case), or it states none (executables and native tools state none).
    pub fn in_mode(&self, mode: &str) -> bool {
        let modes = self.manifest().map(|m| m.modes.as_slice()).unwrap_or_default();
        modes.is_empty() || modes.iter().any(|m| m.eq_ignore_ascii_case(mode) || m.eq_ignore_ascii_case("Global"))
    }

    pub(crate) fn manifest(&self) -> Option<&Manifest> {
        match &self.body {
            Body::Manifest { manifest, .. } => Some(manifest),
            Body::Executable | Body::Native(_) => None,
        }
    }

    /// A manifest tool's compiled command (compiled on first use; it was checked at load,
    /// so an error here means the manifest's templates stopped compiling, which they cannot).
    pub(crate) fn command(&self) -> Option<Result<&CommandTemplate, &str>> {
        let Body::Manifest { manifest, command } = &self.body else { return None };
        let compiled = command.get_or_init(|| {
            let params: Vec<&str> = manifest.parameters.keys().map(String::as_str).collect();
            CommandTemplate::compile(&manifest.command, &params).map(Box::new).map_err(|errors| {
                errors.iter().map(|(path, e)| format!("`{path}`: {}", e.message)).collect::<Vec<_>>().join("; ")
            })
        });
        Some(compiled.as_deref().map_err(String::as_str))
    }

    /// Whether the tool's own definition says it is read-only: a manifest that writes
    /// `read_only: true` (not the default), an executable whose describe says so, a native
    /// tool whose policy says so. Only this is advertised (MCP `readOnlyHint`).
    pub fn states_read_only(&self) -> bool {
        self.policy.read_only
            && match &self.body {
                Body::Manifest { manifest, .. } => manifest.read_only_stated,
                Body::Executable | Body::Native(_) => true,
            }
    }

    /// Execution policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The permission tier (stated or derived, see [`Policy::tier`]).
    pub fn tier(&self) -> crate::policy::Tier {
        let has_path = self.manifest().is_some_and(|m| m.parameters.values().any(crate::manifest::Parameter::is_path));
        self.policy.tier(has_path)
    }

    /// Output shaping rules.
    pub fn output_spec(&self) -> &OutputSpec {
        &self.output
    }

    pub(crate) fn output_template(&self) -> Option<&Template> {
        self.output_template.as_deref()
    }

    /// Why the tool may not be offered or run yet: its manifest lists what a person must
    /// still review (`lint.review`, which `packs convert` writes).
    pub(crate) fn awaiting_review(&self) -> Option<String> {
        awaiting_review(self.manifest()?, &self.source)
    }

    /// The file the tool came from (for a native tool, `<native NAME>`).
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// The sealed bytes an executable is started from, once `--locked` checked them.
    pub(crate) fn image(&self) -> Option<&crate::image::PinnedImage> {
        self.image.get()
    }

    /// Start this executable from `image` from now on (the first image set stays).
    pub(crate) fn pin_image(&self, image: crate::image::PinnedImage) {
        let _ = self.image.set(image);
    }

    /// The JSON Schema calls are validated against (context values filled in first).
    pub fn validation_schema(&self) -> &Value {
        self.validation_schema.get_or_init(|| {
            Box::new(match &self.body {
                Body::Manifest { manifest, .. } => describe::validation_schema(manifest),
                Body::Executable | Body::Native(_) => self.describe().parameters.clone(),
            })
        })
    }

    /// The compiled validator (compiled on first use, then reused).
    ///
    /// A manifest's schema uses only draft-7 keywords, and draft 7's meta-schema is
    /// about three times cheaper to prepare than 2020-12's, which is most of the
    /// first call's cost in a fresh `packs run`. An executable's schema follows its
    /// own `$schema` (default 2020-12); one that only uses keywords both drafts read the
    /// same way ([`draft_neutral`]) is compiled as draft 7, formats as annotations like
    /// 2020-12's (the same answers, 1.5 ms less per process).
    pub(crate) fn validator(&self) -> Result<&jsonschema::Validator, String> {
        self.validator
            .get_or_init(|| {
                let schema = self.validation_schema();
                match self.body {
                    Body::Manifest { .. } => jsonschema::draft7::new(schema),
                    Body::Executable | Body::Native(_) if draft_neutral(schema) => jsonschema::options()
                        .with_draft(jsonschema::Draft::Draft7)
                        .should_validate_formats(false)
                        .build(schema),
                    Body::Executable | Body::Native(_) => jsonschema::validator_for(schema),
                }
                .map_err(|e| format!("the tool's parameter schema is invalid: {e}"))
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// Whether `schema` means the same under JSON Schema draft 7 and 2020-12: it names no
/// draft and uses only keywords both read alike (no `$ref` or `$defs`, whose resolution
/// differs; no array form of `items`; nothing only one of them knows), recursively. Any
/// other keyword, unknown ones included, answers no.
fn draft_neutral(schema: &Value) -> bool {
    const DATA: &[&str] = &[
        "type",
        "enum",
        "const",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxProperties",
        "minProperties",
        "required",
        "title",
        "description",
        "default",
        "examples",
        "readOnly",
        "writeOnly",
        "$comment",
        "format",
    ];
    let map = match schema {
        Value::Bool(_) => return true,
        Value::Object(map) => map,
        _ => return false,
    };
    map.iter().all(|(key, value)| match key.as_str() {
        k if DATA.contains(&k) => true,
        // `items` as one schema only: its array form means `prefixItems` in 2020-12.
        "items" | "additionalProperties" | "contains" | "propertyNames" | "not" | "if" | "then" | "else" => {
            draft_neutral(value)
        }
        "properties" | "patternProperties" => value.as_object().is_some_and(|m| m.values().all(draft_neutral)),
        "allOf" | "anyOf" | "oneOf" => value.as_array().is_some_and(|a| a.iter().all(draft_neutral)),
        _ => false,
    })
}

/// A call's values (parameters, context) never reach a variable that changes how programs
/// load or start ([`crate::environment::LOADER_VARIABLES`]): not in `command.env`, nor in a
/// `NAME=VALUE` argument of `env`. One error per template, at its variable's name.
pub(crate) fn loader_variables(
    manifest: &Manifest,
    command: &CommandTemplate,
    source: &crate::source::SourceFile,
) -> Vec<Diagnostic> {
    use crate::argv::Site;
    use crate::source::Target;
    let through_env = crate::operands::program_name(&manifest.command.program) == "env"
        || command
            .templates()
            .iter()
            .any(|(_, t)| t.is_literal() && crate::operands::program_name(t.source()) == "env");
    let mut errors = Vec::new();
    for (site, t) in command.templates() {
        let (name, target) = match site {
            Site::Env(name) => (name, Target::Key),
            Site::Arg(_) | Site::Member(..) if through_env => {
                let Some((name, _)) = t.source().split_once('=') else { continue };
                if name.is_empty() || !name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric()) {
                    continue;
                }
                (name, Target::Value)
            }
            _ => continue,
        };
        if !crate::environment::is_loader_variable(name) {
            continue;
        }
        let Some(what) = t.refs().iter().find_map(|r| match r {
            Ref::Param(p) => Some(format!("the call's `{p}`")),
            Ref::Context(k) => Some(format!("the context's `{k}`")),
            Ref::Env(_) | Ref::Secret(_) => None,
        }) else {
            continue;
        };
        let path = site.path();
        let message = format!(
            "`{name}` changes how programs load or start, and its value reads {what}: the model would choose what the tool loads or runs"
        );
        let mut d = Diagnostic::file(Severity::Error, Code::LoaderVariable, &source.path, message)
            .at_offset(source, source.locate_nearest(&path, target).map(|r| r.start))
            .with_help("write the value in the manifest, or take it from the operator's environment with `{{env.NAME}}` or `{{secret.NAME}}`");
        d.field = Some(path.to_string());
        errors.push(d);
    }
    errors
}

/// `policy.writable`: templates that may read only `{{env.NAME}}` (the operator's
/// environment), never a call's values, the context or a secret.
fn writable_templates(
    sources: &[String],
    params: &[&str],
) -> Result<Vec<Template>, (usize, crate::template::TemplateError)> {
    place_templates(sources, params, &[], "a writable place")
}

/// The names a `policy.readable` template may read besides `{{env.NAME}}`.
const READABLE_NAMES: &[&str] = &["workspace"];

/// Places named by templates that may read only `{{env.NAME}}` (the operator's environment)
/// and `names` (packs' own values, such as `{{workspace}}`), never a call's values (`params`,
/// named to say so), the context or a secret.
fn place_templates(
    sources: &[String],
    params: &[&str],
    names: &[&str],
    place: &str,
) -> Result<Vec<Template>, (usize, crate::template::TemplateError)> {
    let known: Vec<&str> = params.iter().chain(names).copied().collect();
    sources
        .iter()
        .enumerate()
        .map(|(i, source)| {
            let t = Template::parse(source, &known).map_err(|e| (i, e))?;
            t.check().map_err(|e| (i, e))?;
            let allowed =
                |r: &Ref| matches!(r, Ref::Env(_)) || matches!(r, Ref::Param(p) if names.contains(&p.as_str()));
            if let Some(r) = t.refs().iter().find(|r| !allowed(r)) {
                let what = match r {
                    Ref::Secret(n) => format!("`{{{{secret.{n}}}}}`"),
                    Ref::Context(k) => format!("`{{{{context.{k}}}}}`"),
                    Ref::Param(p) | Ref::Env(p) => format!("the call's `{{{{{p}}}}}`"),
                };
                let also = names.iter().map(|n| format!(" and `{{{{{n}}}}}`")).collect::<String>();
                let message = format!("{place} may read only `{{{{env.NAME}}}}`{also}, not {what}");
                return Err((i, crate::template::TemplateError { offset: 0, message }));
            }
            Ok(t)
        })
        .collect()
}

impl Tool {
    /// The places `policy.writable` names, rendered with packs' environment: absolute
    /// paths only, and none whose variables are unset (`{{env.HOME}}/.npm` without a `HOME`
    /// would be `/.npm`). One that does not exist yet is created when a call runs (not by a
    /// dry run), so the tool can use it.
    pub(crate) fn writable_dirs(&self) -> Vec<PathBuf> {
        render_places(&self.writable, &serde_json::Map::new())
    }

    /// A slot for what a call of this tool decided that depends only on the tool and the
    /// caller's settings (the sandbox's decision): dropped with the tool, so a reloaded
    /// tool never sees its predecessor's.
    pub(crate) fn kept(&self) -> &std::sync::Mutex<Option<Arc<dyn std::any::Any + Send + Sync>>> {
        &self.kept
    }

    /// The places `policy.readable` names, rendered with packs' environment and `workspace`
    /// (absolute paths only, none whose variables are unset); `None`: reads are not narrowed.
    pub(crate) fn readable_places(&self, workspace: &Path) -> Option<Vec<PathBuf>> {
        let mut values = serde_json::Map::new();
        values.insert("workspace".to_owned(), workspace.display().to_string().into());
        self.readable.as_deref().map(|r| render_places(r, &values))
    }
}

/// Place templates rendered with packs' environment and `values`: absolute paths only, and
/// none whose variables are unset (`{{env.HOME}}/.npm` without a `HOME` would be `/.npm`).
fn render_places(templates: &[Template], values: &serde_json::Map<String, Value>) -> Vec<PathBuf> {
    templates
        .iter()
        .filter_map(|t| {
            let environment = crate::template::Environment::read(t.refs());
            if t.refs().iter().any(|r| matches!(r, Ref::Env(n) if !environment.env.contains_key(n))) {
                return None;
            }
            let empty = serde_json::Map::new();
            let data = crate::template::Data::with_environment(values, &empty, &empty, &environment);
            let path = PathBuf::from(t.render(&data).ok()?);
            path.is_absolute().then_some(path)
        })
        .collect()
}

/// An output template renders what the model is sent: it may not read a secret.
fn secret_in_output(template: &Template) -> Result<(), String> {
    match template.refs().iter().find(|r| matches!(r, Ref::Secret(_))) {
        Some(Ref::Secret(name)) => Err(format!(
            "`{{{{secret.{name}}}}}` in `output.template` would send the secret to the model; secrets belong in `command` only"
        )),
        _ => Ok(()),
    }
}

/// Why a manifest's tool waits for review (`lint.review` not empty), or None.
fn awaiting_review(manifest: &Manifest, file: &Path) -> Option<String> {
    match manifest.lint.review.len() {
        0 => None,
        n => Some(format!(
            "awaiting review: {} lists {n} thing{} a person must still check (`lint.review`); the tool is not \
             offered or run until each is checked and its entry removed",
            file.display(),
            if n == 1 { "" } else { "s" }
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::draft_neutral;

    /// Compiled as draft 7 with formats as annotations, a draft-neutral schema accepts and
    /// refuses exactly what the 2020-12 validator does.
    #[test]
    fn a_draft_neutral_schema_validates_the_same_as_2020_12() {
        let schemas = [
            json!({"type": "object", "properties": {"text": {"type": "string", "minLength": 2, "format": "email"},
                   "n": {"type": "integer", "exclusiveMinimum": 0, "multipleOf": 3}},
                   "required": ["text"], "additionalProperties": false}),
            json!({"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b"]},
                   "uniqueItems": true, "maxItems": 2, "contains": {"const": "a"}}}}),
            json!({"type": "object", "patternProperties": {"^x_": {"type": "number"}}, "propertyNames": {"pattern": "^[a-z_]+$"},
                   "if": {"required": ["mode"]}, "then": {"required": ["level"]}, "else": {"not": {"required": ["level"]}},
                   "anyOf": [{"minProperties": 1}, {"maxProperties": 0}], "oneOf": [true, false], "allOf": [{}]}),
        ];
        let instances = [
            json!({}),
            json!({"text": "x"}),
            json!({"text": "not an email"}),
            json!({"text": "ab", "n": 3}),
            json!({"text": "ab", "n": 4}),
            json!({"text": "ab", "n": 0}),
            json!({"text": "ab", "extra": 1}),
            json!({"tags": ["a", "b"]}),
            json!({"tags": ["b"]}),
            json!({"tags": ["a", "a"]}),
            json!({"tags": ["a", "b", "a"]}),
            json!({"x_1": 2, "mode": 1, "level": 2}),
            json!({"x_1": "no"}),
            json!({"mode": 1}),
            json!({"level": 1}),
            json!({"Upper": 1}),
            json!([]),
        ];
        for schema in &schemas {
            assert!(draft_neutral(schema), "{schema}");
            let reference = jsonschema::validator_for(schema).unwrap();
            let neutral = jsonschema::options()
                .with_draft(jsonschema::Draft::Draft7)
                .should_validate_formats(false)
                .build(schema)
                .unwrap();
            for instance in &instances {
                assert_eq!(neutral.is_valid(instance), reference.is_valid(instance), "{schema} on {instance}");
            }
        }
    }

    #[test]
    fn keywords_the_drafts_read_differently_are_not_draft_neutral() {
        for schema in [
            json!({"$schema": "http://json-schema.org/draft-07/schema#"}),
            json!({"properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "string"}}}),
            json!({"definitions": {}}),
            json!({"items": [{"type": "string"}]}),
            json!({"prefixItems": [{"type": "string"}]}),
            json!({"properties": {"a": {"dependencies": {"b": ["c"]}}}}),
            json!({"unevaluatedProperties": false}),
            json!({"contains": {}, "minContains": 2}),
            json!({"x-custom": 1}),
            json!({"anyOf": [{"items": [true]}]}),
            json!(3),
        ] {
            assert!(!draft_neutral(&schema), "{schema}");
        }
    }
}
