//! The profile's mapping of measurements to values, and pooling rounds.

use super::*;

#[test]
fn the_profile_is_the_measurements_mapped_as_documented() {
    let probe = t3fs_real::probe::Probe::parse(
        r#"{"at": 1, "disk_write_mibs": 900, "disk_write_buffered_mibs": 600,
            "disk_read_mibs": 2000, "rand_read_iops": 10000, "qd": 1, "write_qd": 1,
            "loopback_mibs": 4000, "loopback_streams": 2}"#,
    )
    .expect("probe json");
    let d = Duration::from_micros;
    // 100 sorted latencies whose median is `p50` and 99th percentile `p99`.
    let lat = |p50: u64, p99: u64| {
        let mut v = vec![d(1); 50];
        v.extend(std::iter::repeat_n(d(p50), 49));
        v.push(d(p99));
        v
    };
    let store = StoreLatencies {
        read_4k: lat(80, 400),
        read_1m: lat(1000, 1500),
        update_1m: lat(1300, 3000),
        commit: lat(380, 880),
        cpu: own_cpu().map(|c| 100.0 * c),
        threaded_null: lat(30, 60),
        threaded_read_4k: lat(150, 600),
        read_depth_mib_s: vec![3000.0, 2500.0, 2900.0],
        write_depth_mib_s: vec![1500.0],
    };
    // The null reads cost 20 us of CPU per message (two a read); a 1 MiB bulk part costs the
    // transport's two ends 0.2 ns of CPU per byte beyond an empty frame's 10 us, the
    // receiver half of it.
    let mib = (1u64 << 20) as f64;
    let sample = Sample {
        store,
        null: lat(100, 300),
        message: (lat(60, 90), lat(1060, 2000)),
        null_cpu: 100.0 * 2.0 * 20e-6,
        null_cpu_reads: 100,
        message_cpu: (100.0 * 10e-6, 100.0 * (10e-6 + 0.2e-9 * mib)),
        load: load(mib),
    };
    let m = Measured {
        probe,
        sample,
        crc_ns_per_byte: 0.1,
        cores: 2,
    };
    let (hw, why) = this_host(&m);
    let wire = 1000e-6 - 0.1e-9 * mib;
    assert!(
        (hw.nic_bytes / (mib / wire) - 1.0).abs() < 1e-6,
        "1 MiB's share of a lone message, less the transport's CPU on it: {}",
        hw.nic_bytes
    );
    assert_eq!((hw.nic_message, hw.nic_message_p99), (d(0), d(0)));
    assert_eq!(hw.cpu_request, d(20), "the null reads' CPU per message");
    // The null reads' round trips less their two messages' CPU, as measured (the halves'
    // median and p99 are what a profile without null reads falls back on).
    assert_eq!((hw.nic_latency, hw.nic_latency_p99), (d(0), d(0)));
    let trip = hw.nic_latency_trip.as_ref().expect("a measured trip");
    assert_eq!(
        trip.quantile(0.0),
        d(0),
        "1 us less 40 us of CPU: none left"
    );
    assert_eq!(trip.median(), d(60), "a null read less its CPU");
    assert_eq!(trip.quantile(1.0), d(260));
    assert_eq!(
        Figures::of(&m).latency(),
        (d(30), d(130)),
        "half a null read less its CPU"
    );
    assert_eq!((hw.ssd_p50, hw.ssd_p99), (d(80), d(400)));
    assert_eq!(
        (hw.ssd_wake, hw.ssd_wake_p99),
        (d(40), d(170)),
        "threaded reads less the hand-off and the store's own read"
    );
    assert_eq!(hw.ssd_lone_bytes, mib / 1000e-6, "one read alone");
    assert_eq!(
        hw.ssd_bytes,
        2900.0 * mib,
        "the median of the reads several at a time"
    );
    assert_eq!(hw.ssd_write_bytes, 1500.0 * mib);
    assert!((hw.ssd_transfer_spread - 1.5).abs() < 1e-12);
    assert_eq!(
        (hw.ssd_sync, hw.ssd_sync_p99),
        (d(300), d(800)),
        "commits less the access latency"
    );
    assert_eq!(
        hw.ssd_write_lone_bytes,
        mib / 1000e-6,
        "updates less the sync"
    );
    assert!(
        (hw.ssd_write_spread - 2.7).abs() < 1e-12,
        "the update's p99 less the sync, over its median less the sync"
    );
    assert!(
        (hw.cpu_byte_ns - 0.2).abs() < 1e-9,
        "CRC32C and the transport's receiving half: {}",
        hw.cpu_byte_ns
    );
    assert_eq!(
        hw.cpu_overlap,
        d(10),
        "the 4 KiB read's CPU beyond its path, per message"
    );
    // Within a nanosecond per operation (the store's CPU per byte rounds up to whole ns).
    let near = |a: f64, b: f64| (a - b).abs() < 1e-6;
    assert!(
        near(hw.cpu_overlap_read_byte_ns, 0.3),
        "{}",
        hw.cpu_overlap_read_byte_ns
    );
    assert!(
        near(hw.cpu_overlap_write_byte_ns, 0.6),
        "{}",
        hw.cpu_overlap_write_byte_ns
    );
    let c = hw.cpu_store;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    assert!(near(us(c.read), 20.0) && near(c.read_byte_ns, 0.1), "{c:?}");
    assert!(
        near(us(c.write), 50.0) && near(c.write_byte_ns, 0.25),
        "{c:?}"
    );
    assert!(hw.shared_host);
    assert!(
        why.iter().any(|w| w.contains("ASSUMED")),
        "assumptions are named"
    );
}

/// The store's own CPU per 4 KiB read, 1 MiB read, 1 MiB update and commit, seconds: 20 us
/// and 0.1 ns per byte a read, 50 us and 0.25 ns per byte a mutation (a commit moves none).
fn own_cpu() -> [f64; 4] {
    let mib = (1u64 << 20) as f64;
    let read = |b: f64| 20e-6 + b * 0.1e-9;
    [read(4096.0), read(mib), 50e-6 + mib * 0.25e-9, 50e-6]
}

/// Real I/O whose CPU is, on top of the mapping test's 20 us per message and 0.2 ns per
/// received byte on the path and the store's own CPU (`own_cpu`): 10 us per message, 0.3 ns
/// per byte a store reads and 0.6 ns per byte it writes, beside the path; a write goes down 3
/// replicas.
fn load(mib: f64) -> LoadCpu {
    let on_path = 0.2e-9;
    let [own_4k, own_1m, own_update, own_commit] = own_cpu();
    let r4k = 2.0 * 30e-6 + 4096.0 * (on_path + 0.3e-9) + own_4k;
    let r1m = 2.0 * 30e-6 + mib * (on_path + 0.3e-9) + own_1m;
    let w1m = 6.0 * 30e-6 + 3.0 * mib * (on_path + 0.6e-9) + 3.0 * (own_update + own_commit);
    let phase = |per_op: f64| PhaseCpu {
        ops: 50,
        cpu: 50.0 * per_op,
    };
    LoadCpu {
        write_1m: phase(w1m),
        read_4k: phase(r4k),
        read_1m: phase(r1m),
        replicas: 3,
    }
}

#[test]
fn nothing_is_beside_the_path_without_a_load_probe() {
    let no_store = StoreCpu::default();
    let none = beside_path(
        &LoadCpu::default(),
        Duration::from_micros(20),
        0.2,
        &no_store,
    );
    assert_eq!(none, Beside::default());
    // Real I/O cheaper than its path's CPU (noise on a quiet host) is none, not negative.
    let mut cheap = load((1u64 << 20) as f64);
    cheap.write_1m.cpu = 0.0;
    assert_eq!(
        beside_path(&cheap, Duration::from_micros(20), 0.2, &no_store).write_byte_ns,
        0.0
    );
}

#[test]
fn pooled_samples_hold_every_rounds_latencies_sorted() {
    let d = Duration::from_micros;
    let round = |a: u64, b: u64| Sample {
        store: StoreLatencies {
            read_4k: vec![d(a), d(b)],
            ..StoreLatencies::default()
        },
        null: vec![d(a)],
        message: (vec![d(b)], Vec::new()),
        null_cpu: a as f64,
        null_cpu_reads: 2,
        message_cpu: (b as f64, 0.5),
        load: LoadCpu {
            read_4k: PhaseCpu {
                ops: 2,
                cpu: a as f64,
            },
            replicas: 3,
            ..LoadCpu::default()
        },
    };
    let p = Sample::pooled(&[&round(5, 9), &round(1, 7)]);
    assert_eq!(
        (p.null_cpu, p.message_cpu),
        (6.0, (16.0, 1.0)),
        "CPU times add up"
    );
    let read_4k = PhaseCpu { ops: 4, cpu: 6.0 };
    assert_eq!(
        (p.load.read_4k, p.load.replicas),
        (read_4k, 3),
        "the load phases add up"
    );
    assert_eq!(p.store.read_4k, vec![d(1), d(5), d(7), d(9)]);
    assert_eq!((p.null, p.message.0), (vec![d(1), d(5)], vec![d(7), d(9)]));
    assert!(p.store.commit.is_empty() && p.message.1.is_empty());
}

#[test]
fn the_median_and_tail_of_sorted_latencies() {
    let v: Vec<Duration> = (1..=200).map(Duration::from_micros).collect();
    assert_eq!(
        p50_p99(&v),
        (Duration::from_micros(101), Duration::from_micros(199))
    );
    assert_eq!(p50_p99(&[]), (Duration::ZERO, Duration::ZERO));
}
