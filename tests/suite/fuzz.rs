//! The fuzz run of issue 29: random *plausible* manifests and call arguments go through load,
//! lint, dry-run and run, and none of them may panic or hang.
//!
//! Each case is generated from one 64-bit seed (proptest's ChaCha `TestRng` drives a
//! structure-aware generator): parameters of every type and keyword, a command from a list of
//! harmless programs and wrappers (`echo`, `printf`, `cat`, `sort`, `env -- sort`, `nice`,
//! `timeout`, `sh -c` bodies that only print...), argument templates from the template grammar
//! (placeholders, blocks, helpers, groups, `--`, and odd Handlebars that load must refuse),
//! `stdin`, `env`, `cwd`, `output` and `policy` variations, sometimes `tests`; then mutations
//! (keys dropped, renamed or given a wrong type, bytes cut or changed), written as JSON or TOML.
//! Calls get right and wrong types, leading dashes, unicode, NUL and control characters, long
//! strings, nested values, huge numbers, and context values.
//!
//! Most cases run in-process through the library (`Catalog::load`, `lint::lint` and every
//! renderer, exports, the help page, `Call::dry_run`, `Call::run` with the sandbox at its
//! default, `run_tests`) inside `catch_unwind`; one in six also runs the real binary
//! (`packs lint --format json`, `packs run --dry-run`, `packs run`). A failure is a panic, an
//! `internal` diagnostic (a panic caught while loading), exit status 101, a signal, or
//! `panicked` on stderr; it is shrunk (keys and elements removed while it still fails) and
//! printed with its seed. A hang is a step still running 20 s past the tool's timeout: a
//! watchdog thread prints the case and aborts the test binary.
//!
//! Plain `cargo test` runs a few dozen cases. Longer runs:
//!
//! ```text
//! PACKS_FUZZ_SECS=600 cargo test --test lib -- fuzz:: --nocapture     # the 10-minute run
//! PACKS_FUZZ_CASES=5000 cargo test --test lib -- fuzz:: --nocapture   # a number of cases
//! PACKS_FUZZ_SEED=42 ...                                              # another start seed
//! PACKS_FUZZ_REPLAY=SEED cargo test --test lib -- fuzz:: --nocapture  # one case again
//! ```
//!
//! `--nocapture` shows the counts per step at the end. Programs are harmless and every write a
//! tool could make lands in the case's temporary directory.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use packs::{ApproveAll, Call, Catalog, Context, SearchPath};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Map, Value, json};

use crate::common::PACKS;

/// How long a step may run past the tool's own timeout before it counts as a hang.
const GRACE: Duration = Duration::from_secs(20);

/// Cases of a plain `cargo test`.
const DEFAULT_CASES: u64 = 40;

/// One case in this many also goes through the real binary.
const BINARY_EVERY: u64 = 6;

// ---------------------------------------------------------------- randomness

/// Random choices, all from one seed. A *wild* case (about a third) also makes the choices
/// load must refuse; the others are mostly valid, so calls reach planning and running.
struct Rng(TestRunner, bool);

impl Rng {
    fn new(seed: u64) -> Self {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        bytes[8..16].copy_from_slice(b"packsfz1");
        let mut rng =
            Rng(TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)), false);
        rng.1 = rng.chance(35);
        rng
    }

    /// In a wild case, true `percent` times in a hundred; never in the others.
    fn odd(&mut self, percent: u64) -> bool {
        self.1 && self.chance(percent)
    }

    /// One of `valid`, or in a wild case sometimes one of `odd`.
    fn pick_or_odd<T: Clone>(&mut self, valid: &[T], odd: &[T]) -> T {
        if self.odd(30) { self.pick(odd).clone() } else { self.pick(valid).clone() }
    }

    fn u64(&mut self) -> u64 {
        any::<u64>().new_tree(&mut self.0).expect("a u64").current()
    }

    fn below(&mut self, n: usize) -> usize {
        (self.u64() % n.max(1) as u64) as usize
    }

    /// True `percent` times in a hundred.
    fn chance(&mut self, percent: u64) -> bool {
        self.u64() % 100 < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

// ---------------------------------------------------------------- manifests

const PARAM_NAMES: &[&str] = &["a", "b", "path", "n", "flag", "items", "text", "opt", "meta"];
const ODD_PARAM_NAMES: &[&str] = &["2nd", "context", "this", "Bad-Name", "é", "", "else", "a b", "secret"];
const TYPES: &[&str] = &["string", "number", "integer", "boolean", "array", "object"];
const FORMATS: &[&str] =
    &["path", "path", "email", "date", "date-time", "uri", "hostname", "ipv4", "uuid", "regex", "made-up"];
const PATTERNS: &[&str] = &["^[a-z]+$", "^-", "([", "^\\S*$", ".*", "^(a|b)+$", "\\p{L}+", "(?i)x", "[", "^.{0,3}$"];
const SOURCES: &[&str] = &[
    "context.url",
    "context.selection",
    "context.clipboard",
    "context.file",
    "context.cwd",
    "transcript",
    "literal",
    "context.nope",
];
const CONTEXT_KEYS: &[&str] = &["url", "selection", "clipboard", "file", "cwd", "transcript"];

/// Templates that load must refuse (or that fail when rendered), whatever the parameters.
const ODD_TEMPLATES: &[&str] = &[
    "{{#if a}}",
    "{{/if}}",
    "{{}}",
    "{{> part}}",
    "{{@root.a}}",
    "{{[a]}}",
    "{{this}}",
    "{{..}}",
    "{{.}}",
    "{{a",
    "a}}",
    "{{{a}}}",
    "{{!comment}}",
    "{{!-- a --}}",
    "{{undeclared}}",
    "{{context.nope}}",
    "{{secret.X:def}}",
    "{{#if}}{{/if}}",
    "{{shout a}}",
    "{{~a~}}",
    "{{a.b}}",
    "{{a.[0]}}",
    "{{#each a as |x i|}}{{x}}{{i}}{{/each}}",
    "{{else}}",
    "\\{{a}}",
    "{{#if a}}{{else}}{{else}}{{/if}}",
    "{{#unless a}}x{{else if b}}y{{/unless}}",
    "{{#with a}}{{../b}}{{/with}}",
    "{{#each a}}{{@key}}{{@first}}{{@last}}{{/each}}",
    "{{@index}}",
    "{{#if (eq a \"x\"))}}y{{/if}}",
    "{{lookup a \"k\"}}",
    "{{len}}",
    "{{json}}",
    "{{urlencode a b}}",
    "{{#each a}}{{#each this}}{{../../b}}{{/each}}{{/each}}",
    "{{a:}}",
    "{{:x}}",
    "{{ a }}",
    "{{#*inline \"p\"}}x{{/inline}}",
    "{{env.}}",
    "{{secret.}}",
    "{{env.PACKS_FUZZ_UNSET:dflt}}",
    "{{#if a}}{{#if b}}{{#if a}}{{#if b}}{{#if a}}deep{{/if}}{{/if}}{{/if}}{{/if}}{{/if}}",
    "{{#each a}}{{#each ../a}}{{#each ../../a}}{{this}}{{/each}}{{/each}}{{/each}}",
];

fn param_name(rng: &mut Rng) -> String {
    if rng.odd(10) { rng.pick(ODD_PARAM_NAMES) } else { rng.pick(PARAM_NAMES) }.to_string()
}

/// A value of JSON type `ty` (or any type, sometimes).
fn typed_value(rng: &mut Rng, ty: &str, depth: usize) -> Value {
    if rng.chance(10) {
        return any_value(rng, depth);
    }
    match ty {
        "string" => Value::String(string(rng)),
        "number" => number(rng),
        "integer" => json!(*rng.pick(&[0i64, 1, -1, 3, 42, i64::MAX, i64::MIN, 1 << 53])),
        "boolean" => Value::Bool(rng.chance(50)),
        "array" => {
            let n = rng.below(4);
            Value::Array(
                (0..n)
                    .map(|_| if rng.chance(70) { Value::String(string(rng)) } else { any_value(rng, depth + 1) })
                    .collect(),
            )
        }
        "object" => object(rng, depth),
        _ => any_value(rng, depth),
    }
}

fn number(rng: &mut Rng) -> Value {
    match rng.below(12) {
        0 => json!(1.5),
        1 => json!(1e308),
        2 => json!(-1e308),
        3 => json!(u64::MAX),
        4 => json!(i64::MIN),
        5 => json!(-0.0),
        6 => json!(0.1),
        7 => json!(9_007_199_254_740_993u64),
        8 => json!(-1),
        9 => json!(f64::MIN_POSITIVE),
        _ => json!((rng.u64() % 2000) as i64 - 1000),
    }
}

fn object(rng: &mut Rng, depth: usize) -> Value {
    let mut map = Map::new();
    for _ in 0..rng.below(if depth > 3 { 1 } else { 4 }) {
        let key = if rng.chance(50) { rng.pick(&["k", "owner", "a", "", "é", "0"]).to_string() } else { string(rng) };
        map.insert(key, any_value(rng, depth + 1));
    }
    Value::Object(map)
}

fn any_value(rng: &mut Rng, depth: usize) -> Value {
    let top = if depth > 3 { 4 } else { 6 };
    match rng.below(top) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(50)),
        2 => number(rng),
        3 => Value::String(string(rng)),
        4 => Value::Array((0..rng.below(4)).map(|_| any_value(rng, depth + 1)).collect()),
        _ => object(rng, depth),
    }
}

const STRINGS: &[&str] = &[
    "",
    " ",
    "a",
    "b",
    "x",
    "hello world",
    "-n",
    "-r",
    "--",
    "-",
    "-1",
    "--help",
    "--version",
    "-x",
    "-é",
    "..",
    "../..",
    ".",
    "sub",
    "sub/f.txt",
    "/etc/hostname",
    "/nonexistent-fz",
    "é✓",
    "a\u{0}b",
    "\u{0}",
    "line\nbreak",
    "\r\n",
    "\t",
    "\u{1b}[31mred",
    "\u{202e}rtl",
    "{{a}}",
    "{{#if a}}x{{/if}}",
    "$(id)",
    "`id`",
    "; true",
    "*",
    "~",
    "%s%n%d",
    "a=b",
    "LD_PRELOAD=x",
    "\u{feff}",
    "\u{7f}",
    "true",
    "echo",
    "2026-05-01",
    "ada@example.com",
    "https://example.com/a?b#c",
    "  -n",
    "\\",
    "\"",
    "'",
    "null",
    "0",
    "{\"a\":1}",
    "[1,2]",
    "metric",
    "imperial",
];

/// A string a model might send: from a list of troublemakers, random characters (never a
/// leading `-` beyond the list's harmless options), or, rarely, a very long one.
fn string(rng: &mut Rng) -> String {
    match rng.below(20) {
        0..=10 => rng.pick(STRINGS).to_string(),
        11 if rng.chance(15) => "x".repeat(*rng.pick(&[1000, 70_000, 140_000, 1_100_000])),
        _ => {
            const CHARS: &[char] = &[
                'a', 'b', 'z', 'A', '0', '9', ' ', '_', '.', '/', ',', ':', '=', '{', '}', '"', '\\', '\'', '$', '*',
                'é', '✓', '😀', '\u{0}', '\u{7}', '\n', '\r', '\u{2028}', '\u{fffd}', '\u{200b}', '-', '#', '%',
            ];
            let n = rng.below(24);
            let mut s: String = (0..n).map(|_| *rng.pick(CHARS)).collect();
            while s.starts_with('-') {
                s.remove(0);
            }
            s
        }
    }
}

fn parameter(rng: &mut Rng) -> Value {
    let ty = if rng.odd(5) { "float" } else { rng.pick(TYPES) };
    let mut p = Map::new();
    p.insert("type".into(), json!(ty));
    if rng.chance(30) {
        p.insert("required".into(), json!(rng.chance(70)));
    }
    if rng.chance(30) {
        p.insert("description".into(), json!(string(rng)));
    }
    if rng.chance(15) {
        let values: Vec<Value> = (0..1 + rng.below(3)).map(|_| typed_value(rng, ty, 2)).collect();
        p.insert("enum".into(), Value::Array(values));
    }
    if rng.chance(30) {
        p.insert("default".into(), typed_value(rng, ty, 2));
    }
    if rng.chance(10) {
        p.insert("source".into(), json!(rng.pick(SOURCES)));
    }
    if ty == "array" && rng.chance(60) || rng.chance(3) {
        let items = match rng.below(if rng.1 { 5 } else { 3 }) {
            0 => json!({"type": "integer"}),
            1 => json!({"type": "string", "pattern": rng.pick(PATTERNS)}),
            2 => json!({"type": "string"}),
            3 => json!({"type": 5}),
            _ => json!("string"),
        };
        p.insert("items".into(), items);
    }
    if rng.chance(if ty == "string" { 25 } else { 3 }) {
        p.insert("format".into(), json!(rng.pick(FORMATS)));
    }
    if rng.chance(if ty == "string" { 15 } else { 3 }) {
        p.insert("pattern".into(), json!(rng.pick(PATTERNS)));
    }
    if rng.chance(10) {
        p.insert("minimum".into(), number(rng));
    }
    if rng.chance(10) {
        p.insert("maximum".into(), number(rng));
    }
    if rng.chance(8) {
        p.insert("minLength".into(), json!(rng.below(4)));
    }
    if rng.chance(8) {
        p.insert("maxLength".into(), rng.pick_or_odd(&[json!(0), json!(5)], &[json!(-1), json!(1.5)]));
    }
    if rng.chance(15) {
        p.insert("allow_leading_dash".into(), json!(rng.chance(80)));
    }
    if rng.chance(8) {
        let schema = match rng.below(6) {
            0 => json!({"minItems": 1, "uniqueItems": true}),
            1 => json!({"oneOf": [{"type": "string"}, {"type": "integer"}]}),
            2 => json!({"type": ["string", "null"]}),
            3 => json!({"type": 5}),
            4 => {
                json!({"properties": {"owner": {"type": "string"}}, "required": ["owner"], "additionalProperties": false})
            }
            _ => json!({"const": "x"}),
        };
        p.insert("schema".into(), schema);
    }
    Value::Object(p)
}

/// One template over the declared parameters.
fn template(rng: &mut Rng, params: &[String]) -> String {
    if rng.odd(25) {
        return rng.pick(ODD_TEMPLATES).to_string();
    }
    if params.is_empty() && !rng.odd(30) {
        return rng
            .pick(&["-x", "--", "literal", "{{context.url}}", "{{env.HOME}}", "{{#if context.file}}f{{/if}}", ""])
            .to_string();
    }
    let p = if params.is_empty() || rng.odd(10) { "zz".to_string() } else { rng.pick(params).clone() };
    let q = if params.is_empty() { p.clone() } else { rng.pick(params).clone() };
    let forms: &[&dyn Fn() -> String] = &[
        &|| format!("{{{{{p}}}}}"),
        &|| format!("{{{{{p}}}}}"),
        &|| format!("{{{{{p}:dflt}}}}"),
        &|| format!("--opt={{{{{p}}}}}"),
        &|| format!("x{{{{{p}}}}}"),
        &|| format!("{{{{{p}}}}}{{{{{q}}}}}"),
        &|| "-x".to_string(),
        &|| "--".to_string(),
        &|| "literal text".to_string(),
        &|| String::new(),
        &|| format!("{{{{#if {p}}}}}-v{{{{/if}}}}"),
        &|| format!("{{{{#unless {p}}}}}--no{{{{/unless}}}}"),
        &|| format!("{{{{#each {p}}}}}{{{{this}}}},{{{{/each}}}}"),
        &|| format!("{{{{#each {p}}}}}{{{{@index}}}}={{{{../{q}}}}}{{{{/each}}}}"),
        &|| format!("{{{{#if {p}}}}}{{{{{p}}}}}{{{{else}}}}none{{{{/if}}}}"),
        &|| format!("{{{{json {p}}}}}"),
        &|| format!("{{{{urlencode {p}}}}}"),
        &|| format!("{{{{len {p}}}}}"),
        &|| format!("{{{{#if (eq {p} \"a\")}}}}A{{{{else}}}}B{{{{/if}}}}"),
        &|| format!("{{{{#if (and {p} (not {q}))}}}}both{{{{/if}}}}"),
        &|| format!("{{{{#with {p}}}}}{{{{owner}}}}{{{{/with}}}}"),
        &|| format!("{{{{lookup {p} \"owner\"}}}}"),
        &|| "{{context.url}}".to_string(),
        &|| "{{context.selection:sel}}".to_string(),
        &|| "{{env.HOME}}".to_string(),
        &|| "{{env.PACKS_FUZZ_UNSET}}".to_string(),
        &|| "{{secret.HOME}}".to_string(),
        &|| "{{secret.PACKS_FUZZ_UNSET}}".to_string(),
        &|| format!("{{{{#if {p}}}}}stub{{{{else}}}}{{{{secret.PACKS_FUZZ_UNSET}}}}{{{{/if}}}}"),
    ];
    let form = rng.below(forms.len());
    forms[form]()
}

fn arg_element(rng: &mut Rng, params: &[String]) -> Value {
    match rng.below(if rng.1 { 10 } else { 9 }) {
        0 => {
            let n = if rng.odd(20) { 0 } else { 1 + rng.below(3) };
            Value::Array((0..n).map(|_| Value::String(template(rng, params))).collect())
        }
        9 if rng.chance(20) => json!([["--nested", "{{a}}"]]),
        9 => json!(*rng.pick(&[json!(5), json!(null), json!({"k": "v"}), json!(true)])),
        _ => Value::String(template(rng, params)),
    }
}

/// A program from the harmless list, with the arguments that come before the generated ones.
fn program(rng: &mut Rng) -> (&'static str, Vec<&'static str>) {
    let all: &[(&str, &[&str])] = &[
        ("echo", &[]),
        ("echo", &["--"]),
        ("printf", &["%s\\n"]),
        ("printf", &["%s\\0"]),
        ("printf", &["%d\\n"]),
        ("printf", &["{\"a\": \"%s\", \"n\": [1, 2]}\\n"]),
        ("true", &[]),
        ("false", &[]),
        ("cat", &[]),
        ("cat", &["--"]),
        ("sort", &[]),
        ("sort", &["--"]),
        ("wc", &["-c"]),
        ("head", &["-n", "3"]),
        ("env", &["--", "sort"]),
        ("env", &["--", "sort", "--"]),
        ("env", &["FOO=bar", "echo"]),
        ("env", &["-i", "echo"]),
        ("env", &["echo"]),
        ("nice", &["-n", "5", "echo"]),
        ("timeout", &["5", "cat"]),
        ("sh", &["-c", "echo \"$@\"", "sh"]),
        ("sh", &["-c", "printf '{\"a\":1,\"b\":[1,2],\"items\":[{\"id\":3}]}\\n'"]),
        ("sh", &["-c", "printf '{\"a\":1}\\n\\n{\"a\":2}\\r\\nnot json\\n'"]),
        ("sh", &["-c", "printf '{\"a\":1}\\n{\"a\":{\"b\":2}}\\n'"]),
        ("sh", &["-c", "echo out; echo err >&2; exit 3", "sh"]),
        ("sh", &["-c", "cat; echo \"$#\"", "sh"]),
        ("sh", &["-c", "head -c 3000000 /dev/zero | tr '\\0' y"]),
        ("sh", &["-c", "printf '\\377\\376 bad utf-8 \\303'"]),
        ("sh", &["-c", "exec 1>&-; echo closed >&2"]),
        ("sh", &["-c", "kill -TERM $$"]),
        ("sh", &["-c", "(sleep 30 &); echo left a sleeper"]),
        ("sh", &["-c", "sleep 3"]),
        ("/bin/echo", &[]),
        ("no-such-program-fz", &[]),
    ];
    let odd: &[(&str, &[&str])] = &[("./payload", &[]), ("", &[]), ("sh", &["-c", "echo {{a}}"])];
    let (p, pre) = rng.pick_or_odd(all, odd);
    (p, pre.to_vec())
}

/// A manifest, and the parameter names it declares.
fn manifest(rng: &mut Rng) -> (Value, Vec<String>) {
    let mut m = Map::new();
    if rng.chance(5) {
        m.insert("$schema".into(), json!("../schemas/tool-pack.v1.json"));
    }
    let name = if rng.odd(10) {
        rng.pick(&["Bad-Name", "", "é", "x y", "a_very_long_name_that_goes_on_and_on_past_sixty_four_characters_x"])
    } else {
        &"fz"
    };
    m.insert("name".into(), json!(name));
    let description = if rng.odd(8) { "  ".to_string() } else { format!("Fuzz {}", string(rng)) };
    m.insert("description".into(), json!(description));
    if rng.chance(10) {
        m.insert("version".into(), json!("1.0.0"));
    }
    if rng.chance(10) {
        m.insert("modes".into(), json!(["Global", "Coding"]));
    }
    if rng.chance(10) {
        let example = if rng.chance(50) { "User: hi\ncall:fz{a:<escape>x<escape>}" } else { "call:other{" };
        m.insert("examples".into(), json!([example]));
    }
    let mut params = Map::new();
    for _ in 0..rng.below(5) {
        params.insert(param_name(rng), parameter(rng));
    }
    let names: Vec<String> = params.keys().cloned().collect();
    if !params.is_empty() || rng.chance(50) {
        m.insert("parameters".into(), Value::Object(params));
    }
    let (prog, pre) = program(rng);
    let mut args: Vec<Value> = pre.iter().map(|s| json!(s)).collect();
    for _ in 0..rng.below(6) {
        args.push(arg_element(rng, &names));
    }
    let mut command = Map::new();
    command.insert("program".into(), json!(prog));
    command.insert("args".into(), Value::Array(args.clone()));
    if rng.chance(15) {
        let mut env = Map::new();
        for _ in 0..1 + rng.below(2) {
            let var = rng
                .pick_or_odd(&["TZ", "FOO", "EMPTY", "GIT_AUTHOR_NAME", "BASH_ENV"], &["LD_PRELOAD", "BAD NAME", ""]);
            let value = if rng.chance(30) { String::new() } else { template(rng, &names) };
            env.insert(var.into(), json!(value));
        }
        command.insert("env".into(), Value::Object(env));
    }
    if rng.chance(15) {
        let cwd = rng.pick(&[
            "{{context.cwd}}",
            "@WS@/sub",
            "@WS@",
            "/nonexistent-fz",
            "{{a}}",
            "{{env.PACKS_FUZZ_UNSET}}",
            "",
            "sub",
        ]);
        command.insert("cwd".into(), json!(cwd));
    }
    if rng.chance(20) {
        let stdin = match rng.below(4) {
            0 => format!("{}\n", template(rng, &names)),
            1 => "{{#each items}}{{../text}}{{/each}}".to_string(),
            2 => String::new(),
            _ => template(rng, &names),
        };
        command.insert("stdin".into(), json!(stdin));
    }
    let one_line = command.len() == 2 && args.iter().all(Value::is_string) && rng.chance(20);
    if one_line {
        let mut line = quote_word(prog);
        for a in &args {
            line.push(' ');
            line.push_str(&quote_word(a.as_str().unwrap_or_default()));
        }
        if rng.odd(20) {
            line.push_str(" 'unbalanced");
        }
        m.insert("command".into(), json!(line));
    } else {
        m.insert("command".into(), Value::Object(command));
    }
    if rng.chance(60) {
        m.insert("policy".into(), policy(rng));
    }
    if rng.chance(40) {
        m.insert("output".into(), output(rng, &names));
    }
    if rng.chance(15) {
        let tests: Vec<Value> = (0..1 + rng.below(2)).map(|i| manifest_test(rng, &names, i)).collect();
        m.insert("tests".into(), Value::Array(tests));
    }
    if rng.chance(5) {
        m.insert("lint".into(), json!({"allow": {"option-injection": "fuzz"}}));
    }
    if rng.chance(3) {
        m.insert("lint".into(), json!({"review": ["check it"]}));
    }
    (Value::Object(m), names)
}

fn quote_word(word: &str) -> String {
    if word.is_empty() {
        "''".into()
    } else if word.contains([' ', '\'', '"', '\\']) {
        format!("\"{}\"", word.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        word.into()
    }
}

fn policy(rng: &mut Rng) -> Value {
    let mut p = Map::new();
    if rng.chance(30) {
        p.insert("tier".into(), json!(rng.pick_or_odd(&["read_only", "workspace", "system", "elevated"], &["root"])));
    }
    if rng.chance(40) {
        p.insert("read_only".into(), json!(rng.chance(60)));
    }
    if rng.chance(15) {
        p.insert("requires_network".into(), json!(rng.chance(50)));
    }
    if rng.chance(50) {
        p.insert(
            "timeout_secs".into(),
            rng.pick_or_odd(&[json!(0), json!(1), json!(2), json!(5), json!(30)], &[json!(-1), json!("5")]),
        );
    }
    if rng.chance(15) {
        p.insert("confirm_before_run".into(), json!(rng.chance(50)));
    }
    if rng.chance(20) {
        let codes = rng.pick_or_odd(
            &[json!([0]), json!([0, 1]), json!([1]), json!([]), json!([0, 3])],
            &[json!([-1]), json!([256])],
        );
        p.insert("allowed_exit_codes".into(), codes);
    }
    if rng.chance(20) {
        p.insert("max_output_bytes".into(), json!(*rng.pick(&[0u64, 1, 10, 4096, 1_048_576, u64::MAX])));
    }
    if rng.chance(10) {
        let w = rng.pick_or_odd(
            &[json!(["@WS@/w"]), json!(["{{env.PACKS_FUZZ_UNSET}}/x"])],
            &[json!(["relative"]), json!(["{{a}}"]), json!([5])],
        );
        p.insert("writable".into(), w);
    }
    // Read confinement (issue 31): narrowed reads, Unix sockets refused, the credential
    // stores' opt-out.
    if rng.chance(10) {
        let r = rng.pick_or_odd(
            &[json!(["{{workspace}}"]), json!([]), json!(["@WS@", "{{env.PACKS_FUZZ_UNSET}}/x"]), json!(["/usr"])],
            &[json!(["relative"]), json!(["{{a}}"]), json!(["{{secret.K}}"]), json!([5]), json!("/")],
        );
        p.insert("readable".into(), r);
    }
    if rng.chance(10) {
        p.insert("unix_sockets".into(), rng.pick_or_odd(&[json!(false), json!(true)], &[json!("no"), json!(0)]));
    }
    if rng.chance(8) {
        p.insert("reads_credentials".into(), rng.pick_or_odd(&[json!(true), json!(false)], &[json!("yes")]));
    }
    if rng.chance(8) {
        p.insert("max_memory_bytes".into(), json!(*rng.pick(&[1u64, 1 << 20, 1 << 30])));
    }
    if rng.chance(8) {
        p.insert("max_file_bytes".into(), json!(*rng.pick(&[0u64, 1, 1 << 20])));
    }
    if rng.chance(8) {
        p.insert("max_cpu_secs".into(), json!(*rng.pick(&[0u64, 1, 10])));
    }
    if rng.chance(8) {
        p.insert(
            "env_passthrough".into(),
            json!(rng.pick(&[json!(["TZ"]), json!(["BAD NAME"]), json!([""]), json!(["LD_PRELOAD"])])),
        );
    }
    Value::Object(p)
}

fn output(rng: &mut Rng, params: &[String]) -> Value {
    let mut o = Map::new();
    if rng.chance(70) {
        o.insert(
            "format".into(),
            json!(rng.pick_or_odd(&["text", "json", "json", "jsonl", "jsonl", "markdown"], &["xml"])),
        );
    }
    if rng.chance(20) {
        o.insert("speak".into(), json!(rng.chance(50)));
    }
    if rng.chance(25) {
        o.insert("max_chars".into(), rng.pick_or_odd(&[json!(0), json!(1), json!(5), json!(1000)], &[json!(-3)]));
    }
    if rng.chance(30) {
        o.insert(
            "extract_field".into(),
            json!(rng.pick(&["/a", "a", "b.1", "items.0.id", "", "/", "/a/b", "a..b", "~1"])),
        );
    }
    if rng.chance(30) {
        let t = match rng.below(8) {
            0 => "{{output}}".to_string(),
            1 => "{{result.a}} and {{result.b}}".to_string(),
            2 => "{{#each result}}{{this}};{{/each}}".to_string(),
            3 => "{{context.url}}: {{output}}".to_string(),
            4 => "{{env.HOME:h}} {{output}}".to_string(),
            5 => "{{json result}}".to_string(),
            6 => template(rng, params),
            _ => rng.pick(ODD_TEMPLATES).to_string(),
        };
        o.insert("template".into(), json!(t));
    }
    if rng.chance(20) {
        o.insert("include_stderr".into(), json!(rng.chance(50)));
    }
    Value::Object(o)
}

fn manifest_test(rng: &mut Rng, params: &[String], i: usize) -> Value {
    let mut t = Map::new();
    t.insert("name".into(), json!(format!("t{i}")));
    t.insert("args".into(), call_args(rng, params, &Map::new()));
    if rng.chance(20) {
        t.insert("context".into(), json!({"selection": string(rng)}));
    }
    let dry = rng.chance(60);
    if dry || rng.chance(10) {
        t.insert("dry_run".into(), json!(dry));
    }
    let mut expect = Map::new();
    match rng.below(7) {
        0 => drop(expect.insert("argv".into(), json!(["echo", "x"]))),
        1 => drop(expect.insert("error".into(), json!(rng.pick(&["validation", "not_found", "bogus"])))),
        2 => drop(expect.insert("ok".into(), json!(rng.chance(50)))),
        3 => drop(expect.insert("stdout_matches".into(), json!(rng.pick(PATTERNS)))),
        4 => drop(expect.insert("output_equals".into(), json!(string(rng)))),
        5 => drop(expect.insert("exit_code".into(), json!(rng.below(4)))),
        _ => drop(expect.insert("stdout_contains".into(), json!(string(rng)))),
    }
    t.insert("expect".into(), Value::Object(expect));
    Value::Object(t)
}

/// A call's arguments: mostly an object with the declared names (right or wrong types).
fn call_args(rng: &mut Rng, params: &[String], declared: &Map<String, Value>) -> Value {
    if rng.chance(8) {
        return match rng.below(4) {
            0 => any_value(rng, 2),
            1 => json!("{\"a\": \"x\"}"),
            2 => json!("{nope"),
            _ => Value::Null,
        };
    }
    let mut args = Map::new();
    for p in params {
        if rng.chance(60) {
            let ty = declared.get(p).and_then(|d| d.get("type")).and_then(Value::as_str).unwrap_or("string");
            args.insert(p.clone(), typed_value(rng, ty, 0));
        }
    }
    if rng.chance(8) {
        args.insert(rng.pick(&["unknown", "zz", "context", ""]).to_string(), any_value(rng, 1));
    }
    Value::Object(args)
}

// ---------------------------------------------------------------- mutations

/// Every path (keys and indexes) to a node of `v`.
fn paths(v: &Value, prefix: &mut Vec<PathStep>, out: &mut Vec<Vec<PathStep>>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                prefix.push(PathStep::Key(k.clone()));
                out.push(prefix.clone());
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                prefix.push(PathStep::Index(i));
                out.push(prefix.clone());
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

#[derive(Clone, Debug)]
enum PathStep {
    Key(String),
    Index(usize),
}

/// The parent of the node at `path`, and the node's last step.
fn parent_mut<'a>(v: &'a mut Value, path: &[PathStep]) -> Option<(&'a mut Value, PathStep)> {
    let (last, init) = path.split_last()?;
    let mut node = v;
    for step in init {
        node = match step {
            PathStep::Key(k) => node.get_mut(k.as_str())?,
            PathStep::Index(i) => node.get_mut(*i)?,
        };
    }
    Some((node, last.clone()))
}

fn remove_at(v: &mut Value, path: &[PathStep]) -> bool {
    match parent_mut(v, path) {
        Some((Value::Object(map), PathStep::Key(k))) => map.shift_remove(&k).is_some(),
        Some((Value::Array(items), PathStep::Index(i))) if i < items.len() => {
            items.remove(i);
            true
        }
        _ => false,
    }
}

/// Drop a key, give a value a wrong type, add an unknown key or rename one.
fn mutate(rng: &mut Rng, manifest: &mut Value) {
    let mut all = Vec::new();
    paths(manifest, &mut Vec::new(), &mut all);
    if all.is_empty() {
        return;
    }
    let path = rng.pick(&all).clone();
    match rng.below(4) {
        0 => {
            remove_at(manifest, &path);
        }
        1 => {
            let wrong = any_value(rng, 2);
            if let Some((parent, step)) = parent_mut(manifest, &path) {
                match (parent, step) {
                    (Value::Object(map), PathStep::Key(k)) => drop(map.insert(k, wrong)),
                    (Value::Array(items), PathStep::Index(i)) => items[i] = wrong,
                    _ => {}
                }
            }
        }
        2 => {
            let target = if rng.chance(50) { Some(path.as_slice()) } else { None };
            let node = match target {
                Some(p) => {
                    let mut node = &mut *manifest;
                    for step in p {
                        node = match step {
                            PathStep::Key(k) => node.get_mut(k.as_str()).unwrap(),
                            PathStep::Index(i) => node.get_mut(*i).unwrap(),
                        };
                    }
                    node
                }
                None => manifest,
            };
            if let Value::Object(map) = node {
                map.insert(rng.pick(&["polcy", "colour", "arg", "timout_secs", "exampels"]).to_string(), json!(1));
            }
        }
        _ => {
            if let Some((Value::Object(map), PathStep::Key(k))) = parent_mut(manifest, &path) {
                let v = map.shift_remove(&k).unwrap_or_default();
                map.insert(format!("{k}s"), v);
            }
        }
    }
}

/// A change to the written bytes: cut, one byte changed, a key written twice.
#[derive(Clone, Copy, Debug)]
enum TextMutation {
    Cut(u64),
    Byte(u64, u8),
    DuplicateKey,
}

fn apply_text(bytes: &mut Vec<u8>, mutation: TextMutation, toml: bool) {
    match mutation {
        TextMutation::Cut(at) => {
            let at = (at % (bytes.len() as u64 + 1)) as usize;
            bytes.truncate(at);
        }
        TextMutation::Byte(at, b) => {
            if !bytes.is_empty() {
                let at = (at % bytes.len() as u64) as usize;
                bytes[at] = b;
            }
        }
        TextMutation::DuplicateKey => {
            if toml {
                bytes.splice(0..0, b"name = \"dup\"\n".iter().copied());
            } else if let Some(at) = bytes.iter().position(|b| *b == b'{') {
                bytes.splice(at + 1..at + 1, b"\"name\": \"dup\", ".iter().copied());
            }
        }
    }
}

// ---------------------------------------------------------------- cases

#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    manifest: Value,
    toml: bool,
    text: Option<TextMutation>,
    calls: Vec<(Value, Vec<(String, String)>)>,
    run: bool,
    binary: bool,
}

impl Case {
    fn generate(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let (mut manifest, names) = manifest(&mut rng);
        let declared = manifest.get("parameters").and_then(Value::as_object).cloned().unwrap_or_default();
        if rng.odd(60) {
            for _ in 0..1 + rng.below(2) {
                mutate(&mut rng, &mut manifest);
            }
        }
        let text = match if rng.1 { rng.below(40) } else { 100 } {
            0..=3 => Some(TextMutation::Cut(rng.u64())),
            4..=7 => {
                Some(TextMutation::Byte(rng.u64(), *rng.pick(&[b'"', b'{', b'}', b'\\', 0, 0xff, b'\n', b'[', b'='])))
            }
            8..=10 => Some(TextMutation::DuplicateKey),
            _ => None,
        };
        let calls = (0..1 + rng.below(3))
            .map(|_| {
                let args = call_args(&mut rng, &names, &declared);
                let mut context = Vec::new();
                if rng.chance(25) {
                    for _ in 0..1 + rng.below(2) {
                        let key = rng.pick(CONTEXT_KEYS).to_string();
                        let value = if key == "cwd" {
                            rng.pick(&["@WS@", "@WS@/sub", "/nonexistent-fz", "sub", ""]).to_string()
                        } else {
                            string(&mut rng)
                        };
                        context.push((key, value));
                    }
                }
                (args, context)
            })
            .collect();
        Case {
            seed,
            manifest,
            toml: rng.chance(30),
            text,
            calls,
            run: rng.chance(60),
            binary: seed.is_multiple_of(BINARY_EVERY),
        }
    }

    /// The file name and bytes written to the pack directory, `@WS@` replaced by `ws`.
    fn file(&self, ws: &Path) -> (&'static str, Vec<u8>) {
        let ws = ws.to_str().expect("a UTF-8 temp dir");
        let toml_text = if self.toml { toml::to_string(&self.manifest).ok() } else { None };
        let (name, text) = match toml_text {
            Some(t) => ("fz.tool.toml", t),
            None => ("fz.tool.json", serde_json::to_string_pretty(&self.manifest).unwrap()),
        };
        let mut bytes = text.replace("@WS@", ws).into_bytes();
        if let Some(m) = self.text {
            apply_text(&mut bytes, m, name.ends_with(".toml"));
        }
        (name, bytes)
    }

    fn describe(&self, ws: &Path) -> String {
        let shown = Case {
            manifest: shorten(&self.manifest),
            calls: self.calls.iter().map(|(a, c)| (shorten(a), c.clone())).collect(),
            ..self.clone()
        };
        let (name, bytes) = shown.file(ws);
        let mut s = format!(
            "fuzz case seed {} (replay: PACKS_FUZZ_REPLAY={} cargo test --test lib -- fuzz:: --nocapture)\n--- {name} ---\n{}\n",
            self.seed,
            self.seed,
            String::from_utf8_lossy(&bytes)
        );
        for (args, context) in &shown.calls {
            let context: Vec<(&String, String)> = context.iter().map(|(k, v)| (k, short(v))).collect();
            s.push_str(&format!("--- call: {args} context: {context:?}\n"));
        }
        s.push_str(&format!("run: {}, binary: {}\n", self.run, self.binary));
        s
    }

    /// Smaller cases: one key or element removed from the manifest or a call's arguments,
    /// or a call, or the text mutation, dropped.
    fn smaller(&self) -> Vec<Case> {
        let mut out = Vec::new();
        if self.text.is_some() {
            out.push(Case { text: None, ..self.clone() });
        }
        if self.calls.len() > 1 {
            for i in 0..self.calls.len() {
                let mut c = self.clone();
                c.calls.remove(i);
                out.push(c);
            }
        }
        let mut all = Vec::new();
        paths(&self.manifest, &mut Vec::new(), &mut all);
        for p in all {
            let mut c = self.clone();
            if remove_at(&mut c.manifest, &p) {
                out.push(c);
            }
        }
        for i in 0..self.calls.len() {
            let mut all = Vec::new();
            paths(&self.calls[i].0, &mut Vec::new(), &mut all);
            for p in all {
                let mut c = self.clone();
                if remove_at(&mut c.calls[i].0, &p) {
                    out.push(c);
                }
            }
        }
        out
    }
}

/// A value with every long string shown as its start and length (the seed replays it whole).
fn shorten(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(short(s)),
        Value::Array(items) => Value::Array(items.iter().map(shorten).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (short(k), shorten(v))).collect()),
        other => other.clone(),
    }
}

fn short(s: &str) -> String {
    if s.len() > 300 {
        format!("{}...<{} bytes>", s.chars().take(40).collect::<String>(), s.len())
    } else {
        s.to_string()
    }
}

// ---------------------------------------------------------------- the watchdog

struct Watch {
    deadline: Instant,
    what: String,
}

static WATCH: Mutex<Option<Watch>> = Mutex::new(None);

/// Arm the watchdog for one step: past `deadline`, it prints `what` and aborts.
fn arm(limit: Duration, what: impl FnOnce() -> String) {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        std::thread::spawn(|| {
            loop {
                std::thread::sleep(Duration::from_millis(200));
                let guard = WATCH.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(w) = guard.as_ref()
                    && Instant::now() > w.deadline
                {
                    // Straight to the real stderr: the test harness's capture is lost on abort.
                    let _ = writeln!(std::io::stderr(), "\nFUZZ HANG: a step did not end in time\n{}", w.what);
                    std::process::abort();
                }
            }
        });
    });
    *WATCH.lock().unwrap_or_else(|e| e.into_inner()) = Some(Watch { deadline: Instant::now() + limit, what: what() });
}

fn disarm() {
    *WATCH.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

// ---------------------------------------------------------------- running a case

#[derive(Default, Debug)]
struct Counts {
    cases: u64,
    loaded: u64,
    load_errors: u64,
    lints: u64,
    dry_runs: u64,
    dry_run_errors: u64,
    runs: u64,
    runs_ok: u64,
    runs_failed: u64,
    run_errors: u64,
    tests_run: u64,
    binary_cases: u64,
    binary_commands: u64,
    /// How often each code was the first error of a file that did not load.
    load_error_codes: std::collections::BTreeMap<String, u64>,
}

/// The tool's timeout, as loaded, else the longest a generated manifest asks for.
fn step_limit(catalog: &Catalog) -> Duration {
    let secs = catalog.get("fz").map(|t| t.policy().timeout_secs).unwrap_or(30);
    Duration::from_secs(secs.clamp(1, 60)) + GRACE
}

fn run_case(case: &Case, counts: &mut Counts) -> Result<(), String> {
    let root = tempfile::Builder::new().prefix("packs-fuzz-").tempdir().map_err(|e| e.to_string())?;
    let dir = root.path().join("packs");
    let ws = root.path().join("ws");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/f.txt"), "some text\n").unwrap();
    let (file_name, bytes) = case.file(&ws);
    let file = dir.join(file_name);
    std::fs::write(&file, &bytes).unwrap();
    let what = || case.describe(&ws);

    let in_process = catch_unwind(AssertUnwindSafe(|| in_process(case, &dir, &file, &ws, counts, &what)));
    disarm();
    match in_process {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e),
        Err(panic) => return Err(format!("panicked: {}", panic_text(&panic))),
    }
    if case.binary {
        counts.binary_cases += 1;
        let r = binary(case, &dir, &file, &ws, counts);
        disarm();
        r?;
    }
    Ok(())
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

fn no_internal(diagnostics: &[packs::Diagnostic], step: &str) -> Result<(), String> {
    match diagnostics.iter().find(|d| d.code.as_str() == "internal") {
        Some(d) => Err(format!("{step}: an internal diagnostic (a panic while loading): {d}")),
        None => Ok(()),
    }
}

fn in_process(
    case: &Case,
    dir: &Path,
    file: &Path,
    ws: &Path,
    counts: &mut Counts,
    what: &dyn Fn() -> String,
) -> Result<(), String> {
    counts.cases += 1;
    arm(GRACE, || format!("step: load\n{}", what()));
    let catalog = Catalog::load(&SearchPath::dirs([dir]));
    for d in &catalog.diagnostics {
        let _ = d.to_string();
    }
    no_internal(&catalog.diagnostics, "load")?;

    arm(GRACE, || format!("step: lint\n{}", what()));
    let options = packs::lint::Options { packs: vec![dir.to_owned()], ..Default::default() };
    let report = packs::lint::lint(&[file.to_owned()], &options).map_err(|e| format!("lint failed: {e}"))?;
    for format in packs::lint::render::Format::ALL {
        let _ = packs::lint::render::render(&report, *format);
    }
    no_internal(&report.diagnostics, "lint")?;
    counts.lints += 1;

    let Ok(tool) = catalog.get("fz") else {
        counts.load_errors += 1;
        let first = catalog.diagnostics.iter().find(|d| d.severity == packs::Severity::Error);
        *counts.load_error_codes.entry(first.map_or("(none)", |d| d.code.as_str()).to_string()).or_default() += 1;
        return Ok(());
    };
    counts.loaded += 1;
    let limit = step_limit(&catalog);
    arm(GRACE, || format!("step: export\n{}", what()));
    for format in packs::formats::ExportFormat::ALL {
        let _ = packs::formats::export(&[tool], *format).to_string();
    }
    let _ = packs::help_page(tool);
    let _ = packs::prompt::tool_entry(tool);

    for (args, context_values) in &case.calls {
        let mut context = Context::new().with_workspace(ws.to_owned());
        for (k, v) in context_values {
            let v = v.replace("@WS@", ws.to_str().unwrap());
            context.set(k, v).map_err(|e| format!("context: {e}"))?;
        }
        arm(GRACE, || format!("step: dry-run\n{}", what()));
        counts.dry_runs += 1;
        match Call::new("fz", args.clone()).context(&context).approver(&ApproveAll).dry_run(&catalog) {
            Ok(planned) => {
                let _ = (planned.command_line(), format!("{planned:?}"));
            }
            Err(e) => {
                counts.dry_run_errors += 1;
                let _ = (e.to_string(), e.to_json(), e.kind(), e.retryable());
            }
        }
        if case.run {
            arm(limit, || format!("step: run\n{}", what()));
            counts.runs += 1;
            match Call::new("fz", args.clone()).context(&context).approver(&ApproveAll).run(&catalog) {
                Ok(result) => {
                    if result.ok {
                        counts.runs_ok += 1;
                    } else {
                        counts.runs_failed += 1;
                    }
                    let _ = (result.for_model(), result.error_json());
                }
                Err(e) => {
                    counts.run_errors += 1;
                    let _ = (e.to_string(), e.to_json());
                }
            }
        }
    }
    if case.run && case.manifest.get("tests").is_some() {
        // Each test may run the tool once: the bound covers them all.
        arm(limit * 3, || format!("step: tests\n{}", what()));
        counts.tests_run += 1;
        for outcome in packs::run_tests(&catalog, tool) {
            let _ = format!("{outcome:?}");
        }
    }
    Ok(())
}

/// Run the real binary: a wall bound, exit status 101, a signal or `panicked` fail.
fn packs_bin(
    args: &[OsString],
    ws: &Path,
    limit: Duration,
    what: &dyn Fn() -> String,
) -> Result<(Option<i32>, Vec<u8>), String> {
    let mut cmd = Command::new(PACKS);
    cmd.args(args).current_dir(ws).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for var in ["PACKS_PATH", "PACKS_SANDBOX", "PACKS_AGENT", "PACKS_WORKSPACE", "PACKS_LOG", "PACKS_MODE"] {
        cmd.env_remove(var);
    }
    cmd.env("PACKS_CACHE_DIR", "").env("XDG_CONFIG_HOME", ws.join("no-config")).env("PACKS_FUZZ_SECRET", "s3cr3t");
    let shown = args.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ");
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("cannot start packs: {e}"))?;
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        b
    });
    let err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("`packs {shown}` did not end within {limit:?} (a hang)\n{}", what()));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = out.join().unwrap();
    let stderr = String::from_utf8_lossy(&err.join().unwrap()).into_owned();
    use std::os::unix::process::ExitStatusExt;
    if status.code() == Some(101) || status.signal().is_some() || stderr.contains("panicked") {
        return Err(format!("`packs {shown}` ended with {status:?}\n--- stderr ---\n{stderr}"));
    }
    Ok((status.code(), stdout))
}

fn binary(case: &Case, dir: &Path, file: &Path, ws: &Path, counts: &mut Counts) -> Result<(), String> {
    let what = || case.describe(ws);
    let packs = [OsString::from("--packs"), dir.as_os_str().to_owned()];
    let mut lint: Vec<OsString> = packs.to_vec();
    lint.extend(["lint".into(), "--format".into(), "json".into(), file.as_os_str().to_owned()]);
    counts.binary_commands += 1;
    let (_, stdout) = packs_bin(&lint, ws, GRACE, &what)?;
    serde_json::from_slice::<Value>(&stdout)
        .map_err(|e| format!("packs lint --format json printed no JSON: {e}\n{}", what()))?;
    // The bound of a run: the longest timeout a generated manifest can state, plus the grace.
    let limit = Duration::from_secs(30) + GRACE;
    for (i, (args, context_values)) in case.calls.iter().enumerate() {
        let json = serde_json::to_string(args).unwrap();
        if json.len() > 100_000 {
            // The kernel refuses an argv element past 128 KiB: the library steps had these.
            continue;
        }
        let mut run: Vec<OsString> = packs.to_vec();
        run.extend(["run".into(), "fz".into(), json.into()]);
        run.extend(["--workspace".into(), ws.as_os_str().to_owned()]);
        // An argv element cannot hold a NUL byte nor pass 128 KiB: such context values are
        // the library's alone.
        for (k, v) in context_values.iter().filter(|(_, v)| !v.contains('\0') && v.len() < 100_000) {
            run.extend(["--context".into(), format!("{k}={}", v.replace("@WS@", ws.to_str().unwrap())).into()]);
        }
        let mut dry = run.clone();
        dry.push("--dry-run".into());
        if i % 2 == 0 {
            dry.push("--json".into());
        }
        counts.binary_commands += 1;
        packs_bin(&dry, ws, GRACE, &what)?;
        if case.run {
            run.push("--yes".into());
            run.push(["--json", "--stream", "-q"][i % 3].into());
            counts.binary_commands += 1;
            packs_bin(&run, ws, limit, &what)?;
        }
    }
    Ok(())
}

/// Shrink a failing case: keep removing what it can do without while it still fails.
fn shrink(case: Case, counts: &mut Counts) -> (Case, String) {
    let start = Instant::now();
    let mut best = case;
    let mut failure = run_case(&best, counts).err().unwrap_or_else(|| "flaky: passed when run again".into());
    let mut tries = 0;
    'outer: while tries < 400 && start.elapsed() < Duration::from_secs(120) {
        for smaller in best.smaller() {
            tries += 1;
            if let Err(e) = run_case(&smaller, counts) {
                best = smaller;
                failure = e;
                continue 'outer;
            }
            if tries >= 400 || start.elapsed() > Duration::from_secs(120) {
                break 'outer;
            }
        }
        break;
    }
    (best, failure)
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(v.trim().parse().unwrap_or_else(|_| panic!("{name} must be a number, not {v:?}")))
}

#[test]
fn random_manifests_and_arguments_never_panic_or_hang() {
    let mut counts = Counts::default();
    let replay = env_u64("PACKS_FUZZ_REPLAY");
    let secs = env_u64("PACKS_FUZZ_SECS");
    let cases = env_u64("PACKS_FUZZ_CASES").unwrap_or(if secs.is_some() { u64::MAX } else { DEFAULT_CASES });
    let start_seed = env_u64("PACKS_FUZZ_SEED").unwrap_or(1);
    let deadline = secs.map(|s| Instant::now() + Duration::from_secs(s));
    let start = Instant::now();
    let seeds: Box<dyn Iterator<Item = u64>> = match replay {
        Some(seed) => Box::new(std::iter::once(seed)),
        None => Box::new((start_seed..).take(usize::try_from(cases).unwrap_or(usize::MAX))),
    };
    for seed in seeds {
        if deadline.is_some_and(|d| Instant::now() > d) {
            break;
        }
        let mut case = Case::generate(seed);
        if replay.is_some() {
            case.binary = true;
            eprintln!("{}", case.describe(Path::new("@WS@")));
        }
        if let Err(first) = run_case(&case, &mut counts) {
            let (small, failure) = shrink(case.clone(), &mut counts);
            panic!(
                "fuzz failure\n{first}\n\n=== the case as generated ===\n{}\n=== shrunk ===\n{failure}\n{}",
                case.describe(Path::new("@WS@")),
                small.describe(Path::new("@WS@"))
            );
        }
    }
    eprintln!("fuzz: {:.0?}, seeds from {start_seed}: {counts:#?}", start.elapsed());
    assert!(counts.cases > 0);
}
