//! The hop log: with `T3FS_HOP_LOG=DIR` in its environment, a node writes one line per input
//! its machine takes and per answer it returns, stamped with the host's clock, to
//! `DIR/NAME.hops`. Every process on a host reads the same clock, so the lines of a loopback
//! cluster's nodes and of the client in `t3fs bench io` merge into one timeline of each
//! request, hop by hop (`scripts/calibration/hops.py` does it, beside the simulator's `--log`
//! of the same job).
//!
//! A line is `SECONDS NODE WHAT`, the form of the simulator's `--log` lines, so one parser
//! reads both: `recv from FROM: KIND` (a message, as the machine gets it: after the transport
//! read and decoded it), `disk TARGET done: KIND` (a chunk operation's completion as the node
//! gets it), `call` and `return` (a local call, as the native client's caller makes it and gets
//! its answer).
//!
//! Not here: anything on by default (without the variable nothing is opened or written), and
//! the times inside the transport or the store thread (the store operation's span is the
//! metrics' `t3fs_io_latency_us`). Lines are buffered and written every status tick and at
//! shutdown, so the log costs a formatted line per input, not a system call.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// The environment variable naming the directory.
pub const HOP_LOG_ENV: &str = "T3FS_HOP_LOG";

/// One node's hop log.
pub struct HopLog {
    node: String,
    out: BufWriter<File>,
}

impl HopLog {
    /// The log of node `name`, if the environment asks for one. A directory that cannot be
    /// written is reported once and leaves the node without a log.
    pub fn from_env(name: &str) -> Option<Self> {
        let dir = std::env::var_os(HOP_LOG_ENV)?;
        let path = Path::new(&dir).join(format!("{name}.hops"));
        match File::create(&path) {
            Ok(f) => Some(Self {
                node: name.to_string(),
                out: BufWriter::with_capacity(1 << 20, f),
            }),
            Err(e) => {
                tracing::warn!("{HOP_LOG_ENV}: cannot write {}: {e}", path.display());
                None
            }
        }
    }

    /// One line: `what` happened now.
    pub fn line(&mut self, what: std::fmt::Arguments<'_>) {
        let _ = writeln!(self.out, "{:.6} {} {what}", clock_secs(), self.node);
    }

    /// Writes what is buffered.
    pub fn flush(&mut self) {
        let _ = self.out.flush();
    }
}

/// The host's clock, in seconds since the Unix epoch: the one every process of the host reads
/// (a step of the clock during a run shows as one odd hop; the log is for short runs).
fn clock_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_carry_the_node_and_a_clock_that_does_not_go_back() {
        let dir = std::env::temp_dir().join(format!("t3fs-hops-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("storage-1.hops");
        let mut log = HopLog {
            node: "storage-1".into(),
            out: BufWriter::new(File::create(&path).unwrap()),
        };
        log.line(format_args!("recv from n2: {}", "Write"));
        log.line(format_args!("disk t1 done: {}", "chunk_update"));
        log.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let lines: Vec<(f64, &str)> = text
            .lines()
            .map(|l| {
                let (t, rest) = l.split_once(' ').unwrap();
                (t.parse().unwrap(), rest)
            })
            .collect();
        assert_eq!(lines[0].1, "storage-1 recv from n2: Write");
        assert_eq!(lines[1].1, "storage-1 disk t1 done: chunk_update");
        assert!(lines[0].0 > 0.0 && lines[1].0 >= lines[0].0);
    }
}
