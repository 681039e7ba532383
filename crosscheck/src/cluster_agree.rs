//! "replicas agree" on a real run, from two sources: the chunk metadata dump taken over the RPC
//! while the cluster still ran (once quiescent), compared across each chain's serving targets by
//! the simulator's agreement check on (version, length, CRC32C) fingerprints; then every chunk
//! read from the stores after the stop held against the dump, so the bytes on disk are the ones
//! the running targets vouched for.
//!
//! Invariant: either source missing makes the verdict UNKNOWN, never PASS. Not here: taking the
//! dump (t3fs-real `chunk_dump`) or reading the stores (`scenario_run::dump`).

use std::collections::BTreeMap;

use t3fs_core::routing::PublicState;
use t3fs_real::chunk_dump::Dump;
use t3fs_real::scenario_run::dump::{newest, Content, Contents};
use t3fs_real::scenario_run::RealOutcome;
use t3fs_sim::check::Verdict;

/// A chunk's fingerprint as the agreement check compares it: its length and CRC32C.
fn fingerprint(len: u32, checksum: u32) -> Vec<u8> {
    [len.to_le_bytes(), checksum.to_le_bytes()].concat()
}

/// Per chain (newest state seen), its serving targets' dumped chunks in chain order.
fn live_contents(o: &RealOutcome, d: &Dump) -> Result<Contents, String> {
    let mut out = Vec::new();
    for (id, c) in newest(&o.seen) {
        let mut targets = Vec::new();
        for t in c.targets.iter().filter(|t| t.state == PublicState::Serving) {
            let chunks = d
                .get(&t.target)
                .ok_or_else(|| format!("the dump has no {} (serving in chain {id})", t.target))?;
            let content: Content = chunks
                .iter()
                .map(|s| (s.chunk, (s.version.0, fingerprint(s.len, s.checksum))))
                .collect();
            targets.push((t.target, content));
        }
        out.push((id, targets));
    }
    Ok(out)
}

/// The first chunk whose bytes on disk differ from the dump's version, length or checksum.
fn disk_matches_dump(disk: &Contents, d: &Dump) -> Result<usize, String> {
    let mut n = 0;
    for (target, content) in disk.iter().flat_map(|(_, ts)| ts.iter()) {
        let dumped: BTreeMap<_, _> = d
            .get(target)
            .map(|cs| cs.iter().map(|s| (s.chunk, s)).collect())
            .unwrap_or_default();
        if dumped.len() != content.len() {
            return Err(format!(
                "{target}: {} committed chunks in the dump, {} in its store after the stop",
                dumped.len(),
                content.len()
            ));
        }
        for (chunk, (version, data)) in content {
            let same = dumped.get(chunk).is_some_and(|s| {
                s.version.0 == *version
                    && s.len as usize == data.len()
                    && s.checksum == t3fs_core::crc32c::checksum(data)
            });
            if !same {
                return Err(format!(
                    "{target} chunk {chunk}: the store after the stop holds v{version} ({} bytes), the dump said {:?}",
                    data.len(),
                    dumped.get(chunk)
                ));
            }
            n += 1;
        }
    }
    Ok(n)
}

/// The verdict.
pub fn agreement(o: &RealOutcome) -> Verdict {
    let d = match &o.live_dump {
        Ok(d) => d,
        Err(e) => return Verdict::Unknown(format!("no chunk metadata dump: {e}")),
    };
    let live = match live_contents(o, d) {
        Ok(c) => c,
        Err(e) => return Verdict::Unknown(e),
    };
    let v = t3fs_sim::check::agreement::check(&live);
    let Verdict::Pass(said) = v else {
        return match v {
            Verdict::Fail(e) => Verdict::Fail(format!("in the live dump: {e}")),
            other => other,
        };
    };
    match &o.contents {
        Err(e) => Verdict::Unknown(format!("{said} in the live dump; but {e}")),
        Ok(disk) => match disk_matches_dump(disk, d) {
            Ok(n) => Verdict::Pass(format!(
                "{said} in the live dump (version, length, CRC32C); the {n} read from the stores after the stop match it"
            )),
            Err(e) => Verdict::Fail(e),
        },
    }
}
