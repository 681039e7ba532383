//! The connection handshake: both ends prove knowledge of the cluster token without sending it,
//! and learn who is at the other end.
//!
//! Exchange (all fixed-size, before any frame):
//!
//! 1. both ends send a hello: magic `T3TP`, protocol version (u16 BE), node id (u32 BE),
//!    incarnation (u64 BE, random per transport start), the identity its credential proves
//!    (role byte, uid and gid, u32 BE each; `credential.rs`) and a fresh 32-byte random nonce;
//! 2. the dialer sends its proof, `BLAKE3-keyed(K_dialer, "dialer" ‖ dialer hello ‖ acceptor
//!    hello)`, keyed with the key of the identity it claims;
//! 3. the acceptor derives that key (it must hold the cluster secret, or be that identity),
//!    checks the proof in constant time, checks the claim against its roster ([`Roster`]: a
//!    server role only at that role's node id, a client role never at a server's id) and answers
//!    one status byte: `1` (refused, then it closes) or `0` followed by its own proof, labelled
//!    `"acceptor"`, keyed with its own identity's key, or with the dialer's key when the dialer
//!    is a client (a client cannot derive a server's key: it learns that the acceptor holds the
//!    secret its credential came from, and the acceptor is the node its address named).
//!
//! Keys never cross the wire. The proofs bind both nonces, both node ids, incarnations and
//! identities, and the direction, so a recorded proof cannot be replayed on another connection,
//! a proof cannot be reflected back to its sender, and a claimed role cannot be changed without
//! the proof failing. The dialer proves first, so a stranger who connects to a listener learns
//! no proof over its chosen nonce; the status byte tells the dialer it was refused, so both ends
//! count the rejection.
//!
//! Not here: confidentiality or integrity of the frames that follow (no encryption, no per-frame
//! MAC: an on-path attacker could still tamper after the handshake; the token keeps strangers
//! and misconfigured nodes out, it is not TLS), and resistance to offline guessing of a weak
//! token by someone a node dials (use a long random token). Timeouts are the caller's.

use std::io;

use std::collections::BTreeMap;

use t3fs_core::ids::NodeId;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::credential::{Credential, Identity, PeerRole};

/// First bytes of a hello.
const MAGIC: [u8; 4] = *b"T3TP";
/// The handshake and framing version this build speaks.
/// Version 2: hellos carry the credential's identity. Version 3: the node id takes 8 bytes.
pub(crate) const PROTOCOL_VERSION: u16 = 3;
/// Bytes of a hello: magic, version, node, incarnation, role, uid, gid, nonce.
pub(crate) const HELLO_LEN: usize = 4 + 2 + 8 + 8 + 1 + 4 + 4 + 32;
/// Where the nonce starts.
const NONCE_AT: usize = HELLO_LEN - 32;
const PROOF_LEN: usize = 32;
const ACCEPTED: u8 = 0;
const REFUSED: u8 = 1;

fn proof(key: &[u8; 32], label: &[u8], d: &[u8; HELLO_LEN], a: &[u8; HELLO_LEN]) -> blake3::Hash {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(label).update(d).update(a);
    h.finalize()
}

/// Constant-time check of a received proof (`blake3::Hash` equality is constant-time).
fn verify(
    key: &[u8; 32],
    label: &[u8],
    d: &[u8; HELLO_LEN],
    a: &[u8; HELLO_LEN],
    got: [u8; PROOF_LEN],
) -> bool {
    proof(key, label, d, a) == blake3::Hash::from(got)
}

/// Which node id each server role holds (from the cluster config). A transport with a roster
/// refuses a peer whose claimed role does not match its id; one without (a client, a test)
/// checks only the proof.
#[derive(Clone, Debug, Default)]
pub struct Roster(pub BTreeMap<NodeId, PeerRole>);

impl Roster {
    /// Whether `node` may hold `role`.
    fn admits(&self, node: NodeId, role: PeerRole) -> bool {
        match self.0.get(&node) {
            Some(r) => *r == role,
            None => !role.is_server(),
        }
    }
}

/// Who this end is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Me<'a> {
    pub(crate) node: NodeId,
    pub(crate) incarnation: u64,
    pub(crate) cred: &'a Credential,
    /// Set on servers: who may hold which id.
    pub(crate) roster: Option<&'a Roster>,
}

/// The authenticated other end.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) struct Peer {
    pub(crate) node: NodeId,
    pub(crate) incarnation: u64,
    /// What its credential proved.
    pub(crate) id: Identity,
}

/// Why a handshake failed.
#[derive(Debug)]
pub(crate) enum HandshakeError {
    /// The hello was not ours (magic) or spoke another version.
    BadHello,
    /// The peer is not the node we meant to reach, or claims to be us, or claims a role its
    /// node id does not hold.
    WrongNode,
    /// The peer's proof did not verify (it lacks the token).
    BadProof,
    /// The peer refused our proof (our token differs from its token).
    Refused,
    /// The socket failed or closed.
    Io,
}

impl From<io::Error> for HandshakeError {
    fn from(_: io::Error) -> Self {
        Self::Io
    }
}

fn hello(me: &Me<'_>) -> io::Result<[u8; HELLO_LEN]> {
    let id = me.cred.id;
    let mut h = [0u8; HELLO_LEN];
    h[..4].copy_from_slice(&MAGIC);
    h[4..6].copy_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    h[6..14].copy_from_slice(&me.node.0.to_be_bytes());
    h[14..22].copy_from_slice(&me.incarnation.to_be_bytes());
    h[22] = id.role.wire();
    h[23..27].copy_from_slice(&id.uid.to_be_bytes());
    h[27..31].copy_from_slice(&id.gid.to_be_bytes());
    getrandom::fill(&mut h[NONCE_AT..]).map_err(io::Error::other)?;
    Ok(h)
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

fn parse(h: &[u8; HELLO_LEN], me: &Me<'_>) -> Result<Peer, HandshakeError> {
    if h[..4] != MAGIC || h[4..6] != PROTOCOL_VERSION.to_be_bytes() {
        return Err(HandshakeError::BadHello);
    }
    let node = NodeId(be64(&h[6..14]));
    if node == me.node {
        return Err(HandshakeError::WrongNode);
    }
    let role = PeerRole::from_wire(h[22]).ok_or(HandshakeError::BadHello)?;
    if me.roster.is_some_and(|r| !r.admits(node, role)) {
        return Err(HandshakeError::WrongNode);
    }
    let id = Identity {
        role,
        uid: be32(&h[23..27]),
        gid: be32(&h[27..31]),
    };
    Ok(Peer {
        node,
        incarnation: be64(&h[14..22]),
        id,
    })
}

/// The key the acceptor proves with: its own, unless the dialer is a client or mount, which
/// knows only its own key.
fn acceptor_key(dialer: Identity, acceptor: Identity, holder: &Credential) -> Option<[u8; 32]> {
    if dialer.role.holds_secret() {
        holder.key_for(acceptor)
    } else {
        holder.key_for(dialer)
    }
}

/// Both sides' first step: send our hello, read and check theirs.
async fn hellos<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    me: &Me<'_>,
) -> Result<([u8; HELLO_LEN], [u8; HELLO_LEN], Peer), HandshakeError> {
    let mine = hello(me)?;
    s.write_all(&mine).await?;
    let mut theirs = [0u8; HELLO_LEN];
    s.read_exact(&mut theirs).await?;
    let peer = parse(&theirs, me)?;
    Ok((mine, theirs, peer))
}

/// Runs the dialer's side; `expect` is the node the address was supposed to reach.
pub(crate) async fn dial<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    me: &Me<'_>,
    expect: NodeId,
) -> Result<Peer, HandshakeError> {
    let (mine, theirs, peer) = hellos(s, me).await?;
    // A client dials servers only: anything else at a server's address is not who we meant.
    if peer.node != expect || (!me.cred.is_trusted() && !peer.id.role.is_server()) {
        return Err(HandshakeError::WrongNode);
    }
    s.write_all(proof(me.cred.key(), b"dialer", &mine, &theirs).as_bytes())
        .await?;
    match s.read_u8().await? {
        ACCEPTED => {}
        _ => return Err(HandshakeError::Refused),
    }
    let mut got = [0u8; PROOF_LEN];
    s.read_exact(&mut got).await?;
    let key = acceptor_key(me.cred.id, peer.id, me.cred).ok_or(HandshakeError::BadProof)?;
    if !verify(&key, b"acceptor", &mine, &theirs, got) {
        return Err(HandshakeError::BadProof);
    }
    Ok(peer)
}

/// Runs the acceptor's side.
pub(crate) async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    me: &Me<'_>,
) -> Result<Peer, HandshakeError> {
    let (mine, theirs, peer) = hellos(s, me).await?;
    let mut got = [0u8; PROOF_LEN];
    s.read_exact(&mut got).await?;
    let dialer_key = me.cred.key_for(peer.id);
    let reply_key = acceptor_key(peer.id, me.cred.id, me.cred);
    let (Some(dk), Some(rk)) = (dialer_key, reply_key) else {
        let _ = s.write_all(&[REFUSED]).await;
        return Err(HandshakeError::BadProof);
    };
    if !verify(&dk, b"dialer", &theirs, &mine, got) {
        // Best effort: the dialer learns why; the caller closes either way.
        let _ = s.write_all(&[REFUSED]).await;
        return Err(HandshakeError::BadProof);
    }
    let mut reply = [0u8; 1 + PROOF_LEN];
    reply[0] = ACCEPTED;
    reply[1..].copy_from_slice(proof(&rk, b"acceptor", &theirs, &mine).as_bytes());
    s.write_all(&reply).await?;
    Ok(peer)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "the cluster secret";

    fn roster() -> Roster {
        Roster([(NodeId(0), PeerRole::Mgmtd), (NodeId(2), PeerRole::Storage)].into())
    }

    /// Node 1 with `dc` dials node 2 (a storage server with `ac`, which checks the roster).
    async fn run(
        dc: Credential,
        dialer_node: u64,
        ac: Credential,
    ) -> (Result<Peer, HandshakeError>, Result<Peer, HandshakeError>) {
        let (mut a, mut b) = tokio::io::duplex(1024);
        let r = roster();
        // Each end owns its stream, so an end that gives up closes it as a socket would.
        tokio::join!(
            async move {
                let d = Me {
                    node: NodeId(dialer_node),
                    incarnation: 11,
                    cred: &dc,
                    roster: None,
                };
                dial(&mut a, &d, NodeId(2)).await
            },
            async move {
                let acc = Me {
                    node: NodeId(2),
                    incarnation: 22,
                    cred: &ac,
                    roster: Some(&r),
                };
                accept(&mut b, &acc).await
            }
        )
    }

    /// A client's node id that needs all 8 bytes (the old 4-byte hello cut it to 1).
    const WIDE_CLIENT: u64 = 1 << 63 | 0xdead_beef_0000_0001;

    fn storage(secret: &str) -> Credential {
        Credential::trusted(secret, PeerRole::Storage)
    }

    #[tokio::test]
    async fn same_secret_authenticates_both_ends_and_their_roles() {
        let (d, a) = run(
            Credential::trusted(SECRET, PeerRole::Mgmtd),
            0,
            storage(SECRET),
        )
        .await;
        let d = d.unwrap();
        assert_eq!(
            (d.node, d.incarnation, d.id.role),
            (NodeId(2), 22, PeerRole::Storage)
        );
        let a = a.unwrap();
        assert_eq!(
            (a.node, a.incarnation, a.id.role),
            (NodeId(0), 11, PeerRole::Mgmtd)
        );
    }

    #[tokio::test]
    async fn wrong_secret_is_refused_at_both_ends() {
        let (d, a) = run(
            Credential::trusted("other", PeerRole::Mgmtd),
            0,
            storage(SECRET),
        )
        .await;
        assert!(matches!(d, Err(HandshakeError::Refused)), "{d:?}");
        assert!(matches!(a, Err(HandshakeError::BadProof)), "{a:?}");
    }

    #[tokio::test]
    async fn a_client_credential_authenticates_as_its_user_only() {
        let (d, a) = run(
            Credential::client(SECRET, 1000, 100),
            WIDE_CLIENT,
            storage(SECRET),
        )
        .await;
        assert_eq!(d.unwrap().id.role, PeerRole::Storage);
        let a = a.unwrap();
        assert_eq!(
            (a.node, a.id.role, a.id.uid, a.id.gid),
            (NodeId(WIDE_CLIENT), PeerRole::Client, 1000, 100),
            "a client's 64-bit node id crosses the hello whole"
        );
    }

    #[tokio::test]
    async fn a_client_key_cannot_claim_a_server_role_or_another_user() {
        // A client that edits its hello to claim mgmtd (or root) still proves with its own key.
        let c = Credential::client(SECRET, 1000, 100);
        for forged in [
            Identity {
                role: PeerRole::Mgmtd,
                uid: 0,
                gid: 0,
            },
            Identity {
                role: PeerRole::Client,
                uid: 0,
                gid: 0,
            },
        ] {
            let mut f = c.clone();
            f.id = forged;
            let node = if forged.role.is_server() { 0 } else { 1 << 24 };
            let (_, a) = run(f, node, storage(SECRET)).await;
            assert!(
                matches!(a, Err(HandshakeError::BadProof)),
                "{forged:?}: {a:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_server_role_is_refused_at_an_id_the_roster_gives_another_role() {
        // Storage's key, but claiming node 0 (mgmtd's id), or a client's id.
        for node in [0, 1 << 24] {
            let (_, a) = run(storage(SECRET), node, storage(SECRET)).await;
            assert!(
                matches!(a, Err(HandshakeError::WrongNode)),
                "n{node}: {a:?}"
            );
        }
        // And a client credential at a server's id.
        let (_, a) = run(Credential::client(SECRET, 1, 1), 0, storage(SECRET)).await;
        assert!(matches!(a, Err(HandshakeError::WrongNode)), "{a:?}");
    }
}
