//! The framing of the engines' logs: frames `[magic u32][len u32][crc32c u32][payload: len
//! bytes]`, integers little-endian, one magic per engine ([`Framing`]: the chunk store's
//! metadata log is `T3CM`, WalKv's log and snapshot `T3WL`), each engine with its payloads.
//!
//! Why a magic per frame: after a damaged frame its length field cannot be trusted, so finding
//! out whether whole frames (acknowledged work) follow it means scanning byte by byte
//! ([`Framing::whole_after`]); the magic makes that scan cheap and false candidates rare (a
//! candidate must also pass its CRC and decode).
//!
//! Invariants: a frame counts only when whole: its magic, all `len` bytes present, its CRC32C
//! matching, and its payload decoding; a reader stops at the first position holding no such
//! frame ([`Frames::end`]).
//!
//! Not here: payloads, file headers, and what recovery does after the last whole frame, which
//! differs by engine: WalKv cuts a torn tail and refuses damage only when a frame of a newer
//! commit follows; the chunk store zeroes a torn tail in place (its zeros are room written
//! ahead) and refuses damage when any whole record follows.

use t3fs_core::crc32c;

/// Bytes of a frame's head: magic, length, CRC32C.
pub(crate) const HEAD: usize = 12;

/// One engine's framing: the magic its frames start with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Framing(u32);

/// The little-endian `u32` at `i` of `b`.
fn word(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(i..i.checked_add(4)?)?.try_into().ok()?,
    ))
}

impl Framing {
    /// Frames starting with the four bytes `magic`, as they stand on disk.
    pub(crate) const fn new(magic: &[u8; 4]) -> Self {
        Self(u32::from_le_bytes(*magic))
    }

    /// Appends one frame carrying `payload` to `out`.
    pub(crate) fn put(self, payload: &[u8], out: &mut Vec<u8>) {
        out.reserve(HEAD + payload.len());
        out.extend_from_slice(&self.0.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32c::checksum(payload).to_le_bytes());
        out.extend_from_slice(payload);
    }

    /// The payload of the frame at `at` of `data` if it is all there and passes its CRC, and
    /// where the frame ends.
    pub(crate) fn payload_at(self, data: &[u8], at: usize) -> Option<(&[u8], usize)> {
        let head = data.get(at..at.checked_add(HEAD)?)?;
        if word(head, 0)? != self.0 {
            return None;
        }
        let end = (at + HEAD).checked_add(word(head, 4)? as usize)?;
        let payload = data.get(at + HEAD..end)?;
        (crc32c::checksum(payload) == word(head, 8)?).then_some((payload, end))
    }

    /// The whole frame at `at` of `data` decoded by `decode`, and where it ends.
    pub(crate) fn decode_at<T>(
        self,
        data: &[u8],
        at: usize,
        decode: impl FnOnce(&[u8]) -> Option<T>,
    ) -> Option<(T, usize)> {
        let (payload, end) = self.payload_at(data, at)?;
        Some((decode(payload)?, end))
    }

    /// The whole frames of `data` from `start` on, decoded by `decode`, with their offsets, up
    /// to the first position that holds none.
    pub(crate) fn frames<T, D>(self, data: &[u8], start: usize, decode: D) -> Frames<'_, D>
    where
        D: Fn(&[u8]) -> Option<T>,
    {
        Frames {
            framing: self,
            data,
            at: start,
            decode,
        }
    }

    /// Whether a whole frame whose payload `counts` starts anywhere after `at`: then what is
    /// at `at` is damage in front of it, not a torn tail.
    pub(crate) fn whole_after(
        self,
        data: &[u8],
        at: usize,
        mut counts: impl FnMut(&[u8]) -> bool,
    ) -> bool {
        (at.saturating_add(1)..data.len()).any(|p| {
            self.payload_at(data, p)
                .is_some_and(|(payload, _)| counts(payload))
        })
    }
}

/// The whole frames of a log, in order ([`Framing::frames`]).
pub(crate) struct Frames<'a, D> {
    framing: Framing,
    data: &'a [u8],
    at: usize,
    decode: D,
}

impl<D> Frames<'_, D> {
    /// Where the next frame would start: after the iteration, the end of the whole frames
    /// (the file's length, or where a torn tail or damage starts).
    pub(crate) fn end(&self) -> usize {
        self.at
    }
}

impl<T, D: Fn(&[u8]) -> Option<T>> Iterator for Frames<'_, D> {
    type Item = (usize, T);

    fn next(&mut self) -> Option<(usize, T)> {
        let (item, end) = self.framing.decode_at(self.data, self.at, &self.decode)?;
        Some((std::mem::replace(&mut self.at, end), item))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: Framing = Framing::new(b"T3XX");

    fn frames(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = b"header".to_vec();
        for p in payloads {
            F.put(p, &mut out);
        }
        out
    }

    #[test]
    fn the_magics_are_the_formats_words() {
        // The words the engines wrote before this layer: the bytes on disk are unchanged.
        assert_eq!(Framing::new(b"T3CM"), Framing(0x4d43_3354));
        assert_eq!(Framing::new(b"T3WL"), Framing(0x4c57_3354));
        let mut out = Vec::new();
        Framing::new(b"T3WL").put(b"abc", &mut out);
        assert_eq!(&out[..8], b"T3WL\x03\0\0\0");
        assert_eq!(&out[8..12], &crc32c::checksum(b"abc").to_le_bytes());
        assert_eq!(&out[12..], b"abc");
    }

    #[test]
    fn frames_stop_at_the_first_that_is_not_whole() {
        let data = frames(&[b"one", b"two", b"three"]);
        let decode = |p: &[u8]| Some(p.to_vec());
        let mut it = F.frames(&data, 6, decode);
        let got: Vec<_> = it.by_ref().collect();
        assert_eq!(got.len(), 3);
        assert_eq!((got[1].0, &got[1].1[..]), (6 + HEAD + 3, &b"two"[..]));
        assert_eq!(it.end(), data.len());
        // Torn: the last frame runs past the end.
        let mut it = F.frames(&data[..data.len() - 1], 6, decode);
        assert_eq!(it.by_ref().count(), 2);
        assert_eq!(it.end(), got[2].0);
        // A payload the engine refuses ends the frames too.
        let picky = |p: &[u8]| (p != b"two").then_some(());
        let mut it = F.frames(&data, 6, picky);
        assert_eq!(it.by_ref().count(), 1);
        assert_eq!(it.end(), got[1].0);
        // Another engine's magic is no frame.
        assert_eq!(Framing::new(b"T3YY").frames(&data, 6, decode).count(), 0);
    }

    #[test]
    fn damage_is_told_from_a_torn_tail_by_what_follows() {
        let data = frames(&[b"one", b"two", b"three"]);
        let second = 6 + HEAD + 3;
        let mut bad = data.clone();
        bad[second + HEAD] ^= 1;
        assert!(F.payload_at(&bad, second).is_none(), "fails its crc");
        assert!(F.whole_after(&bad, second, |_| true));
        assert!(
            !F.whole_after(&bad, second, |p| p != b"three"),
            "only frames that count"
        );
        // A damaged length field: the byte scan still finds the frame after it.
        let mut bad = data.clone();
        bad[second + 5] ^= 0x40;
        assert!(F.whole_after(&bad, second, |_| true));
        // Nothing whole after the last frame's damage: a torn tail.
        let third = second + HEAD + 3;
        let mut bad = data;
        bad[third + HEAD + 1] ^= 1;
        assert!(!F.whole_after(&bad, third, |_| true));
    }
}
