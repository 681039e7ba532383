//! `--log`: one status line per event — simulated time, node, what happened, and the chains as
//! last published.
//!
//! Not here: events.jsonl (the run directory's notable events).

use super::{node, Ev, World};

impl World {
    /// One status line per event: time, node, event, then the published chains.
    pub(super) fn log_line(&self, ev: &Ev) {
        let name = |i: usize| self.nodes[i].ctx.name.as_str();
        let (node, what) = match ev {
            Ev::Deliver { from, to, frame } => {
                let msg = match frame.decode() {
                    Ok(m) => format!("{m:?}"),
                    Err(e) => format!("malformed frame ({e})"),
                };
                (
                    name(to.0 as usize),
                    format!("recv from {}: {}", name(from.0 as usize), msg),
                )
            }
            Ev::Timer { node, timer, .. } => (name(*node), format!("timer {timer:?}")),
            Ev::Io { node, id, .. } => {
                let what = match self.nodes[*node].ctx.ops.get(id) {
                    Some(node::Pending::Chunk(t, op)) => {
                        format!("disk {t} done: {} {op:?}", op.kind())
                    }
                    Some(node::Pending::Kv(op)) => format!("kv done: {op:?}"),
                    None => format!("stale io {id}"),
                };
                (name(*node), what)
            }
            Ev::Step(i) => (
                "",
                format!("step {}", self.scenario.steps[*i].action.verb()),
            ),
            Ev::ClientNext { node, .. } => (name(*node), "next operation".to_string()),
            Ev::NsNext { node, .. } => (name(*node), "next namespace operation".to_string()),
            Ev::Restart { node, .. } => (name(*node), "restart".to_string()),
            Ev::ReplaceDisk { node } => (name(*node), "retry disk replacement".to_string()),
            Ev::Flap { node, down, .. } => (
                name(*node),
                format!("flap {}", if *down { "down" } else { "up" }),
            ),
            Ev::SafetyEnd => ("", "safety phase ends".to_string()),
            Ev::Probe => ("", "probe".to_string()),
        };
        let mut what = what;
        if what.len() > 900 {
            let mut cut = 900;
            while !what.is_char_boundary(cut) {
                cut -= 1;
            }
            what.truncate(cut);
            what.push('…');
        }
        let chains: Vec<String> = self
            .sim
            .audit
            .chains
            .values()
            .take(4)
            .map(|c| {
                format!(
                    "{}@{}{}",
                    c.chain,
                    c.version,
                    t3fs_core::mgmtd::chain_update::render(&c.targets)
                )
            })
            .collect();
        println!(
            "{:>12.6} {:<10} {what} | {}",
            self.sim.now().0 as f64 / 1e9,
            node,
            chains.join(" ")
        );
    }
}
