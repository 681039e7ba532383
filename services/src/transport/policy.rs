//! Which role may send which message: the check every received frame passes before a machine
//! sees it ([`super::Transport::admit`]), so that an authenticated peer can do only what its
//! role does in the protocol (3FS §2: mgmtd publishes routing, storage replicates, meta and
//! mgmtd use the KV, clients read, write and ask meta).
//!
//! Invariant: every message an honest node of a role sends is allowed from that role (the
//! real-cluster tests would drop frames otherwise, and `refused_role` stays 0 in them); a
//! refused frame is dropped and counted, never answered. Checks that need protocol state (an
//! update from the chain predecessor of its chain version, a heartbeat reply from the mgmtd the
//! heartbeat went to) are the machines' own. Not here: what a user may do to a file (meta's
//! permission checks, with the user from [`user_of`]).

use t3fs_core::meta::perm::User;
use t3fs_core::msg::Msg;

use super::credential::{Identity, PeerRole};

use PeerRole::{Admin, Client, Kv, Meta, Mgmtd, Mount, Storage};

/// The roles that may send `msg`.
pub fn senders(msg: &Msg) -> &'static [PeerRole] {
    match msg {
        // Asking for routing is harmless: anyone authenticated.
        Msg::GetRouting { .. } => &[Mgmtd, Storage, Meta, Kv, Client, Mount, Admin],
        // What mgmtd alone decides.
        Msg::Routing(_)
        | Msg::HeartbeatReply(_)
        | Msg::NotPrimary { .. }
        | Msg::ClientSessions(_)
        | Msg::NodeAddrs(_) => &[Mgmtd],
        // Replication between storage nodes, and storage's answers.
        Msg::Update(_)
        | Msg::SyncStart(_)
        | Msg::SyncStartReply(_)
        | Msg::SyncDone(_)
        | Msg::SyncDoneReply(_)
        | Msg::Heartbeat(_)
        | Msg::UpdateReply(_)
        | Msg::ReadReply(_)
        | Msg::QueryLastChunkReply(_)
        | Msg::SpaceInfoReply(_)
        | Msg::ChunkMetaDump(_) => &[Storage],
        // Chunk I/O: clients, and meta's own storage client (truncate, GC).
        Msg::Read(_) | Msg::Write(_) | Msg::QueryLastChunk(_) => &[Client, Mount, Admin, Meta],
        Msg::ExtendSession(_) => &[Client, Mount, Admin, Meta],
        Msg::MetaReq(_) => &[Client, Mount, Admin],
        Msg::MetaReply(_) => &[Meta],
        Msg::GetClientSessions | Msg::SpaceInfo => &[Meta],
        // The whole metadata store: only the services built on it, and the operator's checkers.
        Msg::KvReq(_) => &[Meta, Mgmtd, Admin],
        Msg::KvReply(_) => &[Kv],
        // An admin's dump, or a server's.
        Msg::DumpChunkMeta { .. } => &[Admin, Mgmtd, Storage, Meta],
    }
}

/// Whether `from` may send `msg`.
pub fn allowed(from: Identity, msg: &Msg) -> bool {
    senders(msg).contains(&from.role)
}

/// The user a request from `from` acts for: the one it names when its credential may act for
/// users (a trusted mount, like NFS AUTH_SYS from a trusted host), else its credential's own.
pub fn user_of(from: Identity, named: User) -> User {
    match from.role {
        Client => User::new(from.uid, from.gid),
        _ => named,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use t3fs_core::ids::RoutingVersion;

    fn who(role: PeerRole) -> Identity {
        Identity {
            role,
            uid: 1000,
            gid: 100,
        }
    }

    #[test]
    fn a_client_may_not_publish_routing_renew_leases_or_reach_the_kv() {
        let c = who(Client);
        let forged = [
            Msg::Routing(Default::default()),
            Msg::KvReq(t3fs_core::msg::kv::KvReq {
                id: 1,
                op: t3fs_core::kv::KvOp::Read {
                    at: None,
                    keys: Vec::new(),
                    ranges: Vec::new(),
                },
            }),
        ];
        for m in &forged {
            assert!(!allowed(c, m), "{m:?}");
            assert!(!allowed(who(Mount), m), "{m:?}");
            assert!(allowed(who(Mgmtd), m) || allowed(who(Meta), m), "{m:?}");
        }
        assert!(allowed(
            c,
            &Msg::GetRouting {
                known: RoutingVersion(0)
            }
        ));
    }

    #[test]
    fn a_client_acts_for_its_credentials_user_and_a_mount_for_the_named_one() {
        let root = t3fs_core::meta::perm::ROOT_USER;
        assert_eq!(user_of(who(Client), root), User::new(1000, 100));
        assert_eq!(user_of(who(Mount), root), root);
    }
}
