//! The connection handshake: both ends prove knowledge of the cluster token without sending it,
//! and learn who is at the other end.
//!
//! Exchange (all fixed-size, before any frame):
//!
//! 1. both ends send a hello: magic `T3TP`, protocol version (u16 BE), node id (u32 BE),
//!    incarnation (u64 BE, random per transport start) and a fresh 32-byte random nonce;
//! 2. the dialer sends its proof, `BLAKE3-keyed(key, "dialer" ‖ dialer hello ‖ acceptor hello)`;
//! 3. the acceptor checks it in constant time and answers one status byte: `1` (refused, then
//!    it closes) or `0` followed by its own proof, the same hash labelled `"acceptor"`, which
//!    the dialer checks in constant time.
//!
//! `key` is derived from the token with BLAKE3's key derivation (`derive_key`), so the token
//! itself never crosses the wire. The proofs bind both nonces, both node ids and incarnations,
//! and the direction, so a recorded proof cannot be replayed on another connection and a proof
//! cannot be reflected back to its sender. The dialer proves first, so a stranger who connects
//! to a listener learns no proof over its chosen nonce; the acceptor's status byte tells the
//! dialer its token was refused, so both ends count the rejection.
//!
//! Not here: confidentiality or integrity of the frames that follow (no encryption, no per-frame
//! MAC: an on-path attacker could still tamper after the handshake; the token keeps strangers
//! and misconfigured nodes out, it is not TLS), and resistance to offline guessing of a weak
//! token by someone a node dials (use a long random token). Timeouts are the caller's.

use std::io;

use t3fs_core::ids::NodeId;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// First bytes of a hello.
const MAGIC: [u8; 4] = *b"T3TP";
/// The handshake and framing version this build speaks.
pub(crate) const PROTOCOL_VERSION: u16 = 1;
/// Bytes of a hello.
pub(crate) const HELLO_LEN: usize = 4 + 2 + 4 + 8 + 32;
const PROOF_LEN: usize = 32;
const KEY_CONTEXT: &str = "t3fs transport 2024 cluster token v1";
const ACCEPTED: u8 = 0;
const REFUSED: u8 = 1;

/// The key both ends derive from the cluster token.
#[derive(Clone)]
pub(crate) struct TokenKey([u8; 32]);

impl TokenKey {
    /// Derives the key of `token`.
    pub(crate) fn new(token: &str) -> Self {
        Self(blake3::derive_key(KEY_CONTEXT, token.as_bytes()))
    }
    fn proof(
        &self,
        label: &[u8],
        dialer: &[u8; HELLO_LEN],
        acceptor: &[u8; HELLO_LEN],
    ) -> blake3::Hash {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(label).update(dialer).update(acceptor);
        h.finalize()
    }
    /// Constant-time check of a received proof (`blake3::Hash` equality is constant-time).
    fn verify(
        &self,
        label: &[u8],
        d: &[u8; HELLO_LEN],
        a: &[u8; HELLO_LEN],
        got: [u8; PROOF_LEN],
    ) -> bool {
        self.proof(label, d, a) == blake3::Hash::from(got)
    }
}

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKey(..)")
    }
}

/// Who this end is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Me {
    pub(crate) node: NodeId,
    pub(crate) incarnation: u64,
}

/// The authenticated other end.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) struct Peer {
    pub(crate) node: NodeId,
    pub(crate) incarnation: u64,
}

/// Why a handshake failed.
#[derive(Debug)]
pub(crate) enum HandshakeError {
    /// The hello was not ours (magic) or spoke another version.
    BadHello,
    /// The peer is not the node we meant to reach, or claims to be us.
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

fn hello(me: Me) -> io::Result<[u8; HELLO_LEN]> {
    let mut h = [0u8; HELLO_LEN];
    h[..4].copy_from_slice(&MAGIC);
    h[4..6].copy_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    h[6..10].copy_from_slice(&me.node.0.to_be_bytes());
    h[10..18].copy_from_slice(&me.incarnation.to_be_bytes());
    getrandom::fill(&mut h[18..]).map_err(io::Error::other)?;
    Ok(h)
}

fn parse(h: &[u8; HELLO_LEN], me: Me) -> Result<Peer, HandshakeError> {
    if h[..4] != MAGIC || h[4..6] != PROTOCOL_VERSION.to_be_bytes() {
        return Err(HandshakeError::BadHello);
    }
    let node = NodeId(u32::from_be_bytes([h[6], h[7], h[8], h[9]]));
    if node == me.node {
        return Err(HandshakeError::WrongNode);
    }
    let mut inc = [0u8; 8];
    inc.copy_from_slice(&h[10..18]);
    Ok(Peer {
        node,
        incarnation: u64::from_be_bytes(inc),
    })
}

/// Both sides' first step: send our hello, read and check theirs.
async fn hellos<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    me: Me,
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
    key: &TokenKey,
    me: Me,
    expect: NodeId,
) -> Result<Peer, HandshakeError> {
    let (mine, theirs, peer) = hellos(s, me).await?;
    if peer.node != expect {
        return Err(HandshakeError::WrongNode);
    }
    s.write_all(key.proof(b"dialer", &mine, &theirs).as_bytes())
        .await?;
    match s.read_u8().await? {
        ACCEPTED => {}
        _ => return Err(HandshakeError::Refused),
    }
    let mut proof = [0u8; PROOF_LEN];
    s.read_exact(&mut proof).await?;
    if !key.verify(b"acceptor", &mine, &theirs, proof) {
        return Err(HandshakeError::BadProof);
    }
    Ok(peer)
}

/// Runs the acceptor's side.
pub(crate) async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    key: &TokenKey,
    me: Me,
) -> Result<Peer, HandshakeError> {
    let (mine, theirs, peer) = hellos(s, me).await?;
    let mut proof = [0u8; PROOF_LEN];
    s.read_exact(&mut proof).await?;
    if !key.verify(b"dialer", &theirs, &mine, proof) {
        // Best effort: the dialer learns why; the caller closes either way.
        let _ = s.write_all(&[REFUSED]).await;
        return Err(HandshakeError::BadProof);
    }
    let mut reply = [0u8; 1 + PROOF_LEN];
    reply[0] = ACCEPTED;
    reply[1..].copy_from_slice(key.proof(b"acceptor", &theirs, &mine).as_bytes());
    s.write_all(&reply).await?;
    Ok(peer)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(
        dialer_token: &str,
        acceptor_token: &str,
    ) -> (Result<Peer, HandshakeError>, Result<Peer, HandshakeError>) {
        let (mut a, mut b) = tokio::io::duplex(1024);
        let (kd, ka) = (TokenKey::new(dialer_token), TokenKey::new(acceptor_token));
        let d = Me {
            node: NodeId(1),
            incarnation: 11,
        };
        let acc = Me {
            node: NodeId(2),
            incarnation: 22,
        };
        tokio::join!(
            async move { dial(&mut a, &kd, d, NodeId(2)).await },
            async move { accept(&mut b, &ka, acc).await }
        )
    }

    #[tokio::test]
    async fn same_token_authenticates_both_ends() {
        let (d, a) = run("secret", "secret").await;
        assert_eq!(
            d.unwrap(),
            Peer {
                node: NodeId(2),
                incarnation: 22
            }
        );
        assert_eq!(
            a.unwrap(),
            Peer {
                node: NodeId(1),
                incarnation: 11
            }
        );
    }

    #[tokio::test]
    async fn wrong_token_is_refused_at_both_ends() {
        let (d, a) = run("secret", "other").await;
        assert!(matches!(d, Err(HandshakeError::Refused)), "{d:?}");
        assert!(matches!(a, Err(HandshakeError::BadProof)), "{a:?}");
    }
}
