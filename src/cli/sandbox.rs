//! `packs sandbox`: what this kernel can enforce for tools, and the mode in effect.

use std::io::Write;

use serde_json::json;

use super::exit;
use crate::sandbox::{
    LANDLOCK_ABI_FOR_READS, LANDLOCK_ABI_FOR_SIGNALS, LANDLOCK_ABI_FOR_WRITES, SandboxMode, Signals, Support,
};

/// Whether confinement really takes here, not only what the kernel says it offers: `true`
/// started as a `read_only` tool without network (Landlock, seccomp, the signal scope, as
/// far as this kernel goes). An error (a filter the kernel will not install, a ruleset it
/// refuses) is why not.
fn live_check() -> Result<(), String> {
    use crate::runner::{self, Invocation};
    let env = crate::environment::minimal_env(&[], Vec::new());
    let invocation = Invocation::plain(vec!["true".to_owned()], env, std::time::Duration::from_secs(10), 1024);
    let enforcement = crate::sandbox::for_a_describe();
    let confined = runner::confine(&invocation, Some(&enforcement)).map_err(|e| e.to_string())?;
    let out = runner::run(confined.as_ref().unwrap_or(&invocation)).map_err(|e| e.to_string())?;
    match out.exit_code {
        Some(0) => Ok(()),
        code => Err(format!("a confined `true` ended with {code:?}")),
    }
}

/// Print the kernel's support, what each tier gets under the session's mode, and the paths no
/// confined tool reads (resolved as the rules deny them).
pub(super) fn report(context: &crate::call::Context, as_json: bool) -> i32 {
    let mode = context.sandbox();
    let support = Support::probe();
    let writes = support.landlock_abi >= LANDLOCK_ABI_FOR_WRITES;
    // What the kernel offers is claimed only once a confined process really started here.
    let failed = (mode != SandboxMode::Off).then(live_check).and_then(Result::err);
    let failure = failed.as_ref().map(|e| format!("not enforced: confining a tool failed here ({e})"));
    let verdict = |needed: bool, ok: bool| match (needed, ok, mode, &failure) {
        (false, _, _, _) => "not needed".to_owned(),
        (_, _, SandboxMode::Off, _) => "not enforced (off)".to_owned(),
        (true, true, _, Some(failure)) => failure.clone(),
        (true, true, _, None) => "enforced".to_owned(),
        (true, false, SandboxMode::Enforce, _) => "refused (the kernel cannot enforce it)".to_owned(),
        (true, false, SandboxMode::BestEffort, _) => "runs partly or not confined (best-effort)".to_owned(),
    };
    // Not a policy a tool states, so never a refusal: what this kernel offers, and the gap.
    let signals = match (mode, Signals::of(mode, support)) {
        (SandboxMode::Off, _) => "not enforced (off)".to_owned(),
        (_, Signals::OwnCall | Signals::NotPacks) if failure.is_some() => failure.clone().unwrap_or_default(),
        (_, Signals::OwnCall) => "enforced (only its own processes)".to_owned(),
        (_, Signals::NotPacks) => format!(
            "packs protected (seccomp: its pid, its group, -1); other processes not protected (needs Landlock ABI {LANDLOCK_ABI_FOR_SIGNALS})"
        ),
        (_, Signals::Anything) => "not protected (needs Landlock ABI 6 or seccomp)".to_owned(),
    };
    // Also not a policy: every confined tool gets it where the kernel has seccomp.
    let typing = match (mode, support.seccomp, &failure) {
        (SandboxMode::Off, _, _) => "not enforced (off)".to_owned(),
        (_, true, Some(failure)) => failure.clone(),
        (_, true, None) => "enforced".to_owned(),
        (_, false, _) => "not protected (needs seccomp)".to_owned(),
    };
    let reads = support.landlock_abi >= LANDLOCK_ABI_FOR_READS;
    // Like signals, a gap on an older kernel rather than a refusal.
    let abstract_unix = match mode {
        SandboxMode::Off => "not enforced (off)".to_owned(),
        _ if support.landlock_abi < LANDLOCK_ABI_FOR_SIGNALS => {
            format!("not protected (needs Landlock ABI {LANDLOCK_ABI_FOR_SIGNALS})")
        }
        _ => failure.clone().unwrap_or_else(|| "enforced".to_owned()),
    };
    // Without a home directory the default list names nothing: said, and refused under enforce.
    let stores = match (crate::reads::homes_unknown(), mode) {
        (false, _) | (true, SandboxMode::Off) => verdict(true, reads),
        (true, SandboxMode::Enforce) => {
            "refused (no home directory: HOME is unset or relative, and the user has no entry in /etc/passwd)"
                .to_owned()
        }
        (true, SandboxMode::BestEffort) => {
            "not enforced (no home directory: HOME is unset or relative, and the user has no entry in /etc/passwd)"
                .to_owned()
        }
    };
    let rows = [
        ("read_only and workspace tools: writes confined", verdict(true, writes)),
        ("read_only and workspace tools: credential stores unreadable", stores.clone()),
        ("confined tools: packs' own configuration not writable", verdict(true, writes)),
        ("tools without requires_network: no IP sockets", verdict(true, support.seccomp)),
        ("tools without requires_network: no abstract Unix sockets outside the call", abstract_unix.clone()),
        ("every tool: signals confined to its call", signals.clone()),
        ("every tool: no typing into a terminal (TIOCSTI, TIOCLINUX)", typing.clone()),
    ];
    // What the read rules deny (the session's list, the agent's, packs' own secrets), as they
    // deny it: absolute, links resolved and kept themselves, a missing path kept. Nothing
    // where no read rules are built: a call reads them all.
    let read_rules = mode != SandboxMode::Off && reads && failure.is_none();
    let unreadable = if read_rules { crate::reads::denied(&context.denied_reads()) } else { Vec::new() };
    let mut out = std::io::stdout().lock();
    let written = if as_json {
        let value = json!({
            "mode": mode.as_str(),
            "landlock_abi": support.landlock_abi,
            "landlock_abi_needed": LANDLOCK_ABI_FOR_WRITES,
            "seccomp": support.seccomp,
            "writes_confined": verdict(true, writes),
            "control_plane_protected": verdict(true, writes),
            "credential_stores_unreadable": stores,
            "network_refused": verdict(true, support.seccomp),
            "abstract_unix_sockets_refused": abstract_unix,
            "signals_confined": signals,
            "terminal_typing_refused": typing,
            "reads_denied": unreadable.iter().map(|p| p.to_string_lossy()).collect::<Vec<_>>(),
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&value).unwrap_or_default())
    } else {
        let landlock = match support.landlock_abi {
            0 => "not available".to_owned(),
            abi if abi < LANDLOCK_ABI_FOR_WRITES => {
                format!("ABI {abi} (ABI {LANDLOCK_ABI_FOR_WRITES} is needed to confine every kind of write)")
            }
            abi if abi < LANDLOCK_ABI_FOR_SIGNALS => {
                format!("ABI {abi} (ABI {LANDLOCK_ABI_FOR_SIGNALS} is needed to confine signals)")
            }
            abi => format!("ABI {abi}"),
        };
        let mut text = format!(
            "mode: {mode} ({})\nlandlock: {landlock}\nseccomp: {}\n",
            mode.help(),
            if support.seccomp { "available" } else { "not available" }
        );
        for (what, verdict) in rows {
            text.push_str(&format!("{what}: {verdict}\n"));
        }
        if read_rules {
            text.push_str(&format!("reads denied to read_only and workspace tools ({}):\n", unreadable.len()));
        } else {
            text.push_str(&format!("reads denied to read_only and workspace tools: none, {stores}\n"));
        }
        // A path as bash would take it, its controls, invisible characters and bytes that are
        // not UTF-8 escaped.
        for path in &unreadable {
            text.push_str(&format!("  {}\n", crate::visible::os_word(path.as_os_str())));
        }
        out.write_all(text.as_bytes())
    };
    if written.is_err() { exit::USAGE } else { exit::OK }
}
