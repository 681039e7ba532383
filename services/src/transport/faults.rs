//! The transport's fault layer: network faults a real run injects without root, obeyed by the
//! node's own transport. Links cut to or from given peers (partitions, one-way cuts, repairs),
//! the whole node isolated, outbound loss and duplication rates and an outbound delay range
//! (wide ranges reorder frames), per-peer links with their own latency, spikes and loss (a far
//! rack), and frames to given peers held until released (`hold`/`release`). Set as a whole, [`NetFaults`], through the node's control
//! endpoint (metrics.rs, authenticated by the cluster token) or directly on an in-process
//! transport.
//!
//! Invariants: with no faults set (the default) a frame takes no lock and no extra branch beyond
//! one atomic load; a frame the layer drops is counted `fault_dropped` and looks to the sender
//! like a frame lost on the wire (the send returns `Ok`), never like an error. Not here: which
//! faults a scenario sets when (t3fs-real's scenario_run), or kernel-level faults (netns.rs).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use t3fs_core::ids::NodeId;

use crate::fault_query::{flag, pairs, rate, span, span_text};

/// One node's network faults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NetFaults {
    /// Frames to these peers are dropped.
    pub cut_out: BTreeSet<NodeId>,
    /// Frames from these peers are dropped.
    pub cut_in: BTreeSet<NodeId>,
    /// Every frame in and out is dropped.
    pub isolated: bool,
    /// Probability that an outbound frame is dropped.
    pub loss: f64,
    /// Probability that an outbound frame is sent twice.
    pub duplicate: f64,
    /// Each outbound frame waits a uniform time in this range before it is queued.
    pub delay: Option<(Duration, Duration)>,
    /// Links to these peers with their own latency, spikes and loss (replacing `delay` and
    /// `loss` for frames to them).
    pub links: BTreeMap<NodeId, Link>,
    /// Frames to these peers are held, in order, until the peer leaves this set.
    pub hold: BTreeSet<NodeId>,
    /// Probability that an outbound heartbeat is dropped.
    pub hb_loss: f64,
    /// Every outbound heartbeat is dropped for this long from when the faults are set.
    pub hb_drop: Duration,
}

/// One outbound link's own behaviour.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Link {
    /// One-way latency, uniform in this range.
    pub latency: (Duration, Duration),
    /// Probability that a frame takes a spike instead.
    pub spike: f64,
    /// The spike's latency range.
    pub spike_latency: (Duration, Duration),
    /// Loss rate.
    pub loss: f64,
}

/// What happens to one outbound frame.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Fate {
    /// Sent as usual.
    Send,
    /// Dropped.
    Drop,
    /// Sent twice.
    Twice,
    /// Sent after this long.
    Delay(Duration),
    /// Held until the peer is released.
    Hold,
}

fn ids(s: &BTreeSet<NodeId>) -> String {
    s.iter()
        .map(|n| n.0.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn parse_ids(v: &str) -> Result<BTreeSet<NodeId>, String> {
    v.split(',')
        .filter(|x| !x.is_empty())
        .map(|x| {
            x.parse()
                .map(NodeId)
                .map_err(|_| format!("bad node id `{x}`"))
        })
        .collect()
}

fn parse_link(item: &str) -> Result<(NodeId, Link), String> {
    let p: Vec<&str> = item.split('/').collect();
    let [n, lat, spike, spike_lat, loss] = p[..] else {
        return Err(format!(
            "link: `{item}` is not peer/latency/spike/spike latency/loss"
        ));
    };
    let node = n
        .parse()
        .map(NodeId)
        .map_err(|_| format!("link: bad node id `{n}`"))?;
    Ok((
        node,
        Link {
            latency: span("link latency", lat)?,
            spike: rate("link spike", spike)?,
            spike_latency: span("link spike latency", spike_lat)?,
            loss: rate("link loss", loss)?,
        },
    ))
}

/// A uniform draw in `lo..=hi` from 64 random bits.
fn within((lo, hi): (Duration, Duration), bits: u64) -> Duration {
    let span = (hi - lo).as_nanos() as u64;
    lo + Duration::from_nanos(if span == 0 { 0 } else { bits % (span + 1) })
}

impl NetFaults {
    /// No faults at all.
    pub fn is_clear(&self) -> bool {
        *self == Self::default()
    }

    /// The control endpoint's query string (`out=1,2&in=&iso=0&loss=0&dup=0&delay_us=0-0&hold=
    /// &link=3/2000-8000/0.01/100000-2000000/0.01,…`: a link is peer/latency/spike/spike
    /// latency/loss, latencies in microseconds).
    pub fn to_query(&self) -> String {
        let (lo, hi) = self.delay.unwrap_or_default();
        let links: Vec<String> = self
            .links
            .iter()
            .map(|(n, l)| {
                format!(
                    "{}/{}/{}/{}/{}",
                    n.0,
                    span_text(l.latency),
                    l.spike,
                    span_text(l.spike_latency),
                    l.loss
                )
            })
            .collect();
        format!(
            "out={}&in={}&iso={}&loss={}&dup={}&delay_us={}-{}&hold={}&link={}&hb_loss={}&hb_drop_ms={}",
            ids(&self.cut_out),
            ids(&self.cut_in),
            u8::from(self.isolated),
            self.loss,
            self.duplicate,
            lo.as_micros(),
            hi.as_micros(),
            ids(&self.hold),
            links.join(","),
            self.hb_loss,
            self.hb_drop.as_millis()
        )
    }

    /// Parses [`to_query`](Self::to_query)'s text; every key must be known and every value valid.
    pub fn parse(query: &str) -> Result<Self, String> {
        let mut f = Self::default();
        for pair in pairs(query) {
            let (k, v) = pair?;
            match k {
                "out" => f.cut_out = parse_ids(v)?,
                "in" => f.cut_in = parse_ids(v)?,
                "iso" => f.isolated = flag(k, v)?,
                "loss" => f.loss = rate(k, v)?,
                "dup" => f.duplicate = rate(k, v)?,
                "delay_us" => {
                    let (a, b) = span(k, v)?;
                    f.delay = (b > Duration::ZERO).then_some((a, b));
                }
                "hold" => f.hold = parse_ids(v)?,
                "hb_loss" => f.hb_loss = rate(k, v)?,
                "hb_drop_ms" => {
                    let ms = v.parse::<u64>().map_err(|_| format!("hb_drop_ms: `{v}`"))?;
                    f.hb_drop = Duration::from_millis(ms);
                }
                "link" => {
                    for item in v.split(',').filter(|x| !x.is_empty()) {
                        let (n, l) = parse_link(item)?;
                        f.links.insert(n, l);
                    }
                }
                _ => return Err(format!("unknown key `{k}`")),
            }
        }
        Ok(f)
    }
}

/// The live fault state of one transport.
#[derive(Debug, Default)]
pub(crate) struct FaultLayer {
    on: AtomicBool,
    state: Mutex<NetFaults>,
    held: Mutex<Vec<(NodeId, crate::transport::Frame)>>,
    /// Until when heartbeats are dropped (`hb_drop` counted from the last `set`).
    hb_until: Mutex<Option<std::time::Instant>>,
}

impl FaultLayer {
    /// Replaces the faults; returns the held frames whose peer is no longer held, in order.
    pub(crate) fn set(&self, f: NetFaults) -> Vec<(NodeId, crate::transport::Frame)> {
        let clear = f.is_clear();
        let hold = f.hold.clone();
        *self.hb_until.lock().unwrap_or_else(|e| e.into_inner()) =
            (f.hb_drop > Duration::ZERO).then(|| std::time::Instant::now() + f.hb_drop);
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = f;
        self.on.store(!clear, Ordering::SeqCst);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let (keep, go) = held.drain(..).partition(|(to, _)| hold.contains(to));
        *held = keep;
        go
    }

    /// Keeps a frame for `to` until its peer is released.
    pub(crate) fn hold(&self, to: NodeId, frame: crate::transport::Frame) {
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((to, frame));
    }

    /// The faults now.
    pub(crate) fn get(&self) -> NetFaults {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The fate of a frame to `to` (a storage heartbeat when `heartbeat`); `random` draws 64
    /// random bits.
    pub(crate) fn outbound(&self, to: NodeId, heartbeat: bool, random: impl Fn() -> u64) -> Fate {
        if !self.on.load(Ordering::Relaxed) {
            return Fate::Send;
        }
        let f = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let unit = || (random() >> 11) as f64 / (1u64 << 53) as f64;
        if f.isolated || f.cut_out.contains(&to) {
            return Fate::Drop;
        }
        if heartbeat {
            let until = *self.hb_until.lock().unwrap_or_else(|e| e.into_inner());
            let dropping = until.is_some_and(|u| std::time::Instant::now() < u);
            if dropping || (f.hb_loss > 0.0 && unit() < f.hb_loss) {
                return Fate::Drop;
            }
        }
        if f.hold.contains(&to) {
            return Fate::Hold;
        }
        let link = f.links.get(&to);
        let loss = link.map_or(f.loss, |l| l.loss);
        if loss > 0.0 && unit() < loss {
            return Fate::Drop;
        }
        if f.duplicate > 0.0 && unit() < f.duplicate {
            return Fate::Twice;
        }
        match (link, f.delay) {
            (Some(l), _) if l.spike > 0.0 && unit() < l.spike => {
                Fate::Delay(within(l.spike_latency, random()))
            }
            (Some(l), _) => Fate::Delay(within(l.latency, random())),
            (None, Some(range)) => Fate::Delay(within(range, random())),
            (None, None) => Fate::Send,
        }
    }

    /// Whether a frame from `from` is dropped.
    pub(crate) fn drops_inbound(&self, from: NodeId) -> bool {
        if !self.on.load(Ordering::Relaxed) {
            return false;
        }
        let f = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f.isolated || f.cut_in.contains(&from)
    }
}

/// A transport whose outbound frames pass the fault layer (TCP and RDMA alike).
pub(crate) trait Faulted: Clone + Send + Sync + 'static {
    /// Its fault layer.
    fn layer(&self) -> &FaultLayer;
    /// Its counters.
    fn counts(&self) -> &super::counters::Counters;
    /// 64 random bits (the fault layer's draws).
    fn random(&self) -> u64;
    /// Queues a frame past the fault layer.
    fn enqueue(&self, to: NodeId, frame: super::Frame) -> Result<(), super::SendError>;
    /// Runs a task until the transport shuts down.
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static);
}

/// Sends `frame` to `to` as the fault layer decides: as usual, dropped, twice, held or
/// delayed (each counted). `Ok` means queued or taken by the fault layer, as the wire would.
pub(crate) fn send_faulted<T: Faulted>(
    t: &T,
    to: NodeId,
    frame: super::Frame,
) -> Result<(), super::SendError> {
    use super::counters::Counters;
    let hb = t3fs_core::msg::is_heartbeat_frame(&frame.head);
    let c = t.counts();
    match t.layer().outbound(to, hb, || t.random()) {
        Fate::Send => t.enqueue(to, frame),
        Fate::Drop => {
            Counters::bump(&c.fault_dropped);
            Ok(())
        }
        Fate::Twice => {
            Counters::bump(&c.fault_duplicated);
            t.enqueue(to, frame.clone())?;
            t.enqueue(to, frame)
        }
        Fate::Hold => {
            Counters::bump(&c.fault_delayed);
            t.layer().hold(to, frame);
            Ok(())
        }
        Fate::Delay(d) => {
            Counters::bump(&c.fault_delayed);
            let me = t.clone();
            t.spawn(async move {
                tokio::time::sleep(d).await;
                let _ = me.enqueue(to, frame);
            });
            Ok(())
        }
    }
}

/// The network faults at `/fault`.
impl crate::fault_query::FaultResource for crate::transport::Transport {
    fn describe(&self) -> String {
        format!("{}\n", self.faults().to_query())
    }
    fn put(&self, query: &str) -> Result<String, String> {
        let f = crate::transport::NetFaults::parse(query)?;
        tracing::warn!("network faults set: {}", f.to_query());
        self.set_faults(f);
        Ok(self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_round_trips_and_bad_input_is_refused() {
        let f = NetFaults {
            cut_out: [NodeId(1), NodeId(4)].into(),
            cut_in: [NodeId(2)].into(),
            isolated: false,
            loss: 0.25,
            duplicate: 0.5,
            delay: Some((Duration::from_micros(100), Duration::from_millis(5))),
            links: [(
                NodeId(3),
                Link {
                    latency: (Duration::from_millis(2), Duration::from_millis(8)),
                    spike: 0.01,
                    spike_latency: (Duration::from_millis(100), Duration::from_secs(2)),
                    loss: 0.02,
                },
            )]
            .into(),
            hold: [NodeId(2)].into(),
            hb_loss: 0.5,
            hb_drop: Duration::from_millis(1500),
        };
        assert_eq!(NetFaults::parse(&f.to_query()), Ok(f));
        assert!(NetFaults::parse("link=3/1-2/0.1/1-2").is_err());
        assert_eq!(
            NetFaults::parse(&NetFaults::default().to_query()),
            Ok(NetFaults::default())
        );
        assert!(NetFaults::parse("loss=2").is_err());
        assert!(NetFaults::parse("out=x").is_err());
        assert!(NetFaults::parse("nope=1").is_err());
        assert!(NetFaults::parse("delay_us=5-1").is_err());
    }

    impl FaultLayer {
        fn outbound_any(&self, to: NodeId, random: impl Fn() -> u64) -> Fate {
            self.outbound(to, false, random)
        }
    }

    #[test]
    fn heartbeats_alone_are_dropped_while_the_drop_lasts() {
        let l = FaultLayer::default();
        let r = || 0u64;
        l.set(NetFaults {
            hb_drop: Duration::from_secs(60),
            ..NetFaults::default()
        });
        assert_eq!(l.outbound(NodeId(0), true, r), Fate::Drop);
        assert_eq!(l.outbound(NodeId(0), false, r), Fate::Send);
        l.set(NetFaults {
            hb_drop: Duration::from_nanos(1),
            ..NetFaults::default()
        });
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(l.outbound(NodeId(0), true, r), Fate::Send, "the drop ended");
        l.set(NetFaults {
            hb_loss: 0.5,
            ..NetFaults::default()
        });
        assert_eq!(l.outbound(NodeId(0), true, r), Fate::Drop);
        assert_eq!(l.outbound(NodeId(0), true, || u64::MAX), Fate::Send);
    }

    #[test]
    fn fates_follow_the_faults() {
        let l = FaultLayer::default();
        let r = || 0u64; // Every draw is the smallest: any positive rate fires.
        assert_eq!(l.outbound_any(NodeId(1), r), Fate::Send);
        l.set(NetFaults {
            cut_out: [NodeId(1)].into(),
            cut_in: [NodeId(3)].into(),
            ..NetFaults::default()
        });
        assert_eq!(l.outbound_any(NodeId(1), r), Fate::Drop);
        assert_eq!(l.outbound_any(NodeId(2), r), Fate::Send);
        assert!(l.drops_inbound(NodeId(3)) && !l.drops_inbound(NodeId(1)));
        l.set(NetFaults {
            duplicate: 0.1,
            ..NetFaults::default()
        });
        assert_eq!(l.outbound_any(NodeId(2), r), Fate::Twice);
        l.set(NetFaults {
            isolated: true,
            ..NetFaults::default()
        });
        assert_eq!(l.outbound_any(NodeId(2), r), Fate::Drop);
        assert!(l.drops_inbound(NodeId(9)));
        l.set(NetFaults {
            hold: [NodeId(4)].into(),
            links: [(
                NodeId(5),
                Link {
                    latency: (Duration::from_millis(3), Duration::from_millis(3)),
                    ..Link::default()
                },
            )]
            .into(),
            ..NetFaults::default()
        });
        assert_eq!(l.outbound_any(NodeId(4), r), Fate::Hold);
        assert_eq!(
            l.outbound_any(NodeId(5), r),
            Fate::Delay(Duration::from_millis(3))
        );
        assert_eq!(l.outbound_any(NodeId(6), r), Fate::Send);
        l.hold(NodeId(4), crate::transport::Frame::default());
        assert!(l
            .set(NetFaults {
                hold: [NodeId(4)].into(),
                ..NetFaults::default()
            })
            .is_empty());
        assert_eq!(
            l.set(NetFaults::default()).len(),
            1,
            "released frames come back to be sent"
        );
        assert_eq!(l.outbound_any(NodeId(1), r), Fate::Send);
        assert!(!l.drops_inbound(NodeId(3)));
    }
}
