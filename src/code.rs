//! Diagnostic codes: every problem packs reports (loading pack directories, `packs
//! lint`) has one, stable and kebab-case, documented in docs/LINT.md.
//!
//! This module names nothing else of the crate, so every module can use it; `packs::lint`
//! re-exports it.

macro_rules! codes {
    ($( #[doc = $doc:literal] $variant:ident = $name:literal, $description:literal; )+) => {
        /// A diagnostic's code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum Code {
            $( #[doc = $doc] $variant, )+
        }

        impl Code {
            /// Every code, in the order docs/LINT.md lists them.
            pub const ALL: &'static [Code] = &[$(Code::$variant),+];

            /// The stable kebab-case name (`unknown-key`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $name,)+
                }
            }

            /// What the code means, in one line.
            pub fn description(self) -> &'static str {
                match self {
                    $(Code::$variant => $description,)+
                }
            }
        }
    };
}

codes! {
    /// The file is not valid JSON.
    InvalidJson = "invalid-json", "the file is not valid JSON";
    /// The file is not valid TOML.
    InvalidToml = "invalid-toml", "the file is not valid TOML";
    /// The file or directory cannot be read.
    Unreadable = "unreadable", "the file or directory cannot be read";
    /// The manifest does not match schemas/tool-pack.v1.json.
    SchemaViolation = "schema-violation", "the manifest does not match schemas/tool-pack.v1.json";
    /// A field has a value of the wrong type.
    InvalidField = "invalid-field", "a field has a value of the wrong type";
    /// A key the format does not know (a typo is ignored silently otherwise).
    UnknownKey = "unknown-key", "a key the format does not know (a typo is ignored silently otherwise)";
    /// A JSON or TOML file that looks like a manifest but is not named `*.tool.json` / `*.tool.toml`.
    MisnamedManifest = "misnamed-manifest", "a file that looks like a manifest is not named *.tool.json or *.tool.toml, so it is not loaded";
    /// The tool name is not snake_case or is longer than 64 characters.
    InvalidName = "invalid-name", "the tool name is not snake_case or is longer than 64 characters";
    /// The description is empty.
    EmptyDescription = "empty-description", "the description is empty";
    /// Command.program is empty.
    EmptyProgram = "empty-program", "command.program is empty";
    /// The description is longer than 1,024 characters.
    LongDescription = "long-description", "the description is longer than 1,024 characters";
    /// Two tools in one pack directory have the same name.
    DuplicateName = "duplicate-name", "two tools in one pack directory have the same name";
    /// A tool is hidden by one of the same name earlier on the search path.
    ShadowedName = "shadowed-name", "a tool is hidden by one of the same name earlier on the search path";
    /// A parameter name is not an identifier.
    InvalidParameterName = "invalid-parameter-name", "a parameter name is not an identifier";
    /// A `literal` parameter has no default.
    LiteralWithoutDefault = "literal-without-default", "a `literal` parameter has no default";
    /// A parameter's default is not of its type.
    DefaultTypeMismatch = "default-type-mismatch", "a parameter's default is not of its type";
    /// A parameter's default is not one of its enum values.
    DefaultNotInEnum = "default-not-in-enum", "a parameter's default is not one of its enum values";
    /// A required parameter has a default that is never used.
    RequiredWithDefault = "required-with-default", "a required parameter has a default that is never used";
    /// An enum value is not of the parameter's type.
    EnumTypeMismatch = "enum-type-mismatch", "an enum value is not of the parameter's type";
    /// A parameter's source is not a known context key.
    UnknownSource = "unknown-source", "a parameter's source is not a known context key";
    /// A parameter's pattern is not a valid regular expression.
    InvalidPattern = "invalid-pattern", "a parameter's pattern is not a valid regular expression";
    /// A pattern on a parameter that is not a string.
    PatternOnNonString = "pattern-on-non-string", "a pattern on a parameter that is not a string";
    /// A template names a parameter that is not declared.
    UndeclaredPlaceholder = "undeclared-placeholder", "a template names a parameter that is not declared";
    /// A template names an unknown context key.
    UnknownContextKey = "unknown-context-key", "a template names an unknown context key";
    /// A template does not parse.
    InvalidTemplate = "invalid-template", "a template does not parse";
    /// A parameter offered to the model is used by no template.
    UnusedParameter = "unused-parameter", "a parameter offered to the model is used by no template";
    /// An optional parameter without default renders an empty value.
    OptionalRendersEmpty = "optional-renders-empty", "an optional parameter without default renders an empty value";
    /// Extract_field without output format json.
    ExtractFieldNeedsJson = "extract-field-needs-json", "extract_field without output format json";
    /// A parameter is pasted into code a shell or interpreter runs.
    ShellInjection = "shell-injection", "a parameter is pasted into code a shell or interpreter runs";
    /// A call's value reaches a variable that changes how programs load or start.
    LoaderVariable = "loader-variable", "a call's value reaches a variable that changes how programs load or start (`LD_PRELOAD`, `BASH_ENV`...)";
    /// A string parameter is a whole argument with no `--` before it.
    OptionInjection = "option-injection", "a call value can start an argument with `-` where the program reads options";
    /// A credential is written into the manifest.
    HardcodedSecret = "hardcoded-secret", "a credential is written into the manifest";
    /// A known mutating command relies on the default read_only: true.
    ImplicitReadOnly = "implicit-read-only", "a known mutating command relies on the default read_only: true";
    /// A mutating network tool without confirm_before_run.
    UnconfirmedMutation = "unconfirmed-mutation", "a mutating network tool without confirm_before_run";
    /// The program is not on PATH.
    ProgramNotFound = "program-not-found", "the program is not on PATH";
    /// A `policy.writable` place is far broader than a tool needs (`/`, `$HOME`), or not absolute.
    BroadWritable = "broad-writable", "a policy.writable place is far broader than a tool needs (`/`, `$HOME`), or not absolute";
    /// A `policy.readable` place narrows little or nothing (`/`, `$HOME`), or is not absolute.
    BroadReadable = "broad-readable", "a policy.readable place narrows little or nothing (`/`, `$HOME`), or is not absolute";
    /// A tool may read the credential stores, or a confined one names one it cannot read.
    ReadsCredentials = "reads-credentials", "a tool may read the credential stores (`policy.reads_credentials`), or a confined one names one it cannot read (`~/.ssh`)";
    /// Timeout_secs is 0 or more than an hour.
    TimeoutOutOfRange = "timeout-out-of-range", "timeout_secs is 0 or more than an hour";
    /// Allowed_exit_codes is empty or outside 0-255.
    InvalidExitCodes = "invalid-exit-codes", "allowed_exit_codes is empty or outside 0-255";
    /// An example is not a FunctionGemma call of this tool with its parameters.
    InvalidExample = "invalid-example", "an example is not a FunctionGemma call of this tool with its parameters";
    /// A test in `tests` cannot run as written.
    InvalidTest = "invalid-test", "a test in `tests` cannot run as written";
    /// An executable's --describe fails, times out or prints an invalid description.
    BadDescribe = "bad-describe", "an executable's --describe fails, times out or prints an invalid description";
    /// A file at the top of a pack directory starts with `#!` but is not executable.
    NotExecutable = "not-executable", "a file at the top of a pack directory starts with `#!` but is not executable";
    /// A manifest parameter's `items` or `schema` is not valid JSON Schema (draft 7).
    InvalidParameterSchema = "invalid-parameter-schema", "a parameter's `items` or `schema` is not valid JSON Schema (draft 7)";
    /// An executable's parameters are not a valid JSON Schema.
    InvalidParametersSchema = "invalid-parameters-schema", "an executable's parameters are not a valid JSON Schema";
    /// A pack directory does not exist.
    MissingPackDir = "missing-pack-dir", "a pack directory does not exist";
    /// An Agent Skill's `SKILL.md` breaks the Agent Skills rules.
    InvalidSkill = "invalid-skill", "an Agent Skill's `SKILL.md` breaks the Agent Skills rules";
    /// An agent's soul or context module names a tool the agent is not offered.
    UnofferedTool = "unoffered-tool", "an agent's soul or context module names a tool the agent is not offered";
    /// A tool is not pinned in the lock file.
    LockUnpinned = "lock-unpinned", "a tool is not pinned in the lock file";
    /// A tool differs from its pin in the lock file.
    LockDrift = "lock-drift", "a tool differs from its pin in the lock file";
    /// A tool's file was reformatted since it was pinned (same meaning).
    LockReformatted = "lock-reformatted", "a tool's file was reformatted since it was pinned (same meaning)";
    /// The lock file pins a tool that is no longer found.
    LockStale = "lock-stale", "the lock file pins a tool that is no longer found";
    /// A manifest lists something a person must still review (`lint.review`).
    NeedsReview = "needs-review", "a manifest lists something a person must still review (`lint.review`)";
    /// A `lint.allow` entry of a manifest silenced nothing.
    UnusedAllowance = "unused-allowance", "a `lint.allow` entry of a manifest silenced nothing";
    /// Loading a file failed unexpectedly (a bug in packs: please report it).
    Internal = "internal", "loading a file failed unexpectedly (a bug in packs: please report it)";
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A name that is no diagnostic code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownCode(pub String);

impl std::fmt::Display for UnknownCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown diagnostic code `{}`", self.0)
    }
}

impl std::error::Error for UnknownCode {}

impl std::str::FromStr for Code {
    type Err = UnknownCode;
    fn from_str(s: &str) -> Result<Self, UnknownCode> {
        Code::ALL.iter().copied().find(|c| c.as_str() == s).ok_or_else(|| UnknownCode(s.to_owned()))
    }
}
