//! Connection set-up and teardown of the RDMA transport: the offer a dialer makes, the
//! acceptor's queue pair and answer, the tie-break when both offer at once, a restarted peer's
//! offer replacing the old connection, a refusal moving a peer onto TCP, and the TCP path's
//! frames sorted into connection management and the rest. See the module docs of `mod.rs`.
//!
//! Not here: the data path of an established connection (`link.rs`), the frame formats
//! (`ctl.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use t3fs_core::ids::NodeId;
use tokio::sync::mpsc;

use super::link::Up;
use super::{lock, Inner, State};
use crate::rdma::channel::{Channel, ChannelConfig};
use crate::transport::counters::Counters;
use crate::transport::rdma_ctl::{self as ctl, Ctl, Region};
use crate::transport::Inbound;

impl Inner {
    /// Makes a queue pair and offers it to `node`.
    pub(super) fn offer(&self, node: NodeId) -> State {
        let (ch, endpoint) = match Channel::new(self.wire.device.clone(), self.wire.channel) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(peer = node.0, error = %e, "rdma: no queue pair");
                return idle(Duration::from_secs(1));
            }
        };
        let conn = self.conn_id();
        let offer = Ctl::Connect {
            conn,
            endpoint,
            region: Region::from(ch.bulk()),
            slots: self.wire.channel.slots,
            slot_bytes: self.wire.channel.slot_bytes,
        };
        if !self.ctl(node, &offer) {
            return idle(Duration::from_millis(100));
        }
        State::Dialing {
            ch: Box::new(ch),
            conn,
            since: Instant::now(),
        }
    }

    /// Handles a connection-management frame from `from`.
    fn on_ctl(&self, from: NodeId, id: crate::transport::Identity, c: Ctl) {
        let p = self.peer(from);
        *lock(&p.id) = Some(id);
        let mut st = lock(&p.state);
        match c {
            Ctl::Connect {
                conn,
                endpoint,
                region,
                slots,
                slot_bytes,
            } => {
                if matches!(*st, State::Dialing { .. }) && self.me < from {
                    return; // both offered: ours wins, the peer answers it
                }
                if let State::Up(up) = &*st {
                    if up.conn == conn {
                        return; // a repeated offer of the connection we have
                    }
                    self.lost(up);
                }
                *st = self.accept(from, conn, endpoint, region, slots, slot_bytes);
            }
            Ctl::Accept {
                conn,
                endpoint,
                region,
            } => {
                let State::Dialing { conn: c, .. } = &*st else {
                    return;
                };
                if *c != conn {
                    return;
                }
                let State::Dialing { mut ch, .. } =
                    std::mem::replace(&mut *st, idle(Duration::ZERO))
                else {
                    unreachable!("matched above")
                };
                if !region.fits() || ch.connect(endpoint).is_err() {
                    return;
                }
                if let Ok(up) = Up::new(*ch, conn, false, region, self.wire.channel.slot_bytes) {
                    Counters::bump(&self.counters.connects);
                    *st = State::Up(Box::new(up));
                }
            }
            Ctl::Refuse { conn } => {
                if matches!(&*st, State::Dialing { conn: c, .. } if *c == conn) {
                    tracing::info!(peer = from.0, "peer does not speak rdma: using tcp");
                    *st = State::Tcp;
                }
            }
        }
        drop(st);
        self.wake.notify_one();
    }

    /// Accepts an offer: a queue pair of the offered sizes, connected, and the answer.
    fn accept(
        &self,
        from: NodeId,
        conn: u64,
        endpoint: crate::rdma::verbs::QpEndpoint,
        region: Region,
        slots: u32,
        slot_bytes: u32,
    ) -> State {
        // The offer sizes our queue pair: bound what a peer may make us allocate.
        // At most our own sizes (a cluster's nodes share them), and a region that fits.
        let own = u64::from(self.wire.channel.slots) * u64::from(self.wire.channel.slot_bytes);
        if !(2..=4096).contains(&slots)
            || !(64..=(1 << 20)).contains(&slot_bytes)
            || u64::from(slots) * u64::from(slot_bytes) > own
            || !region.fits()
        {
            Counters::bump(&self.counters.malformed);
            return idle(Duration::ZERO);
        }
        let cfg = ChannelConfig {
            slots,
            slot_bytes,
            bulk_bytes: self.wire.channel.bulk_bytes,
        };
        let made = Channel::new(self.wire.device.clone(), cfg).and_then(|(mut ch, me)| {
            ch.connect(endpoint)?;
            Ok((ch, me))
        });
        let (ch, me) = match made {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(peer = from.0, error = %e, "rdma: cannot accept");
                return idle(Duration::ZERO);
            }
        };
        let answer = Ctl::Accept {
            conn,
            endpoint: me,
            region: Region::from(ch.bulk()),
        };
        if !self.ctl(from, &answer) {
            return idle(Duration::ZERO);
        }
        Counters::bump(&self.counters.connects);
        match Up::new(ch, conn, true, region, slot_bytes) {
            Ok(up) => State::Up(Box::new(up)),
            Err(_) => idle(Duration::ZERO),
        }
    }
}

/// A peer's state with no connection; a new offer may go after `wait`.
pub(super) fn idle(wait: Duration) -> State {
    State::Idle {
        retry_at: Instant::now() + wait,
    }
}

/// Takes the TCP path's frames: connection management here, the rest to the receiver.
pub(super) async fn tcp_loop(inner: Arc<Inner>, mut rx: mpsc::Receiver<Inbound>) {
    while let Some(inb) = rx.recv().await {
        if ctl::is_ctl(&inb.frame) {
            match Ctl::decode(&inb.frame) {
                Some(c) => inner.on_ctl(inb.from, inb.id, c),
                None => Counters::bump(&inner.counters.malformed),
            }
            continue;
        }
        if inner.inbound.send(inb).await.is_err() {
            return;
        }
    }
}
