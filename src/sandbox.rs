//! The sandbox: a call's policy enforced by the kernel (Linux), below the tool and
//! everything it starts, without privileges or user namespaces.
//!
//! - **Filesystem, by tier** (Landlock, ABI 3 or later for a full guarantee): a `read_only`
//!   tool may write nowhere but a private temporary directory (its `TMPDIR`, removed after
//!   the call) and the usual character devices (`/dev/null`...); a `workspace` tool also
//!   under the workspace root; `system` and `elevated` tools are not restricted by tier.
//!   Reads (`read_only`, `workspace`): everything but the credential stores and packs' own
//!   secrets ([`crate::reads`]), in a Landlock domain of its own, kept per process.
//! - **Network** (seccomp): a tool that does not state `requires_network: true` cannot
//!   create a socket of any family but Unix-domain and netlink (so no IPv4, IPv6, packet,
//!   VM or Bluetooth socket), nor an io_uring (which could make one). A tool stating
//!   `policy.unix_sockets: false` (any tier) cannot create a Unix-domain socket either, so it
//!   reaches no local daemon; a stream `socketpair` stays (a datagram pair could `sendto`
//!   any datagram socket: refused).
//! - **Signals, for every tier** (Landlock's signal scope, ABI 6): a tool and what it starts
//!   may signal one another, and nothing else: not packs, not another call's tool, not the
//!   user's other processes. On a kernel without ABI 6, seccomp refuses at least the signals
//!   aimed at packs itself (its pid, its process group) and at every process (`kill(-1)`).
//! - **No new privileges**: a setuid program cannot lift the restrictions.
//!
//! Everything is prepared in packs' process (the Landlock ruleset, the seccomp program,
//! the temporary directory); the child only makes three system calls between `fork` and
//! `exec` ([`Prepared::enter`]), nothing that allocates.
//!
//! **Fail closed**: when the kernel cannot enforce what a call needs, the call is refused,
//! naming what is missing, unless the operator chose `--sandbox best-effort` (enforce what
//! the kernel can) or `--sandbox off`. The level of every call is shown by `--dry-run` and
//! recorded in the audit log.

use std::path::{Path, PathBuf};

use crate::policy::Tier;

crate::names::named_enum! {
    /// How strictly a call's policy is enforced by the kernel.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub enum SandboxMode {
        /// Enforce every restriction the policy implies; refuse a call the kernel cannot confine.
        #[default]
        Enforce = "enforce",
        /// Enforce what this kernel can, run the rest unconfined (recorded in the audit log).
        BestEffort = "best-effort",
        /// Enforce nothing (recorded in the audit log).
        Off = "off",
    }
}

impl SandboxMode {
    /// Whether this mode confines more than `other` (`enforce` > `best-effort` > `off`).
    pub(crate) fn is_stricter_than(self, other: Self) -> bool {
        let rank = |m: Self| match m {
            Self::Off => 0,
            Self::BestEffort => 1,
            Self::Enforce => 2,
        };
        rank(self) > rank(other)
    }
}

/// Where a call may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Writes {
    /// Anywhere the user may (`system`, `elevated`).
    Anywhere,
    /// Under these directories (the workspace, `policy.writable`) and the private temp dir.
    Under(Vec<PathBuf>),
}

/// What a call's policy asks of the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Needs {
    pub(crate) writes: Writes,
    pub(crate) network: bool,
    /// packs' own configuration (pack directories, agents, lock file, audit log...): never
    /// writable by the tool, even inside a place it may write ([`crate::grants`]).
    pub(crate) protected: Vec<PathBuf>,
    /// Reads confined: the paths no read reaches (absolute, resolved when the rules are
    /// built, links crossed kept too: [`crate::reads::denied`]); `None`: reads
    /// are not restricted (`system`, `elevated`, `policy.reads_credentials`).
    pub(crate) reads: Option<Vec<PathBuf>>,
    /// The operator replaced the default list of `reads` (`--no-default-deny-read`).
    pub(crate) reads_replaced: bool,
    /// How many of `reads` are packs' own secrets, not the operator's or the agent's.
    pub(crate) own_reads: usize,
    /// No home directory was found (`HOME` unset or relative, no passwd entry): the default
    /// list names nothing, so reads are not confined (and `enforce` refuses).
    pub(crate) no_home: bool,
    /// Unix-domain sockets may be created (`policy.unix_sockets`, `true` unless stated).
    pub(crate) unix: bool,
    /// Reads narrowed to these places (`policy.readable` rendered, the manifest's directory),
    /// beside the writable places, TMPDIR and [`crate::reads::SYSTEM_READABLE`]; `None`:
    /// not narrowed.
    pub(crate) readable: Option<Vec<PathBuf>>,
}

impl Needs {
    /// The restrictions a tool of `tier` implies; `workspace` is the confinement root.
    pub(crate) fn of(tier: Tier, requires_network: bool, workspace: &Path, writable: &[PathBuf]) -> Self {
        let mut dirs = writable.to_vec();
        let writes = match tier {
            Tier::ReadOnly => Writes::Under(dirs),
            Tier::Workspace => {
                dirs.insert(0, std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_owned()));
                Writes::Under(dirs)
            }
            Tier::System | Tier::Elevated => Writes::Anywhere,
        };
        Self {
            writes,
            network: requires_network,
            protected: Vec::new(),
            reads: None,
            reads_replaced: false,
            own_reads: 0,
            no_home: false,
            unix: true,
            readable: None,
        }
    }

    /// The same, with reads narrowed to `places` (and what every program needs), or not.
    #[must_use]
    pub(crate) fn reading_only(mut self, places: Option<Vec<PathBuf>>) -> Self {
        self.readable = places;
        self
    }

    /// The same, with `socket(AF_UNIX)` refused unless `unix` (`policy.unix_sockets: false`).
    #[must_use]
    pub(crate) fn unix_sockets(mut self, unix: bool) -> Self {
        self.unix = unix;
        self
    }

    /// The same, with `denied` (absolute) unreadable, or
    /// reads not restricted (`None`).
    #[must_use]
    pub(crate) fn denying_reads(mut self, denied: Option<Vec<PathBuf>>) -> Self {
        self.reads = denied;
        self
    }

    /// The same, saying whether the operator replaced the default list of what is unreadable,
    /// and how many of the denied paths are packs' own secrets (denied whatever the list).
    #[must_use]
    pub(crate) fn reads_list_replaced(mut self, replaced: bool, own: usize) -> Self {
        self.reads_replaced = replaced;
        self.own_reads = own;
        self
    }

    /// The same, saying whether no home directory was found ([`crate::reads::homes_unknown`]).
    #[must_use]
    pub(crate) fn without_home(mut self, no_home: bool) -> Self {
        self.no_home = no_home;
        self
    }

    /// Reads should be confined, but the credential stores are unknown (no home directory,
    /// the default list kept).
    fn stores_unknown(&self) -> bool {
        self.reads.is_some() && self.no_home && !self.reads_replaced
    }

    /// The same, with `paths` (packs' own configuration, resolved: see
    /// [`crate::grants::resolved`]) kept out of every writable place.
    #[must_use]
    pub(crate) fn protecting(mut self, paths: &[PathBuf]) -> Self {
        self.protected = paths.to_vec();
        self
    }

    fn restricts_writes(&self) -> bool {
        matches!(self.writes, Writes::Under(_))
    }
}

/// What the kernel will enforce for one call, decided before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enforcement {
    /// The mode it was decided under.
    pub mode: SandboxMode,
    /// Writes are confined (to these directories and the call's temp dir); `None`: not confined.
    pub writes_under: Option<Vec<PathBuf>>,
    /// IPv4/IPv6 sockets are refused.
    pub no_network: bool,
    /// Reads are confined: these paths (credential stores, packs' secrets) cannot be opened;
    /// `None`: reads are not restricted.
    pub reads_denied: Option<Vec<PathBuf>>,
    /// What the policy asked for and this kernel could not enforce (best-effort, off).
    pub unenforced: Vec<String>,
    /// Which processes the tool may signal (decided for every tier, not by the policy).
    pub(crate) signals: Signals,
    /// The `ioctl` requests that type into a terminal (`TIOCSTI`, `TIOCLINUX`) are refused
    /// (seccomp): every confined tool, where the kernel has seccomp.
    pub(crate) no_typing: bool,
    /// Reads are narrowed (`policy.readable`): only these places, the writable ones, the
    /// call's TMPDIR and what every program needs (docs/SANDBOX.md lists them).
    pub reads_only: Option<Vec<PathBuf>>,
    /// No Unix-domain socket can be created (`policy.unix_sockets: false`; seccomp):
    /// pathname and abstract ones alike.
    pub no_unix: bool,
    /// Abstract Unix sockets outside the call are unreachable (Landlock ABI 6, a tool
    /// without `requires_network`; on an older kernel a documented gap, not a refusal).
    pub(crate) no_abstract_unix: bool,
    pub(crate) needs: Option<Needs>,
    pub(crate) landlock_abi: i32,
}

/// Which processes a tool may send signals to. Not part of a tool's policy: no tool may
/// signal packs, so every tool gets the best this kernel offers, and a kernel that offers
/// less is a documented gap (`packs sandbox`), not a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signals {
    /// Only processes of its own call (Landlock's signal scope: its own domain).
    OwnCall,
    /// Anything but packs (its pid and process group) and every process at once (`-1`),
    /// refused by seccomp: a kernel without Landlock ABI 6.
    NotPacks,
    /// Anything the user may signal (`--sandbox off`, or a kernel without seccomp).
    Anything,
}

/// The Landlock ABI that scopes signals to a Landlock domain (Linux 6.12).
pub(crate) const LANDLOCK_ABI_FOR_SIGNALS: i32 = 6;

impl Signals {
    /// What this kernel offers, under `mode`.
    pub(crate) fn of(mode: SandboxMode, support: Support) -> Self {
        match mode {
            SandboxMode::Off => Self::Anything,
            _ if support.landlock_abi >= LANDLOCK_ABI_FOR_SIGNALS => Self::OwnCall,
            _ if support.seccomp => Self::NotPacks,
            _ => Self::Anything,
        }
    }

    /// In words, for `--dry-run`, `packs help` and `packs sandbox`.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::OwnCall => "signals only its own processes",
            Self::NotPacks => "cannot signal packs (other processes: needs Landlock ABI 6)",
            Self::Anything => "may signal any process of the user",
        }
    }
}

impl Enforcement {
    /// One word for the audit log and `--dry-run`: `enforced`, `partial`, `off` or `none`
    /// (nothing enforced: a `system` tool that may use the network, on a kernel without
    /// seccomp or Landlock ABI 6 to keep its signals from packs).
    pub fn level(&self) -> &'static str {
        match (self.mode, self.unenforced.is_empty()) {
            (SandboxMode::Off, _) => "off",
            (_, false) => "partial",
            _ if !self.confines() => "none",
            _ => "enforced",
        }
    }

    /// How reads are confined, in one word for the audit log: `narrowed` (`policy.readable`),
    /// `credentials-denied` (the credential stores and the operator's list), `unconfined`.
    pub fn reads(&self) -> &'static str {
        match (&self.reads_only, &self.reads_denied) {
            (Some(_), _) => "narrowed",
            (None, Some(_)) => "credentials-denied",
            (None, None) => "unconfined",
        }
    }

    /// Whether the kernel is asked to restrict anything for this call.
    pub(crate) fn confines(&self) -> bool {
        self.writes_under.is_some()
            || self.no_network
            || self.signals != Signals::Anything
            || self.reads_denied.is_some()
            || self.no_unix
            || self.reads_only.is_some()
    }

    /// Whether the tool can signal nothing outside its call (Landlock's signal scope).
    pub(crate) fn signals_confined(&self) -> bool {
        self.signals == Signals::OwnCall
    }

    /// What is enforced, in words (`--dry-run`, `packs help`).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        match &self.writes_under {
            Some(dirs) if dirs.is_empty() => parts.push("writes only to its private TMPDIR".to_owned()),
            Some(dirs) => {
                let protected = self.needs.as_ref().map_or(&[][..], |n| n.protected.as_slice());
                let kept_out = dirs.iter().any(|d| protected.iter().any(|p| p.starts_with(d)));
                parts.push(format!(
                    "writes only under {}{} and its private TMPDIR",
                    dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "),
                    if kept_out { " (but packs' own configuration there)" } else { "" }
                ));
            }
            None => {}
        }
        if self.needs.as_ref().is_some_and(Needs::stores_unknown) {
            parts.push("credential stores readable (no home directory)".to_owned());
        } else if let Some(denied) = &self.reads_denied {
            let replaced = self.needs.as_ref().is_some_and(|n| n.reads_replaced);
            let own = self.needs.as_ref().map_or(0, |n| n.own_reads);
            parts.push(
                match (replaced, denied.len() <= own, own) {
                    (false, _, _) => "credential stores unreadable",
                    (true, false, _) => "only the --deny-read paths unreadable (no default list)",
                    (true, true, 0) => "reads not restricted (--no-default-deny-read)",
                    (true, true, _) => "reads not restricted but for packs' own secrets (--no-default-deny-read)",
                }
                .to_owned(),
            );
        } else if self.needs.as_ref().is_some_and(|n| n.restricts_writes() && n.reads.is_none()) {
            parts.push("may read credential stores (policy.reads_credentials)".to_owned());
        }
        if let Some(places) = &self.reads_only {
            let mut named: Vec<String> = places.iter().map(|p| p.display().to_string()).collect();
            named.push("its writable places and the system's files".to_owned());
            parts.push(format!("reads only {}", named.join(", ")));
        }
        match (self.no_network, self.no_unix, self.no_abstract_unix) {
            (true, true, _) => parts.push("no network, no Unix socket".to_owned()),
            (true, false, true) => parts.push("no network, no abstract Unix socket".to_owned()),
            (true, false, false) => parts.push("no network".to_owned()),
            (false, true, _) => parts.push("no Unix socket".to_owned()),
            (false, false, _) => {}
        }
        if self.signals != Signals::Anything {
            parts.push(self.signals.describe().to_owned());
        }
        let mut text = if parts.is_empty() { "nothing to confine".to_owned() } else { parts.join("; ") };
        if !self.unenforced.is_empty() {
            text.push_str(&format!(" (not enforced: {})", self.unenforced.join("; ")));
        }
        if self.mode == SandboxMode::Off {
            text = "off: nothing is enforced".to_owned();
        }
        text
    }
}

/// What the kernel enforces for a call, in words, as the call's context decided it (its
/// `enforcement`; this module stays below the pipeline): `--dry-run`'s `sandbox:` line (it is
/// [`Enforcement::describe`]), `packs help NAME` and the `dev.packs/sandbox` note of an MCP
/// `tools/list` entry all say it this way, so they cannot drift apart.
pub(crate) fn stated(decided: &Result<Enforcement, Unenforceable>) -> String {
    match decided {
        Ok(e) => e.describe(),
        Err(e) => format!("refused here unless `--sandbox best-effort` or `off`: {}", e.missing.join("; ")),
    }
}

/// The kernel cannot enforce what a call needs, and the mode is `enforce`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the kernel cannot enforce this tool's policy: {}; run with `--sandbox best-effort` (or `off`) to accept that",
    missing.join("; ")
)]
pub struct Unenforceable {
    /// What is missing, one entry per restriction.
    pub missing: Vec<String>,
}

/// What this kernel supports, probed once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI version (0: none).
    pub landlock_abi: i32,
    /// Whether seccomp filters can be installed.
    pub seccomp: bool,
}

/// The Landlock ABI that confines every kind of write (ABI 3 adds truncation).
pub(crate) const LANDLOCK_ABI_FOR_WRITES: i32 = 3;

/// The Landlock ABI that confines reads (reading, listing, executing files: ABI 1; without
/// `REFER`, ABI 1 refuses every link or rename across directories, so no link reaches a
/// denied file either).
pub(crate) const LANDLOCK_ABI_FOR_READS: i32 = 1;

impl Support {
    /// This kernel's support (probed on first use).
    pub fn probe() -> Self {
        static SUPPORT: std::sync::OnceLock<Support> = std::sync::OnceLock::new();
        *SUPPORT.get_or_init(imp::probe)
    }
}

/// Decide what the kernel will enforce for a call needing `needs`.
pub(crate) fn decide(needs: Needs, mode: SandboxMode, support: Support) -> Result<Enforcement, Unenforceable> {
    let mut missing = Vec::new();
    let writes = needs.restricts_writes();
    if writes && support.landlock_abi < LANDLOCK_ABI_FOR_WRITES {
        missing.push(if support.landlock_abi == 0 {
            "confining writes needs Landlock, which this kernel does not offer (Linux 6.2 or later, with `landlock` among the LSMs)".to_owned()
        } else {
            format!(
                "confining every kind of write needs Landlock ABI {LANDLOCK_ABI_FOR_WRITES} (Linux 6.2), this kernel has ABI {}",
                support.landlock_abi
            )
        });
    }
    if needs.reads.is_some() && support.landlock_abi < LANDLOCK_ABI_FOR_READS {
        missing
            .push("keeping credential stores unreadable needs Landlock, which this kernel does not offer".to_owned());
    }
    if needs.stores_unknown() {
        missing.push(
            "keeping credential stores unreadable needs a home directory, and there is none (HOME is unset or relative, and the user has no entry in /etc/passwd); set HOME".to_owned(),
        );
    }
    if !needs.network && !support.seccomp {
        missing.push("refusing network sockets needs seccomp, which this kernel does not offer".to_owned());
    }
    if needs.readable.is_some() && support.landlock_abi < LANDLOCK_ABI_FOR_READS {
        missing.push("narrowing reads (policy.readable) needs Landlock, which this kernel does not offer".to_owned());
    }
    if !needs.unix && !support.seccomp {
        missing.push(
            "refusing Unix sockets (policy.unix_sockets) needs seccomp, which this kernel does not offer".to_owned(),
        );
    }
    if mode == SandboxMode::Enforce && !missing.is_empty() {
        return Err(Unenforceable { missing });
    }
    let (fs_ok, net_ok) = match mode {
        SandboxMode::Off => (false, false),
        _ => (support.landlock_abi > 0, support.seccomp),
    };
    let writes_under = match (&needs.writes, fs_ok) {
        (Writes::Under(dirs), true) => Some(dirs.clone()),
        _ => None,
    };
    let no_network = !needs.network && net_ok;
    let no_unix = !needs.unix && net_ok;
    let reads_only = needs.readable.clone().filter(|_| fs_ok);
    let reads_denied = needs.reads.clone().filter(|denied| fs_ok && !(needs.stores_unknown() && denied.is_empty()));
    let unenforced = if mode == SandboxMode::Off { Vec::new() } else { missing };
    Ok(Enforcement {
        mode,
        writes_under,
        no_network,
        reads_denied,
        no_unix,
        reads_only,
        unenforced,
        signals: Signals::of(mode, support),
        no_typing: net_ok,
        no_abstract_unix: !needs.network
            && mode != SandboxMode::Off
            && support.landlock_abi >= LANDLOCK_ABI_FOR_SIGNALS,
        landlock_abi: support.landlock_abi,
        needs: (mode != SandboxMode::Off).then_some(needs),
    })
}

/// Whether this process makes one call at most (`packs run`, `packs exec`): the read ruleset
/// it builds is not used again, so the directories on the way to the credential stores are
/// not recorded to notice a change later (a `stat` each, see [`crate::reads::Walk`]).
static ONE_CALL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Say that this process makes one call at most. Were it to make more, each would build its
/// read ruleset anew (correct, only slower).
pub(crate) fn one_call_per_process() {
    ONE_CALL.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// What an executable's `--describe` run gets: the confinement of a `read_only` tool without
/// network, as far as this kernel can (a describe is no call of the operator's: it is
/// confined whatever `--sandbox` says, and never refused for want of the kernel's support).
pub(crate) fn for_a_describe() -> Enforcement {
    let needs = Needs::of(Tier::ReadOnly, false, Path::new("/"), &[])
        .denying_reads(Some(crate::reads::default_list().to_vec()))
        .without_home(crate::reads::homes_unknown());
    decide(needs, SandboxMode::BestEffort, Support::probe())
        .unwrap_or_else(|_| unreachable!("best-effort never refuses"))
}

/// A call's sandbox, ready to enter: built in packs' process before the child starts.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// The private temporary directory (the tool's `TMPDIR`), removed when dropped.
    pub(crate) tmpdir: Option<PrivateDir>,
    inner: imp::Inner,
}

/// Where private temp dirs are made: packs' own `TMPDIR` when the operator set one, else
/// `/dev/shm` when it is a writable directory no other user can rename entries in (memory:
/// creating and removing a directory there costs a tenth of what it costs on a disk's
/// `/tmp`), else the system's temp dir. A base another user could swap the call's directory
/// in is refused by [`PrivateDir::new_in`], naming it.
fn temp_base() -> PathBuf {
    static BASE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        if std::env::var_os("TMPDIR").is_some_and(|t| !t.is_empty()) {
            let base = std::env::temp_dir();
            return std::fs::canonicalize(&base).unwrap_or(base);
        }
        let shm = Path::new("/dev/shm");
        let usable = std::fs::metadata(shm).is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.is_dir() && unsafe_base((m.uid(), m.gid()), m.mode(), packs_user()).is_none()
        })
            // SAFETY: access(2) with a NUL-terminated path literal.
            && unsafe { libc::access(c"/dev/shm".as_ptr(), libc::W_OK | libc::X_OK) } == 0;
        let base = if usable { shm.to_owned() } else { std::env::temp_dir() };
        // Resolved once: the call's directory is made in it, and named to the tool, by this path.
        std::fs::canonicalize(&base).unwrap_or(base)
    })
    .clone()
}

/// packs' effective user and group.
fn packs_user() -> (u32, u32) {
    // SAFETY: geteuid and getegid have no arguments and cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// Why a base directory of `owner` (user, group) with `mode` would let a user other than
/// packs' (`me`, user and group; root can anything anyway) rename what packs makes in it, and
/// so put a directory of their own in the call's place: its owner can, and so can whoever
/// may write it, unless it is sticky. A group-writable base of packs' own user and group is
/// taken as that user's alone (a private group, the usual `umask 002` set-up).
fn unsafe_base(owner: (u32, u32), mode: u32, me: (u32, u32)) -> Option<String> {
    let ((uid, gid), (euid, egid)) = (owner, me);
    let sticky = mode & 0o1000 != 0;
    let mode = mode & 0o7777;
    if uid != euid && uid != 0 {
        Some(format!("owned by another user (uid {uid}), who can rename what packs makes in it"))
    } else if mode & 0o002 != 0 && !sticky {
        Some(format!(
            "writable by every user without the sticky bit (mode {mode:o}): another user could swap the call's directory"
        ))
    } else if mode & 0o020 != 0 && !sticky && (uid, gid) != (euid, egid) {
        Some(format!(
            "writable by its group (gid {gid}) without the sticky bit (mode {mode:o}): a member could swap the call's directory"
        ))
    } else {
        None
    }
}

/// A call's private temporary directory: made with mode 0700 under a name no other process
/// can guess (96 bits from the kernel's random source, `getrandom`, drawn anew for each: a tool
/// that saw one call's name learns nothing about the next), in a base no other user can
/// rename it in, then opened (without following a link) and checked to be the directory made:
/// the Landlock rules name that descriptor, not the path. Removed when dropped, on the error
/// paths that drop it too, whatever the tool locked in it ([`empty`]).
#[derive(Debug)]
pub(crate) struct PrivateDir {
    path: PathBuf,
    /// The base, open: the directory is made in it and removed from it by name.
    base: std::os::fd::OwnedFd,
    /// The directory's name in `base`.
    name: String,
    /// The directory as it was made and checked.
    dir: std::os::fd::OwnedFd,
}

impl PrivateDir {
    /// The name's prefix: a directory left behind (packs killed) says whose it was.
    const PREFIX: &str = "packs-call-";

    /// A new directory in `base` (made absolute: it is a tool's `TMPDIR`). A name taken
    /// already is drawn again, a few times. A base another user could swap it in is refused.
    pub(crate) fn new_in(base: &Path) -> std::io::Result<Self> {
        use rustix::fs::{FileType, Mode, OFlags};
        let base = if base.is_absolute() { base.to_owned() } else { std::env::current_dir()?.join(base) };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let base_fd = rustix::fs::open(&base, flags, Mode::empty())?;
        let stat = rustix::fs::fstat(&base_fd)?;
        let me = packs_user();
        if let Some(why) = unsafe_base((stat.st_uid, stat.st_gid), stat.st_mode, me) {
            let e = format!("cannot make the private TMPDIR in {}: it is {why}", base.display());
            return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, e));
        }
        let mut tries = 0;
        let name = loop {
            let mut bytes = [0u8; 12];
            getrandom::fill(&mut bytes).map_err(|e| {
                let kind = std::io::Error::from(e).kind();
                std::io::Error::new(kind, format!("cannot draw the private TMPDIR's name: {e}"))
            })?;
            let name = format!("{}{}", Self::PREFIX, data_encoding::HEXLOWER.encode(&bytes));
            match rustix::fs::mkdirat(&base_fd, name.as_str(), Mode::from_raw_mode(0o700)) {
                Ok(()) => break name,
                Err(rustix::io::Errno::EXIST) if tries < 8 => tries += 1,
                Err(e) => return Err(e.into()),
            }
        };
        let path = base.join(&name);
        // What is at the name now must be what was made: a directory of packs' user, opened
        // without following a link. The mode is set on it (a umask may have narrowed it).
        let replaced = || {
            std::io::Error::other(format!(
                "the private TMPDIR {} is not the directory packs made, of uid {}: it was replaced, \
                 or its file system gives it another owner",
                path.display(),
                me.0
            ))
        };
        let dir = rustix::fs::openat(&base_fd, name.as_str(), flags | OFlags::NOFOLLOW, Mode::empty())
            .map_err(|_| replaced())?;
        let stat = rustix::fs::fstat(&dir)?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::Directory || stat.st_uid != me.0 {
            return Err(replaced());
        }
        if stat.st_mode & 0o7777 != 0o700 {
            rustix::fs::fchmod(&dir, Mode::from_raw_mode(0o700))?;
        }
        Ok(Self { path, base: base_fd, name, dir })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The directory, opened as it was made: what the Landlock rules name.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.dir)
    }
}

/// Remove the call's temp dir, whatever the tool left and locked in it ([`empty`]).
impl Drop for PrivateDir {
    fn drop(&mut self) {
        use rustix::fs::AtFlags;
        // Most tools leave their TMPDIR empty: one `rmdir`.
        if rustix::fs::unlinkat(&self.base, self.name.as_str(), AtFlags::REMOVEDIR).is_ok() {
            return;
        }
        // Emptied through the descriptor opened when it was made, not its path.
        let _ = empty(std::os::fd::AsFd::as_fd(&self.dir));
        let _ = rustix::fs::unlinkat(&self.base, self.name.as_str(), AtFlags::REMOVEDIR);
    }
}

/// How many levels [`empty`] descends with a directory open at each; a directory deeper is
/// moved up to the top, where it is removed in turn: a tree of any depth goes, with at most
/// this many descriptors open and no recursion.
const OPEN_LEVELS: usize = 32;

/// How many walks [`empty`] makes at most: one per [`OPEN_LEVELS`] of depth at worst (a
/// directory moved up may not be listed by the walk that moved it), so a tree over 100,000
/// levels deep, or one a process keeps adding to, may not go entirely.
const MAX_PASSES: usize = 4096;

/// Remove everything in the directory `top` (opened for reading), even what its owner locked:
/// each directory is unlocked (mode 0700, by a descriptor opened without following a link)
/// before it is read, and removed once emptied; anything else is unlinked. No link is ever
/// followed, so what a link names stays. Goes on past what cannot be removed; the first error.
fn empty(top: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
    let mut first = None;
    let mut deep = 0u64;
    // A pass that moved a deep directory up does another (a directory being read may not
    // list an entry added meanwhile).
    for _ in 0..MAX_PASSES {
        if empty_pass(top, &mut first, &mut deep) == 0 {
            break;
        }
    }
    first.map_or(Ok(()), Err)
}

/// One walk of [`empty`]: how many directories it moved up to `top`.
fn empty_pass(top: std::os::fd::BorrowedFd<'_>, first: &mut Option<std::io::Error>, deep: &mut u64) -> usize {
    use rustix::fs::{AtFlags, Dir, FileType};
    let mut note = |e: std::io::Error| {
        first.get_or_insert(e);
    };
    // The top too may have been locked.
    match rustix::fs::fstat(top) {
        Ok(stat) if stat.st_mode & 0o700 != 0o700 => {
            if let Err(e) = rustix::fs::fchmod(top, rustix::fs::Mode::from_raw_mode(0o700)) {
                note(e.into());
            }
        }
        Ok(_) => {}
        Err(e) => note(e.into()),
    }
    // Each level open: its listing, and its name in the level above.
    let mut levels: Vec<(Dir, std::ffi::CString)> = match Dir::read_from(top) {
        Ok(dir) => vec![(dir, std::ffi::CString::default())],
        Err(e) => {
            note(e.into());
            return 0;
        }
    };
    let mut moved = 0;
    loop {
        let depth = levels.len();
        let Some((dir, _)) = levels.last_mut() else { break };
        let entry = match dir.read() {
            Some(Ok(entry)) => Some(entry),
            Some(Err(e)) => {
                note(e.into());
                None
            }
            None => None,
        };
        let Some(entry) = entry else {
            // This level is done: remove it from the one above.
            let (done, name) = levels.pop().unwrap_or_else(|| unreachable!("a level is open"));
            drop(done);
            if let Some((parent, _)) = levels.last()
                && let Err(e) = dir_fd(parent).and_then(|fd| Ok(rustix::fs::unlinkat(fd, &name, AtFlags::REMOVEDIR)?))
            {
                note(e);
            }
            continue;
        };
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let at = match dir_fd(dir) {
            Ok(at) => at,
            Err(e) => {
                note(e);
                continue;
            }
        };
        let is_dir = match entry.file_type() {
            FileType::Directory => true,
            FileType::Unknown => rustix::fs::statat(at, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Directory),
            _ => false,
        };
        if !is_dir {
            if let Err(e) = rustix::fs::unlinkat(at, name, AtFlags::empty()) {
                note(e.into());
            }
            continue;
        }
        let name = name.to_owned();
        if depth < OPEN_LEVELS {
            match unlocked(at, &name).and_then(|fd| Ok(Dir::new(fd)?)) {
                Ok(sub) => levels.push((sub, name)),
                Err(e) => note(e),
            }
            continue;
        }
        match move_up(at, &name, top, deep) {
            Ok(()) => moved += 1,
            Err(e) => note(e),
        }
    }
    moved
}

/// The descriptor a listing reads, which entries are named relative to.
fn dir_fd(dir: &rustix::fs::Dir) -> std::io::Result<std::os::fd::BorrowedFd<'_>> {
    Ok(dir.fd()?)
}

/// The directory `name` in `at`, opened for reading without following a link, with mode 0700
/// (the tool may have left it unreadable, or its entries unremovable).
fn unlocked(at: std::os::fd::BorrowedFd<'_>, name: &std::ffi::CStr) -> std::io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(at, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::ACCESS) => {
            // Unreadable: unlocked through a location-only descriptor (which opening needs no
            // right on the directory for), then opened again and checked to be the same.
            let location = rustix::fs::openat(at, name, locate(), Mode::empty())?;
            chmod_location(&location, 0o700)?;
            let fd = rustix::fs::openat(at, name, flags, Mode::empty())?;
            let (was, is) = (rustix::fs::fstat(&location)?, rustix::fs::fstat(&fd)?);
            if (was.st_dev, was.st_ino) != (is.st_dev, is.st_ino) {
                return Err(std::io::Error::other("a directory changed while it was removed"));
            }
            return Ok(fd);
        }
        Err(e) => return Err(e.into()),
    };
    if rustix::fs::fstat(&fd)?.st_mode & 0o700 != 0o700 {
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700))?;
    }
    Ok(fd)
}

/// The flags of a location-only descriptor of a directory, never a link (`O_PATH`).
#[cfg(target_os = "linux")]
fn locate() -> rustix::fs::OFlags {
    use rustix::fs::OFlags;
    OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

#[cfg(not(target_os = "linux"))]
fn locate() -> rustix::fs::OFlags {
    use rustix::fs::OFlags;
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Set the mode of what the location-only descriptor `location` names: `fchmodat2` on it
/// (Linux 6.6), else its `/proc/self/fd` entry, which names that very file whatever its path
/// became (never a link: the descriptor was opened without following one).
#[cfg(target_os = "linux")]
fn chmod_location(location: &std::os::fd::OwnedFd, mode: u32) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fchmodat2 reads a NUL-terminated empty path literal; the descriptor is open.
    let done =
        unsafe { libc::syscall(libc::SYS_fchmodat2, location.as_raw_fd(), c"".as_ptr(), mode, libc::AT_EMPTY_PATH) };
    if done == 0 { Ok(()) } else { chmod_through_proc(location, mode) }
}

/// `chmod` of `/proc/self/fd/N`: a location-only descriptor's file, on a kernel before 6.6.
#[cfg(target_os = "linux")]
fn chmod_through_proc(location: &std::os::fd::OwnedFd, mode: u32) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let proc = format!("/proc/self/fd/{}", location.as_raw_fd());
    Ok(rustix::fs::chmod(proc.as_str(), rustix::fs::Mode::from_raw_mode(mode))?)
}

#[cfg(not(target_os = "linux"))]
fn chmod_location(location: &std::os::fd::OwnedFd, mode: u32) -> std::io::Result<()> {
    Ok(rustix::fs::fchmod(location, rustix::fs::Mode::from_raw_mode(mode))?)
}

/// Move the directory `name` in `at` to `top` under a name of packs' own (unlocked first: a
/// directory moved needs its own write right, for its `..`).
fn move_up(
    at: std::os::fd::BorrowedFd<'_>,
    name: &std::ffi::CStr,
    top: std::os::fd::BorrowedFd<'_>,
    deep: &mut u64,
) -> std::io::Result<()> {
    drop(unlocked(at, name)?);
    loop {
        *deep += 1;
        let to = format!(".packs-deep-{deep}");
        match rustix::fs::renameat_with(at, name, top, to.as_str(), rustix::fs::RenameFlags::NOREPLACE) {
            Err(rustix::io::Errno::EXIST) => {}
            done => return Ok(done?),
        }
    }
}

#[cfg(test)]
mod private_dir_tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::PrivateDir;

    #[test]
    fn a_private_dir_is_the_owners_alone_unguessable_and_removed_when_dropped() {
        let base = tempfile::tempdir().unwrap();
        let (a, b) = (PrivateDir::new_in(base.path()).unwrap(), PrivateDir::new_in(base.path()).unwrap());
        for dir in [&a, &b] {
            let meta = std::fs::metadata(dir.path()).unwrap();
            assert!(meta.is_dir());
            assert_eq!(meta.mode() & 0o7777, 0o700, "{}", dir.path().display());
            let name = dir.path().file_name().unwrap().to_str().unwrap();
            let random = name.strip_prefix(PrivateDir::PREFIX).unwrap();
            assert!(random.len() == 24 && random.bytes().all(|c| c.is_ascii_hexdigit()), "{name}");
            assert_eq!(dir.path().parent(), Some(base.path()));
        }
        assert_ne!(a.path(), b.path());
        // A tool's leftovers, a subdirectory it locked among them, go with it.
        let (a_path, b_path) = (a.path().to_owned(), b.path().to_owned());
        std::fs::create_dir_all(b_path.join("x/y")).unwrap();
        std::fs::write(b_path.join("x/y/f"), "f").unwrap();
        std::fs::set_permissions(b_path.join("x"), std::fs::Permissions::from_mode(0o000)).unwrap();
        drop((a, b));
        assert!(!a_path.exists() && !b_path.exists());
        assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 0);
    }

    /// Run `f` in a thread of its own without the capabilities that let root ignore a file's
    /// mode (`CAP_DAC_OVERRIDE`, `CAP_DAC_READ_SEARCH`, `CAP_FOWNER`): capabilities belong to a
    /// thread, so that thread meets modes as any other user does, whether the tests run as root
    /// (CI) or not. Checked: a directory of mode 000 cannot be opened there.
    fn as_a_user<T: Send>(f: impl FnOnce() -> T + Send) -> T {
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        std::thread::scope(|s| {
            s.spawn(|| {
                // _LINUX_CAPABILITY_VERSION_3; pid 0 is this thread.
                let mut header = Header { version: 0x2008_0522, pid: 0 };
                let mut data = [Data::default(); 2];
                // SAFETY: capget/capset read and write one header and two data structs, alive here.
                unsafe {
                    assert_eq!(libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()), 0);
                    // CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER (linux/capability.h).
                    let dac: u32 = 1 << 1 | 1 << 2 | 1 << 3;
                    data[0].effective &= !dac;
                    assert_eq!(libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()), 0);
                }
                let probe = tempfile::tempdir().unwrap();
                std::fs::set_permissions(probe.path(), std::fs::Permissions::from_mode(0o000)).unwrap();
                let refused = std::fs::read_dir(probe.path()).is_err();
                std::fs::set_permissions(probe.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
                assert!(refused, "this thread still reads a directory of mode 000");
                f()
            })
            .join()
            .unwrap()
        })
    }

    /// The directories `a/b/c/d` under `root`, a file in each, every one locked (mode 000), and
    /// one `ro` (mode 0500, listed but nothing in it removable). Links to `outside` (a file
    /// and a directory of mode 0555) sit at the top and inside the innermost.
    fn lock_a_tree(root: &std::path::Path, outside: &std::path::Path) {
        let deepest = root.join("a/b/c/d");
        std::fs::create_dir_all(&deepest).unwrap();
        std::fs::create_dir(root.join("ro")).unwrap();
        std::fs::write(root.join("ro/kept"), "x").unwrap();
        for dir in [root.join("a"), root.join("a/b"), root.join("a/b/c"), deepest.clone()] {
            std::fs::write(dir.join("blob"), vec![b'x'; 4096]).unwrap();
        }
        for (at, name) in [(root, "top"), (deepest.as_path(), "deep")] {
            std::os::unix::fs::symlink(outside.join("file"), at.join(format!("{name}-file"))).unwrap();
            std::os::unix::fs::symlink(outside.join("dir"), at.join(format!("{name}-dir"))).unwrap();
            std::fs::hard_link(outside.join("file"), at.join(format!("{name}-hard"))).unwrap();
        }
        std::fs::set_permissions(root.join("ro"), std::fs::Permissions::from_mode(0o500)).unwrap();
        for dir in ["a/b/c/d", "a/b/c", "a/b", "a"] {
            std::fs::set_permissions(root.join(dir), std::fs::Permissions::from_mode(0o000)).unwrap();
        }
    }

    /// What `lock_a_tree` links to: a file and a directory (mode 0555, holding a file).
    fn outside(base: &std::path::Path) -> std::path::PathBuf {
        let outside = base.join("outside");
        std::fs::create_dir_all(outside.join("dir")).unwrap();
        std::fs::write(outside.join("file"), "keep").unwrap();
        std::fs::write(outside.join("dir/inner"), "keep").unwrap();
        std::fs::set_permissions(outside.join("dir"), std::fs::Permissions::from_mode(0o555)).unwrap();
        outside
    }

    fn outside_is_intact(outside: &std::path::Path) {
        assert_eq!(std::fs::read_to_string(outside.join("file")).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(outside.join("dir/inner")).unwrap(), "keep");
        assert_eq!(std::fs::metadata(outside.join("dir")).unwrap().mode() & 0o7777, 0o555);
        assert_eq!(std::fs::metadata(outside.join("file")).unwrap().mode() & 0o7777, 0o644);
    }

    #[test]
    fn a_tree_the_tool_locked_at_every_level_goes_with_its_private_dir_links_not_followed() {
        let base = tempfile::tempdir().unwrap();
        let outside = outside(base.path());
        let path = as_a_user(|| {
            let dir = PrivateDir::new_in(base.path()).unwrap();
            let path = dir.path().to_owned();
            lock_a_tree(&path, &outside);
            // The tool may lock its TMPDIR itself too.
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
            drop(dir);
            path
        });
        assert!(!path.exists(), "{} was left behind", path.display());
        outside_is_intact(&outside);
        std::fs::set_permissions(outside.join("dir"), std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_tree_thousands_of_levels_deep_goes_with_its_private_dir() {
        use rustix::fs::{Mode, OFlags};
        let base = tempfile::tempdir().unwrap();
        let path = as_a_user(|| {
            let dir = PrivateDir::new_in(base.path()).unwrap();
            let path = dir.path().to_owned();
            // Deeper than a path can name (PATH_MAX), and than a process may hold descriptors
            // (1024): made one level at a time, every 100th level locked once its child is made.
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let mut at = rustix::fs::open(&path, flags, Mode::empty()).unwrap();
            for level in 0..2_000 {
                rustix::fs::mkdirat(&at, "d", Mode::from_raw_mode(0o700)).unwrap();
                std::fs::write(format!("/proc/self/fd/{}/f", std::os::fd::AsRawFd::as_raw_fd(&at)), "x").unwrap();
                let next = rustix::fs::openat(&at, "d", flags, Mode::empty()).unwrap();
                if level % 100 == 0 {
                    rustix::fs::fchmod(&at, Mode::empty()).unwrap();
                }
                at = next;
            }
            drop(at);
            drop(dir);
            path
        });
        assert!(!path.exists(), "{} was left behind", path.display());
    }

    #[test]
    fn a_base_another_user_could_swap_the_dir_in_is_refused_naming_it() {
        let base = tempfile::tempdir().unwrap();
        let mode = |m| std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(m)).unwrap();
        let refused = |why: &str| {
            let e = PrivateDir::new_in(base.path()).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
            let said = e.to_string();
            assert!(said.contains(&base.path().display().to_string()) && said.contains(why), "{said}");
            assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 0, "a directory was made: {said}");
        };
        mode(0o777);
        refused("writable by every user without the sticky bit (mode 777)");
        // Sticky (as /tmp and /dev/shm are), or group-writable but packs' user's own: taken.
        for ok in [0o1777, 0o775, 0o2770] {
            mode(ok);
            drop(PrivateDir::new_in(base.path()).unwrap());
        }
    }

    /// A base another user owns: its owner can rename what is in it whatever its mode. Root
    /// makes one (`chown`); `.ci/run` runs the tests that need root.
    #[test]
    #[ignore = "needs root (chown to another user)"]
    fn a_base_another_user_owns_is_refused_naming_it() {
        let base = tempfile::tempdir().unwrap();
        std::os::unix::fs::chown(base.path(), Some(54321), None).expect("chown needs root");
        for other in [0o755, 0o775, 0o1777] {
            std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(other)).unwrap();
            let e = PrivateDir::new_in(base.path()).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
            let said = e.to_string();
            assert!(said.contains(&base.path().display().to_string()), "{said}");
            assert!(said.contains("owned by another user (uid 54321)"), "{said}");
            assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 0, "a directory was made: {said}");
        }
        std::os::unix::fs::chown(base.path(), Some(0), None).unwrap();
    }

    #[test]
    fn a_base_is_judged_by_who_may_rename_in_it() {
        use super::unsafe_base;
        let me = (1000, 1000);
        let (mine, my_group, root, other, staff) = ((1000, 1000), (1000, 50), (0, 0), (1001, 1001), (0, 50));
        // Packs' user's own, or root's, and no one else may write it unless it is sticky.
        let taken = [
            (mine, 0o700),
            (mine, 0o755),
            (mine, 0o775),
            (mine, 0o2775),
            (mine, 0o1777),
            (my_group, 0o755),
            (my_group, 0o1775),
            (root, 0o755),
            (root, 0o1777),
            (staff, 0o1775),
        ];
        for (owner, mode) in taken {
            assert_eq!(unsafe_base(owner, 0o040_000 | mode, me), None, "{owner:?} {mode:o}");
        }
        let refused = [
            (other, 0o700, "owned by another user (uid 1001)"),
            (other, 0o1777, "owned by another user"),
            (mine, 0o777, "writable by every user without the sticky bit (mode 777)"),
            (root, 0o777, "writable by every user"),
            (my_group, 0o775, "writable by its group (gid 50) without the sticky bit (mode 775)"),
            (staff, 0o775, "writable by its group (gid 50)"),
            (root, 0o2775, "writable by its group (gid 0)"),
        ];
        for (owner, mode, why) in refused {
            let said = unsafe_base(owner, 0o040_000 | mode, me).unwrap_or_default();
            assert!(said.contains(why), "{owner:?} {mode:o}: {said}");
        }
        // Root runs packs: another user's base is refused, and one every user may swap in.
        assert_eq!(unsafe_base(root, 0o040_775, root), None);
        assert!(unsafe_base(root, 0o040_777, root).is_some());
        assert!(unsafe_base(mine, 0o040_700, root).is_some());
    }

    #[test]
    fn a_locked_directory_is_unlocked_by_a_descriptor_that_never_follows_a_link() {
        use rustix::fs::{Mode, OFlags};
        let base = tempfile::tempdir().unwrap();
        let locked = base.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        std::os::unix::fs::symlink(&locked, base.path().join("link")).unwrap();
        let at = rustix::fs::open(base.path(), OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        // A link is not opened (so not unlocked) in the directory's place.
        assert!(super::unlocked(std::os::fd::AsFd::as_fd(&at), c"link").is_err());
        // Both ways of setting a location-only descriptor's mode: fchmodat2, and /proc.
        let location = rustix::fs::openat(&at, "locked", super::locate(), Mode::empty()).unwrap();
        super::chmod_through_proc(&location, 0o500).unwrap();
        assert_eq!(std::fs::metadata(&locked).unwrap().mode() & 0o7777, 0o500);
        super::chmod_location(&location, 0o000).unwrap();
        assert_eq!(std::fs::metadata(&locked).unwrap().mode() & 0o7777, 0o000);
        drop(super::unlocked(std::os::fd::AsFd::as_fd(&at), c"locked").unwrap());
        assert_eq!(std::fs::metadata(&locked).unwrap().mode() & 0o7777, 0o700);
    }

    #[test]
    fn a_private_dir_is_made_where_asked_or_not_at_all() {
        let base = tempfile::tempdir().unwrap();
        let missing = base.path().join("missing");
        assert_eq!(PrivateDir::new_in(&missing).unwrap_err().kind(), std::io::ErrorKind::NotFound);
        assert!(!missing.exists());
        // A relative base is made absolute (the tool's TMPDIR is read from anywhere).
        let here = std::env::current_dir().unwrap();
        let dir = PrivateDir::new_in(std::path::Path::new(".")).unwrap();
        assert!(dir.path().is_absolute() && dir.path().starts_with(&here), "{}", dir.path().display());
    }
}

/// Two sandboxes are the same only if they are one (each holds its own descriptors).
impl PartialEq for Prepared {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Prepared {}

impl Prepared {
    /// Build what `enforcement` needs: the temp dir, the Landlock ruleset, the seccomp program.
    pub(crate) fn new(enforcement: &Enforcement) -> std::io::Result<Self> {
        let tmpdir = match &enforcement.writes_under {
            Some(_) => Some(PrivateDir::new_in(&temp_base())?),
            None => None,
        };
        let inner = imp::Inner::new(enforcement, tmpdir.as_ref())?;
        Ok(Self { tmpdir, inner })
    }

    /// Whether anything is entered in the child.
    pub(crate) fn confines(&self) -> bool {
        self.inner.confines()
    }

    /// Restrict the calling process: run in the child between `fork` and `exec`. Only
    /// system calls; nothing allocates.
    pub(crate) fn enter(&self) -> std::io::Result<()> {
        self.inner.enter()
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::path::Path;
    use std::sync::Arc;

    use landlock::{ABI, AccessFs, BitFlags, CompatLevel, Compatible, Ruleset, RulesetAttr, Scope};
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    };

    use super::{Enforcement, PrivateDir, Signals, Support};

    /// Character devices a confined tool may still write (and truncate: `> /dev/null`).
    const DEVICES: &[&str] = &["/dev/null", "/dev/zero"];

    pub(super) fn probe() -> Support {
        // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only
        // returns the ABI version (or an error); it touches no memory.
        let abi = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32) };
        // SAFETY: PR_GET_SECCOMP reads this thread's seccomp mode; no memory is passed.
        let seccomp = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) } >= 0;
        Support { landlock_abi: i32::try_from(abi).unwrap_or(0).max(0), seccomp }
    }

    #[derive(Debug)]
    pub(super) struct Inner {
        ruleset: Option<OwnedFd>,
        filter: Option<&'static BpfProgram>,
        /// The read confinement: a Landlock domain of its own, entered after the call's.
        reads: Option<std::sync::Arc<OwnedFd>>,
        /// Reads narrowed (`policy.readable`): a third domain, built for the call.
        narrow: Option<OwnedFd>,
    }

    /// The write rights handled: every one this kernel knows up to ABI 5, whose `IoctlDev`
    /// keeps a confined tool from driving a device it opens (a terminal's `TIOCSTI`).
    fn write_access(abi: i32) -> BitFlags<AccessFs> {
        AccessFs::from_write(ABI::from(abi.min(5)))
    }

    impl Inner {
        pub(super) fn new(enforcement: &Enforcement, tmpdir: Option<&PrivateDir>) -> std::io::Result<Self> {
            let reads = match &enforcement.reads_denied {
                Some(denied) if !denied.is_empty() => Some(read_ruleset(enforcement.landlock_abi, denied)?),
                _ => None,
            };
            // The control plane, and the paths no read reaches: a tool that may write a
            // store's parent (a workspace that is `$HOME`, `~/.cargo`) must not rename,
            // remove or replace the store, or create an entry at its name, since a store
            // moved elsewhere would read in the next call.
            let mut protected = enforcement.needs.as_ref().map_or_else(Vec::new, |n| n.protected.clone());
            if let Some((_, resolved)) = &reads {
                protected.extend(resolved.iter().cloned());
            }
            let writes = enforcement.writes_under.as_deref().map(|dirs| (dirs, tmpdir));
            let scoped = enforcement.signals == Signals::OwnCall;
            let unix = enforcement.no_abstract_unix;
            let ruleset = (writes.is_some() || scoped || unix)
                .then(|| ruleset(enforcement.landlock_abi, writes, &protected, scoped, unix))
                .transpose()?;
            let not_packs = enforcement.signals == Signals::NotPacks;
            let filter = (enforcement.no_network || not_packs || enforcement.no_typing || enforcement.no_unix)
                .then(|| program(enforcement.no_network, not_packs, enforcement.no_unix))
                .transpose()?;
            let narrow = match &enforcement.reads_only {
                Some(places) => {
                    let writable = enforcement.writes_under.as_deref().unwrap_or_default();
                    let denied = reads.as_ref().map_or(&[][..], |(_, resolved)| resolved);
                    Some(narrow_ruleset(enforcement.landlock_abi, places, writable, tmpdir, denied)?)
                }
                None => None,
            };
            let reads = reads.map(|(fd, _)| fd);
            Ok(Self { ruleset, filter, reads, narrow })
        }

        pub(super) fn confines(&self) -> bool {
            self.ruleset.is_some() || self.filter.is_some() || self.reads.is_some() || self.narrow.is_some()
        }

        pub(super) fn enter(&self) -> std::io::Result<()> {
            // SAFETY: plain system calls with integer arguments; the ruleset descriptor is
            // open (owned by `self`, which outlives the spawn).
            unsafe {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Smallest first: each domain the kernel makes holds a copy of every rule of
                // the domains entered before it (and frees them when the tool exits), so the
                // read domain, the one with a rule per entry beside each protected path, comes
                // last and is copied once rather than twice.
                for fd in [&self.ruleset, &self.narrow].into_iter().flatten().chain(self.reads.as_deref()) {
                    if libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
            }
            if let Some(filter) = self.filter {
                seccompiler::apply_filter(filter).map_err(|e| match e {
                    seccompiler::Error::Prctl(io) | seccompiler::Error::Seccomp(io) => io,
                    _ => std::io::Error::from_raw_os_error(libc::EINVAL),
                })?;
            }
            Ok(())
        }
    }

    /// The Landlock ruleset: the write rights handled (with `dirs`, the temp dir and the
    /// devices as exceptions, but never the `protected` control plane) when `writes` is
    /// given; signals scoped to the domain when `scoped` (the kernel has ABI 6), and
    /// abstract Unix sockets when `unix` (a tool without the network, ABI 6).
    fn ruleset(
        abi: i32,
        writes: Option<(&[std::path::PathBuf], Option<&PrivateDir>)>,
        protected: &[std::path::PathBuf],
        scoped: bool,
        unix: bool,
    ) -> std::io::Result<OwnedFd> {
        let access = write_access(abi);
        let error =
            |e: landlock::RulesetError| std::io::Error::other(format!("cannot build the Landlock ruleset: {e}"));
        let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
        if writes.is_some() {
            ruleset = ruleset.handle_access(access).map_err(error)?;
        }
        if scoped {
            ruleset = ruleset.scope(Scope::Signal).map_err(error)?;
        }
        if unix {
            ruleset = ruleset.scope(Scope::AbstractUnixSocket).map_err(error)?;
        }
        let ruleset = created(ruleset.create().map_err(error)?)?;
        let Some((dirs, tmpdir)) = writes else { return Ok(ruleset) };
        let file_access = access & (AccessFs::WriteFile | AccessFs::Truncate);
        // The private TMPDIR: the directory made and checked, by the descriptor it was opened
        // with (nothing of packs' own lies in a directory just made).
        if let Some(tmpdir) = tmpdir {
            add_rule(&ruleset, &tmpdir.fd(), access)?;
        }
        for dir in dirs {
            // A declared writable place (a cache) may not exist yet: the tool could not
            // create it once confined.
            std::fs::create_dir_all(dir)?;
            let real = std::fs::canonicalize(dir)?;
            // The place, or (when packs' own configuration lies inside it) all of it but that.
            // Each opened without following links and checked (`grants::grants`): the rule
            // names what was checked, not the path looked up again.
            let granted = crate::grants::grants(&real, protected)
                .map_err(|e| std::io::Error::other(format!("{}: {e}", real.display())))?;
            for crate::grants::Opened { grant, fd } in granted {
                let rights = match grant {
                    crate::grants::Grant::Tree(_) => access,
                    crate::grants::Grant::File(_) => file_access,
                };
                add_rule(&ruleset, &fd, rights)?;
            }
        }
        for device in DEVICES {
            if let Ok(fd) = open_path(Path::new(device)) {
                add_rule(&ruleset, &fd, file_access)?;
            }
        }
        Ok(ruleset)
    }

    /// A created ruleset as its descriptor, which [`add_rule`] adds rules to.
    fn created(ruleset: landlock::RulesetCreated) -> std::io::Result<OwnedFd> {
        Option::<OwnedFd>::from(ruleset).ok_or_else(|| std::io::Error::other("Landlock gave no ruleset"))
    }

    /// `path` opened as a location only (`O_PATH`), as a rule names it.
    fn open_path(path: &Path) -> std::io::Result<OwnedFd> {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_PATH).open(path).map(OwnedFd::from)
    }

    /// Allow `rights` beneath `fd` in `ruleset`: one `landlock_add_rule`. The caller knows
    /// whether `fd` is a directory (a grant's kind, or its own `fstat`) and passes a file only
    /// rights a file can have; the landlock crate's `add_rule` makes an `fstat` per rule to
    /// learn it, which a read ruleset of dozens of rules paid at every cold build. `rights`
    /// must be handled by the ruleset (the kernel refuses the rule otherwise, as it refuses
    /// directory rights on a file: the call fails, it is not run less confined).
    fn add_rule(ruleset: &OwnedFd, fd: &impl AsRawFd, rights: BitFlags<AccessFs>) -> std::io::Result<()> {
        /// `struct landlock_path_beneath_attr` (linux/landlock.h).
        #[repr(C, packed)]
        struct PathBeneathAttr {
            allowed_access: u64,
            parent_fd: i32,
        }
        /// `LANDLOCK_RULE_PATH_BENEATH`.
        const PATH_BENEATH: libc::c_int = 1;
        let attr = PathBeneathAttr { allowed_access: rights.bits(), parent_fd: fd.as_raw_fd() };
        // SAFETY: landlock_add_rule reads one path-beneath attribute from a live stack value;
        // both descriptors are open for the duration of the call.
        let done = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                ruleset.as_raw_fd(),
                PATH_BENEATH,
                std::ptr::from_ref(&attr),
                0u32,
            )
        };
        if done == 0 {
            Ok(())
        } else {
            let e = std::io::Error::last_os_error();
            Err(std::io::Error::other(format!("cannot add a Landlock rule: {e}")))
        }
    }

    // ---- Reads (docs/SANDBOX.md, "Credential stores"): a ruleset of its own, kept per process.

    /// The read rights handled: reading and executing files, listing directories, and
    /// `REFER` (ABI 2), so that no link or rename gives a denied file read rights elsewhere.
    fn read_access(abi: i32) -> BitFlags<AccessFs> {
        let mut access = AccessFs::ReadFile | AccessFs::ReadDir | AccessFs::Execute;
        if abi >= 2 {
            access |= AccessFs::Refer;
        }
        access
    }

    /// The rulesets built (16 at most), by the paths they deny, with the walk that built them
    /// and the paths as they were resolved then. Looked up by comparing lists, most recent
    /// last: a list is the same one at each call, and equal paths compare as bytes, where
    /// hashing a list hashes each path a component at a time.
    type ReadRulesets = Vec<(Vec<std::path::PathBuf>, (crate::reads::Walk, Arc<OwnedFd>, Resolved))>;

    /// Denied paths as the rules around them were built, and each link crossed on the way
    /// (see [`crate::reads::denied`]).
    type Resolved = Arc<[std::path::PathBuf]>;

    /// The read ruleset denying `denied`, and `denied` resolved: built once per process and
    /// list, rebuilt (the paths resolved again) when a directory on the way to a denied
    /// path changed (a new entry there is granted then, a new store denied).
    fn read_ruleset(abi: i32, denied: &[std::path::PathBuf]) -> std::io::Result<(Arc<OwnedFd>, Resolved)> {
        static BUILT: std::sync::Mutex<Option<ReadRulesets>> = std::sync::Mutex::new(None);
        let mut guard = BUILT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let built = guard.get_or_insert_with(Default::default);
        let at = built.iter().rposition(|(list, _)| list.as_slice() == denied);
        if let Some((_, (walk, fd, resolved))) = at.map(|i| &built[i])
            && !walk.changed()
        {
            return Ok((Arc::clone(fd), Arc::clone(resolved)));
        }
        // Rules gone stale are dropped once the lock is let go: closing their walk's inotify
        // instance waits about 8 ms, which the calls waiting for the lock need not.
        let mut stale = at.map(|i| built.remove(i).1).into_iter().collect::<Vec<_>>();
        // The walk is taken first: a change made while the rules are built is seen next time.
        let (resolved, mut walk) = if super::ONE_CALL.load(std::sync::atomic::Ordering::Relaxed) {
            (crate::reads::denied(denied), crate::reads::Walk::unrecorded())
        } else {
            crate::reads::Walk::resolved(denied)
        };
        let resolved: Resolved = resolved.into();
        let fd = Arc::new(build_read_ruleset(abi, &resolved, &mut walk)?);
        if built.len() >= 16 {
            stale.extend(built.drain(..).map(|(_, kept)| kept));
        }
        built.push((denied.to_vec(), (walk, Arc::clone(&fd), Arc::clone(&resolved))));
        drop(guard);
        drop(stale);
        Ok((fd, resolved))
    }

    /// An empty Landlock ruleset handling `access` (the read rights), every right required.
    fn new_read_ruleset(access: BitFlags<AccessFs>) -> std::io::Result<OwnedFd> {
        let error =
            |e: landlock::RulesetError| std::io::Error::other(format!("cannot build the Landlock read ruleset: {e}"));
        created(
            Ruleset::default()
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(access)
                .map_err(error)?
                .create()
                .map_err(error)?,
        )
    }

    /// `walk` is told each file granted by a rule of its own: a name given to it later (a
    /// hard link made in a store) is a change.
    fn build_read_ruleset(
        abi: i32,
        denied: &[std::path::PathBuf],
        walk: &mut crate::reads::Walk,
    ) -> std::io::Result<OwnedFd> {
        let access = read_access(abi);
        let ruleset = new_read_ruleset(access)?;
        // Listing (names, not contents) and linking everywhere; reading and executing around
        // the denied paths.
        let root = open_path(Path::new("/")).map_err(|e| std::io::Error::other(format!("/: {e}")))?;
        add_rule(&ruleset, &root, access & (AccessFs::ReadDir | AccessFs::Refer))?;
        let file = AccessFs::ReadFile | AccessFs::Execute;
        // An entry that went away, that this user cannot reach, or that is or became a link:
        // not granted (`grants::grants` opens each without following it).
        let granted =
            crate::grants::grants(Path::new("/"), denied).map_err(|e| std::io::Error::other(format!("/: {e}")))?;
        for crate::grants::Opened { grant, fd } in granted {
            let rights = match grant {
                crate::grants::Grant::Tree(_) => access,
                crate::grants::Grant::File(path) => {
                    walk.granted(&path, std::os::fd::AsFd::as_fd(&fd));
                    file
                }
            };
            add_rule(&ruleset, &fd, rights)?;
        }
        Ok(ruleset)
    }

    /// The narrowed reads of `policy.readable`: reading, listing and executing only beneath
    /// `places`, the writable places, the call's TMPDIR, packs' `PATH` directories and
    /// [`crate::reads::SYSTEM_READABLE`]. Built for each call (the TMPDIR is the call's own).
    fn narrow_ruleset(
        abi: i32,
        places: &[std::path::PathBuf],
        writable: &[std::path::PathBuf],
        tmpdir: Option<&PrivateDir>,
        denied: &[std::path::PathBuf],
    ) -> std::io::Result<OwnedFd> {
        let access = read_access(abi);
        let ruleset = new_read_ruleset(access)?;
        let homes = crate::reads::resolve(crate::reads::homes());
        let path_dirs = crate::reads::path_dirs(std::env::var_os("PATH").as_deref(), &homes, denied);
        let system = crate::reads::SYSTEM_READABLE.iter().map(Path::new);
        let all = places.iter().chain(writable).chain(&path_dirs).map(std::path::PathBuf::as_path).chain(system);
        // The call's TMPDIR by the descriptor it was made and checked with.
        if let Some(tmpdir) = tmpdir {
            add_rule(&ruleset, &tmpdir.fd(), access)?;
        }
        for place in all {
            // A place that does not exist (yet) is not granted: nothing beneath it reads.
            let Ok(fd) = open_path(place) else { continue };
            // The descriptor's own type (one `fstat`), not the path's looked up again.
            // SAFETY: fstat on an open descriptor into a zeroed stat buffer it fills.
            let is_dir = unsafe {
                let mut stat: libc::stat = std::mem::zeroed();
                libc::fstat(fd.as_raw_fd(), &raw mut stat) == 0 && stat.st_mode & libc::S_IFMT == libc::S_IFDIR
            };
            let rights = if is_dir { access } else { access & (AccessFs::ReadFile | AccessFs::Execute) };
            add_rule(&ruleset, &fd, rights)?;
        }
        Ok(ruleset)
    }

    /// The bit that marks an x32 system call on x86_64.
    const X32: i64 = 0x4000_0000;

    /// Whether this kernel runs x32 system calls (probed with an x32 `getpid`, which
    /// fails with ENOSYS when the kernel lacks the ABI).
    fn x32_enabled() -> bool {
        // SAFETY: getpid takes no arguments and touches no memory.
        cfg!(target_arch = "x86_64") && unsafe { libc::syscall(X32 | libc::SYS_getpid) } > 0
    }

    /// The seccomp program for a call: refusing the terminal `ioctl`s that type (always),
    /// network sockets (`no_network`), signals aimed at packs (`not_packs`), Unix-domain
    /// sockets (`no_unix`). Each of the eight is built once per process.
    fn program(no_network: bool, not_packs: bool, no_unix: bool) -> std::io::Result<&'static BpfProgram> {
        type Built = std::sync::OnceLock<Result<BpfProgram, String>>;
        static PROGRAMS: [Built; 8] = [const { Built::new() }; 8];
        let slot = usize::from(no_network) | usize::from(not_packs) << 1 | usize::from(no_unix) << 2;
        PROGRAMS[slot]
            .get_or_init(|| build(no_network, not_packs, no_unix).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| std::io::Error::other(format!("cannot build the seccomp filter: {e}")))
    }

    /// A rule matching when argument `arg` (a 32-bit `pid_t` or `int`) is `value`, and
    /// every other condition of `and`.
    fn equals(arg: u8, value: i32, and: &[SeccompCondition]) -> Result<SeccompRule, seccompiler::BackendError> {
        #[allow(clippy::cast_sign_loss)] // the kernel compares the argument's 32 bits
        let bits = u64::from(value as u32);
        let mut conditions = and.to_vec();
        conditions.push(SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, bits)?);
        SeccompRule::new(conditions)
    }

    /// A rule matching `ioctl` request `request` as the kernel reads it: an `unsigned int`
    /// (`ioctl(2)`'s second argument), so only the argument's low 32 bits are compared and
    /// a request with high bits set does not slip past.
    fn ioctl_request(request: libc::Ioctl) -> Result<SeccompRule, seccompiler::BackendError> {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::unnecessary_cast)]
        let bits = u64::from(request as u32);
        SeccompRule::new(vec![SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, bits)?])
    }

    fn build(no_network: bool, not_packs: bool, no_unix: bool) -> Result<BpfProgram, seccompiler::BackendError> {
        // On x86_64 the x32 ABI (when the kernel has it) reaches the same calls with this
        // bit set in the number: those are refused too.
        let x32: &[i64] = if x32_enabled() { &[0, X32] } else { &[0] };
        let mut rules = std::collections::BTreeMap::new();
        for base in x32 {
            let family = |op, family: i32| {
                SeccompCondition::new(0, SeccompCmpArgLen::Dword, op, u64::try_from(family).unwrap_or_default())
            };
            if no_network {
                // Every family but Unix-domain (unless `no_unix`) and netlink (local to the
                // machine; the C library asks the kernel about interfaces through it): IPv4,
                // IPv6, packet, and also the VM sockets of a hypervisor, Bluetooth, CAN...
                let local: &[i32] = if no_unix { &[libc::AF_NETLINK] } else { &[libc::AF_UNIX, libc::AF_NETLINK] };
                let others = local.iter().map(|f| family(SeccompCmpOp::Ne, *f)).collect::<Result<Vec<_>, _>>()?;
                rules.insert(base | libc::SYS_socket, vec![SeccompRule::new(others)?]);
            } else if no_unix {
                rules.insert(
                    base | libc::SYS_socket,
                    vec![SeccompRule::new(vec![family(SeccompCmpOp::Eq, libc::AF_UNIX)?])?],
                );
            }
            // A Unix socketpair of a connected kind (`SOCK_STREAM`) stays: it reaches nothing
            // outside the call. A datagram pair (`SOCK_DGRAM`, `SOCK_RAW` which is one,
            // `SOCK_SEQPACKET`) would: `sendto` or `connect` names any datagram socket
            // (`/dev/log`, journald, `NOTIFY_SOCKET`). The type's low four bits are the kind
            // (the rest are `SOCK_NONBLOCK`, `SOCK_CLOEXEC`). Without the network, no other
            // family's pair either.
            if no_unix {
                let unix = family(SeccompCmpOp::Eq, libc::AF_UNIX)?;
                let kinds = (0..16).filter(|k| *k != libc::SOCK_STREAM);
                let pairs = kinds
                    .map(|k| {
                        let kind = SeccompCondition::new(
                            1,
                            SeccompCmpArgLen::Dword,
                            SeccompCmpOp::MaskedEq(0xf),
                            u64::try_from(k).unwrap_or_default(),
                        )?;
                        SeccompRule::new(vec![unix.clone(), kind])
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                rules.insert(base | libc::SYS_socketpair, pairs);
            }
            if no_network {
                let others = family(SeccompCmpOp::Ne, libc::AF_UNIX)?;
                rules.entry(base | libc::SYS_socketpair).or_default().push(SeccompRule::new(vec![others])?);
            }
            if no_network || no_unix {
                // io_uring can open sockets of its own (IORING_OP_SOCKET).
                rules.insert(base | libc::SYS_io_uring_setup, Vec::new());
            }
            if not_packs {
                signal_rules(*base, &mut rules)?;
            }
            // Typing into a terminal: `TIOCSTI` pushes bytes into its input as if the user
            // typed them, `TIOCLINUX` (a virtual console) pastes its selection. The tool
            // shares packs' session when packs has no terminal (src/runner.rs), and may open
            // a terminal device: both requests are refused, on any descriptor.
            rules
                .entry(base | libc::SYS_ioctl)
                .or_default()
                .extend([ioctl_request(libc::TIOCSTI)?, ioctl_request(libc::TIOCLINUX)?]);
        }
        let arch = std::env::consts::ARCH.try_into()?;
        let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)?;
        filter.try_into()
    }

    /// `fcntl` and `ioctl` requests that set a descriptor's owner from memory (Linux's
    /// generic values; the `libc` crate does not name them).
    const F_SETOWN_EX: i32 = 15;
    const FIOSETOWN: i32 = 0x8901;
    const SIOCSPGRP: i32 = 0x8902;

    /// Refuse the signals a tool could aim at packs (this process, by its pid, and its
    /// process group, by its id or its leader's pid) or at every process (`kill(-1)`),
    /// where Landlock cannot scope signals. The tool runs in a process group of its own
    /// (and a session of its own when packs has a terminal), so `kill(0)` is its own group. Not covered: another thread's id of packs, other
    /// processes of the user (see docs/SANDBOX.md).
    fn signal_rules(
        base: i64,
        rules: &mut std::collections::BTreeMap<i64, Vec<SeccompRule>>,
    ) -> Result<(), seccompiler::BackendError> {
        // SAFETY: getpid and getpgrp take no arguments and touch no memory.
        let (pid, group) = unsafe { (libc::getpid(), libc::getpgrp()) };
        let mut processes = vec![pid, group];
        processes.dedup();
        // kill: a process (packs, the leader of its group), a group (packs'), everyone.
        let mut kill_targets: Vec<i32> = processes.iter().flat_map(|p| [*p, -*p]).collect();
        kill_targets.push(-1);
        let any = |arg: u8, targets: &[i32], and: &[SeccompCondition]| {
            targets.iter().map(|t| equals(arg, *t, and)).collect::<Result<Vec<_>, _>>()
        };
        rules.insert(base | libc::SYS_kill, any(0, &kill_targets, &[])?);
        // A thread of packs, named by its process (the first argument).
        for call in [libc::SYS_tgkill, libc::SYS_rt_sigqueueinfo, libc::SYS_rt_tgsigqueueinfo, libc::SYS_pidfd_open] {
            rules.insert(base | call, any(0, &processes, &[])?);
        }
        // Any thread by its id alone, and a pidfd (it can come from opening /proc/PID,
        // which no argument shows): refused whoever they name.
        rules.insert(base | libc::SYS_tkill, Vec::new());
        rules.insert(base | libc::SYS_pidfd_send_signal, Vec::new());
        // SIGIO and SIGURG (whose default is to end the process) go to a descriptor's
        // owner: packs or its group as owner is refused, and the ways to set an owner that
        // pass it through memory (F_SETOWN_EX, FIOSETOWN, SIOCSPGRP).
        let setown = SeccompCondition::new(
            1,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            u64::try_from(libc::F_SETOWN).unwrap_or_default(),
        )?;
        let owners: Vec<i32> = processes.iter().flat_map(|p| [*p, -*p]).collect();
        let mut fcntl = any(2, &owners, &[setown])?;
        fcntl.push(equals(1, F_SETOWN_EX, &[])?);
        rules.insert(base | libc::SYS_fcntl, fcntl);
        rules.insert(base | libc::SYS_ioctl, any(1, &[FIOSETOWN, SIOCSPGRP], &[])?);
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::path::Path;

    use super::{Enforcement, Support};

    pub(super) fn probe() -> Support {
        Support { landlock_abi: 0, seccomp: false }
    }

    #[derive(Debug)]
    pub(super) struct Inner;

    impl Inner {
        pub(super) fn new(_: &Enforcement, _: Option<&super::PrivateDir>) -> std::io::Result<Self> {
            Ok(Self)
        }

        pub(super) fn confines(&self) -> bool {
            false
        }

        pub(super) fn enter(&self) -> std::io::Result<()> {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(writes: Writes, network: bool) -> Needs {
        Needs { writes, ..Needs::of(Tier::System, network, Path::new("/"), &[]) }
    }

    #[test]
    fn enforce_refuses_what_the_kernel_cannot_do() {
        let old = Support { landlock_abi: 2, seccomp: true };
        let e = decide(needs(Writes::Under(vec![]), true), SandboxMode::Enforce, old).unwrap_err();
        assert!(e.missing[0].contains("ABI 3"), "{e}");
        let none = Support { landlock_abi: 0, seccomp: false };
        let e = decide(needs(Writes::Anywhere, false), SandboxMode::Enforce, none).unwrap_err();
        assert!(e.missing[0].contains("seccomp"), "{e}");
        // Nothing to confine: nothing missing.
        assert_eq!(decide(needs(Writes::Anywhere, true), SandboxMode::Enforce, none).unwrap().level(), "none");
    }

    #[test]
    fn credential_stores_fail_closed_and_best_effort_says_so() {
        let denied = || needs(Writes::Under(vec![]), false).denying_reads(Some(vec![PathBuf::from("/h/.ssh")]));
        let none = Support { landlock_abi: 0, seccomp: true };
        let e = decide(denied(), SandboxMode::Enforce, none).unwrap_err();
        assert!(e.missing.iter().any(|m| m.contains("credential stores")), "{e}");
        let e = decide(denied(), SandboxMode::BestEffort, none).unwrap();
        assert_eq!((e.level(), e.reads_denied.is_none()), ("partial", true));
        assert!(
            e.describe().contains("not enforced: ") && e.describe().contains("credential stores"),
            "{}",
            e.describe()
        );
        let e = decide(denied(), SandboxMode::Enforce, Support { landlock_abi: 6, seccomp: true }).unwrap();
        assert_eq!(e.reads_denied.as_deref(), Some(&[PathBuf::from("/h/.ssh")][..]));
        assert!(e.describe().contains("credential stores unreadable"), "{}", e.describe());
        // A confined tool that opted out says so.
        let e = decide(
            needs(Writes::Under(vec![]), false),
            SandboxMode::Enforce,
            Support { landlock_abi: 6, seccomp: true },
        );
        assert!(e.unwrap().describe().contains("may read credential stores"));
    }

    #[test]
    fn refusing_unix_sockets_needs_seccomp_and_is_said() {
        let no_unix = || needs(Writes::Anywhere, true).unix_sockets(false);
        let e = decide(no_unix(), SandboxMode::Enforce, Support { landlock_abi: 6, seccomp: false }).unwrap_err();
        assert!(e.missing.iter().any(|m| m.contains("policy.unix_sockets")), "{e}");
        let e = decide(no_unix(), SandboxMode::BestEffort, Support { landlock_abi: 6, seccomp: false }).unwrap();
        assert_eq!((e.level(), e.no_unix), ("partial", false));
        let kernel = Support { landlock_abi: 6, seccomp: true };
        let e = decide(no_unix(), SandboxMode::Enforce, kernel).unwrap();
        assert!(e.no_unix && !e.no_network);
        assert!(e.describe().starts_with("no Unix socket;"), "{}", e.describe());
        let e = decide(needs(Writes::Anywhere, false).unix_sockets(false), SandboxMode::Enforce, kernel).unwrap();
        assert!(e.describe().starts_with("no network, no Unix socket;"), "{}", e.describe());
        let e = decide(needs(Writes::Anywhere, true), SandboxMode::Enforce, kernel).unwrap();
        assert!(!e.no_unix && !e.describe().contains("Unix"), "{}", e.describe());
    }

    #[test]
    fn best_effort_and_off_say_what_is_not_enforced() {
        let old = Support { landlock_abi: 2, seccomp: true };
        let e = decide(needs(Writes::Under(vec![]), false), SandboxMode::BestEffort, old).unwrap();
        assert_eq!(e.level(), "partial");
        assert!(e.no_network);
        assert!(e.writes_under.is_some(), "ABI 2 still confines most writes");
        let off = decide(needs(Writes::Under(vec![]), false), SandboxMode::Off, old).unwrap();
        assert_eq!((off.level(), off.no_network, off.writes_under.is_none()), ("off", false, true));
    }

    #[test]
    fn signals_get_the_best_the_kernel_offers_for_every_tier_and_never_a_refusal() {
        let kernel = |landlock_abi, seccomp| Support { landlock_abi, seccomp };
        let system = || needs(Writes::Anywhere, true);
        for (support, mode, signals, level) in [
            (kernel(6, true), SandboxMode::Enforce, Signals::OwnCall, "enforced"),
            (kernel(5, true), SandboxMode::Enforce, Signals::NotPacks, "enforced"),
            (kernel(0, true), SandboxMode::BestEffort, Signals::NotPacks, "enforced"),
            (kernel(0, false), SandboxMode::Enforce, Signals::Anything, "none"),
            (kernel(7, true), SandboxMode::Off, Signals::Anything, "off"),
        ] {
            let e = decide(system(), mode, support).unwrap();
            assert_eq!((e.signals, e.level()), (signals, level), "{support:?} {mode}");
            assert_eq!(e.describe().contains("signal"), signals != Signals::Anything, "{}", e.describe());
        }
        // A read_only tool on ABI 5: writes confined, packs protected, the rest a gap.
        let e = decide(needs(Writes::Under(vec![]), false), SandboxMode::Enforce, kernel(5, true)).unwrap();
        assert!(!e.signals_confined());
        assert!(e.describe().contains("cannot signal packs"), "{}", e.describe());
    }

    /// An enforcement that confines nothing, to set one restriction at a time.
    fn nothing() -> Enforcement {
        Enforcement {
            mode: SandboxMode::Enforce,
            writes_under: None,
            no_network: false,
            reads_denied: None,
            unenforced: Vec::new(),
            signals: Signals::Anything,
            no_typing: false,
            reads_only: None,
            no_unix: false,
            no_abstract_unix: false,
            needs: None,
            landlock_abi: 0,
        }
    }

    #[test]
    fn modes_rank_enforce_over_best_effort_over_off() {
        let order = [SandboxMode::Off, SandboxMode::BestEffort, SandboxMode::Enforce];
        for (i, a) in order.iter().enumerate() {
            for (j, b) in order.iter().enumerate() {
                assert_eq!(a.is_stricter_than(*b), i > j, "{a:?} than {b:?}");
            }
        }
    }

    #[test]
    fn each_tier_writes_where_it_may_and_the_credential_stores_are_unknown_only_without_a_home() {
        let workspace = tempfile::tempdir().unwrap();
        let cache = vec![PathBuf::from("/cache")];
        let read_only = Needs::of(Tier::ReadOnly, false, workspace.path(), &cache);
        assert_eq!((read_only.writes.clone(), read_only.restricts_writes()), (Writes::Under(cache.clone()), true));
        let own = Needs::of(Tier::Workspace, false, workspace.path(), &cache).writes;
        assert_eq!(own, Writes::Under(vec![workspace.path().canonicalize().unwrap(), PathBuf::from("/cache")]));
        for tier in [Tier::System, Tier::Elevated] {
            let n = Needs::of(tier, true, workspace.path(), &cache);
            assert_eq!((n.writes.clone(), n.restricts_writes()), (Writes::Anywhere, false));
        }
        // Only confined reads, no home, and the default list kept leave the stores unknown.
        for reads in [None, Some(vec![])] {
            for no_home in [false, true] {
                for replaced in [false, true] {
                    let n = read_only
                        .clone()
                        .denying_reads(reads.clone())
                        .without_home(no_home)
                        .reads_list_replaced(replaced, 0);
                    let unknown = reads.is_some() && no_home && !replaced;
                    assert_eq!(n.stores_unknown(), unknown, "{reads:?} {no_home} {replaced}");
                }
            }
        }
    }

    #[test]
    fn any_one_restriction_confines_and_the_level_and_reads_say_which() {
        let e = nothing();
        assert!(!e.confines() && !e.signals_confined());
        assert_eq!((e.level(), e.reads(), e.describe()), ("none", "unconfined", "nothing to confine".to_owned()));
        let each: [fn(&mut Enforcement); 7] = [
            |e| e.writes_under = Some(Vec::new()),
            |e| e.no_network = true,
            |e| e.signals = Signals::NotPacks,
            |e| e.signals = Signals::OwnCall,
            |e| e.reads_denied = Some(Vec::new()),
            |e| e.no_unix = true,
            |e| e.reads_only = Some(Vec::new()),
        ];
        for (i, set) in each.iter().enumerate() {
            let mut e = nothing();
            set(&mut e);
            assert!(e.confines(), "restriction {i}");
            assert_eq!(e.level(), "enforced", "restriction {i}");
            assert_eq!(e.signals_confined(), e.signals == Signals::OwnCall, "restriction {i}");
        }
        let mut e = nothing();
        e.reads_denied = Some(Vec::new());
        assert_eq!(e.reads(), "credentials-denied");
        e.reads_only = Some(Vec::new());
        assert_eq!(e.reads(), "narrowed");
        e.unenforced = vec!["something".to_owned()];
        assert_eq!(e.level(), "partial");
        e.mode = SandboxMode::Off;
        assert_eq!(e.level(), "off");
    }

    #[test]
    fn describe_says_each_restriction_in_its_own_words() {
        let said = |set: &dyn Fn(&mut Enforcement)| {
            let mut e = nothing();
            set(&mut e);
            e.describe()
        };
        assert_eq!(said(&|e| e.writes_under = Some(Vec::new())), "writes only to its private TMPDIR");
        let dirs = || Some(vec![PathBuf::from("/w"), PathBuf::from("/c")]);
        assert_eq!(said(&|e| e.writes_under = dirs()), "writes only under /w, /c and its private TMPDIR");
        let protecting = |paths: &[PathBuf]| Some(needs(Writes::Anywhere, true).protecting(paths));
        assert_eq!(
            said(&|e| {
                e.writes_under = dirs();
                e.needs = protecting(&[PathBuf::from("/elsewhere/.packs")]);
            }),
            "writes only under /w, /c and its private TMPDIR"
        );
        assert_eq!(
            said(&|e| {
                e.writes_under = dirs();
                e.needs = protecting(&[PathBuf::from("/c/.packs")]);
            }),
            "writes only under /w, /c (but packs' own configuration there) and its private TMPDIR"
        );
        // Reads: the default list, the operator's list alone, packs' own secrets alone, nothing.
        let denied = |replaced: bool, own: usize, count: usize| {
            said(&|e| {
                e.reads_denied = Some((0..count).map(|i| PathBuf::from(format!("/d{i}"))).collect());
                e.needs = Some(needs(Writes::Anywhere, true).reads_list_replaced(replaced, own));
            })
        };
        assert_eq!(denied(false, 0, 2), "credential stores unreadable");
        assert_eq!(denied(false, 2, 2), "credential stores unreadable");
        assert_eq!(denied(true, 1, 2), "only the --deny-read paths unreadable (no default list)");
        assert_eq!(denied(true, 2, 2), "reads not restricted but for packs' own secrets (--no-default-deny-read)");
        assert_eq!(denied(true, 0, 0), "reads not restricted (--no-default-deny-read)");
        assert_eq!(
            said(&|e| {
                e.reads_denied = Some(Vec::new());
                e.needs = Some(needs(Writes::Anywhere, true).denying_reads(Some(Vec::new())).without_home(true));
            }),
            "credential stores readable (no home directory)"
        );
        // A tool that writes anywhere says nothing of the stores it may read; a confined one does.
        assert_eq!(said(&|e| e.needs = Some(needs(Writes::Anywhere, true))), "nothing to confine");
        assert_eq!(
            said(&|e| e.needs = Some(needs(Writes::Under(Vec::new()), true))),
            "may read credential stores (policy.reads_credentials)"
        );
        assert_eq!(
            said(&|e| e.reads_only = Some(vec![PathBuf::from("/data"), PathBuf::from("/etc/x.conf")])),
            "reads only /data, /etc/x.conf, its writable places and the system's files"
        );
        for (network, unix, abstract_unix, words) in [
            (true, true, true, "no network, no Unix socket"),
            (true, false, true, "no network, no abstract Unix socket"),
            (true, false, false, "no network"),
            (false, true, true, "no Unix socket"),
            (false, false, true, "nothing to confine"),
        ] {
            let e = said(&|e| {
                e.no_network = network;
                e.no_unix = unix;
                e.no_abstract_unix = abstract_unix;
            });
            assert_eq!(e, words, "{network} {unix} {abstract_unix}");
        }
        assert_eq!(
            said(&|e| {
                e.no_network = true;
                e.signals = Signals::OwnCall;
            }),
            "no network; signals only its own processes"
        );
        assert_eq!(
            said(&|e| e.signals = Signals::NotPacks),
            "cannot signal packs (other processes: needs Landlock ABI 6)"
        );
        assert_eq!(
            said(&|e| {
                e.no_network = true;
                e.unenforced = vec!["one".to_owned(), "two".to_owned()];
            }),
            "no network (not enforced: one; two)"
        );
        assert_eq!(
            said(&|e| {
                e.no_network = true;
                e.mode = SandboxMode::Off;
            }),
            "off: nothing is enforced"
        );
        assert_eq!(stated(&Ok(nothing())), "nothing to confine");
        let refused = Unenforceable { missing: vec!["one".to_owned(), "two".to_owned()] };
        assert_eq!(stated(&Err(refused)), "refused here unless `--sandbox best-effort` or `off`: one; two");
    }

    #[test]
    fn decide_asks_of_the_kernel_only_what_the_call_needs() {
        let kernel = |landlock_abi, seccomp| Support { landlock_abi, seccomp };
        let refused = |needs: Needs, support| decide(needs, SandboxMode::Enforce, support).unwrap_err().missing;
        let taken = |needs: Needs, support| {
            let e = decide(needs, SandboxMode::Enforce, support).unwrap();
            assert_eq!(e.unenforced, Vec::<String>::new());
            e
        };
        let system = || needs(Writes::Anywhere, true);
        let confined = || needs(Writes::Under(vec![PathBuf::from("/w")]), true);
        // Writes: no Landlock, too old a Landlock, enough.
        let missing = refused(confined(), kernel(0, true));
        assert_eq!(missing.len(), 1);
        assert!(
            missing[0].starts_with("confining writes needs Landlock, which this kernel does not offer"),
            "{missing:?}"
        );
        assert_eq!(
            refused(confined(), kernel(2, true)),
            ["confining every kind of write needs Landlock ABI 3 (Linux 6.2), this kernel has ABI 2"]
        );
        assert_eq!(taken(confined(), kernel(3, true)).writes_under, Some(vec![PathBuf::from("/w")]));
        assert_eq!(taken(system(), kernel(2, true)).writes_under, None);
        assert_eq!(taken(system(), kernel(0, true)).landlock_abi, 0);
        // Reads: Landlock ABI 1 is enough; a tool whose reads are free needs none.
        let reading = || system().denying_reads(Some(vec![PathBuf::from("/h/.ssh")]));
        assert_eq!(
            refused(reading(), kernel(0, true)),
            ["keeping credential stores unreadable needs Landlock, which this kernel does not offer"]
        );
        assert_eq!(taken(reading(), kernel(1, true)).reads_denied, Some(vec![PathBuf::from("/h/.ssh")]));
        let narrowed = || system().reading_only(Some(vec![PathBuf::from("/data")]));
        assert_eq!(
            refused(narrowed(), kernel(0, true)),
            ["narrowing reads (policy.readable) needs Landlock, which this kernel does not offer"]
        );
        assert_eq!(taken(narrowed(), kernel(1, true)).reads_only, Some(vec![PathBuf::from("/data")]));
        // Sockets: only a tool without the network, or without Unix sockets, needs seccomp.
        let offline = || needs(Writes::Anywhere, false);
        assert_eq!(
            refused(offline(), kernel(6, false)),
            ["refusing network sockets needs seccomp, which this kernel does not offer"]
        );
        let e = taken(offline(), kernel(0, true));
        assert!(e.no_network && !e.no_unix && e.no_typing);
        let e = taken(system(), kernel(6, false));
        assert!(!e.no_network && !e.no_unix && !e.no_typing);
        let e = taken(system().unix_sockets(false), kernel(0, true));
        assert!(!e.no_network && e.no_unix);
        // Without a home, the stores are unknown: refused, and best effort denies no empty list.
        let homeless = |denied: Vec<PathBuf>| confined().denying_reads(Some(denied)).without_home(true);
        assert_eq!(refused(homeless(Vec::new()), kernel(6, true)).len(), 1);
        let best = |needs: Needs, support| decide(needs, SandboxMode::BestEffort, support).unwrap();
        let e = best(homeless(Vec::new()), kernel(6, true));
        assert_eq!((e.reads_denied.clone(), e.unenforced.len(), e.level()), (None, 1, "partial"));
        assert!(e.describe().contains("no home directory"), "{}", e.describe());
        let own = vec![PathBuf::from("/packs/secrets")];
        assert_eq!(best(homeless(own.clone()), kernel(6, true)).reads_denied, Some(own));
        assert_eq!(taken(confined().denying_reads(Some(Vec::new())), kernel(6, true)).reads_denied, Some(Vec::new()));
        // Best effort without Landlock: nothing of the file system, what seccomp can.
        let e = best(
            confined().denying_reads(Some(vec![PathBuf::from("/h")])).reading_only(Some(Vec::new())),
            kernel(0, true),
        );
        assert_eq!((e.writes_under, e.reads_denied, e.reads_only), (None, None, None));
        assert_eq!(e.unenforced.len(), 3);
        let e = best(offline(), kernel(6, false));
        assert!(!e.no_network && !e.no_typing);
        assert_eq!(e.unenforced.len(), 1);
        // Abstract Unix sockets: a tool without the network, on ABI 6, not under `off`.
        assert!(taken(offline(), kernel(6, true)).no_abstract_unix);
        assert!(!taken(offline(), kernel(5, true)).no_abstract_unix);
        assert!(!taken(system(), kernel(6, true)).no_abstract_unix);
        // `off` keeps nothing: no restriction, no gap, no needs.
        let e = decide(confined().denying_reads(Some(Vec::new())), SandboxMode::Off, kernel(0, false)).unwrap();
        assert_eq!((e.unenforced.len(), e.needs.is_none(), e.level()), (0, true, "off"));
        let e = decide(offline(), SandboxMode::Off, kernel(7, true)).unwrap();
        assert!(!e.no_abstract_unix && !e.no_network && !e.no_typing && e.needs.is_none());
        assert!(taken(offline(), kernel(7, true)).needs.is_some());
    }

    // ---- What a confined process meets: the rules built and entered, for real.

    /// What this kernel enforces for `needs` under `enforce`. The process tests below need
    /// Landlock ABI 3 and seccomp, as `packs run` of a confined tool does (the integration
    /// suite's confined calls fail without them too): a kernel without them fails here, saying so.
    fn enforced(needs: Needs) -> Enforcement {
        let kernel = Support::probe();
        assert!(
            kernel.landlock_abi >= LANDLOCK_ABI_FOR_WRITES && kernel.seccomp,
            "the sandbox's process tests need Landlock ABI {LANDLOCK_ABI_FOR_WRITES} and seccomp; this kernel has \
             Landlock ABI {} and seccomp {}",
            kernel.landlock_abi,
            kernel.seccomp
        );
        decide(needs, SandboxMode::Enforce, kernel).unwrap()
    }

    /// `argv` run as a call's process is, confined by `enforcement`: what it printed on stdout
    /// (it must exit 0).
    fn run_confined(enforcement: &Enforcement, argv: &[&str]) -> String {
        let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".to_owned());
        let plain = crate::runner::Invocation::plain(
            argv.iter().map(|a| (*a).to_owned()).collect(),
            vec![("PATH".to_owned(), path)],
            std::time::Duration::from_secs(60),
            1 << 20,
        );
        let confined = crate::runner::confine(&plain, Some(enforcement)).unwrap().expect("something to confine");
        let out = crate::runner::run(&confined).unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.exit_code, Some(0), "{stderr}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// A hard link between two directories of the call's TMPDIR, which a ruleset that does not
    /// handle Landlock's `REFER` refuses (with `EXDEV`: `mv` would copy instead, and succeed).
    const MOVE: &str =
        r#"mkdir "$TMPDIR/a" "$TMPDIR/b" && echo a > "$TMPDIR/a/f" && ln "$TMPDIR/a/f" "$TMPDIR/b/f" && echo moved"#;

    #[test]
    fn a_read_only_process_writes_its_tmpdir_and_the_devices_and_nothing_else() {
        let e = enforced(Needs::of(Tier::ReadOnly, false, Path::new("/"), &[]));
        let outside = tempfile::tempdir().unwrap();
        let script = format!(
            r#"echo "$TMPDIR"
echo a > "$TMPDIR/f" && echo written
{MOVE}
echo a > /dev/null && : > /dev/zero && echo devices written
(echo a > "$1/f") 2>/dev/null || echo outside refused"#
        );
        let out = run_confined(&e, &["sh", "-c", &script, "sh", outside.path().to_str().unwrap()]);
        let (tmpdir, rest) = out.split_once('\n').unwrap();
        assert_eq!(rest, "written\nmoved\ndevices written\noutside refused\n");
        assert!(!outside.path().join("f").exists());
        // The private TMPDIR: absolute, in a resolved base (`/dev/shm` unless packs has a
        // TMPDIR of its own), and removed with the call.
        let tmpdir = Path::new(tmpdir);
        let base = tmpdir.parent().unwrap();
        assert!(base.is_absolute() && base.canonicalize().unwrap() == base, "{}", tmpdir.display());
        let shm = tempfile::tempdir_in("/dev/shm").is_ok();
        if std::env::var_os("TMPDIR").is_none_or(|t| t.is_empty()) && shm {
            assert_eq!(base, Path::new("/dev/shm"));
        }
        assert!(!tmpdir.exists(), "{} is left", tmpdir.display());
    }

    #[test]
    fn a_prepared_sandbox_equals_itself_only_and_enters_only_what_it_built() {
        let e = enforced(Needs::of(Tier::ReadOnly, false, Path::new("/"), &[]));
        let one = Prepared::new(&e).unwrap();
        let other = Prepared::new(&e).unwrap();
        let same = &one;
        assert!(one.eq(same) && !one.eq(&other));
        assert!(one.confines() && other.confines());
        // Any one part built is entered: the write and signal ruleset, the seccomp program, the
        // read ruleset, the narrowed reads.
        let kernel = Support::probe().landlock_abi;
        let each: [fn(&mut Enforcement); 4] = [
            |e| e.writes_under = Some(Vec::new()),
            |e| e.no_network = true,
            |e| e.reads_denied = Some(vec![PathBuf::from("/nonexistent/packs-test")]),
            |e| e.reads_only = Some(vec![PathBuf::from("/usr")]),
        ];
        for (i, set) in each.iter().enumerate() {
            let mut e = nothing();
            e.landlock_abi = kernel;
            set(&mut e);
            assert!(Prepared::new(&e).unwrap().confines(), "part {i}");
        }
        // An empty list of denied reads builds no rule: nothing to enter.
        let mut empty = nothing();
        empty.reads_denied = Some(Vec::new());
        assert!(empty.confines() && !Prepared::new(&empty).unwrap().confines());
    }

    #[test]
    fn a_denied_file_is_unreadable_and_an_entry_made_beside_it_later_is_readable() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        std::fs::write(dir.join("secret"), "secret\n").unwrap();
        std::fs::write(dir.join("open"), "open\n").unwrap();
        let needs =
            || Needs::of(Tier::ReadOnly, false, Path::new("/"), &[]).denying_reads(Some(vec![dir.join("secret")]));
        let e = enforced(needs());
        let script = format!(
            r#"cat "$1/secret" 2>/dev/null || echo secret refused
cat "$1/open" "$1/later" 2>/dev/null
ls "$1"
{MOVE}"#
        );
        let argv = ["sh", "-c", &script, "sh", dir.to_str().unwrap()];
        assert_eq!(run_confined(&e, &argv), "secret refused\nopen\nopen\nsecret\nmoved\n");
        // The rules are kept for the next call with the same list, unless a directory on the
        // way to a denied path changed: then they are built again, granting the new entry.
        std::fs::write(dir.join("later"), "later\n").unwrap();
        assert_eq!(run_confined(&e, &argv), "secret refused\nopen\nlater\nlater\nopen\nsecret\nmoved\n");
    }

    #[test]
    fn narrowed_reads_reach_the_places_named_directories_or_files_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        std::fs::create_dir(dir.join("place")).unwrap();
        std::fs::write(dir.join("place/f"), "in the place\n").unwrap();
        std::fs::write(dir.join("one"), "one file\n").unwrap();
        std::fs::write(dir.join("other"), "other\n").unwrap();
        let places = vec![dir.join("place"), dir.join("one")];
        let e = enforced(Needs::of(Tier::ReadOnly, false, Path::new("/"), &[]).reading_only(Some(places)));
        let script = r#"cat "$1/place/f" "$1/one"; ls "$1/place"
cat "$1/other" 2>/dev/null || echo other refused
ls "$1" >/dev/null 2>&1 || echo listing refused"#;
        let out = run_confined(&e, &["sh", "-c", script, "sh", dir.to_str().unwrap()]);
        assert_eq!(out, "in the place\none file\nf\nother refused\nlisting refused\n");
    }

    /// Tries each system call seccomp refuses to some tool and prints its name with `ok` or
    /// the error number.
    const PROBE: &str = r#"
import ctypes, fcntl, os, socket, struct, sys, threading
pid, group, uring, tgkill, sigqueue, tgsigqueue, pidfd_open, tkill, pidfd_signal, tioclinux = map(int, sys.argv[1:])
libc = ctypes.CDLL(None, use_errno=True)
def call(name, number, *args):
    print(name, "ok" if libc.syscall(number, *args) >= 0 else ctypes.get_errno())
def t(name, f):
    try:
        f()
        print(name, "ok")
    except OSError as e:
        print(name, e.errno)
t("inet", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
t("unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
t("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))
t("stream pair", lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM))
t("datagram pair", lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM))
call("io_uring", uring, 1, ctypes.create_string_buffer(120))
r, w = os.pipe()
import termios
t("TIOCSTI", lambda: fcntl.ioctl(r, termios.TIOCSTI, b"x"))
t("TIOCLINUX", lambda: fcntl.ioctl(r, tioclinux, b"x"))
t("kill packs", lambda: os.kill(pid, 0))
t("kill group", lambda: os.killpg(group, 0))
t("kill all", lambda: os.kill(-1, 0))
info = ctypes.create_string_buffer(struct.pack("iii", 0, 0, -1), 128)
call("tgkill", tgkill, pid, pid, 0)
call("rt_sigqueueinfo", sigqueue, pid, 0, info)
call("rt_tgsigqueueinfo", tgsigqueue, pid, pid, 0, info)
call("pidfd_open", pidfd_open, pid, 0)
call("tkill", tkill, threading.get_native_id(), 0)
call("pidfd_send_signal", pidfd_signal, -1, 0, None, 0)
s = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)[0]
t("F_SETOWN self", lambda: fcntl.fcntl(s, fcntl.F_SETOWN, os.getpid()))
t("F_SETOWN packs", lambda: fcntl.fcntl(s, fcntl.F_SETOWN, pid))
t("F_SETOWN group", lambda: fcntl.fcntl(s, fcntl.F_SETOWN, -group))
t("F_SETOWN_EX", lambda: fcntl.fcntl(s, 15, struct.pack("ii", 1, os.getpid())))
t("FIOSETOWN", lambda: fcntl.ioctl(s, 0x8901, struct.pack("i", os.getpid())))
t("SIOCSPGRP", lambda: fcntl.ioctl(s, 0x8902, struct.pack("i", os.getpid())))
"#;

    #[test]
    fn each_seccomp_program_refuses_what_its_restrictions_name_and_nothing_more() {
        let base = enforced(Needs::of(Tier::ReadOnly, true, Path::new("/"), &[]));
        // SAFETY: getpid and getpgrp take no arguments and touch no memory.
        let (pid, group) = unsafe { (libc::getpid(), libc::getpgrp()) };
        let numbers = [
            i64::from(pid),
            i64::from(group),
            libc::SYS_io_uring_setup,
            libc::SYS_tgkill,
            libc::SYS_rt_sigqueueinfo,
            libc::SYS_rt_tgsigqueueinfo,
            libc::SYS_pidfd_open,
            libc::SYS_tkill,
            libc::SYS_pidfd_send_signal,
            i64::from(libc::TIOCLINUX as u32),
        ]
        .map(|n| n.to_string());
        let mut argv = vec!["python3", "-c", PROBE];
        argv.extend(numbers.iter().map(String::as_str));
        let uring_native =
            std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled").map_or(true, |d| d.trim() == "0");
        // All eight programs (each built once per process, in a slot of its own), in turn.
        for slot in 0..8 {
            let (network, packs, unix) = (slot & 1 != 0, slot & 2 != 0, slot & 4 != 0);
            let mut e = base.clone();
            e.signals = if packs { Signals::NotPacks } else { Signals::Anything };
            e.no_network = network;
            e.no_unix = unix;
            e.no_abstract_unix = false;
            assert!(e.no_typing);
            let refused = |yes: bool| if yes { "1" } else { "ok" };
            let mut expected = vec![
                ("inet", refused(network)),
                ("unix", refused(unix)),
                ("netlink", "ok"),
                ("stream pair", "ok"),
                ("datagram pair", refused(unix)),
                ("io_uring", refused(network || unix)),
                ("TIOCSTI", "1"),
                ("TIOCLINUX", "1"),
            ];
            for name in [
                "kill packs",
                "kill group",
                "kill all",
                "tgkill",
                "rt_sigqueueinfo",
                "rt_tgsigqueueinfo",
                "pidfd_open",
                "tkill",
            ] {
                expected.push((name, refused(packs)));
            }
            expected.push(("pidfd_send_signal", if packs { "1" } else { "9" }));
            expected.push(("F_SETOWN self", "ok"));
            for name in ["F_SETOWN packs", "F_SETOWN group", "F_SETOWN_EX", "FIOSETOWN", "SIOCSPGRP"] {
                expected.push((name, refused(packs)));
            }
            let out = run_confined(&e, &argv);
            let got: Vec<(&str, &str)> = out.lines().map(|l| l.rsplit_once(' ').unwrap()).collect();
            let got: Vec<_> =
                got.into_iter().filter(|(n, _)| uring_native || *n != "io_uring" || network || unix).collect();
            let expected: Vec<_> =
                expected.into_iter().filter(|(n, _)| uring_native || *n != "io_uring" || network || unix).collect();
            assert_eq!(got, expected, "network {network}, packs {packs}, unix {unix}");
        }
    }

    #[test]
    fn the_probe_finds_seccomp_where_the_kernel_reports_it() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        assert_eq!(Support::probe().seccomp, status.lines().any(|l| l.starts_with("Seccomp:")));
    }
}
