//! The trust model on real processes: a client credential (issued by `t3fs cluster credential`)
//! reads and writes files as its own user, and the messages only other roles may send are
//! refused and counted when it forges them: a routing push with version u64::MAX, a heartbeat
//! reply renewing a storage lease, a KV read of the whole metadata store, a chain-forwarded
//! update. A client cannot claim a server's id, nor take a connected client's id.
//!
//! Every process the test starts is stopped by a guard, pass or fail. Traffic stays on
//! 127.0.0.1.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use t3fs_client::client::{Client, ClientError, ClientOptions};
use t3fs_core::chunk::UpdateKind;
use t3fs_core::ids::{ChainId, ChainVersion, ChunkId, ChunkVersion, InodeId, NodeId};
use t3fs_core::ids::{RoutingVersion, VersionedChain};
use t3fs_core::meta::MetaError;
use t3fs_core::msg::{HeartbeatReply, MessageTag, MgmtdStatus, Msg, UpdateReq};
use t3fs_real::cluster::{self, NodeEntry};
use t3fs_services::transport::{Credential, Transport, TransportConfig};

struct Cluster {
    dir: PathBuf,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        support::stop_cluster(&self.dir);
    }
}

fn t3fs(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_t3fs"))
        .args(args)
        .output()
        .expect("run t3fs");
    let text = support::text_of(&out);
    assert!(out.status.success(), "t3fs {args:?} failed:\n{text}");
    text
}

/// A counter from a node's `/metrics`.
fn metric(n: &NodeEntry, line: &str) -> u64 {
    let (_, body) = t3fs_services::metrics::get(
        n.cfg.node.metrics.parse().unwrap(),
        "/metrics",
        Duration::from_secs(2),
    )
    .unwrap();
    body.lines()
        .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `{line}` in /metrics:\n{body}"))
}

fn refused(n: &NodeEntry) -> u64 {
    metric(n, "t3fs_transport_total{name=\"refused_role\"}")
}

/// A raw transport that proves `cred` as node `id`, with every server's address.
async fn raw(id: NodeId, cred: Credential, nodes: &[NodeEntry]) -> (Transport, Receiver) {
    let (t, rx) = Transport::start(TransportConfig::with_credential(id, None, cred))
        .await
        .unwrap();
    for n in nodes {
        t.set_addr(
            NodeId(n.cfg.node.id.into()),
            n.cfg.node.listen.parse().unwrap(),
        );
    }
    (t, rx)
}

type Receiver = tokio::sync::mpsc::Receiver<t3fs_services::transport::Inbound>;

async fn until(what: &str, ok: impl Fn() -> bool) {
    for _ in 0..200 {
        if ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn a_client_credential_acts_as_its_user_and_its_forged_server_messages_are_refused_and_counted() {
    let dir = std::env::temp_dir().join(format!("t3fs-trust-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let c = Cluster { dir };
    let d = c.dir.to_str().unwrap();
    t3fs(&["cluster", "up", "--dir", d, "--storage", "3"]);
    let cred_text = t3fs(&[
        "cluster",
        "credential",
        "--dir",
        d,
        "--role",
        "client",
        "--uid",
        "1000",
        "--gid",
        "100",
    ]);
    let cred = cred_text.trim().to_string();
    assert!(cred.starts_with("t3fs1:client:1000:100:"), "{cred}");
    let nodes = cluster::nodes(&c.dir).unwrap();
    let node = |name: &str| nodes.iter().find(|n| n.name == name).unwrap().clone();
    let (m, s1, kv) = (node("mgmtd-0"), node("storage-1"), node("kv"));
    let secret = m.cfg.cluster.token.clone();
    assert!(
        !cred.contains(&secret),
        "a client credential does not carry the secret"
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // The operator (the secret) makes a shared directory; root's own stays root's.
        let mgmtd_addr = m.cfg.node.listen.parse().unwrap();
        let admin = Client::connect(ClientOptions::new(mgmtd_addr, secret.clone()))
            .await
            .unwrap();
        admin.mkdir_mode("/shared", 0o1777).await.unwrap();
        admin.close().await;
        // The credential works for files, as user 1000 whatever user the request names.
        let mut opts = ClientOptions::new(mgmtd_addr, cred.clone());
        opts.user = t3fs_core::meta::perm::ROOT_USER;
        let cl = Client::connect(opts)
            .await
            .expect("a client credential connects");
        let denied = cl.create("/not-mine", 0o644).await;
        assert!(
            matches!(denied, Err(ClientError::Meta(MetaError::Access))),
            "naming root does not make a client root: {denied:?}"
        );
        let f = cl.create("/shared/mine", 0o644).await.unwrap();
        cl.write(&f, 0, b"hello".to_vec()).await.unwrap();
        cl.close_file(&f, 5).await.unwrap();
        let st = cl.stat("/shared/mine").await.unwrap();
        assert_eq!(
            (st.uid, st.gid),
            (1000, 100),
            "meta takes the credential's user"
        );
        cl.close().await;

        let before = (refused(&s1), refused(&kv));
        let client = Credential::parse(&cred).unwrap();
        let me = NodeId((1 << 24) + 77);
        let (t, mut rx) = raw(me, client.clone(), &nodes).await;
        let s1_id = NodeId(s1.cfg.node.id.into());
        let mut routing = t3fs_core::routing::RoutingInfo::default();
        routing.version = RoutingVersion(u64::MAX);
        t.try_send(s1_id, Msg::Routing(routing)).unwrap();
        let renew = MgmtdStatus::Accepted {
            hb_version: u64::MAX,
            timestamp: u64::MAX,
            routing: RoutingVersion(u64::MAX),
        };
        t.try_send(s1_id, Msg::HeartbeatReply(HeartbeatReply { status: renew }))
            .unwrap();
        let update = UpdateReq {
            tag: MessageTag::default(),
            chain: VersionedChain {
                chain: ChainId(1),
                version: ChainVersion(1),
            },
            chunk: ChunkId {
                inode: InodeId(1),
                index: 0,
            },
            kind: UpdateKind::Remove,
            chunk_size: 1 << 20,
            update_version: ChunkVersion(9),
            checksum: 0,
            retry: 0,
            is_syncing: false,
        };
        t.try_send(s1_id, Msg::Update(update)).unwrap();
        let dump_all = t3fs_core::msg::kv::KvReq {
            id: 1,
            op: t3fs_core::kv::KvOp::Read {
                at: None,
                keys: Vec::new(),
                ranges: vec![(
                    t3fs_core::kv::KeyRange {
                        begin: Vec::new(),
                        end: vec![0xff; 8],
                    },
                    1000,
                )],
            },
        };
        t.try_send(NodeId(kv.cfg.node.id.into()), Msg::KvReq(dump_all))
            .unwrap();
        until("storage-1 refusing three forged frames", || {
            refused(&s1) >= before.0 + 3
        })
        .await;
        until("the kv service refusing the KV read", || {
            refused(&kv) >= before.1 + 1
        })
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(rx.try_recv().is_err(), "nothing answered a refused frame");

        // The same id under another credential, while the first is connected: refused.
        let other = Credential::client(&secret, 2000, 100);
        let taken = metric(&s1, "t3fs_transport_total{name=\"id_taken\"}");
        let (t2, _rx2) = raw(me, other, &nodes).await;
        let _ = t2.try_send(
            s1_id,
            Msg::GetRouting {
                known: RoutingVersion(0),
            },
        );
        until("storage-1 refusing the id takeover", || {
            metric(&s1, "t3fs_transport_total{name=\"id_taken\"}") > taken
        })
        .await;
        // A client credential at a server's id (mgmtd's): refused in the handshake.
        let rejected = metric(&s1, "t3fs_transport_total{name=\"auth_rejected\"}");
        let (t3, _rx3) = raw(NodeId(0), client, &nodes).await;
        let _ = t3.try_send(
            s1_id,
            Msg::GetRouting {
                known: RoutingVersion(0),
            },
        );
        until("storage-1 refusing a client at mgmtd's id", || {
            metric(&s1, "t3fs_transport_total{name=\"auth_rejected\"}") > rejected
        })
        .await;
        for t in [t, t2, t3] {
            t.shutdown().await;
        }
    });
    // Nothing forged took effect: routing is the cluster's own, every target still SERVING.
    let status = cluster::status(&c.dir).unwrap();
    assert!(cluster::all_serving(&status, 1), "{status}");
    assert!(!status.contains(&format!("v{}", u64::MAX)), "{status}");
    // And the honest cluster refused nothing of its own.
    for n in &nodes {
        if n.name != "storage-1" && n.name != "kv" {
            assert_eq!(refused(n), 0, "{} refused an honest frame", n.name);
        }
    }
}
