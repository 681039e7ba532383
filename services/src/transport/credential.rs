//! Credentials: what a process proves in the handshake, and so what the other end lets it do.
//!
//! Every key is derived from the cluster secret (the `[cluster] token` of the servers'
//! configs) with BLAKE3: `master = derive_key(CONTEXT, secret)`, and a role's key is
//! `keyed_hash(master, role ‖ uid ‖ gid)`. Who holds what:
//!
//! - **servers** (mgmtd, storage, meta, kv) hold the secret, so they can derive any key and
//!   check any peer's proof;
//! - a **client** holds only its own derived key, issued for one user (`uid`, `gid`) by whoever
//!   holds the secret (`t3fs cluster credential`); it cannot compute a server's key, so it
//!   cannot claim a server role, and meta takes its user from the credential, not the request;
//! - a **mount** credential is a trusted client (a FUSE mount on a trusted host, like NFS
//!   AUTH_SYS): meta accepts the user each request names; it is issued like a client's and
//!   does not carry the secret either;
//! - an **admin** holds the secret but serves nothing (`chunk_dump`, checkers, benchmarks,
//!   `cluster` commands): it acts for any user and may read the KV, as the operator who could
//!   start a meta server anyway.
//!
//! A credential string (`t3fs1:client:1000:1000:<64 hex>`, `t3fs1:mount:0:0:<64 hex>`) is what
//! a client is given; a bare string is taken as the cluster secret itself (an admin's).
//!
//! Invariants: a role's key never crosses the wire (the handshake sends keyed proofs over both
//! hellos); a key for one (role, uid, gid) says nothing about another. Not here: asymmetric
//! keys (every server holds the secret, so a compromised server can act as any server role;
//! public-key credentials would close that), revocation (rotate the secret), encryption.

use std::fmt;

/// Derivation context of the master key.
const CONTEXT: &str = "t3fs credentials 2026 cluster secret v1";
/// Prefix of a credential string.
const PREFIX: &str = "t3fs1";

/// What a peer may act as, bound in the handshake.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum PeerRole {
    /// The cluster manager.
    Mgmtd,
    /// A storage service.
    Storage,
    /// A meta service.
    Meta,
    /// The KV service.
    Kv,
    /// A client acting for the one user of its credential.
    Client,
    /// A trusted client (a mount on a trusted host): may act for any user.
    Mount,
    /// A holder of the secret that serves nothing (admin tools, checkers).
    Admin,
}

impl PeerRole {
    /// Every role, in wire order.
    pub const ALL: [Self; 7] = [
        Self::Mgmtd,
        Self::Storage,
        Self::Meta,
        Self::Kv,
        Self::Client,
        Self::Mount,
        Self::Admin,
    ];

    /// Its byte in a hello.
    pub fn wire(self) -> u8 {
        self as u8
    }

    /// The role of a hello's byte.
    pub fn from_wire(b: u8) -> Option<Self> {
        Self::ALL.get(usize::from(b)).copied()
    }

    /// Whether it is a server role (serves at a node id of the plan; holds the secret).
    pub fn is_server(self) -> bool {
        !matches!(self, Self::Client | Self::Mount | Self::Admin)
    }

    /// Whether its holder has the cluster secret (so can derive, and check, every key).
    pub fn holds_secret(self) -> bool {
        !matches!(self, Self::Client | Self::Mount)
    }

    /// The lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Mgmtd => "mgmtd",
            Self::Storage => "storage",
            Self::Meta => "meta",
            Self::Kv => "kv",
            Self::Client => "client",
            Self::Mount => "mount",
            Self::Admin => "admin",
        }
    }

    /// The role named `s`.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.name() == s)
    }

    /// The transport role of a service role.
    pub fn of(role: t3fs_core::node::Role) -> Self {
        use t3fs_core::node::Role;
        match role {
            Role::Mgmtd => Self::Mgmtd,
            Role::Storage => Self::Storage,
            Role::Meta => Self::Meta,
            Role::Client => Self::Client,
        }
    }
}

impl fmt::Display for PeerRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Who a credential is: a role and, for clients, the user it acts for.
#[derive(Clone, Copy, Debug, Eq, Hash, PartialEq)]
pub struct Identity {
    /// The role.
    pub role: PeerRole,
    /// The user (0 for servers and mounts).
    pub uid: u32,
    /// The group (0 for servers and mounts).
    pub gid: u32,
}

/// A credential: an identity and its key, plus the secret when the holder is trusted with it.
#[derive(Clone)]
pub struct Credential {
    /// Who it proves.
    pub id: Identity,
    key: [u8; 32],
    master: Option<[u8; 32]>,
}

/// The master key of `secret`.
fn master(secret: &str) -> [u8; 32] {
    blake3::derive_key(CONTEXT, secret.as_bytes())
}

/// The key of `id` under `master`.
fn key_of(master: &[u8; 32], id: Identity) -> [u8; 32] {
    let mut m = [0u8; 9];
    m[0] = id.role.wire();
    m[1..5].copy_from_slice(&id.uid.to_be_bytes());
    m[5..9].copy_from_slice(&id.gid.to_be_bytes());
    *blake3::keyed_hash(master, &m).as_bytes()
}

impl Credential {
    /// A server or admin credential: it holds the secret and can check every peer.
    pub fn trusted(secret: &str, role: PeerRole) -> Self {
        let m = master(secret);
        let id = Identity {
            role,
            uid: 0,
            gid: 0,
        };
        Self {
            id,
            key: key_of(&m, id),
            master: Some(m),
        }
    }

    /// A client credential for user `uid`/`gid`, as the holder of `secret` issues it. It does
    /// not carry the secret.
    pub fn client(secret: &str, uid: u32, gid: u32) -> Self {
        Self::issued(secret, PeerRole::Client, uid, gid)
    }

    /// A mount credential (a trusted client that acts for the users it names).
    pub fn mount(secret: &str) -> Self {
        Self::issued(secret, PeerRole::Mount, 0, 0)
    }

    fn issued(secret: &str, role: PeerRole, uid: u32, gid: u32) -> Self {
        let id = Identity { role, uid, gid };
        Self {
            id,
            key: key_of(&master(secret), id),
            master: None,
        }
    }

    /// Parses what a client is given: a credential string, or else the cluster secret (an
    /// admin's).
    pub fn parse(s: &str) -> Result<Self, String> {
        if !s.starts_with(&format!("{PREFIX}:")) {
            return Ok(Self::trusted(s, PeerRole::Admin));
        }
        let bad = || format!("a credential is {PREFIX}:ROLE:UID:GID:<64 hex digits>");
        let parts: Vec<&str> = s.trim().split(':').collect();
        let [_, role, uid, gid, hex] = parts[..] else {
            return Err(bad());
        };
        let role = PeerRole::from_name(role).ok_or_else(bad)?;
        if role.holds_secret() {
            return Err(format!(
                "only client and mount credentials are issued as strings; a {role} holds the secret"
            ));
        }
        let (uid, gid) = (
            uid.parse().map_err(|_| bad())?,
            gid.parse().map_err(|_| bad())?,
        );
        let key = hex32(hex).ok_or_else(bad)?;
        Ok(Self {
            id: Identity { role, uid, gid },
            key,
            master: None,
        })
    }

    /// The credential string (clients only: a trusted credential is its secret).
    pub fn encode(&self) -> Option<String> {
        (self.master.is_none()).then(|| {
            let hex: String = self.key.iter().map(|b| format!("{b:02x}")).collect();
            let Identity { role, uid, gid } = self.id;
            format!("{PREFIX}:{role}:{uid}:{gid}:{hex}")
        })
    }

    /// This credential's own key.
    pub(crate) fn key(&self) -> &[u8; 32] {
        &self.key
    }

    /// The key of `id`, if this holder can know it: its own, or any when it holds the secret.
    pub(crate) fn key_for(&self, id: Identity) -> Option<[u8; 32]> {
        match &self.master {
            _ if id == self.id => Some(self.key),
            Some(m) => Some(key_of(m, id)),
            None => None,
        }
    }

    /// Whether the holder has the secret (and so checks peers' roles).
    pub fn is_trusted(&self) -> bool {
        self.master.is_some()
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Credential({:?}, ..)", self.id)
    }
}

fn hex32(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in b.chunks(2).enumerate() {
        let d = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(d, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_credential_round_trips_and_matches_the_servers_derivation() {
        let c = Credential::client("the cluster secret", 1000, 100);
        let s = c.encode().unwrap();
        let back = Credential::parse(&s).unwrap();
        assert_eq!(back.id, c.id);
        let server = Credential::trusted("the cluster secret", PeerRole::Storage);
        assert_eq!(server.key_for(c.id), Some(*c.key()));
        assert_eq!(
            back.key_for(server.id),
            None,
            "a client cannot derive a server's key"
        );
    }

    #[test]
    fn keys_differ_by_role_user_and_secret() {
        let a = Credential::client("s", 1, 1);
        assert_ne!(a.key(), Credential::client("s", 2, 1).key());
        assert_ne!(a.key(), Credential::client("t", 1, 1).key());
        let m = Credential::trusted("s", PeerRole::Mgmtd);
        assert_ne!(m.key(), Credential::trusted("s", PeerRole::Storage).key());
    }

    #[test]
    fn bad_strings_are_refused_with_the_format() {
        for s in [
            "t3fs1:client:1:1:zz",
            "t3fs1:client:x:1:00",
            "t3fs1:mgmtd:0:0:00",
        ] {
            assert!(Credential::parse(s).is_err(), "{s}");
        }
        assert!(Credential::parse("plain secret").unwrap().is_trusted());
        let m = Credential::parse(&Credential::mount("s").encode().unwrap()).unwrap();
        assert!(!m.is_trusted() && m.id.role == PeerRole::Mount);
    }
}
