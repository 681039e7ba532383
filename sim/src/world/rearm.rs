//! Events that come back later: with `[hardware]`, a chunk operation's completion is scheduled
//! for when a shared SSD (`resources/sharing.rs`) expected to finish it, and a later arrival
//! may have slowed that SSD since. Such an event is pushed again for the new time before it is
//! hashed into the trace or logged, so `--log` (which `scripts/calibration/hops.py` reads) and
//! the trace see each completion once, when it happens.
//!
//! Invariant: an event comes back later than now, and the SSD's state only moves forward (so
//! re-arming ends). Not here: what an event does once it is due (mod.rs).

use t3fs_core::time::Instant;

use super::{Ev, World};

impl World {
    /// `ev` if it is due at `now`; `None` if it was pushed again for later.
    pub(super) fn rearmed(&mut self, ev: Ev, now: Instant) -> Option<Ev> {
        let later = match (&ev, self.sim.resources.as_mut()) {
            (&Ev::Io { node, inc, id }, Some(r)) if self.nodes[node].ctx.incarnation == inc => {
                r.ssd_check((node, inc, id.0), now)
            }
            _ => None,
        };
        match later {
            Some(at) => {
                self.sim.queue.push(at, ev);
                None
            }
            None => Some(ev),
        }
    }
}
