//! How a node's transport is chosen and sized: `[node] transport` and the `[rdma]` section of
//! a node config, and the device each choice opens.
//!
//! ```toml
//! [node]
//! transport = "rdma"        # "tcp" (default), "rdma" (a verbs device) or "soft-rdma"
//!
//! [rdma]                    # optional; sizes of each connection, defaults shown
//! slots = 64                # receive slots per connection (the credit window is one less)
//! slot_kib = 64             # bytes of a slot: the largest message sent inline
//! pool_mib = 8              # registered pool per connection: half out, half in; a frame
//!                           # (a chunk plus its header) must fit a half
//! device = ""               # rdma: device name (empty: the first under /sys/class/infiniband)
//! fabric = "/c/fabric.sock" # soft-rdma: the software fabric's socket (`t3fs fabric`)
//! ```
//!
//! Invariant: a config that loads can open its device or says why not (no device, a build
//! without the `rdma` feature, no fabric at the socket) before any traffic. Not here: the
//! transport itself (`transport::rdma`).

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::rdma::channel::ChannelConfig;
use crate::rdma::verbs::Verbs;
use crate::transport::RdmaWire;

/// The transports a node may use.
pub const TRANSPORTS: [&str; 3] = ["tcp", "rdma", "soft-rdma"];

/// `[rdma]`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct RdmaSection {
    /// Receive slots per connection.
    pub slots: u32,
    /// Bytes per slot, in KiB.
    pub slot_kib: u32,
    /// Registered pool per connection, in MiB.
    pub pool_mib: u32,
    /// `rdma`: the device's name; empty for the first.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub device: String,
    /// `soft-rdma`: the fabric's socket.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fabric: Option<PathBuf>,
}

impl Default for RdmaSection {
    fn default() -> Self {
        Self {
            slots: 64,
            slot_kib: 64,
            pool_mib: 8,
            device: String::new(),
            fabric: None,
        }
    }
}

impl RdmaSection {
    /// What is wrong with the section for `transport` and `chunk_size`: (key, message).
    pub fn check(&self, transport: &str, chunk_size: u32) -> Result<(), (&'static str, String)> {
        if !TRANSPORTS.contains(&transport) {
            return Err((
                "node.transport",
                format!("`{transport}`: expected \"tcp\", \"rdma\" or \"soft-rdma\""),
            ));
        }
        if !(2..=4096).contains(&self.slots) {
            return Err(("rdma.slots", format!("{}: must be 2 ..= 4096", self.slots)));
        }
        if !(1..=1024).contains(&self.slot_kib) {
            return Err((
                "rdma.slot_kib",
                format!("{}: must be 1 ..= 1024", self.slot_kib),
            ));
        }
        // A chunk's frame (payload plus header) must fit half the pool.
        let need = u64::from(chunk_size) + (64 << 10);
        if u64::from(self.pool_mib) << 19 < need || self.pool_mib > 4096 {
            return Err((
                "rdma.pool_mib",
                format!(
                    "{}: half the pool must hold a chunk of {chunk_size} bytes and its header \
                     (at least {} MiB), at most 4096",
                    self.pool_mib,
                    (2 * need).div_ceil(1 << 20)
                ),
            ));
        }
        if transport == "soft-rdma" && self.fabric.is_none() {
            return Err((
                "rdma.fabric",
                "soft-rdma needs the fabric's socket (`t3fs cluster up --transport soft-rdma` \
                 writes it)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Opens the device `transport` names (`None` for TCP); `name` names this end on a software
    /// fabric. The error says what is missing.
    pub fn wire(&self, transport: &str, name: &str) -> Result<Option<RdmaWire>, String> {
        let device: Arc<dyn Verbs> = match transport {
            "tcp" => return Ok(None),
            "soft-rdma" => {
                let path = self
                    .fabric
                    .as_ref()
                    .ok_or("soft-rdma: no rdma.fabric socket")?;
                Arc::new(
                    crate::rdma::soft::remote::RemoteDevice::connect(path, name)
                        .map_err(|e| e.to_string())?,
                )
            }
            "rdma" => open_device(&self.device)?,
            t => return Err(format!("unknown transport `{t}`")),
        };
        let mut w = RdmaWire::new(device);
        w.channel = ChannelConfig {
            slots: self.slots,
            slot_bytes: self.slot_kib << 10,
            bulk_bytes: u64::from(self.pool_mib) << 20,
        };
        Ok(Some(w))
    }
}

/// The verbs device `name` (empty: the first), through rdma-sys.
#[cfg(feature = "rdma")]
fn open_device(name: &str) -> Result<Arc<dyn Verbs>, String> {
    let name = (!name.is_empty()).then_some(name);
    crate::rdma::ibv::IbvDevice::open(name, 1, 0)
        .map(|d| Arc::new(d) as Arc<dyn Verbs>)
        .map_err(|e| e.to_string())
}

/// Without the `rdma` feature there is no provider for devices.
#[cfg(not(feature = "rdma"))]
fn open_device(_name: &str) -> Result<Arc<dyn Verbs>, String> {
    Err(
        "this build has no RDMA provider: rebuild with `--features rdma` (needs libibverbs-dev, \
         librdmacm-dev and libclang-dev); for a loopback cluster without hardware use \
         `--transport soft-rdma`"
            .into(),
    )
}

#[cfg(test)]
mod tests {
    use super::RdmaSection;

    #[test]
    fn a_bad_section_names_its_key_and_a_missing_device_says_what_is_missing() {
        let ok = RdmaSection::default();
        assert_eq!(ok.check("tcp", 1 << 20), Ok(()));
        assert_eq!(ok.check("udp", 1 << 20).unwrap_err().0, "node.transport");
        assert_eq!(ok.check("rdma", 4 << 20).unwrap_err().0, "rdma.pool_mib");
        assert_eq!(ok.check("soft-rdma", 1 << 20).unwrap_err().0, "rdma.fabric");
        let bad = RdmaSection {
            slots: 1,
            ..RdmaSection::default()
        };
        assert_eq!(bad.check("rdma", 1 << 20).unwrap_err().0, "rdma.slots");
        assert!(ok.wire("tcp", "n").unwrap().is_none());
        // This host has no RDMA device (and the build may lack the provider): the message
        // names what is missing.
        if !std::path::Path::new("/sys/class/infiniband").exists() {
            let e = ok.wire("rdma", "n").expect_err("no device here");
            assert!(
                e.contains("/sys/class/infiniband") || e.contains("--features rdma"),
                "{e}"
            );
        }
        let gone = RdmaSection {
            fabric: Some("/nonexistent/fabric.sock".into()),
            ..RdmaSection::default()
        };
        let e = gone.wire("soft-rdma", "n").expect_err("no fabric");
        assert!(e.contains("/nonexistent/fabric.sock"), "{e}");
    }
}
