//! The namespace workload: what a client asks the meta service, drawn from a small pool of
//! paths so that concurrent operations collide (one directory's entries, renames across
//! directories, directories moved into their own subtrees).
//!
//! Paths are `/dK` (K < `dirs`) and below them names `nJ` (J < `names`), nested up to the mix's
//! depth. Invariant: every drawn operation names pool paths only, so a checker's reference
//! model stays small. Not here: executing or checking operations (t3fs-sim).

use core::ops::Range;
use core::time::Duration;

use serde::Deserialize;
use t3fs_core::meta::lock::LockAction;
use t3fs_core::meta::request::MetaOp;

use crate::duration::{fmt_duration, parse_range};
use crate::rng::Rng;

/// Which operations a namespace workload favours.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum NsMix {
    /// Every operation type over two levels.
    Mixed,
    /// create / remove / rename / stat / list of names in one directory.
    OneDir,
    /// mkdir -p and directory renames over three levels: moves into a subtree must fail.
    RenameLoops,
    /// Writers open a few files in one directory, write at scattered offsets and truncate
    /// them (client-driven, §4.3) while others write: truncate racing a write.
    Truncate,
}

/// What a writer does with a file it opened for write, in order, before closing it.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum FileAction {
    /// Writes a block at this byte offset.
    Write(u64),
    /// Truncates the file to this length.
    Truncate(u64),
    /// Reads [`FILE_READ_BYTES`] at this byte offset.
    Read(u64),
}

/// Bytes of one read of a plan.
pub const FILE_READ_BYTES: u64 = 256;

/// Modes drawn for new directories and chmod: shared, private, sticky, setgid.
const DIR_PERMS: [u32; 6] = [0o755, 0o777, 0o1777, 0o700, 0o750, 0o2777];

/// Offsets and lengths of file actions stay below this many bytes (four 4 KiB chunks of the
/// simulator's layout).
pub const FILE_SPAN: u64 = 16 * 1024;

impl NsMix {
    /// The name used in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            Self::Mixed => "mixed",
            Self::OneDir => "one-dir",
            Self::RenameLoops => "rename-loops",
            Self::Truncate => "truncate",
        }
    }
}

/// The `[namespace]` section.
#[derive(Clone, Debug, PartialEq)]
pub struct NsWorkload {
    /// Top-level directories in the pool.
    pub dirs: u32,
    /// Names per level.
    pub names: u32,
    /// Operation mix.
    pub mix: NsMix,
    /// Think time between a client's namespace operations.
    pub think: Range<Duration>,
    /// Operations per client (`None`: until the safety phase ends).
    pub ops_per_client: Option<u64>,
    /// How long GC leaves an unlinked file alone (`None`: 3FS's 5 minutes, scaled like the
    /// other timeouts). Shorter is safe only without delayed duplicate frames (module docs of
    /// `core::meta::gc`).
    pub gc_delay: Option<Duration>,
    /// How long meta keeps idempotency records (`None`: 3FS's 30 minutes, scaled); cleaning
    /// runs every quarter of it.
    pub idem_expire: Option<Duration>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNamespace {
    #[serde(default = "two")]
    dirs: u32,
    #[serde(default = "three")]
    names: u32,
    #[serde(default = "mixed")]
    mix: String,
    #[serde(default = "think")]
    think: String,
    ops_per_client: Option<u64>,
    gc_delay: Option<String>,
    idem_expire: Option<String>,
}

fn two() -> u32 {
    2
}
fn three() -> u32 {
    3
}
fn mixed() -> String {
    "mixed".into()
}
fn think() -> String {
    "20ms..200ms".into()
}

impl RawNamespace {
    /// Validates; errors name the field (the caller adds file and line).
    pub(crate) fn validate(self) -> Result<NsWorkload, (&'static str, String)> {
        if self.dirs == 0 || self.dirs > 8 {
            return Err(("dirs", "use 1 to 8".into()));
        }
        if self.names == 0 || self.names > 8 {
            return Err(("names", "use 1 to 8".into()));
        }
        let mix = match self.mix.as_str() {
            "mixed" => NsMix::Mixed,
            "one-dir" => NsMix::OneDir,
            "rename-loops" => NsMix::RenameLoops,
            "truncate" => NsMix::Truncate,
            other => {
                return Err((
                    "mix",
                    format!(
                        "`{other}`: use \"mixed\", \"one-dir\", \"rename-loops\" or \"truncate\""
                    ),
                ))
            }
        };
        let think = parse_range(&self.think).map_err(|m| ("think", m))?;
        let gc_delay = match &self.gc_delay {
            Some(s) => Some(crate::duration::parse_duration(s).map_err(|m| ("gc_delay", m))?),
            None => None,
        };
        let idem_expire = match &self.idem_expire {
            Some(s) => match crate::duration::parse_duration(s).map_err(|m| ("idem_expire", m))? {
                d if d < Duration::from_secs(1) => {
                    return Err((
                        "idem_expire",
                        "use at least 1s (records are timed in seconds)".into(),
                    ))
                }
                d => Some(d),
            },
            None => None,
        };
        Ok(NsWorkload {
            idem_expire,
            dirs: self.dirs,
            names: self.names,
            mix,
            think,
            ops_per_client: self.ops_per_client,
            gc_delay,
        })
    }
}

/// The section as TOML (for `write.rs`).
pub fn ns_toml(w: &NsWorkload) -> String {
    let mut o = format!(
        "\n[namespace]\ndirs = {}\nnames = {}\nmix = \"{}\"\nthink = \"{}..{}\"\n",
        w.dirs,
        w.names,
        w.mix.name(),
        fmt_duration(w.think.start),
        fmt_duration(w.think.end)
    );
    if let Some(n) = w.ops_per_client {
        o.push_str(&format!("ops_per_client = {n}\n"));
    }
    if let Some(d) = w.gc_delay {
        o.push_str(&format!("gc_delay = \"{}\"\n", fmt_duration(d)));
    }
    if let Some(d) = w.idem_expire {
        o.push_str(&format!("idem_expire = \"{}\"\n", fmt_duration(d)));
    }
    o
}

/// One client's stream of namespace operations.
#[derive(Clone, Debug)]
pub struct NsGenerator {
    w: NsWorkload,
    rng: Rng,
    issued: u64,
}

impl NsGenerator {
    /// The stream drawn from `rng`.
    pub fn new(w: &NsWorkload, rng: Rng) -> Self {
        Self {
            w: w.clone(),
            rng,
            issued: 0,
        }
    }

    /// Think time before the next operation.
    pub fn think(&mut self) -> Duration {
        self.rng.duration(self.w.think.clone())
    }

    fn path(&mut self, depth: u32) -> String {
        let mut p = match self.w.mix {
            NsMix::OneDir | NsMix::Truncate => "/d0".to_string(),
            _ => format!("/d{}", self.rng.below(u64::from(self.w.dirs))),
        };
        let extra = match self.w.mix {
            NsMix::OneDir | NsMix::Truncate => 1,
            // Mostly below the top directories: a top directory replaced by a file would turn
            // most later operations into ENOTDIR.
            NsMix::Mixed if self.rng.chance(0.85) => 1,
            _ => self.rng.below(u64::from(depth)) as u32,
        };
        for _ in 0..extra {
            p.push_str(&format!("/n{}", self.rng.below(u64::from(self.w.names))));
        }
        p
    }

    /// A path one level below a top directory, where files live.
    fn file_path(&mut self) -> String {
        let d = match self.w.mix {
            NsMix::OneDir | NsMix::Truncate => 0,
            _ => self.rng.below(u64::from(self.w.dirs)),
        };
        format!("/d{d}/n{}", self.rng.below(u64::from(self.w.names)))
    }

    /// Whether the next operation closes one of the client's `open` write sessions (drawn
    /// only while it holds some, so streams without opens are unchanged).
    pub fn wants_close(&mut self, open: usize) -> bool {
        open > 0 && self.rng.chance(0.1)
    }

    /// What a writer does with a file it just opened for write. Mixed streams write one
    /// block, and sometimes truncate and read back; truncate streams interleave scattered
    /// writes, truncates and reads; the others write one block at offset 0.
    pub fn file_plan(&mut self, block: u64) -> Vec<FileAction> {
        let write = |rng: &mut Rng| FileAction::Write(rng.below(FILE_SPAN - block));
        match self.w.mix {
            // Writes and reads meet on 16 slots (4 per chunk), so reads see data and
            // truncates cut through it.
            NsMix::Truncate => (0..1 + self.rng.below(4))
                .map(|_| {
                    let slot = self.rng.below(4) * 4096 + self.rng.below(4) * 1000;
                    match self.rng.below(10) {
                        0..=3 => FileAction::Truncate(self.rng.below(FILE_SPAN + 1)),
                        4..=6 => FileAction::Write(slot),
                        _ => FileAction::Read(slot.saturating_sub(96)),
                    }
                })
                .collect(),
            NsMix::Mixed => {
                let mut plan = vec![write(&mut self.rng)];
                // open(O_TRUNC): 3FS answers needTruncate and the client truncates to 0.
                if self.rng.chance(0.1) {
                    plan.insert(0, FileAction::Truncate(0));
                }
                if self.rng.chance(0.2) {
                    plan.push(FileAction::Truncate(self.rng.below(FILE_SPAN + 1)));
                }
                if self.rng.chance(0.3) {
                    plan.push(FileAction::Read(
                        self.rng.below(FILE_SPAN - FILE_READ_BYTES),
                    ));
                }
                plan
            }
            NsMix::OneDir | NsMix::RenameLoops => vec![FileAction::Write(0)],
        }
    }

    /// The next operation, or `None` when the budget is spent.
    pub fn next_op(&mut self) -> Option<MetaOp> {
        if self.w.ops_per_client.is_some_and(|n| self.issued >= n) {
            return None;
        }
        self.issued += 1;
        let depth = match self.w.mix {
            NsMix::RenameLoops => 4,
            _ => 2,
        };
        let roll = self.rng.below(100);
        let op = match self.w.mix {
            NsMix::RenameLoops => self.rename_loops_op(roll, depth),
            // Mostly opens for write of three files: the plans race on them.
            NsMix::Truncate => self.truncate_op(roll),
            NsMix::OneDir | NsMix::Mixed => self.general_op(roll, depth),
        };
        Some(op)
    }

    /// A rename-loops operation for `roll` (0..100): mkdir -p and renames over `depth` levels.
    fn rename_loops_op(&mut self, roll: u64, depth: u32) -> MetaOp {
        match roll {
            0..=34 => MetaOp::Mkdirs {
                path: self.path(depth),
                perm: 0o755,
                recursive: true,
            },
            35..=69 => MetaOp::Rename {
                from: self.path(depth),
                to: self.path(depth),
            },
            70..=79 => MetaOp::Remove {
                path: self.path(depth),
                recursive: self.rng.chance(0.5),
            },
            80..=89 => MetaOp::Stat {
                path: self.path(depth),
                follow: false,
            },
            _ => MetaOp::List {
                path: self.path(depth - 1),
                after: Vec::new(),
                limit: 64,
            },
        }
    }

    /// A truncate-mix operation for `roll` (0..100), on the three files of `/d0`.
    fn truncate_op(&mut self, roll: u64) -> MetaOp {
        match roll {
            0..=59 => MetaOp::Open {
                path: format!("/d0/n{}", self.rng.below(3)),
                write: true,
                session: 0,
            },
            60..=69 => MetaOp::Create {
                path: format!("/d0/n{}", self.rng.below(3)),
                perm: 0o644,
                exclusive: false,
                session: None,
            },
            70..=79 => MetaOp::Remove {
                path: format!("/d0/n{}", self.rng.below(3)),
                recursive: false,
            },
            _ => MetaOp::Stat {
                path: format!("/d0/n{}", self.rng.below(3)),
                follow: true,
            },
        }
    }

    /// A mixed or one-dir operation for `roll` (0..100): every operation type.
    fn general_op(&mut self, roll: u64, depth: u32) -> MetaOp {
        match roll {
            0..=19 => MetaOp::Create {
                path: self.path(depth),
                perm: [0o644, 0o600, 0o666, 0o640, 0o400][self.rng.below(5) as usize],
                exclusive: self.rng.chance(0.5),
                // Opened for write in the same request, as the mount's create does; the
                // driver fills in the session id and writes and closes it as an open's.
                session: self.rng.chance(0.5).then_some(0),
            },
            20..=29 => MetaOp::Mkdirs {
                path: self.path(depth),
                perm: DIR_PERMS[self.rng.below(DIR_PERMS.len() as u64) as usize],
                recursive: self.w.mix == NsMix::Mixed && self.rng.chance(0.3),
            },
            30..=44 => MetaOp::Remove {
                path: self.path(depth),
                recursive: self.rng.chance(0.2),
            },
            45..=64 => MetaOp::Rename {
                from: self.path(depth),
                to: self.path(depth),
            },
            65..=67 => MetaOp::Symlink {
                path: self.path(depth),
                target: self.path(depth),
            },
            // FIFOs, sockets and devices: the users' device nodes are refused (EPERM).
            68..=69 => MetaOp::Mknod {
                path: self.path(depth),
                kind: t3fs_core::wire::SpecialKind::ALL[self.rng.below(4) as usize],
                perm: 0o644,
                rdev: (1 << 8) | 3,
            },
            70..=74 => MetaOp::Hardlink {
                existing: self.path(depth),
                path: self.path(depth),
            },
            75..=78 => MetaOp::Stat {
                path: self.path(depth),
                follow: self.rng.chance(0.5),
            },
            79..=80 => self.set_attr_op(depth),
            93 => MetaOp::StatFs,
            81 => MetaOp::BatchStat {
                paths: (0..3).map(|_| self.path(depth)).collect(),
            },
            // An open for write; the driver fills in the session id and closes it later.
            82..=89 => MetaOp::Open {
                path: self.file_path(),
                write: true,
                session: 0,
            },
            90..=92 => self.lock_op(),
            _ => MetaOp::List {
                path: if self.w.mix == NsMix::OneDir {
                    "/d0".into()
                } else {
                    self.path(1)
                },
                after: Vec::new(),
                limit: 64,
            },
        }
    }

    /// A setattr of a pool path: chmod among modes that keep directories usable by someone,
    /// utimes, and sometimes chown (root only: the others get EPERM).
    fn set_attr_op(&mut self, depth: u32) -> MetaOp {
        MetaOp::SetAttr {
            path: self.path(depth),
            attr: t3fs_core::meta::SetAttr {
                perm: self
                    .rng
                    .chance(0.7)
                    .then(|| DIR_PERMS[self.rng.below(DIR_PERMS.len() as u64) as usize]),
                uid: self
                    .rng
                    .chance(0.2)
                    .then(|| [0, 1000, 1001][self.rng.below(3) as usize]),
                // chgrp among the users' groups (100, and 200 for one) and one of no one's.
                gid: self
                    .rng
                    .chance(0.2)
                    .then(|| [100, 200, 300][self.rng.below(3) as usize]),
                mtime: self.rng.chance(0.5).then(|| self.rng.below(1000)),
                mtime_ns: self.rng.below(1_000_000_000) as u32,
                // utimensat's atime: explicit, to now, or omitted.
                atime: self.rng.chance(0.3).then(|| self.rng.below(1000)),
                atime_ns: 0,
                atime_now: self.rng.chance(0.2),
                touch: self.rng.chance(0.2),
                // A directory's default layout: 4 or 8 KiB chunks over 1 to 4 chains.
                layout: self
                    .rng
                    .chance(0.2)
                    .then(|| t3fs_core::meta::placement::DirLayout {
                        chunk_size: 4096 << self.rng.below(2),
                        stripe: 1 + self.rng.below(4) as u32,
                    }),
                // lchown and utimensat(AT_SYMLINK_NOFOLLOW): a final symlink itself.
                nofollow: self.rng.chance(0.3),
            },
        }
    }

    /// Directory locks: mostly try-lock and unlock, sometimes preempt or clear (a holder that
    /// crashed comes back as another client and cannot unlock).
    fn lock_op(&mut self) -> MetaOp {
        MetaOp::LockDirectory {
            path: if self.w.mix == NsMix::OneDir {
                "/d0".into()
            } else {
                self.path(1)
            },
            action: match self.rng.below(10) {
                0..=3 => LockAction::TryLock,
                4..=7 => LockAction::Unlock,
                8 => LockAction::PreemptLock,
                _ => LockAction::Clear,
            },
        }
    }
}
