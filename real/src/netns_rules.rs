//! Network faults in the kernel for a `--hosts netns` cluster: each node's cut links and its
//! isolation become an nftables table (`inet t3fs`) in the node's namespace, whose output chain
//! drops what the node sends to a cut peer's address (or everything but loopback, isolated)
//! and whose input chain drops everything arriving at an isolated node.
//!
//! Why the kernel: with rules there, the services' TCP meets a real partition: segments vanish,
//! the kernel retransmits, keepalive and `TCP_USER_TIMEOUT` end dead connections, and the
//! transport has to reconnect, none of which the transport's own fault layer exercises.
//!
//! Invariants: a node's table is replaced in one `nft -f` transaction (never half applied);
//! empty rules remove the table; a cut is one way (a → b drops only a's sends; TCP's replies
//! from b then go unanswered too, as in a real one-way cut). Not here: message loss,
//! duplication, delays and held links, which stay in the transport's fault layer (packet loss
//! under TCP is delay, not loss; and this kernel has no `sch_netem` for latency), nor which
//! node's faults changed (`scenario_run/net.rs`).

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};

use crate::netns::Net;

/// The table every rule lives in.
const TABLE: &str = "inet t3fs";

/// One node's kernel-level network faults.
#[derive(Clone, Debug, Default, Eq, PartialEq)]
pub struct Rules {
    /// Peer addresses this node's packets to are dropped.
    pub drop_to: BTreeSet<String>,
    /// Everything in and out is dropped, loopback excepted.
    pub isolated: bool,
}

impl Rules {
    /// No fault.
    pub fn is_empty(&self) -> bool {
        self.drop_to.is_empty() && !self.isolated
    }

    /// The `nft -f` script that makes these the node's rules (creating the table first, so that
    /// deleting it cannot fail, then filling it again unless the rules are empty).
    pub fn script(&self) -> String {
        let mut s = format!("table {TABLE} {{}}\ndelete table {TABLE}\n");
        if self.is_empty() {
            return s;
        }
        s.push_str(&format!("table {TABLE} {{\n"));
        s.push_str(
            "  chain output {\n    type filter hook output priority filter; policy accept;\n",
        );
        s.push_str("    oifname \"lo\" accept\n");
        if !self.drop_to.is_empty() {
            let set: Vec<&str> = self.drop_to.iter().map(String::as_str).collect();
            s.push_str(&format!("    ip daddr {{ {} }} drop\n", set.join(", ")));
        }
        if self.isolated {
            s.push_str("    drop\n");
        }
        s.push_str("  }\n");
        if self.isolated {
            s.push_str(
                "  chain input {\n    type filter hook input priority filter; policy accept;\n",
            );
            s.push_str("    iifname \"lo\" accept\n    drop\n  }\n");
        }
        s.push_str("}\n");
        s
    }
}

/// Whether `nft` can be run (Debian: the `nftables` package).
pub fn nft_available() -> bool {
    Command::new("nft")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

impl Net {
    /// Makes `rules` node `id`'s kernel-level faults, in one transaction.
    pub fn apply_rules(&self, id: u32, rules: &Rules) -> Result<(), String> {
        let ns = self.ns(id);
        let mut child = Command::new("ip")
            .args(["netns", "exec", &ns, "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("nft in {ns}: {e} (is the nftables package installed?)"))?;
        let script = rules.script();
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(script.as_bytes())
                .map_err(|e| format!("nft in {ns}: {e}"))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| format!("nft in {ns}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "nft in {ns}: {}\n{script}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// The rules node `id` holds now (`nft list table`), as text; empty if it has none.
    pub fn listed_rules(&self, id: u32) -> String {
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns(id),
                "nft",
                "list",
                "table",
                "inet",
                "t3fs",
            ])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_replace_the_table_and_empty_rules_remove_it() {
        let none = Rules::default();
        assert_eq!(
            none.script(),
            "table inet t3fs {}\ndelete table inet t3fs\n"
        );
        let cut = Rules {
            drop_to: ["10.77.3.12".to_string(), "10.77.3.10".to_string()].into(),
            isolated: false,
        };
        let s = cut.script();
        assert!(s.starts_with("table inet t3fs {}\ndelete table inet t3fs\ntable inet t3fs {"));
        assert!(
            s.contains("ip daddr { 10.77.3.10, 10.77.3.12 } drop"),
            "{s}"
        );
        assert!(
            !s.contains("chain input"),
            "a cut drops only what the node sends:\n{s}"
        );
        let alone = Rules {
            isolated: true,
            ..Rules::default()
        };
        let s = alone.script();
        assert!(
            s.contains("chain input") && s.matches("    drop\n").count() == 2,
            "{s}"
        );
        assert!(s.contains("oifname \"lo\" accept") && s.contains("iifname \"lo\" accept"));
    }
}
