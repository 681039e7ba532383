//! Connecting a [`Client`]: a fresh identity, mgmtd's server addresses, the client machine's
//! config, and the wait for its first routing info. Not here: the calls of a connected client
//! (client.rs).

use std::time::Duration;

use bytes::Bytes;

use t3fs_core::client::ClientConfig;
use t3fs_core::ids::{ClientId, NodeId};
use t3fs_core::msg::kv::NodeAddrs;
use t3fs_core::msg::Msg;
use t3fs_core::node::Process;
use t3fs_core::routing::RoutingInfo;
use t3fs_scenario::Timeouts;

use super::{Client, ClientError, ClientOptions, Outage};
use crate::node::{self, KvBackend, NodeParts};
use crate::transport::{Inbound, Transport, TransportConfig};

/// 64 bits from the OS. A failure is an error: zeros would give every client one identity.
fn rand_u64() -> Result<u64, ClientError> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b)
        .map_err(|e| ClientError::Connect(format!("no randomness for a client id: {e}")))?;
    Ok(u64::from_le_bytes(b))
}

/// The top bit of every client's node id and `ClientId`: servers are numbered from 0 (below
/// `SERVER_NODE_IDS`) and a server's own `ClientId` is `client_id(node, incarnation)` with a
/// small incarnation, so neither can meet a client's.
const CLIENT_BIT: u64 = 1 << 63;

/// A client's node id from 64 random bits: 63 of them, so a cluster of n clients shares an id
/// with a chance of about n²/2⁶⁴ (and a shared id is refused at the handshake, never taken
/// over).
fn client_node(r: u64) -> NodeId {
    NodeId(CLIENT_BIT | r)
}

/// A transport error while connecting, as the client's error.
fn connect_err(e: std::io::Error) -> ClientError {
    ClientError::Connect(e.to_string())
}

impl Client {
    /// Connects with a fresh identity.
    pub async fn connect(opts: ClientOptions) -> Result<Self, ClientError> {
        Self::connect_as(
            opts,
            client_node(rand_u64()?),
            ClientId(CLIENT_BIT | rand_u64()?),
        )
        .await
    }

    /// Connects as `node` with identity `id` (tests use it to show why ids must be fresh).
    pub async fn connect_as(
        opts: ClientOptions,
        node: NodeId,
        id: ClientId,
    ) -> Result<Self, ClientError> {
        let (transport, mut inbound, mgmtds) = start_transport(&opts, node).await?;
        let ask = Bytes::from(
            Msg::GetRouting {
                known: t3fs_core::ids::RoutingVersion(0),
            }
            .encode(),
        );
        let deadline = tokio::time::Instant::now() + opts.connect_timeout;
        let (mgmtd, addrs) =
            ask_mgmtds(&opts, &transport, &mut inbound, &mgmtds, &ask, deadline).await?;
        for (n, a) in &addrs.addrs {
            if let Ok(sa) = a.parse() {
                transport.set_addr(*n, sa);
            }
        }
        let cfg = client_config(&opts, node, id, mgmtd, &mgmtds, &addrs);
        let machine = t3fs_core::client::Client::new(cfg, RoutingInfo::default());
        let parts = NodeParts {
            id: node,
            name: format!("client-{}", node.0),
            process: Process::Client(Box::new(machine)),
            stores: Default::default(),
            kv: KvBackend::None,
            transport: transport.clone(),
            inbound,
            clock: Default::default(),
            env: Default::default(),
        };
        let (handle, _join) = node::spawn(parts).map_err(connect_err)?;
        let c = Self {
            handle,
            transport,
            id,
            node,
            next_session: std::sync::atomic::AtomicU64::new(1),
            dirs_watch: Default::default(),
        };
        c.wait_for_routing(deadline).await?;
        Ok(c)
    }

    /// Waits until the machine holds routing with chains; past `deadline` closes and fails.
    async fn wait_for_routing(&self, deadline: tokio::time::Instant) -> Result<(), ClientError> {
        while self.routing().is_none_or(|r| r.chains.is_empty()) {
            if tokio::time::Instant::now() > deadline {
                self.close().await;
                return Err(ClientError::Connect("no routing info from mgmtd".into()));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }
}

/// Starts the client's transport as `node` and gives it every mgmtd's address; returns the
/// mgmtd node ids (0 for `opts.mgmtd`, then the standbys).
async fn start_transport(
    opts: &ClientOptions,
    node: NodeId,
) -> Result<(Transport, tokio::sync::mpsc::Receiver<Inbound>, Vec<NodeId>), ClientError> {
    let cred = crate::transport::Credential::parse(&opts.token).map_err(ClientError::Invalid)?;
    let mut tc = TransportConfig::with_credential(node, None, cred);
    tc.rdma = opts.rdma.clone();
    let (transport, inbound) = Transport::start(tc).await.map_err(connect_err)?;
    let mgmtds: Vec<NodeId> = (0..=opts.standby.len() as u64).map(NodeId).collect();
    transport.set_addr(NodeId(0), opts.mgmtd);
    for (i, a) in opts.standby.iter().enumerate() {
        transport.set_addr(NodeId(i as u64 + 1), *a);
    }
    Ok((transport, inbound, mgmtds))
}

/// Sends `ask` to the mgmtds until one answers with the server addresses; returns that mgmtd
/// and its answer. Past `deadline` shuts the transport down and fails.
async fn ask_mgmtds(
    opts: &ClientOptions,
    transport: &Transport,
    inbound: &mut tokio::sync::mpsc::Receiver<Inbound>,
    mgmtds: &[NodeId],
    ask: &Bytes,
    deadline: tokio::time::Instant,
) -> Result<(NodeId, NodeAddrs), ClientError> {
    // Ask each mgmtd in turn; a standby's NotPrimary hint names the one to ask next.
    let mut next = 0usize;
    let mut hint: Option<NodeId> = None;
    loop {
        let target = hint.take().unwrap_or_else(|| {
            next += 1;
            mgmtds[(next - 1) % mgmtds.len()]
        });
        let _ = transport.try_send(target, ask.clone());
        if let Some(a) = await_addrs(transport, inbound, mgmtds, &mut hint).await {
            return Ok(a);
        }
        if tokio::time::Instant::now() > deadline {
            transport.shutdown().await;
            return Err(ClientError::Connect(format!(
                "no answer from mgmtd at {}{}",
                opts.mgmtd,
                if opts.standby.is_empty() {
                    String::new()
                } else {
                    format!(" or {:?}", opts.standby)
                }
            )));
        }
    }
}

/// Waits up to 300 ms for a mgmtd's server addresses; a standby's hint to the primary (one of
/// `mgmtds`) ends the wait early and is left in `hint`.
async fn await_addrs(
    transport: &Transport,
    inbound: &mut tokio::sync::mpsc::Receiver<Inbound>,
    mgmtds: &[NodeId],
    hint: &mut Option<NodeId>,
) -> Option<(NodeId, NodeAddrs)> {
    let wait = tokio::time::sleep(Duration::from_millis(300));
    tokio::pin!(wait);
    loop {
        tokio::select! {
            Some(mut inb) = inbound.recv() => {
                let from = inb.from;
                match transport.decode(&mut inb) {
                    Ok(Msg::NodeAddrs(a)) => break Some((from, a)),
                    Ok(Msg::NotPrimary { primary: Some(p) }) if mgmtds.contains(&p) => {
                        *hint = Some(p);
                        break None;
                    }
                    _ => {}
                }
            }
            _ = &mut wait => break None,
        }
    }
}

/// The client machine's config: mgmtd and meta from `addrs`, retry bounds from the outage
/// mode, timers scaled to the timeout profile.
fn client_config(
    opts: &ClientOptions,
    node: NodeId,
    id: ClientId,
    mgmtd: NodeId,
    mgmtds: &[NodeId],
    addrs: &NodeAddrs,
) -> ClientConfig {
    let mut cfg = ClientConfig::new(node, id);
    cfg.mgmtd = Some(mgmtd);
    cfg.mgmtds = mgmtds.to_vec();
    cfg.meta = addrs.meta.clone();
    cfg.user = opts.user;
    cfg.channels = 64;
    if opts.outage == Outage::Block {
        // Bounded only so that the machine's counters cannot overflow: at the fast
        // profile's half-second retry wait this is decades.
        cfg.retries_max = u32::MAX / 2;
        cfg.meta_attempts_max = u32::MAX / 2;
    }
    let scale = |d: Duration| match opts.timeouts {
        Timeouts::ThreeFs => d,
        Timeouts::Fast => d / 10,
    };
    if let Some(t) = &cfg.io_timeout {
        cfg.io_timeout = Some(scale(t.start)..scale(t.end));
    }
    cfg.retry_wait = scale(cfg.retry_wait.start)..scale(cfg.retry_wait.end);
    let refresh = opts
        .refresh
        .unwrap_or_else(|| scale(t3fs_core::limits::ROUTING_REFRESH));
    cfg.refresh_interval = Some(refresh..refresh * 11 / 10);
    cfg.meta_timeout = scale(cfg.meta_timeout.start)..scale(cfg.meta_timeout.end);
    cfg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_node_ids_take_63_random_bits_and_never_meet_a_server() {
        for r in [
            0,
            1,
            0x3fff_ffff,
            u64::from(u32::MAX),
            u64::MAX >> 1,
            u64::MAX,
        ] {
            let n = client_node(r);
            assert!(n.0 >= CLIENT_BIT, "{n} must lie above every server id");
            assert_eq!(
                n.0 & !CLIENT_BIT,
                r & !CLIENT_BIT,
                "every random bit but the top one kept"
            );
        }
        // The old 30-bit scheme gave these two draws one id; now they differ.
        assert_ne!(client_node(5), client_node(5 | 1 << 40));
        let (a, b) = (rand_u64().unwrap(), rand_u64().unwrap());
        assert_ne!(
            client_node(a),
            client_node(b),
            "two draws of 63 random bits"
        );
    }
}
