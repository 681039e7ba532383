//! The namespace history of a run: every meta request a namespace client issued, in invocation
//! order, with one logical clock stamping invocations and answers, and each answer in its
//! abstract form (what the reference tree can be compared on).
//!
//! The abstraction of an answer ([`Abstract`], [`abstract_of`]) lives here, not with the
//! reference model that produces the same form (`check::ns_model`): the history stores answers
//! in it as they arrive, so it is part of the record's vocabulary, and keeping it here lets the
//! record depend on no checker. Storing the raw `MetaResult` and abstracting at check time
//! would also work, but would keep every inode and listing of a run alive until the end.
//!
//! Invariant: the clock strictly increases over invocations and answers; an operation whose
//! every retry ended in an unknown KV commit stays open (`ret == None`). Not here: judging the
//! history (`check::namespace`), issuing the operations (the world's `ns_client.rs`).

use t3fs_core::meta::perm::User;
use t3fs_core::meta::request::{MetaAnswer, MetaOp, MetaResult};
use t3fs_core::meta::{EntryKind, MetaError};

/// An answer as the namespace checker compares it.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub enum Abstract {
    /// The request's inode kind.
    Kind(EntryKind),
    /// A listing: names and kinds.
    Names(Vec<(Vec<u8>, EntryKind)>),
    /// Done.
    Done,
    /// A POSIX error.
    Error(MetaError),
    /// A batch stat: each path's kind or error.
    Many(Vec<Abstract>),
    /// A statFs whose figures add up (their values depend on storage, not on the tree).
    Space,
    /// A statFs whose figures do not add up.
    BadSpace,
}

/// The abstract form of a real answer.
pub fn abstract_of(r: &MetaResult) -> Abstract {
    match r {
        Ok(MetaAnswer::Inode(i)) => Abstract::Kind(i.entry_kind()),
        Ok(MetaAnswer::Entries(rows)) => {
            Abstract::Names(rows.iter().map(|(n, e)| (n.clone(), e.kind)).collect())
        }
        Ok(MetaAnswer::Done) => Abstract::Done,
        Ok(MetaAnswer::StatFs(s)) if s.used <= s.capacity && s.free == s.capacity - s.used => {
            Abstract::Space
        }
        Ok(MetaAnswer::StatFs(_)) => Abstract::BadSpace,
        Ok(MetaAnswer::Stats(rs)) => Abstract::Many(
            rs.iter()
                .map(|r| match r {
                    Ok(i) => Abstract::Kind(i.entry_kind()),
                    Err(e) => Abstract::Error(e.clone()),
                })
                .collect(),
        ),
        Err(e) => Abstract::Error(e.clone()),
    }
}

/// One namespace operation of a run.
#[derive(Clone, Debug)]
pub struct NsRec {
    /// Client index.
    pub client: u32,
    /// The asking client's `ClientId` (directory locks name it; a restarted client has a new
    /// one).
    pub who: u64,
    /// The user it acts for (permission checks).
    pub user: User,
    /// The request.
    pub op: MetaOp,
    /// Logical invocation time.
    pub invoke: u64,
    /// Logical return time and answer (`None`: open).
    pub ret: Option<(u64, Abstract)>,
    /// Simulated ns at invocation.
    pub invoke_ns: u64,
}

/// A run's namespace history.
#[derive(Clone, Debug, Default)]
pub struct NsHistory {
    /// Operations in invocation order.
    pub ops: Vec<NsRec>,
    clock: u64,
}

impl NsHistory {
    /// Records an invocation; returns its index.
    pub fn invoke(
        &mut self,
        client: u32,
        (who, user): (u64, User),
        op: MetaOp,
        now_ns: u64,
    ) -> usize {
        self.clock += 1;
        self.ops.push(NsRec {
            client,
            who,
            user,
            op,
            invoke: self.clock,
            ret: None,
            invoke_ns: now_ns,
        });
        self.ops.len() - 1
    }

    /// Records the answer of operation `i`. A KV failure after every retry leaves it open.
    pub fn ret(&mut self, i: usize, result: MetaResult) {
        self.clock += 1;
        if matches!(result, Err(MetaError::Kv(_))) {
            return; // Unknown outcome: may or may not have taken effect.
        }
        self.ops[i].ret = Some((self.clock, abstract_of(&result)));
    }

    /// Answered operations.
    pub fn answered(&self) -> usize {
        self.ops.iter().filter(|o| o.ret.is_some()).count()
    }
}
