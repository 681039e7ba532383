//! Network namespaces for `t3fs cluster up --hosts netns` (root only): every server process
//! (mgmtd, storage, meta, the kv service) runs in a namespace of its own, a host with its own
//! address, joined to the others by a veth pair on one bridge, so that the kernel can cut one
//! node's links without touching the others (`netns_rules.rs`).
//!
//! Layout for a cluster with key `K` (4 hex digits derived from the cluster directory):
//! bridge `t3bK` holds `10.77.N.1/24` in the root namespace, where clients (the native client,
//! benchmarks, a scenario run's workload) live; node `i` lives in namespace `t3-K-nI` with
//! `eth0` at `10.77.N.(10+i)`, whose peer `t3vKnI` is enslaved to the bridge. Traffic never
//! leaves the bridge.
//!
//! Invariants: [`Net::create`] is idempotent (an existing piece is kept), [`Net::destroy`]
//! removes every namespace and the bridge it names, and both only touch names with this
//! cluster's key. Not here: the rules that fault the links (`netns_rules.rs`).

use std::process::Command;

/// Most nodes a namespace network holds (their addresses are `.10` to `.250` of one /24).
pub const MAX_HOSTS: u32 = 241;

/// The network of one cluster.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct Net {
    /// Cluster key (4 hex digits).
    pub key: String,
    /// Third octet of the subnet.
    pub subnet: u8,
    /// Nodes (ids `0..hosts`), each a host.
    pub hosts: u32,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn exists(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

impl Net {
    /// The network of the cluster in `dir` with `hosts` storage hosts.
    pub fn of(dir: &std::path::Path, hosts: u32) -> Self {
        let path = dir.to_string_lossy();
        let h = path.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        Self {
            key: format!("{:04x}", h & 0xffff),
            subnet: (h >> 16) as u8 % 250 + 1,
            hosts,
        }
    }

    /// The bridge's name.
    pub fn bridge(&self) -> String {
        format!("t3b{}", self.key)
    }

    /// Node `i`'s namespace.
    pub fn ns(&self, i: u32) -> String {
        format!("t3-{}-n{i}", self.key)
    }

    /// The root namespace's address on the bridge.
    pub fn gateway(&self) -> String {
        format!("10.77.{}.1", self.subnet)
    }

    /// Node `i`'s address.
    pub fn host_ip(&self, i: u32) -> String {
        format!("10.77.{}.{}", self.subnet, 10 + i)
    }

    /// Whether this process may create namespaces.
    #[allow(unsafe_code)]
    pub fn permitted() -> bool {
        // SAFETY: geteuid(2) has no arguments and no memory effects.
        unsafe { libc::geteuid() == 0 }
    }

    /// Creates the bridge, the namespaces and their links (keeping what exists). A step that
    /// fails removes everything this network has, so a failed start leaves no namespace or
    /// bridge behind (one did, when `ip -n` could not enter a new namespace).
    pub fn create(&self) -> Result<(), String> {
        self.create_all().inspect_err(|_| {
            let _ = self.destroy();
        })
    }

    fn create_all(&self) -> Result<(), String> {
        if !Self::permitted() {
            return Err("--hosts netns needs root (network namespaces)".into());
        }
        if self.hosts > MAX_HOSTS {
            return Err(format!(
                "--hosts netns: {} nodes, at most {MAX_HOSTS}",
                self.hosts
            ));
        }
        let br = self.bridge();
        if !exists(&["link", "show", &br]) {
            ip(&["link", "add", &br, "type", "bridge"])?;
            ip(&["addr", "add", &format!("{}/24", self.gateway()), "dev", &br])?;
        }
        ip(&["link", "set", &br, "up"])?;
        for i in 0..self.hosts {
            let ns = self.ns(i);
            if exists(&["netns", "exec", &ns, "true"]) {
                continue;
            }
            let veth = format!("t3v{}n{i}", self.key);
            ip(&["netns", "add", &ns])?;
            ip(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            ip(&["link", "set", &veth, "master", &br, "up"])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", self.host_ip(i)),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    /// Removes the namespaces (their veths go with them) and the bridge.
    pub fn destroy(&self) -> Result<(), String> {
        let mut errors = Vec::new();
        for i in 0..self.hosts {
            let ns = self.ns(i);
            if self.ns_exists(&ns) {
                if let Err(e) = ip(&["netns", "del", &ns]) {
                    errors.push(e);
                }
            }
        }
        if exists(&["link", "show", &self.bridge()]) {
            if let Err(e) = ip(&["link", "del", &self.bridge()]) {
                errors.push(e);
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// Whether any piece of this network exists.
    pub fn present(&self) -> bool {
        exists(&["link", "show", &self.bridge()])
            || (0..self.hosts).any(|i| self.ns_exists(&self.ns(i)))
    }

    /// Whether namespace `ns` exists: named in `ip netns list`, even where it cannot be entered.
    fn ns_exists(&self, ns: &str) -> bool {
        std::path::Path::new("/run/netns").join(ns).exists()
            || exists(&["netns", "exec", ns, "true"])
    }
}
