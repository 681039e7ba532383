//! The attributes of directories this mount just changed, as meta's commits left them
//! (`DirsChanged` in meta's answers), kept for the attribute TTL.
//!
//! Why: after every create, mkdir, unlink, rmdir, rename or link in a directory the kernel
//! drops the directory's cached attributes (they changed), and its next permission check in
//! that directory (`default_permissions`) asks getattr: one more meta request, in series,
//! before the next operation there. Meta's answer already carried the directory as the commit
//! left it, so that getattr is answered from here.
//!
//! Invariants: an entry is what a commit wrote, and a directory keeps the entry of the newest
//! commit (the KV version orders answers that arrive out of order); an entry is served only
//! within the attribute TTL of when it arrived, the bound the kernel's own attribute cache
//! has on other clients' changes. Bounded: at most [`DIR_ATTRS_MAX`] entries (expired ones go
//! first, then the oldest). Not here: asking meta (inner.rs), answering the kernel (fs.rs).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use t3fs_core::ids::InodeId;
use t3fs_core::meta::Inode;
use t3fs_core::msg::meta::DirsChanged;

use super::backend::lock;

/// Directories kept at most.
pub const DIR_ATTRS_MAX: usize = 4096;

/// The directories meta's answers said changed: their inode, the commit's version, and when
/// the answer arrived.
pub(super) struct DirAttrs {
    ttl: Duration,
    by_id: Mutex<BTreeMap<InodeId, (u64, Instant, Inode)>>,
}

impl DirAttrs {
    /// Nothing kept; entries served for `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            by_id: Mutex::default(),
        }
    }

    /// Keeps what a commit left of each directory it changed, unless a newer commit's is kept.
    pub fn learn(&self, changed: &DirsChanged) {
        self.learn_at(changed, Instant::now());
    }

    fn learn_at(&self, changed: &DirsChanged, now: Instant) {
        let mut by_id = lock(&self.by_id);
        for d in &changed.dirs {
            let newer = by_id.get(&d.id).is_none_or(|(v, ..)| *v <= changed.version);
            if newer {
                by_id.insert(d.id, (changed.version, now, d.clone()));
            }
        }
        if by_id.len() > DIR_ATTRS_MAX {
            by_id.retain(|_, (_, at, _)| now.duration_since(*at) < self.ttl);
        }
        while by_id.len() > DIR_ATTRS_MAX {
            let oldest = by_id
                .iter()
                .min_by_key(|(_, (_, at, _))| *at)
                .map(|(id, _)| *id);
            let Some(id) = oldest else { break };
            by_id.remove(&id);
        }
    }

    /// Directory `id` as the newest commit this mount heard of left it, if that was within
    /// the TTL.
    pub fn fresh(&self, id: InodeId) -> Option<Inode> {
        self.fresh_at(id, Instant::now())
    }

    fn fresh_at(&self, id: InodeId, now: Instant) -> Option<Inode> {
        let by_id = lock(&self.by_id);
        let (_, at, i) = by_id.get(&id)?;
        (now.duration_since(*at) < self.ttl).then(|| i.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use t3fs_core::meta::InodeKind;

    fn dir(id: u64, nlink: u32) -> Inode {
        let kind = InodeKind::Directory {
            parent: InodeId(0),
            name: Vec::new(),
            lock: None,
            layout: None,
        };
        Inode {
            id: InodeId(id),
            kind,
            uid: 0,
            gid: 0,
            perm: 0o755,
            nlink,
            ctime: 0,
            mtime: 0,
            atime: 0,
            atime_ns: 0,
            mtime_ns: 0,
        }
    }

    fn changed(version: u64, dirs: Vec<Inode>) -> DirsChanged {
        DirsChanged { version, dirs }
    }

    #[test]
    fn the_newest_commit_wins_whatever_order_answers_arrive_in() {
        let a = DirAttrs::new(Duration::from_secs(1));
        let t = Instant::now();
        a.learn_at(&changed(7, vec![dir(5, 3)]), t);
        a.learn_at(&changed(6, vec![dir(5, 2)]), t);
        assert_eq!(a.fresh_at(InodeId(5), t).map(|i| i.nlink), Some(3));
        a.learn_at(&changed(8, vec![dir(5, 4), dir(6, 2)]), t);
        assert_eq!(a.fresh_at(InodeId(5), t).map(|i| i.nlink), Some(4));
        assert_eq!(a.fresh_at(InodeId(6), t).map(|i| i.nlink), Some(2));
        assert_eq!(a.fresh_at(InodeId(7), t), None, "never changed here");
    }

    #[test]
    fn entries_serve_only_within_the_ttl_and_stay_bounded() {
        let a = DirAttrs::new(Duration::from_secs(1));
        let t = Instant::now();
        a.learn_at(&changed(1, vec![dir(5, 2)]), t);
        assert!(a
            .fresh_at(InodeId(5), t + Duration::from_millis(999))
            .is_some());
        assert!(a.fresh_at(InodeId(5), t + Duration::from_secs(1)).is_none());
        for k in 0..DIR_ATTRS_MAX as u64 + 10 {
            a.learn_at(
                &changed(2, vec![dir(100 + k, 2)]),
                t + Duration::from_secs(2),
            );
        }
        assert_eq!(lock(&a.by_id).len(), DIR_ATTRS_MAX);
        assert!(
            a.fresh_at(InodeId(5), t).is_none(),
            "the expired entry went first"
        );
    }
}
