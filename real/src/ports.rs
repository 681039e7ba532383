//! Listen ports for the nodes of a `t3fs cluster`.
//!
//! Why not "bind port 0 and let go": the kernel takes port 0's answer from the ephemeral range,
//! the same range every outgoing connection on the host draws its local port from. Between
//! `cluster up` picking a port and the node binding it, any connection (another cluster's
//! client, an etcd test, a browser) may take it, and the node fails with EADDRINUSE. Ports
//! below the ephemeral range are never handed to outgoing connections, so a port picked there
//! and found free stays free unless another listener picks the same one; picks are random to
//! make that unlikely for clusters started side by side.
//!
//! Invariant: the ports of one call are distinct and each was bindable on 127.0.0.1 when picked.
//! Not here: holding the ports until the nodes bind them (nodes are separate processes).

use std::collections::BTreeSet;
use std::net::TcpListener;

/// The lowest port picked (below it sit well-known services).
const LOWEST: u16 = 10_000;

/// `n` distinct free ports, below the ephemeral range where the host leaves room for them,
/// otherwise from the kernel's port 0.
pub fn free_ports(n: usize) -> Result<Vec<u16>, String> {
    let (eph_lo, _) = ephemeral_range();
    let mut got = BTreeSet::new();
    let mut tries = 0;
    while got.len() < n && eph_lo > LOWEST + 1000 && tries < 100 * n {
        tries += 1;
        let p = LOWEST + (random() % u64::from(eph_lo - LOWEST)) as u16;
        if !got.contains(&p) && TcpListener::bind(("127.0.0.1", p)).is_ok() {
            got.insert(p);
        }
    }
    while got.len() < n {
        let l = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        got.insert(l.local_addr().map_err(|e| e.to_string())?.port());
    }
    let mut v: Vec<u16> = got.into_iter().collect();
    // Sorted order would give the first nodes the lowest ports every time; keep the draw's.
    shuffle(&mut v);
    Ok(v)
}

/// The host's ephemeral port range (Linux's default when it cannot be read).
pub fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| parse_range(&s))
        .unwrap_or((32768, 60999))
}

fn parse_range(s: &str) -> Option<(u16, u16)> {
    let mut it = s.split_whitespace().map(|w| w.parse::<u16>().ok());
    Some((it.next()??, it.next()??))
}

fn random() -> u64 {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    u64::from_le_bytes(b)
}

fn shuffle(v: &mut [u16]) {
    for i in (1..v.len()).rev() {
        v.swap(i, (random() % (i as u64 + 1)) as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_bindable_and_below_the_ephemeral_range() {
        let (lo, _) = ephemeral_range();
        let ports = free_ports(24).unwrap();
        assert_eq!(ports.iter().collect::<BTreeSet<_>>().len(), 24);
        for p in ports {
            if lo > LOWEST + 1000 {
                assert!((LOWEST..lo).contains(&p), "{p} is in the ephemeral range");
            }
            TcpListener::bind(("127.0.0.1", p)).expect("still free");
        }
    }

    #[test]
    fn the_range_file_parses() {
        assert_eq!(parse_range("32768\t60999\n"), Some((32768, 60999)));
        assert_eq!(parse_range("oops"), None);
    }
}
