//! The driver's inputs, waited on together: inbound frames, loopback messages, timer fires, I/O
//! completions, local commands and the status tick.
//!
//! Why not `tokio::select!`: its random branch order draws from the runtime's generator, which
//! nothing seeds outside tokio's unstable flags, so a driver under turmoil would not be a
//! function of its seed; and a `biased` select starves the later branches while an earlier one
//! stays ready (a loaded storage node always has frames). [`Sources::next`] polls the six in
//! turn instead, starting one further along after every input: deterministic and fair.
//!
//! Invariants: a closed channel is never polled again; a closed command channel is itself an
//! input (the node's handles are gone: stop). Not here: what an input does (mod.rs).

use std::future::poll_fn;
use std::task::{Context, Poll};

use tokio::sync::mpsc;
use tokio::time::Interval;

use t3fs_core::ids::IoId;
use t3fs_core::machine::IoResult;
use t3fs_core::msg::Msg;
use t3fs_core::node::AnyTimer;

use crate::transport::Inbound;

use super::Cmd;

/// One input.
pub(super) enum Event {
    Frame(Inbound),
    Loopback(Msg),
    Timer(AnyTimer, u64),
    Io(IoId, IoResult),
    /// A command, or `None` once every handle is gone.
    Cmd(Option<Cmd>),
    Tick,
}

const KINDS: usize = 6;

/// The driver's receivers.
pub(super) struct Sources {
    pub inbound: mpsc::Receiver<Inbound>,
    pub loopback: mpsc::UnboundedReceiver<Msg>,
    pub timers: mpsc::UnboundedReceiver<(AnyTimer, u64)>,
    pub io: mpsc::UnboundedReceiver<(IoId, IoResult)>,
    pub cmds: mpsc::Receiver<Cmd>,
    pub tick: Interval,
    /// Which source is polled first next time.
    turn: usize,
    /// Sources found closed.
    closed: [bool; KINDS],
}

impl Sources {
    pub fn new(
        inbound: mpsc::Receiver<Inbound>,
        loopback: mpsc::UnboundedReceiver<Msg>,
        timers: mpsc::UnboundedReceiver<(AnyTimer, u64)>,
        io: mpsc::UnboundedReceiver<(IoId, IoResult)>,
        cmds: mpsc::Receiver<Cmd>,
        tick: Interval,
    ) -> Self {
        Self {
            inbound,
            loopback,
            timers,
            io,
            cmds,
            tick,
            turn: 0,
            closed: [false; KINDS],
        }
    }

    /// The next input.
    pub async fn next(&mut self) -> Event {
        let start = self.turn;
        self.turn = (self.turn + 1) % KINDS;
        poll_fn(|cx| {
            for k in 0..KINDS {
                let i = (start + k) % KINDS;
                if self.closed[i] {
                    continue;
                }
                match self.poll_one(i, cx) {
                    Poll::Ready(Some(e)) => return Poll::Ready(e),
                    Poll::Ready(None) => self.closed[i] = true,
                    Poll::Pending => {}
                }
            }
            Poll::Pending
        })
        .await
    }

    /// Polls source `i`: `Ready(None)` when it is closed.
    fn poll_one(&mut self, i: usize, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        match i {
            0 => self.inbound.poll_recv(cx).map(|o| o.map(Event::Frame)),
            1 => self.loopback.poll_recv(cx).map(|o| o.map(Event::Loopback)),
            2 => self
                .timers
                .poll_recv(cx)
                .map(|o| o.map(|(t, g)| Event::Timer(t, g))),
            3 => self
                .io
                .poll_recv(cx)
                .map(|o| o.map(|(id, r)| Event::Io(id, r))),
            // The command channel's end is an input, not a closed source.
            4 => self.cmds.poll_recv(cx).map(|o| Some(Event::Cmd(o))),
            _ => self.tick.poll_tick(cx).map(|_| Some(Event::Tick)),
        }
    }
}
