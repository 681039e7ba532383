//! The on-disk formats of the embedded engine: the log (`wal`) and the snapshot (`snapshot`).
//!
//! Both files start with an 8-byte header naming the format, so that a foreign or older file
//! is refused instead of being read as a log of zero commits. After it come frames
//! `[magic u32][len u32][crc32c u32][payload: len bytes]` (magic `T3WL`; the framing, and why
//! each frame has a magic, in `durable/frame.rs`, shared with the chunk store), payload
//! `[version u64][count u32][mutations]`; all integers little-endian. The log holds one frame
//! per committed transaction in version order; the snapshot holds exactly one frame whose
//! mutations are `Set`s of every live key and whose version is the commit it reflects.
//!
//! Damage in front of a whole frame is told from a torn tail by a frame after it that also
//! carries a newer version than every frame before the damage (the chunk store's records
//! carry no order, so any whole record counts there).

use t3fs_core::kv::{KeyRange, Mutation};

use crate::durable::frame::{Framing, HEAD};

/// First bytes of a log file.
pub const LOG_HEADER: &[u8; 8] = b"t3fswal2";
/// First bytes of a snapshot file.
pub const SNAP_HEADER: &[u8; 8] = b"t3fssnp2";
const FRAMES: Framing = Framing::new(b"T3WL");

/// One decoded frame.
#[derive(Debug)]
pub struct Commit {
    /// Where the frame starts in its file.
    pub offset: usize,
    /// The commit version it carries.
    pub version: u64,
    /// Its writes, in order.
    pub mutations: Vec<Mutation>,
}

fn put_u32(out: &mut Vec<u8>, x: u32) {
    out.extend_from_slice(&x.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, b.len() as u32);
    out.extend_from_slice(b);
}

/// One frame carrying `version` and `mutations`.
pub fn encode(version: u64, mutations: &[Mutation]) -> Vec<u8> {
    let mut p = Vec::with_capacity(64);
    p.extend_from_slice(&version.to_le_bytes());
    put_u32(&mut p, mutations.len() as u32);
    for m in mutations {
        match m {
            Mutation::Set(k, v) => {
                p.push(0);
                put_bytes(&mut p, k);
                put_bytes(&mut p, v);
            }
            Mutation::Clear(k) => {
                p.push(1);
                put_bytes(&mut p, k);
            }
            Mutation::ClearRange(r) => {
                p.push(2);
                put_bytes(&mut p, &r.begin);
                put_bytes(&mut p, &r.end);
            }
        }
    }
    let mut f = Vec::with_capacity(p.len() + HEAD);
    FRAMES.put(&p, &mut f);
    f
}

/// The length of the frame [`encode`] makes of `mutations` (whatever its version), without
/// making it: what a commit must find room for in the log before it is decided.
pub fn encoded_len(mutations: &[Mutation]) -> usize {
    let body: usize = mutations
        .iter()
        .map(|m| {
            1 + match m {
                Mutation::Set(k, v) => 8 + k.len() + v.len(),
                Mutation::Clear(k) => 4 + k.len(),
                Mutation::ClearRange(r) => 8 + r.begin.len() + r.end.len(),
            }
        })
        .sum();
    HEAD + 8 + 4 + body
}

/// A whole snapshot file for `version` holding `sets`.
pub fn encode_snapshot(version: u64, sets: &[Mutation]) -> Vec<u8> {
    let mut out = SNAP_HEADER.to_vec();
    out.extend_from_slice(&encode(version, sets));
    out
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let (h, t) = self.0.split_at_checked(n)?;
        self.0 = t;
        Some(h)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.u32()? as usize;
        Some(self.take(n)?.to_vec())
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
}

fn decode(payload: &[u8]) -> Option<(u64, Vec<Mutation>)> {
    let mut c = Cursor(payload);
    let version = c.u64()?;
    let n = c.u32()?;
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(match c.u8()? {
            0 => Mutation::Set(c.bytes()?, c.bytes()?),
            1 => Mutation::Clear(c.bytes()?),
            2 => Mutation::ClearRange(KeyRange {
                begin: c.bytes()?,
                end: c.bytes()?,
            }),
            _ => return None,
        });
    }
    c.0.is_empty().then_some((version, out))
}

/// The frames of a log body starting at `start`, and the length of the good prefix they cover.
///
/// Everything from the first position that is not a whole good frame on is a torn tail, and is
/// reported as such (`Ok`, with the shorter length), only if no whole good frame with a newer
/// version than the last good one starts anywhere after it; otherwise the damage sits in front
/// of commits that may have been acknowledged, and `Err` carries the damaged frame's offset.
pub fn scan(data: &[u8], start: usize) -> Result<(Vec<Commit>, usize), usize> {
    let mut frames = FRAMES.frames(data, start, decode);
    let out: Vec<Commit> = frames
        .by_ref()
        .map(|(offset, (version, mutations))| Commit {
            offset,
            version,
            mutations,
        })
        .collect();
    let at = frames.end();
    let last = out.last().map_or(0, |c| c.version);
    let newer = |p: &[u8]| decode(p).is_some_and(|(version, _)| version > last);
    if FRAMES.whole_after(data, at, newer) {
        return Err(at);
    }
    Ok((out, at))
}

/// The version and live keys of a snapshot file, or why it is not one.
pub fn parse_snapshot(data: &[u8]) -> Result<(u64, Vec<Mutation>), String> {
    let Some(body) = data.strip_prefix(SNAP_HEADER.as_slice()) else {
        return Err("not a t3fs snapshot (bad header)".into());
    };
    match FRAMES.decode_at(body, 0, decode) {
        Some(((version, mutations), end)) if end == body.len() => {
            if mutations.iter().any(|m| !matches!(m, Mutation::Set(..))) {
                return Err("damaged snapshot (a mutation other than a set)".into());
            }
            Ok((version, mutations))
        }
        Some(_) => Err("damaged snapshot (bytes after its frame)".into()),
        None => Err("damaged snapshot (torn or failing its checksum)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(k: &str) -> Mutation {
        Mutation::Set(k.into(), b"v".to_vec())
    }

    #[test]
    fn frames_round_trip_and_damage_is_placed() {
        let mut log = LOG_HEADER.to_vec();
        let offsets: Vec<usize> = (1..=3u64)
            .map(|v| {
                let at = log.len();
                log.extend_from_slice(&encode(v, &[set("a"), Mutation::Clear(b"b".to_vec())]));
                at
            })
            .collect();
        let (all, end) = scan(&log, 8).unwrap();
        assert_eq!((all.len(), end), (3, log.len()));
        assert_eq!(all[2].version, 3);
        // Torn: the last frame runs past the end.
        let (some, end) = scan(&log[..log.len() - 3], 8).unwrap();
        assert_eq!((some.len(), end), (2, offsets[2]));
        // The last frame fails its checksum with nothing after it: torn too.
        let mut bad = log.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(scan(&bad, 8).unwrap().1, offsets[2]);
        // The middle frame fails its checksum and a whole frame follows: refused, with where.
        let mut bad = log.clone();
        bad[offsets[1] + HEAD + 2] ^= 1;
        assert_eq!(scan(&bad, 8).unwrap_err(), offsets[1]);
        // Its length field is damaged instead: the byte scan still finds the frame after it.
        let mut bad = log.clone();
        bad[offsets[1] + 5] ^= 0x40;
        assert_eq!(scan(&bad, 8).unwrap_err(), offsets[1]);
        // Zeros after the last frame (a size extended without its data) are a torn tail.
        let mut zeros = log.clone();
        zeros.extend_from_slice(&[0; 40]);
        assert_eq!(scan(&zeros, 8).unwrap().1, log.len());
    }

    #[test]
    fn encoded_len_is_the_frames_length() {
        let range = Mutation::ClearRange(KeyRange {
            begin: b"a".to_vec(),
            end: b"zz".to_vec(),
        });
        for m in [
            vec![],
            vec![set("key")],
            vec![set("a"), Mutation::Clear(b"bc".to_vec()), range],
        ] {
            assert_eq!(encoded_len(&m), encode(u64::MAX, &m).len());
        }
    }

    #[test]
    fn snapshots_parse_or_say_why_not() {
        let s = encode_snapshot(7, &[set("a"), set("b")]);
        assert_eq!(parse_snapshot(&s).unwrap().0, 7);
        assert!(parse_snapshot(&s[..s.len() - 1]).is_err());
        assert!(parse_snapshot(b"garbage").is_err());
        let mut extra = s.clone();
        extra.push(0);
        assert!(parse_snapshot(&extra).is_err());
    }
}
