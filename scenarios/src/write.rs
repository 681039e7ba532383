//! Writes a scenario back as TOML in the catalog format, so a generated scenario (a failing
//! swarm seed) becomes a regression file that `load` reads back to an equal scenario.
//!
//! Invariant: `parse(to_toml(s)) == s` for every valid scenario (tested). Not here: parsing.

use core::fmt::Write;
use core::ops::Range;
use core::time::Duration;

use crate::duration::fmt_duration;
use crate::schema::{
    Action, ChainPos, Cluster, Expect, Faults, NodeRef, Scenario, Timeouts, Workload,
};

fn range(r: &Range<Duration>) -> String {
    format!("{}..{}", fmt_duration(r.start), fmt_duration(r.end))
}

fn node(n: &NodeRef) -> String {
    match n {
        NodeRef::Mgmtd(i) => format!("mgmtd-{i}"),
        NodeRef::Storage(i) => format!("storage-{i}"),
        NodeRef::Client(i) => format!("client-{i}"),
        NodeRef::Meta(i) => format!("meta-{i}"),
        NodeRef::Primary => "primary".into(),
        NodeRef::ChainPos(p, c) => format!(
            "{}:{c}",
            match p {
                ChainPos::Head => "head",
                ChainPos::Middle => "middle",
                ChainPos::Tail => "tail",
            }
        ),
    }
}

fn nodes(ns: &[NodeRef]) -> String {
    let v: Vec<String> = ns.iter().map(|n| format!("\"{}\"", node(n))).collect();
    format!("[{}]", v.join(", "))
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The `[hardware]` section: every value written out, the profile only as the base.
pub fn hardware_toml(h: &crate::Hardware) -> String {
    let us = |d: Duration| d.as_nanos() as f64 / 1e3;
    format!(
        "\n[hardware]\nprofile = {}\nnic_gbps = {:?}\nnic_message_us = {:?}\n\
         nic_message_p99_us = {:?}\nssd_mb_s = {:?}\n\
         ssd_write_mb_s = {:?}\nssd_iops = {:?}\nssd_queue_depth = {}\nssd_p50_us = {:?}\n\
         ssd_p99_us = {:?}\nssd_sync_us = {:?}\nssd_sync_p99_us = {:?}\n\
         ssd_transfer_spread = {:?}\nssd_write_spread = {:?}\ncpu_cores = {}\n\
         cpu_request_us = {:?}\ncpu_byte_ns = {:?}\n\
         shared_host = {}\n{}",
        quote(&h.profile),
        h.nic_bytes * 8.0 / 1e9,
        us(h.nic_message),
        us(h.nic_message_p99),
        h.ssd_bytes / 1e6,
        h.ssd_write_bytes / 1e6,
        h.ssd_iops,
        h.ssd_queue_depth,
        us(h.ssd_p50),
        us(h.ssd_p99),
        us(h.ssd_sync),
        us(h.ssd_sync_p99),
        h.ssd_transfer_spread,
        h.ssd_write_spread,
        h.cpu_cores,
        us(h.cpu_request),
        h.cpu_byte_ns,
        h.shared_host,
        optional_keys(h),
    )
}

/// The keys written only where set (the lone rates: where they are not the bandwidths), so
/// profiles without them write as they always did: each group whole or not at all.
fn optional_keys(h: &crate::Hardware) -> String {
    let us = |d: Duration| d.as_nanos() as f64 / 1e3;
    let c = &h.cpu_store;
    let groups: [(bool, &[(&str, f64)]); 6] = [
        (
            h.ssd_read_concurrency == 0.0 && h.ssd_write_concurrency == 0.0,
            &[
                ("ssd_read_concurrency", h.ssd_read_concurrency),
                ("ssd_write_concurrency", h.ssd_write_concurrency),
            ],
        ),
        (
            h.nic_latency.is_zero() && h.nic_latency_p99.is_zero(),
            &[
                ("nic_latency_us", us(h.nic_latency)),
                ("nic_latency_p99_us", us(h.nic_latency_p99)),
            ],
        ),
        (
            h.ssd_wake.is_zero() && h.ssd_wake_p99.is_zero(),
            &[
                ("ssd_wake_us", us(h.ssd_wake)),
                ("ssd_wake_p99_us", us(h.ssd_wake_p99)),
            ],
        ),
        (
            h.ssd_lone_bytes == h.ssd_bytes && h.ssd_write_lone_bytes == h.ssd_write_bytes,
            &[
                ("ssd_lone_mb_s", h.ssd_lone_bytes / 1e6),
                ("ssd_write_lone_mb_s", h.ssd_write_lone_bytes / 1e6),
            ],
        ),
        (
            h.cpu_overlap.is_zero()
                && h.cpu_overlap_read_byte_ns == 0.0
                && h.cpu_overlap_write_byte_ns == 0.0,
            &[
                ("cpu_overlap_us", us(h.cpu_overlap)),
                ("cpu_overlap_read_byte_ns", h.cpu_overlap_read_byte_ns),
                ("cpu_overlap_write_byte_ns", h.cpu_overlap_write_byte_ns),
            ],
        ),
        (
            c.is_zero(),
            &[
                ("cpu_store_read_us", us(c.read)),
                ("cpu_store_read_byte_ns", c.read_byte_ns),
                ("cpu_store_write_us", us(c.write)),
                ("cpu_store_write_byte_ns", c.write_byte_ns),
            ],
        ),
    ];
    let mut out = String::new();
    for (absent, keys) in groups {
        if !absent {
            for (k, v) in keys {
                out.push_str(&format!("{k} = {v:?}\n"));
            }
        }
    }
    if let Some(trip) = &h.nic_latency_trip {
        let points: Vec<String> = trip
            .points()
            .iter()
            .map(|&(p, d)| format!("[{p:?}, {:?}]", us(d)))
            .collect();
        out.push_str(&format!("nic_latency_trip = [{}]\n", points.join(", ")));
    }
    out
}

/// The scenario as TOML.
pub fn to_toml(s: &Scenario) -> String {
    let mut o = String::new();
    write_top(&mut o, s);
    write_cluster(&mut o, &s.cluster);
    write_workload(&mut o, &s.workload);
    if let Some(ns) = &s.namespace {
        o.push_str(&crate::namespace::ns_toml(ns));
    }
    write_faults(&mut o, &s.faults);
    if let Some(h) = &s.hardware {
        o.push_str(&hardware_toml(h));
    }
    for st in &s.steps {
        let _ = writeln!(
            o,
            "\n[[step]]\nat = \"{}\"\ndo = \"{}\"",
            fmt_duration(st.at),
            st.action.verb()
        );
        let line = step_fields(&st.action);
        if !line.is_empty() {
            let _ = writeln!(o, "{line}");
        }
    }
    write_expect(&mut o, &s.expect);
    o
}

/// The top-level keys: name, about, seeds, durations and the bug.
fn write_top(o: &mut String, s: &Scenario) {
    let _ = writeln!(o, "name = {}", quote(&s.name));
    let _ = writeln!(o, "about = {}", quote(&s.about));
    let seeds: Vec<String> = s.seeds.iter().map(u64::to_string).collect();
    let _ = writeln!(o, "seeds = [{}]", seeds.join(", "));
    let _ = writeln!(o, "duration = \"{}\"", fmt_duration(s.duration));
    let _ = writeln!(
        o,
        "converge_within = \"{}\"",
        fmt_duration(s.converge_within)
    );
    if let Some(b) = &s.bug {
        let _ = writeln!(o, "bug = {}", quote(b));
    }
}

/// The `[cluster]` section.
fn write_cluster(o: &mut String, c: &Cluster) {
    let _ = writeln!(o, "\n[cluster]");
    let _ = writeln!(
        o,
        "mgmtd = {}\nstorage_nodes = {}\ntargets_per_node = {}",
        c.mgmtd, c.storage_nodes, c.targets_per_node
    );
    let _ = writeln!(
        o,
        "replicas = {}\nchains = {}\nclients = {}",
        c.replicas, c.chains, c.clients
    );
    let _ = writeln!(
        o,
        "timeouts = \"{}\"",
        match c.timeouts {
            Timeouts::Fast => "fast",
            Timeouts::ThreeFs => "3fs",
        }
    );
    let _ = writeln!(o, "reject_dirty_reads = {}", c.reject_dirty_reads);
    if c.client_boot_empty {
        let _ = writeln!(o, "client_boot_empty = true");
    }
    if c.storage_lease {
        let _ = writeln!(o, "storage_lease = true");
    }
    if c.serial_forwarding {
        let _ = writeln!(o, "serial_forwarding = true");
    }
    if c.meta > 0 {
        let _ = writeln!(o, "meta = {}", c.meta);
    }
}

/// The `[workload]` section.
fn write_workload(o: &mut String, w: &Workload) {
    let _ = writeln!(o, "\n[workload]");
    let _ = writeln!(
        o,
        "chunks = {}\nwrite_size = {}\nread_fraction = {:?}",
        w.chunks, w.write_size, w.read_fraction
    );
    let _ = writeln!(o, "think = \"{}\"", range(&w.think));
    if let Some(n) = w.ops_per_client {
        let _ = writeln!(o, "ops_per_client = {n}");
    }
    if w.prefill {
        let _ = writeln!(o, "prefill = true");
    }
}

/// The `[faults]` section: every value written out.
fn write_faults(o: &mut String, f: &Faults) {
    let _ = writeln!(o, "\n[faults]");
    let _ = writeln!(
        o,
        "net_latency = \"{}\"\nnet_spike = {:?}\nnet_spike_latency = \"{}\"",
        range(&f.net_latency),
        f.net_spike,
        range(&f.net_spike_latency)
    );
    let _ = writeln!(o, "loss = {:?}\nduplicate = {:?}", f.loss, f.duplicate);
    let _ = writeln!(
        o,
        "disk_latency = \"{}\"\ndisk_spike = {:?}\ndisk_eio = {:?}",
        range(&f.disk_latency),
        f.disk_spike,
        f.disk_eio
    );
    let _ = writeln!(
        o,
        "disk_corrupt = {:?}\ntorn_write = {:?}",
        f.disk_corrupt, f.torn_write
    );
    if f.lost_write > 0.0 {
        let _ = writeln!(o, "lost_write = {:?}", f.lost_write);
    }
    let _ = writeln!(
        o,
        "kv_latency = \"{}\"\nkv_conflict = {:?}\nkv_commit_unknown = {:?}",
        range(&f.kv_latency),
        f.kv_conflict,
        f.kv_commit_unknown
    );
    let _ = writeln!(
        o,
        "heartbeat_loss = {:?}\nrestart_after = \"{}\"",
        f.heartbeat_loss,
        range(&f.restart_after)
    );
    let _ = writeln!(
        o,
        "clock_offset = \"{}\"\nclock_drift_ppm = {}",
        fmt_duration(f.clock_offset),
        f.clock_drift_ppm
    );
    let _ = writeln!(o, "buggify = {}", f.buggify);
}

/// The fields of a `[[step]]` after `at` and `do`, one per line (empty when it has none).
fn step_fields(action: &Action) -> String {
    match action {
        Action::Crash(n)
        | Action::CrashAfterForward(n)
        | Action::PauseOnCommit(n)
        | Action::Restart(n)
        | Action::RestartEmpty(n)
        | Action::Pause(n)
        | Action::Resume(n)
        | Action::Isolate(n)
        | Action::CorruptChunk(n)
        | Action::FailDisk(n)
        | Action::HealDisk(n)
        | Action::FillDisk(n) => format!("node = \"{}\"", node(n)),
        Action::Partition { a, b, oneway } => {
            format!("a = {}\nb = {}\noneway = {oneway}", nodes(a), nodes(b))
        }
        Action::Link {
            a,
            b,
            latency,
            spike,
            loss,
        } => format!(
            "a = {}\nb = {}\nlatency = \"{}\"\nspike = {spike:?}\nloss = {loss:?}",
            nodes(a),
            nodes(b),
            range(latency)
        ),
        Action::Repair { a, b } | Action::Hold { a, b } | Action::Release { a, b } => {
            format!("a = {}\nb = {}", nodes(a), nodes(b))
        }
        Action::Heal | Action::KvUnavailable | Action::KvAvailable => String::new(),
        Action::SetLoss(r) | Action::SetDuplicate(r) => format!("rate = {r:?}"),
        Action::SetLatency(l) => format!("latency = \"{}\"", range(l)),
        Action::Flap {
            node: n,
            down,
            up,
            count,
        } => format!(
            "node = \"{}\"\ndown = \"{}\"\nup = \"{}\"\ncount = {count}",
            node(n),
            fmt_duration(*down),
            fmt_duration(*up)
        ),
        Action::SkewClock {
            node: n,
            offset_ms,
            drift_ppm,
        } => {
            format!(
                "node = \"{}\"\noffset_ms = {offset_ms}\ndrift_ppm = {drift_ppm}",
                node(n)
            )
        }
        Action::StepClock { node: n, by_ms } => {
            format!("node = \"{}\"\nby_ms = {by_ms}", node(n))
        }
        Action::SlowDisk { node: n, latency } => {
            format!("node = \"{}\"\nlatency = \"{}\"", node(n), range(latency))
        }
        Action::DropHeartbeats { node: n, duration } => {
            format!(
                "node = \"{}\"\nfor = \"{}\"",
                node(n),
                fmt_duration(*duration)
            )
        }
        Action::KvFaults {
            conflict,
            commit_unknown,
        } => {
            format!("conflict = {conflict:?}\ncommit_unknown = {commit_unknown:?}")
        }
    }
}

/// The `[expect]` section.
fn write_expect(o: &mut String, e: &Expect) {
    let _ = writeln!(
        o,
        "\n[expect]\nlinearizable = {}\nloss_allowed = {}\nconverges = {}",
        e.linearizable, e.loss_allowed, e.converges
    );
    if e.undecided_ok {
        let _ = writeln!(o, "undecided_ok = true");
    }
}
