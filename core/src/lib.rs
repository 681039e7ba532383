//! t3fs-core: the pure, deterministic state machines of t3fs and the contracts they run against.
//!
//! Everything in this crate runs unchanged in three places: the stateright model checker
//! (t3fs-sim, feature `model`), the seeded discrete-event simulator (t3fs-sim) and the real tokio
//! services (t3fs-real). That only works because every machine obeys one contract.
//!
//! # The determinism contract
//!
//! 1. A machine never reads a clock. `now: Instant` is an argument of every handler.
//! 2. A machine never draws randomness. Timer jitter is a duration *range* on
//!    [`machine::Action::SetTimer`] that the driver resolves with its own seeded RNG; choices such
//!    as which replica serves a read are derived from inputs (request ids).
//! 3. A machine performs no I/O. Every asynchronous effect (send, timer, chunk I/O, KV step) is
//!    an [`machine::Action`], and every completion is an [`machine::Event`]. An `Io` action is
//!    answered by exactly one `IoDone` unless the node crashes first.
//! 4. State uses `BTreeMap`/`BTreeSet`/`Vec`/`VecDeque` (or [`vec_map::VecMap`], which orders,
//!    compares and hashes like a `BTreeMap`), never hash maps: iteration order must not depend
//!    on the process. Machine state derives `Clone, Debug, Eq, Hash` so the model checker can
//!    store and compare it.
//! 5. No threads, no globals, no `unsafe`.
//! 6. Every queue has a bound from [`limits`]. Overflow is answered with a typed status, never
//!    by growing.
//! 7. Handlers tolerate message loss, duplication and reordering; input from the network is
//!    decoded by [`wire::codec`], which returns errors and never panics.
//!
//! `core/clippy.toml` declares the bans on clocks, threads and hash maps for clippy (a plain
//! `cargo clippy -p t3fs-core` reports them; CI's clippy step runs only the MSRV lint, so in CI
//! they hold by review). `scripts/check-deps.sh` checks with `cargo tree` that this crate pulls
//! in no workspace crate and no async or OS crate. See `docs/ARCHITECTURE.md`.
//!
//! # What is here
//!
//! - [`machine`]: the `Machine` trait with `Event`, `Action` and `Outbox`.
//! - [`node`]: the node runtime every driver runs machines through (timers, in-flight I/O, the
//!   `Host` trait), so the simulator and the tokio driver execute actions with the same code.
//! - [`ids`]: newtype identifiers and versions with their compact `Display` forms.
//! - [`time`]: the `Instant` handed to machines (nanoseconds from one cluster-wide epoch).
//! - [`limits`]: every bound in one place.
//! - [`routing`]: routing info (chains, chain versions, public and local states) as mgmtd
//!   publishes it.
//! - [`layout`]: a file's chunk size and chains, and the split of a byte range into chunk I/Os.
//! - [`payload`]: `Payload`, a write's bytes shared instead of copied, with their CRC32Cs.
//! - [`crc32c`]: CRC32C (Castagnoli) used end to end for chunk payloads.
//! - [`vec_map`]: `VecMap`, an ordered map kept as a sorted deque for small, append-mostly maps.
//! - [`chunk`]: the completion-based `ChunkStore` contract.
//! - [`kv`]: the transactional KV contract and the in-memory MVCC reference engine.
//! - [`wire`]: the versioned binary codec (`docs/wire.md`) and the nouns every message carries
//!   (meta requests and answers, inodes, users); a leaf that names no machine.
//! - [`msg`]: the wire messages of every service.
//! - [`storage`]: the CRAQ storage machine (3FS §3): writes, reads, resync, exactly-once.
//! - [`client`]: the client machine (routing cache, chunk split, retry, namespace calls).
//! - [`mgmtd`]: the cluster manager machine (3FS §2): lease election, heartbeats, chain updates.
//! - [`meta`]: the namespace over the KV and the stateless meta server machine (3FS §4).
//! - [`bugs`]: deliberately broken variants that checkers must catch.
//! - `testing` (feature `testing`): in-memory reference chunk store and the conformance suites.
//! - `appendix_b` (tests only): 3FS's suspected weak spots written as tests.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(test)]
mod appendix_b;
pub mod bugs;
pub mod chunk;
pub mod client;
pub mod crc32c;
pub mod ids;
pub mod kv;
pub mod layout;
pub mod limits;
pub mod machine;
pub mod meta;
pub mod mgmtd;
pub mod msg;
pub mod node;
pub mod payload;
pub mod routing;
pub mod storage;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod time;
pub mod vec_map;
pub mod wire;
