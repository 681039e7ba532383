//! The host probe: this host's physical bounds, measured the same way every time, so a
//! benchmark can say which bound binds and what fraction of it the cluster reached.
//!
//! Measured on the filesystem of the cluster's data directory, at the concurrency the run puts
//! on the disk (a bound taken at queue depth 1 would flatter any concurrent system): 1 MiB
//! writes by `write_qd` writers at once, each made durable by fdatasync, through the page cache
//! and with O_DIRECT (the best of three trials of each: a bound is the best the disk shows), sequential 1 MiB O_DIRECT reads by `qd`
//! readers, and 4 KiB O_DIRECT random reads with `qd` threads in flight; and loopback TCP
//! bandwidth (the best of one to `cores` streams of 1 MiB writes). A probe is saved as `probe.json` with its time, and
//! reused while it is young enough (the caller states its age). Not here: the roofline
//! arithmetic (`roofline.rs`).

use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const MIB: usize = 1 << 20;
/// Trials of the durable-write probe; the best counts.
const WRITE_TRIALS: usize = 3;
/// Trials of the loopback probe at each stream count; the best counts.
const LOOPBACK_TRIALS: usize = 3;

/// The bounds of this host.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    /// When it was measured (Unix seconds).
    pub at: u64,
    /// 1 MiB writes by `write_qd` writers, made durable (fdatasync), MiB/s: the better of
    /// buffered and O_DIRECT writes.
    pub disk_write_mibs: f64,
    /// The buffered half of `disk_write_mibs` alone: the file store's data path (page cache,
    /// then fdatasync), which is not a bound of the host but explains a file-store write.
    pub disk_write_buffered_mibs: f64,
    /// Sequential 1 MiB O_DIRECT reads, MiB/s.
    pub disk_read_mibs: f64,
    /// 4 KiB O_DIRECT random reads at `qd`, IOPS.
    pub rand_read_iops: f64,
    /// The queue depth of `disk_read_mibs` and `rand_read_iops` (the run's total iodepth).
    pub qd: usize,
    /// Concurrent fdatasync writers of `disk_write_mibs` (the run's queue depth times the
    /// replicas: on one host every replica of a write lands on the same disk).
    pub write_qd: usize,
    /// Loopback TCP, MiB/s over `loopback_streams` connections at once (the best count).
    pub loopback_mibs: f64,
    /// The connections of `loopback_mibs`.
    pub loopback_streams: usize,
}

impl Probe {
    /// As JSON.
    pub fn json(&self) -> String {
        format!(
            "{{\"at\": {}, \"disk_write_mibs\": {:.1}, \"disk_write_buffered_mibs\": {:.1}, \"disk_read_mibs\": {:.1}, \"rand_read_iops\": {:.0}, \"qd\": {}, \"write_qd\": {}, \"loopback_mibs\": {:.1}, \"loopback_streams\": {}}}\n",
            self.at, self.disk_write_mibs, self.disk_write_buffered_mibs, self.disk_read_mibs, self.rand_read_iops, self.qd, self.write_qd, self.loopback_mibs, self.loopback_streams
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
            disk_write_buffered_mibs: field("disk_write_buffered_mibs")?,
            disk_read_mibs: field("disk_read_mibs")?,
            rand_read_iops: field("rand_read_iops")?,
            qd: field("qd")? as usize,
            write_qd: field("write_qd")? as usize,
            loopback_mibs: field("loopback_mibs")?,
            // A probe saved before stream counts were recorded is measured again.
            loopback_streams: field("loopback_streams")? as usize,
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

/// Runs `f(thread)` on `n` threads at once and sums their results.
fn parallel(
    n: usize,
    f: impl Fn(usize) -> std::io::Result<u64> + Send + Sync + 'static,
) -> std::io::Result<u64> {
    let f = std::sync::Arc::new(f);
    let threads: Vec<_> = (0..n)
        .map(|q| {
            let f = f.clone();
            std::thread::spawn(move || f(q))
        })
        .collect();
    let mut sum = 0;
    for t in threads {
        sum += t
            .join()
            .map_err(|_| std::io::Error::other("probe thread panicked"))??;
    }
    Ok(sum)
}

/// `streams` writers at once, each writing 1 MiB blocks to its own file and making them durable
/// with one fdatasync at the end: the disk's write bandwidth at that concurrency, durability
/// included, through the page cache or (`direct`) with O_DIRECT, as the file store writes its
/// data. An O_DIRECT trial overwrites files laid out first (untimed), as a store overwrites the
/// extents it reuses: allocating fresh blocks would measure the file system's allocator, not
/// the disk. How often a store syncs (per update, or grouped) is the store's cost, not the
/// disk's, so it is not in the bound; MiB/s over all.
fn disk_write(dir: &Path, size_mib: usize, streams: usize, direct: bool) -> std::io::Result<f64> {
    let per = size_mib.div_ceil(streams).max(1);
    let tag = std::process::id();
    let path = move |dir: &Path, q: usize| dir.join(format!(".t3fs-probe-w{tag}-{q}"));
    let d = dir.to_path_buf();
    let laid = if direct {
        parallel(streams, move |q| write_pass(&path(&d, q), per, q, true))
    } else {
        Ok(0)
    };
    let d = dir.to_path_buf();
    let timed = laid.and_then(|_| {
        let t = Instant::now();
        parallel(streams, move |q| write_pass(&path(&d, q), per, q, direct))?;
        Ok(t.elapsed())
    });
    for q in 0..streams {
        let _ = std::fs::remove_file(path(dir, q));
    }
    Ok((per * streams) as f64 / timed?.as_secs_f64())
}

/// Writes `per` MiB into `path` (created if absent, never truncated) and fdatasyncs it.
fn write_pass(path: &Path, per: usize, q: usize, direct: bool) -> std::io::Result<u64> {
    // O_DIRECT wants the memory aligned too: the block-aligned window of a larger buffer.
    let mut space = vec![0u8; 2 * MIB];
    let at = space.as_ptr().align_offset(4096);
    let data = &mut space[at..at + MIB];
    for (i, b) in data.iter_mut().enumerate() {
        *b = (i * 7 + q) as u8;
    }
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(false);
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    let f = o.open(path)?;
    for k in 0..per {
        f.write_all_at(data, (k * MIB) as u64)?;
    }
    f.sync_data()?;
    Ok(per as u64)
}

fn disk(
    dir: &Path,
    size_mib: usize,
    qd: usize,
    write_qd: usize,
    rand_for: Duration,
) -> std::io::Result<DiskBounds> {
    std::fs::create_dir_all(dir)?;
    // A bound is the best the disk shows: on shared machines one short trial of durable writes
    // moved between 574 and 1,523 MiB/s within minutes, below what the cluster then sustained.
    // Both ways a store may write (the file store's data is O_DIRECT, its metadata buffered);
    // O_DIRECT is skipped where the file system refuses it (tmpfs).
    let (mut buffered, mut direct) = (0f64, 0f64);
    for _ in 0..WRITE_TRIALS {
        buffered = buffered.max(disk_write(dir, size_mib, write_qd, false)?);
        if let Ok(w) = disk_write(dir, size_mib, write_qd, true) {
            direct = direct.max(w);
        }
    }
    let path = read_file(dir, "probe", size_mib)?;
    let r = (|| {
        let f = std::sync::Arc::new(open_direct(&path)?);
        // Sequential 1 MiB reads by `qd` readers, each over its own stretch of the file.
        let per = (size_mib / qd).max(1);
        let t = Instant::now();
        let g = f.clone();
        let n = parallel(qd.min(size_mib), move |q| {
            let (mut buf, off) = aligned(MIB);
            for k in q * per..(q + 1) * per {
                g.read_exact_at(&mut buf[off..off + MIB], (k * MIB) as u64)?;
            }
            Ok(per as u64)
        })?;
        let read = n as f64 / t.elapsed().as_secs_f64();
        let stop = Instant::now() + rand_for;
        let blocks = (size_mib * MIB / 4096) as u64;
        let n = parallel(qd, move |q| {
            let (mut buf, off) = aligned(4096);
            let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (q as u64 + 1);
            let mut n = 0;
            while Instant::now() < stop {
                f.read_exact_at(&mut buf[off..off + 4096], next_block(&mut x, blocks) * 4096)?;
                n += 1;
            }
            Ok(n)
        })?;
        Ok::<_, std::io::Error>((read, n as f64 / rand_for.as_secs_f64()))
    })();
    let _ = std::fs::remove_file(&path);
    let (read, iops) = r?;
    Ok(DiskBounds {
        write: buffered.max(direct),
        buffered,
        read,
        iops,
    })
}

/// Writes `size_mib` MiB to a file `.t3fs-TAG-PID` in `dir` and makes it durable: what the
/// read probes read (the caller removes it).
fn read_file(dir: &Path, tag: &str, size_mib: usize) -> std::io::Result<std::path::PathBuf> {
    let path = dir.join(format!(".t3fs-{tag}-{}", std::process::id()));
    let data: Vec<u8> = (0..MIB).map(|i| (i * 7) as u8).collect();
    let f = std::fs::File::create(&path)?;
    for k in 0..size_mib {
        f.write_all_at(&data, (k * MIB) as u64)?;
    }
    f.sync_all()?;
    Ok(path)
}

fn open_direct(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

/// The next random 4 KiB block below `blocks` (xorshift64 on `x`).
fn next_block(x: &mut u64, blocks: u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x % blocks
}

/// What [`disk`] measured.
struct DiskBounds {
    write: f64,
    buffered: f64,
    read: f64,
    iops: f64,
}

/// `streams` TCP connections over loopback at once, `size_mib` MiB in all, 1 MiB writes and
/// reads: MiB/s over all.
fn loopback_pass(size_mib: usize, streams: usize) -> std::io::Result<f64> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    let rx = std::thread::spawn(move || -> std::io::Result<()> {
        let readers: Vec<_> = (0..streams)
            .map(|_| {
                let (mut s, _) = l.accept()?;
                Ok(std::thread::spawn(move || -> std::io::Result<()> {
                    let mut buf = vec![0u8; MIB];
                    while s.read(&mut buf)? > 0 {}
                    Ok(())
                }))
            })
            .collect::<std::io::Result<_>>()?;
        for r in readers {
            r.join()
                .map_err(|_| std::io::Error::other("probe thread panicked"))??;
        }
        Ok(())
    });
    let per = size_mib.div_ceil(streams).max(1);
    let t = Instant::now();
    let sent = parallel(streams, move |_| {
        let mut s = std::net::TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        let data = vec![1u8; MIB];
        for _ in 0..per {
            s.write_all(&data)?;
        }
        Ok(per as u64)
    });
    let joined = rx
        .join()
        .map_err(|_| std::io::Error::other("probe thread panicked"));
    let sent = sent?;
    joined??;
    Ok(sent as f64 / t.elapsed().as_secs_f64())
}

/// Loopback TCP bandwidth: the best of [`LOOPBACK_TRIALS`] trials at each stream count from 1
/// to the host's cores (a run moves data over several connections at once: every storage node
/// to the client, every hop of a chain), with the stream count that showed it. On this class
/// of host one stream measured 1.4 to 5.0 GiB/s within an hour and two streams 6 GiB/s: one
/// short single-stream trial is no bound, and a read through the cluster beat it.
fn loopback(size_mib: usize) -> std::io::Result<(f64, usize)> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut best = (0f64, 1);
    for streams in 1..=cores.clamp(1, 4) {
        for _ in 0..LOOPBACK_TRIALS {
            let mibs = loopback_pass(size_mib, streams)?;
            if mibs > best.0 {
                best = (mibs, streams);
            }
        }
    }
    Ok(best)
}

/// Measures this host on `dir`'s filesystem: `size_mib` MiB written by `write_qd` fdatasync
/// writers and read by `qd` O_DIRECT readers, then `qd` 4 KiB random readers for `rand_for`.
pub fn measure(
    dir: &Path,
    size_mib: usize,
    qd: usize,
    write_qd: usize,
    rand_for: Duration,
) -> std::io::Result<Probe> {
    let d = disk(dir, size_mib, qd.max(1), write_qd.max(1), rand_for)?;
    let (loopback_mibs, loopback_streams) = loopback(size_mib * 4)?;
    Ok(Probe {
        at: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs(),
        disk_write_mibs: d.write,
        disk_write_buffered_mibs: d.buffered,
        disk_read_mibs: d.read,
        rand_read_iops: d.iops,
        qd,
        write_qd,
        loopback_mibs,
        loopback_streams,
    })
}

/// The probe saved at `file` if it is younger than `max_age` and was taken at `qd` and
/// `write_qd`, else a new
/// one (saved there).
pub fn load_or_measure(
    file: &Path,
    dir: &Path,
    qd: usize,
    write_qd: usize,
    max_age: Duration,
) -> std::io::Result<Probe> {
    if let Some(p) = std::fs::read_to_string(file)
        .ok()
        .and_then(|t| Probe::parse(&t))
    {
        if p.age() < max_age && p.qd == qd && p.write_qd == write_qd {
            return Ok(p);
        }
    }
    let p = measure(dir, 256, qd, write_qd, Duration::from_secs(3))?;
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
            disk_write_buffered_mibs: 1.5,
            disk_read_mibs: 2.0,
            rand_read_iops: 3.0,
            qd: 4,
            write_qd: 12,
            loopback_mibs: 7.5,
            loopback_streams: 2,
        };
        assert_eq!(Probe::parse(&p.json()), Some(p));
        assert_eq!(Probe::parse("{}"), None);
    }

    #[test]
    fn a_small_probe_measures_positive_bounds() {
        let dir = std::env::temp_dir().join(format!("t3fs-probe-{}", std::process::id()));
        let p = measure(&dir, 4, 2, 3, Duration::from_millis(100)).unwrap();
        assert!(
            p.disk_write_mibs > 0.0
                && p.disk_read_mibs > 0.0
                && p.rand_read_iops > 0.0
                && p.loopback_mibs > 0.0
                && (1..=4).contains(&p.loopback_streams),
            "{p:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
