//! The host probe: this host's physical bounds, measured the same way every time, so a
//! benchmark can say which bound binds and what fraction of it the cluster reached.
//!
//! Measured on the filesystem of the cluster's data directory: sequential 1 MiB writes with an
//! fdatasync after each (the durability a chunk update needs), sequential 1 MiB O_DIRECT reads,
//! and 4 KiB O_DIRECT random reads with `qd` threads in flight; and loopback TCP bandwidth (one
//! stream of 1 MiB writes). A probe is saved as `probe.json` with its time, and reused while it
//! is young enough (the caller states its age). Not here: the roofline arithmetic (bench_io).

use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const MIB: usize = 1 << 20;

/// The bounds of this host.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    /// When it was measured (Unix seconds).
    pub at: u64,
    /// Sequential 1 MiB writes, fdatasync after each, MiB/s.
    pub disk_write_mibs: f64,
    /// Sequential 1 MiB O_DIRECT reads, MiB/s.
    pub disk_read_mibs: f64,
    /// 4 KiB O_DIRECT random reads at `qd`, IOPS.
    pub rand_read_iops: f64,
    /// The queue depth of `rand_read_iops`.
    pub qd: usize,
    /// Loopback TCP, one stream, MiB/s.
    pub loopback_mibs: f64,
}

impl Probe {
    /// As JSON.
    pub fn json(&self) -> String {
        format!(
            "{{\"at\": {}, \"disk_write_mibs\": {:.1}, \"disk_read_mibs\": {:.1}, \"rand_read_iops\": {:.0}, \"qd\": {}, \"loopback_mibs\": {:.1}}}\n",
            self.at, self.disk_write_mibs, self.disk_read_mibs, self.rand_read_iops, self.qd, self.loopback_mibs
        )
    }

    /// Parses [`Probe::json`]'s output.
    pub fn parse(text: &str) -> Option<Self> {
        let field = |k: &str| -> Option<f64> {
            let rest = &text[text.find(&format!("\"{k}\": "))? + k.len() + 4..];
            rest[..rest.find([',', '}'])?].trim().parse().ok()
        };
        Some(Self {
            at: field("at")? as u64,
            disk_write_mibs: field("disk_write_mibs")?,
            disk_read_mibs: field("disk_read_mibs")?,
            rand_read_iops: field("rand_read_iops")?,
            qd: field("qd")? as usize,
            loopback_mibs: field("loopback_mibs")?,
        })
    }

    /// Its age.
    pub fn age(&self) -> Duration {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        Duration::from_secs(now.saturating_sub(self.at))
    }
}

fn aligned(len: usize) -> (Vec<u8>, usize) {
    // O_DIRECT wants 4 KiB-aligned buffers: over-allocate and start at the aligned offset.
    let v = vec![0u8; len + 4096];
    let off = (4096 - (v.as_ptr() as usize % 4096)) % 4096;
    (v, off)
}

fn disk(
    dir: &Path,
    size_mib: usize,
    qd: usize,
    rand_for: Duration,
) -> std::io::Result<(f64, f64, f64)> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!(".t3fs-probe-{}", std::process::id()));
    let data: Vec<u8> = (0..MIB).map(|i| (i * 7) as u8).collect();
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .read(true)
        .open(&path)?;
    let t = Instant::now();
    for k in 0..size_mib {
        f.write_all_at(&data, (k * MIB) as u64)?;
        f.sync_data()?;
    }
    let write = size_mib as f64 / t.elapsed().as_secs_f64();
    drop(f);
    let direct = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path);
    let r = (|| {
        let f = direct?;
        let (mut buf, off) = aligned(MIB);
        let t = Instant::now();
        for k in 0..size_mib {
            f.read_exact_at(&mut buf[off..off + MIB], (k * MIB) as u64)?;
        }
        let read = size_mib as f64 / t.elapsed().as_secs_f64();
        let f = std::sync::Arc::new(f);
        let stop = Instant::now() + rand_for;
        let blocks = (size_mib * MIB / 4096) as u64;
        let threads: Vec<_> = (0..qd)
            .map(|q| {
                let f = f.clone();
                std::thread::spawn(move || -> std::io::Result<u64> {
                    let (mut buf, off) = aligned(4096);
                    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (q as u64 + 1);
                    let mut n = 0;
                    while Instant::now() < stop {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        f.read_exact_at(&mut buf[off..off + 4096], (x % blocks) * 4096)?;
                        n += 1;
                    }
                    Ok(n)
                })
            })
            .collect();
        let mut n = 0;
        for t in threads {
            n += t
                .join()
                .map_err(|_| std::io::Error::other("probe thread panicked"))??;
        }
        Ok::<_, std::io::Error>((read, n as f64 / rand_for.as_secs_f64()))
    })();
    let _ = std::fs::remove_file(&path);
    let (read, iops) = r?;
    Ok((write, read, iops))
}

fn loopback(size_mib: usize) -> std::io::Result<f64> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    let rx = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = l.accept()?;
        let mut buf = vec![0u8; MIB];
        while s.read(&mut buf)? > 0 {}
        Ok(())
    });
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    let data = vec![1u8; MIB];
    let t = Instant::now();
    for _ in 0..size_mib {
        s.write_all(&data)?;
    }
    drop(s);
    rx.join()
        .map_err(|_| std::io::Error::other("probe thread panicked"))??;
    Ok(size_mib as f64 / t.elapsed().as_secs_f64())
}

/// Measures this host on `dir`'s filesystem (`size_mib` MiB of disk traffic, `qd` random
/// readers for `rand_for`).
pub fn measure(
    dir: &Path,
    size_mib: usize,
    qd: usize,
    rand_for: Duration,
) -> std::io::Result<Probe> {
    let (disk_write_mibs, disk_read_mibs, rand_read_iops) = disk(dir, size_mib, qd, rand_for)?;
    let loopback_mibs = loopback(size_mib * 4)?;
    Ok(Probe {
        at: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs(),
        disk_write_mibs,
        disk_read_mibs,
        rand_read_iops,
        qd,
        loopback_mibs,
    })
}

/// The probe saved at `file` if it is younger than `max_age` and was taken at `qd`, else a new
/// one (saved there).
pub fn load_or_measure(
    file: &Path,
    dir: &Path,
    qd: usize,
    max_age: Duration,
) -> std::io::Result<Probe> {
    if let Some(p) = std::fs::read_to_string(file)
        .ok()
        .and_then(|t| Probe::parse(&t))
    {
        if p.age() < max_age && p.qd == qd {
            return Ok(p);
        }
    }
    let p = measure(dir, 256, qd, Duration::from_secs(3))?;
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(file, p.json())?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_round_trips_through_its_json() {
        let p = Probe {
            at: 5,
            disk_write_mibs: 1.5,
            disk_read_mibs: 2.0,
            rand_read_iops: 3.0,
            qd: 4,
            loopback_mibs: 7.5,
        };
        assert_eq!(Probe::parse(&p.json()), Some(p));
        assert_eq!(Probe::parse("{}"), None);
    }

    #[test]
    fn a_small_probe_measures_positive_bounds() {
        let dir = std::env::temp_dir().join(format!("t3fs-probe-{}", std::process::id()));
        let p = measure(&dir, 4, 2, Duration::from_millis(100)).unwrap();
        assert!(
            p.disk_write_mibs > 0.0
                && p.disk_read_mibs > 0.0
                && p.rand_read_iops > 0.0
                && p.loopback_mibs > 0.0,
            "{p:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
