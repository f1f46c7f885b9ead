//! Template rules beyond syntax (which loading checks): unused parameters and
//! optional parameters that would render an empty argument.

use std::collections::HashSet;

use super::Subject;
use crate::argv::Site;
use crate::code::Code;
use crate::source::{Diagnostic, FieldPath, Severity, Target};

pub(super) fn check(s: &Subject<'_>, out: &mut Vec<Diagnostic>) {
    let Some(command) = s.command else { return };
    let templates = command.templates();
    let used: HashSet<&str> = templates.iter().flat_map(|(_, t)| t.params()).collect();
    for (name, p) in &s.m.parameters {
        if p.is_offered() && !used.contains(name.as_str()) {
            out.push(
                s.diag(
                    Severity::Warning,
                    Code::UnusedParameter,
                    &FieldPath::dotted("parameters").key(name),
                    Target::Key,
                    format!("parameter `{name}` is offered to the model but no template uses it"),
                )
                .with_help(format!(
                    "use `{{{{{name}}}}}` in `command.args`, `env`, `cwd` or `stdin`, or remove the parameter"
                )),
            );
        }
    }
    // Plain (non-group) argument elements only: a group is left out as a whole when empty.
    for (site, t) in &templates {
        if !matches!(site, Site::Arg(_)) {
            continue;
        }
        for name in t.bare_params() {
            let Some(p) = s.m.parameters.get(name) else { continue };
            let from_context = p.source.and_then(|src| src.context_key()).is_some();
            if p.required || p.default.is_some() || from_context || t.placeholder() == Some(name.as_str()) {
                continue;
            }
            out.push(
                s.diag(
                    Severity::Warning,
                    Code::OptionalRendersEmpty,
                    &site.path(),
                    Target::Value,
                    // A long element is not quoted (it is on the line shown): each of its
                    // values can have this warning, and the text stays linear. Never cut:
                    // a cut secret would escape the masking of whole ones.
                    match t.source() {
                        short if short.chars().count() <= 80 => format!(
                            "optional parameter `{name}` has no default: without it, `{short}` renders with an empty value"
                        ),
                        _ => format!("optional parameter `{name}` has no default: without it, this element renders with an empty value"),
                    },
                )
                .with_help(format!(
                    "give `{name}` a default, use an inline default `{{{{{name}:...}}}}`, wrap it in `{{{{#if {name}}}}}`, or put the element in a group"
                )),
            );
        }
    }
}
