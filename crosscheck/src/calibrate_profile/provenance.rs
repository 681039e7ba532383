//! Where each value of the `this-host` profile comes from: one line per value (or group of
//! values), written as comments above the profile, naming the measurement, its count and its
//! figures, or the assumption (ASSUMED). Not here: the values themselves (the parent module).

use t3fs_real::probe_store::DEPTH;

use super::{us, Figures, Measured, PASSES_PER_HOP, PROBE_DEPTH};

/// Where each of the profile's values comes from, one line per value (or group of values).
pub(super) fn provenance(m: &Measured, f: &Figures) -> Vec<String> {
    [nic(m, f), ssd(m, f), cpu(m, f)].concat()
}

/// The NIC's values: the line, the message's cost and its latency.
fn nic(m: &Measured, f: &Figures) -> Vec<String> {
    let p = &m.probe;
    vec![
        format!(
            "nic_gbps: what 1 MiB adds to a lone message through the TCP transport, {:.0} us \
             (round trip p50 {:.0} us with a 1 MiB bulk part, p99 {:.0} us; {:.0} us without; \
             streams reach {:.0} MiB/s, probe), less the CPU the transport spends on it \
             ({:.0} us, in cpu_byte_ns): {:.0} us",
            us(f.lone),
            us(f.m1),
            us(f.m1_99),
            us(f.m0),
            p.loopback_mibs,
            us(f.lone.saturating_sub(f.wire_1m())),
            us(f.wire_1m())
        ),
        "nic_message_us, nic_message_p99_us: 0 (on one host a message's stack work is CPU, \
         cpu_request_us, and its wait is latency, nic_latency_trip)"
            .into(),
        latency(m, f),
    ]
}

/// The message latency's line: the measured round trip, or its halves where there is none.
fn latency(m: &Measured, f: &Figures) -> String {
    let n = m.sample.null.len();
    let Some(trip) = &f.trip else {
        return format!(
            "nic_latency_us, nic_latency_p99_us: half a read of an absent chunk through the \
             running cluster (client, transport both ways, storage service and its store \
             thread; no disk), {n} reads one at a time: p50 {:.0} us, p99 {:.0} us, each less \
             the CPU per message (cpu_request_us)",
            us(f.null50),
            us(f.null99)
        );
    };
    let q = |p: f64| us(trip.quantile(p));
    format!(
        "nic_latency_trip: reads of an absent chunk through the running cluster (client, \
         transport both ways, storage service and its store thread; no disk), {n} reads one at \
         a time, each less the CPU of its two messages (2 x cpu_request_us), at {} quantiles: \
         p50 {:.0} us, p90 {:.0} us, p99 {:.0} us, p99.9 {:.0} us (before the CPU: p50 {:.0} \
         us, p99 {:.0} us); each message draws half the median plus an excess whose larger of \
         two is the trip's (scenarios/src/trip.rs)",
        trip.points().len(),
        q(0.5),
        q(0.9),
        q(0.99),
        q(0.999),
        us(f.null50),
        us(f.null99)
    )
}

/// The SSD's values: the chunk stores' operations alone, several at a time and on a thread.
fn ssd(m: &Measured, f: &Figures) -> Vec<String> {
    let (p, s) = (&m.probe, &m.sample.store);
    vec![
        format!(
            "ssd_p50_us, ssd_p99_us: the io_uring chunk store's 4 KiB reads, one at a time, p50 \
             {:.0} us, p99 {:.0} us ({} reads)",
            us(f.r4k50),
            us(f.r4k99),
            s.read_4k.len()
        ),
        format!(
            "ssd_lone_mb_s, ssd_transfer_spread: its 1 MiB chunk reads, p50 {:.0} us, p99 {:.0} \
             us ({} reads)",
            us(f.r1m50),
            us(f.r1m99),
            s.read_1m.len()
        ),
        format!(
            "ssd_mb_s, ssd_write_mb_s: the chain's stores with {DEPTH} operations in flight, 1 \
             MiB reads {} MiB/s and 1 MiB updates, each with its commit, {} MiB/s (rounds: {:.0?}, \
             {:.0?}; the median)",
            f.read_depth_mib_s.map_or("not measured".into(), |r| format!("{r:.0}")),
            f.write_depth_mib_s.map_or("not measured".into(), |w| format!("{w:.0}")),
            s.read_depth_mib_s,
            s.write_depth_mib_s
        ),
        format!(
            "ssd_read_concurrency, ssd_write_concurrency: {:.2} and {:.2} lone operations' \
             worth at once, the disk shared by what is in service (processor sharing): those \
             bandwidths over one alone's (a 1 MiB read at its lone p50; a 1 MiB update's lone \
             transfer and sync and its commit's sync)",
            f.concurrency().0,
            f.concurrency().1
        ),
        format!(
            "ssd_sync_us, ssd_sync_p99_us: its commits (a metadata record made durable), p50 \
             {:.0} us, p99 {:.0} us, less the 4 KiB read median (the model's access latency)",
            us(f.c50),
            us(f.c99)
        ),
        format!(
            "ssd_write_lone_mb_s, ssd_write_spread: its 1 MiB updates (fresh extent, data fdatasync, \
             record, fdatasync), p50 {:.0} us, p99 {:.0} us ({} updates), each less the sync \
             median",
            us(f.u50),
            us(f.u99),
            s.update_1m.len()
        ),
        format!(
            "ssd_wake_us, ssd_wake_p99_us: the head's store on a store thread (as a node runs \
             it), one read at a time: 4 KiB reads p50 {:.0} us, p99 {:.0} us ({} reads), less \
             reads of absent chunks (the hand-off a null request holds) p50 {:.0} us ({} reads), \
             less the store's own 4 KiB read (p50, p99)",
            us(f.t_r4k50),
            us(f.t_r4k99),
            s.threaded_read_4k.len(),
            us(f.t_null50),
            s.threaded_null.len()
        ),
        format!(
            "ssd_iops: 4 KiB O_DIRECT random reads {:.0} IOPS at qd {} (probe)",
            p.rand_read_iops, p.qd
        ),
        "ssd_queue_depth: 32, ASSUMED (the jobs run at most 8 at a time, and never reach it)".into(),
    ]
}

/// The CPU's values and the host's shape.
fn cpu(m: &Measured, f: &Figures) -> Vec<String> {
    vec![
        format!("cpu_cores: {} (this host)", m.cores),
        format!(
            "cpu_byte_ns: {PASSES_PER_HOP} pass per received byte (the payload's block \
             checksums) at this CPU's CRC32C speed, {:.3} ns/byte, plus the receiving end's half \
             of the transport's CPU per byte of a 1 MiB bulk part beyond an empty frame (both \
             ends run here: this process's CPU time over the round trips), {:.3} ns/byte",
            m.crc_ns_per_byte, f.transport_byte_ns
        ),
        format!(
            "cpu_request_us: CPU per message on the busy host: every cluster process's and \
             this one's CPU time over {} null reads {PROBE_DEPTH} at a time, {:.3} s, \
             over their {} messages",
            m.sample.null_cpu_reads,
            m.sample.null_cpu,
            2 * m.sample.null_cpu_reads
        ),
        overlap_provenance(m),
        store_cpu_provenance(m),
        "shared_host: every node and target of a loopback cluster on one host".into(),
    ]
}

/// Where the CPU beside the path comes from.
fn overlap_provenance(m: &Measured) -> String {
    let l = &m.sample.load;
    format!(
        "cpu_overlap_us, cpu_overlap_read_byte_ns, cpu_overlap_write_byte_ns: CPU beside a \
         message's path (the sender's half, hand-offs, the store's work beyond its own \
         operation), from every cluster process's and this one's CPU time over real I/O \
         through the cluster {PROBE_DEPTH} at a time: {} 4 KiB reads {:.1} us each, {} 1 MiB \
         reads {:.1} us each, {} 1 MiB writes on {} replicas {:.1} us each, less the CPU on \
         their path (cpu_request_us, cpu_byte_ns, cpu_store_*)",
        l.read_4k.ops,
        l.read_4k.per_op() * 1e6,
        l.read_1m.ops,
        l.read_1m.per_op() * 1e6,
        l.write_1m.ops,
        l.replicas,
        l.write_1m.per_op() * 1e6,
    )
}

/// Where the store's own CPU comes from.
fn store_cpu_provenance(m: &Measured) -> String {
    let s = m.sample.store.cpu_per_op().map(|c| c * 1e6);
    format!(
        "cpu_store_read_us, cpu_store_read_byte_ns, cpu_store_write_us, \
         cpu_store_write_byte_ns: the io_uring chunk store's own CPU (this process's, its \
         io_uring workers' included) one operation at a time: {:.0} us per 4 KiB read, {:.0} us \
         per 1 MiB read (a fixed part and one per byte through the two), {:.0} us per commit \
         (a mutation's fixed part) and {:.0} us per 1 MiB update (the rest per byte); on the \
         path, each waits for a free core (a store thread that finds both cores busy starts \
         late), which the probe, alone on the host, never does",
        s[0], s[1], s[3], s[2],
    )
}
