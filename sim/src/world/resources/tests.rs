//! The resources' queues and draws, one behaviour per test.

use super::*;

/// An operation's name where the SSD is not shared (its key is not consulted).
const NOBODY: (sharing::Key, Option<u128>) = ((0, 0, 0), None);

fn hw() -> Hardware {
    let mut h = Hardware::profile("gbe-sata").expect("profile");
    h.cpu_cores = 0;
    h
}

#[test]
fn a_message_costs_its_bytes_once_and_grows_with_size() {
    let mut r = Resources::new(hw(), 2);
    let p = Duration::from_micros(10);
    let small = r.message(
        Instant::ZERO,
        (NodeId(0), NodeId(1)),
        4096,
        p,
        &mut Rng::new(1),
    );
    let mut r = Resources::new(hw(), 2);
    let big = r.message(
        Instant::ZERO,
        (NodeId(0), NodeId(1)),
        1 << 20,
        p,
        &mut Rng::new(1),
    );
    let wire = |b: usize| bytes_ns(b, hw().nic_bytes);
    assert_eq!(small.0, 5_000 + wire(4096) + 10_000);
    assert_eq!(big.0, 5_000 + wire(1 << 20) + 10_000);
    assert!(
        big.0 > 100 * (small.0 - 15_000),
        "1 MiB takes ~256x the wire time of 4 KiB"
    );
}

#[test]
fn a_messages_latency_overlaps_where_its_nic_cost_queues() {
    // Eight empty messages sent at once on one host: 40 us each on the NIC queue serialize
    // (the last arrives after 8 x 40 us); 40 us of latency that holds nothing overlaps
    // (every one arrives at 40 us).
    let send_all = |h: Hardware| {
        let mut r = Resources::new(h, 2);
        (0..8)
            .map(|_| {
                let at = r.message(
                    Instant::ZERO,
                    (NodeId(0), NodeId(1)),
                    0,
                    Duration::ZERO,
                    &mut Rng::new(1),
                );
                at.0
            })
            .max()
            .unwrap()
    };
    let mut queued = hw();
    queued.nic_message = Duration::from_micros(40);
    queued.nic_message_p99 = queued.nic_message;
    let mut overlapped = hw();
    overlapped.nic_message = Duration::ZERO;
    overlapped.nic_message_p99 = Duration::ZERO;
    overlapped.nic_latency = Duration::from_micros(40);
    overlapped.nic_latency_p99 = overlapped.nic_latency;
    assert_eq!(send_all(queued), 8 * 40_000);
    assert_eq!(send_all(overlapped), 40_000);
}

#[test]
fn a_measured_round_trip_is_what_a_request_and_its_reply_take() {
    // A trip of median 200 us, 3% of it stalled up to 2 ms: a request and its reply, drawn
    // message by message, take what the trip says at its median and in its tail.
    let us = Duration::from_micros;
    let body = [
        (0.0, us(150)),
        (0.5, us(200)),
        (0.9, us(240)),
        (0.97, us(250)),
    ];
    let tail = [(0.99, us(700)), (0.999, us(1500)), (1.0, us(2000))];
    let points = [&body[..], &tail[..]].concat();
    let trip = t3fs_scenario::trip::Trip::new(points).unwrap();
    let mut h = hw();
    h.nic_message = Duration::ZERO;
    h.nic_message_p99 = Duration::ZERO;
    h.nic_latency_trip = Some(trip);
    let mut rng = Rng::new(3);
    let mut trips: Vec<u64> = (0..20_000)
        .map(|_| {
            let mut r = Resources::new(h.clone(), 2);
            let pair = (NodeId(0), NodeId(1));
            let there = r.message(Instant::ZERO, pair, 0, Duration::ZERO, &mut rng);
            r.message(there, (pair.1, pair.0), 0, Duration::ZERO, &mut rng)
                .0
        })
        .collect();
    trips.sort();
    let at = |p: f64| trips[(p * trips.len() as f64) as usize] as f64 / 1e3;
    // Within 10% at the median and the 90th percentile; within 15% at the 99th, where the
    // trip's quantile climbs 450 us in 2 points of probability and the other message's
    // share, added to the slower one's, shifts it most.
    for (p, want, within) in [(0.5, 200.0, 0.1), (0.9, 240.0, 0.1), (0.99, 700.0, 0.15)] {
        assert!((at(p) / want - 1.0).abs() < within, "p{p}: {} us", at(p));
    }
}

#[test]
fn many_senders_share_one_receivers_line_rate() {
    let mut r = Resources::new(hw(), 9);
    let mut last = Instant::ZERO;
    for s in 1..9 {
        last = last.max(r.message(
            Instant::ZERO,
            (NodeId(s), NodeId(0)),
            1 << 20,
            Duration::ZERO,
            &mut Rng::new(1),
        ));
    }
    let one = bytes_ns(1 << 20, hw().nic_bytes);
    // Eight senders in parallel, one receive line: eight wire times, not one.
    assert!(last.0 >= 8 * one, "{} < {}", last.0, 8 * one);
    assert!(last.0 <= 8 * one + 5_000 + 8, "work conserving");
}

#[test]
fn one_host_shares_its_nic_and_disk_between_all_nodes_and_targets() {
    let mut h = hw();
    h.shared_host = true;
    let mut r = Resources::new(h, 4);
    let one = bytes_ns(1 << 20, hw().nic_bytes) + 5_000;
    // Two independent pairs of nodes, one loopback: the second message waits for the first.
    let a = r.message(
        Instant::ZERO,
        (NodeId(0), NodeId(1)),
        1 << 20,
        Duration::ZERO,
        &mut Rng::new(1),
    );
    let b = r.message(
        Instant::ZERO,
        (NodeId(2), NodeId(3)),
        1 << 20,
        Duration::ZERO,
        &mut Rng::new(1),
    );
    assert_eq!((a.0, b.0), (one, 2 * one));
    let lat = Duration::ZERO;
    let x = r.ssd(
        (TargetId(1), Instant::ZERO),
        (1 << 20, true),
        lat,
        NOBODY,
        &mut Rng::new(1),
    );
    let y = r.ssd(
        (TargetId(2), Instant::ZERO),
        (1 << 20, true),
        lat,
        NOBODY,
        &mut Rng::new(1),
    );
    let w = bytes_ns(1 << 20, hw().ssd_write_bytes);
    let s = ns(hw().ssd_sync);
    assert_eq!(
        (x.0, y.0),
        (w + s, 2 * w + s),
        "two targets, one disk, its write bandwidth"
    );
}

#[test]
fn cpu_cores_serve_in_parallel_up_to_their_count() {
    let mut h = hw();
    h.cpu_cores = 2;
    h.cpu_request = Duration::from_micros(100);
    h.cpu_byte_ns = 0.0;
    let mut r = Resources::new(h, 4);
    let at: Vec<u64> = (1..4)
        .map(|s| {
            r.message(
                Instant::ZERO,
                (NodeId(s), NodeId(0)),
                0,
                Duration::ZERO,
                &mut Rng::new(1),
            )
            .0
        })
        .collect();
    assert_eq!(
        at,
        [105_000, 105_000, 205_000],
        "two at once, the third waits"
    );
}

#[test]
fn cpu_beside_a_path_delays_no_lone_message_but_bounds_a_busy_host() {
    let mut h = hw();
    h.cpu_cores = 2;
    h.cpu_request = Duration::from_micros(100);
    h.cpu_byte_ns = 0.0;
    h.cpu_overlap = Duration::from_micros(300);
    let arrivals = |h: Hardware, n: u16| {
        let mut r = Resources::new(h, 4);
        let mut rng = Rng::new(1);
        (1..=n)
            .map(|s| {
                let pair = (NodeId(s.into()), NodeId(0));
                r.message(Instant::ZERO, pair, 0, Duration::ZERO, &mut rng)
                    .0
            })
            .collect::<Vec<u64>>()
    };
    assert_eq!(arrivals(h.clone(), 1), [105_000], "alone, as without it");
    // The first message's work beside its path holds the second core until 305 us; the
    // second's holds the first from 205 us, so the third waits for the second core.
    assert_eq!(arrivals(h.clone(), 3), [105_000, 205_000, 405_000]);
    // A store's work beside its path is per byte, a write's at its own rate.
    h.cpu_overlap = Duration::ZERO;
    h.cpu_overlap_write_byte_ns = 0.5;
    let mut r = Resources::new(h, 4);
    let at = (NodeId(0), Instant::ZERO);
    r.store_cpu(at, 200_000, false);
    r.store_cpu(at, 200_000, true);
    r.store_cpu(at, 400_000, true);
    let m = r.message(
        Instant::ZERO,
        (NodeId(1), NodeId(0)),
        0,
        Duration::ZERO,
        &mut Rng::new(1),
    );
    // Reads cost nothing here; the writes hold the cores for 100 and 200 us, so the
    // message's 100 us start when the first is free.
    assert_eq!(m.0, 200_000);
}

#[test]
fn a_stores_own_cpu_waits_for_a_free_core_and_then_holds_it() {
    let mut h = hw();
    h.cpu_cores = 2;
    h.cpu_store = t3fs_scenario::hardware::StoreCpu {
        read: Duration::from_micros(30),
        read_byte_ns: 0.0,
        write: Duration::from_micros(50),
        write_byte_ns: 0.25,
    };
    let mut r = Resources::new(h.clone(), 1);
    let at = (NodeId(0), Instant::ZERO);
    // Alone, each starts at once: two cores, two operations (a write of 200 us, a read).
    assert_eq!(r.store_cpu(at, 600_000, true), Instant::ZERO);
    assert_eq!(r.store_cpu(at, 4096, false), Instant::ZERO);
    // The third waits for the first core free: the read's, at 30 us.
    assert_eq!(r.store_cpu(at, 4096, false).0, 30_000);
    // Without it, nothing waits, however busy the cores.
    h.cpu_store = Default::default();
    let mut r = Resources::new(h, 1);
    for _ in 0..4 {
        assert_eq!(r.store_cpu(at, 1 << 20, true), Instant::ZERO);
    }
}

#[test]
fn ssds_bind_on_iops_for_small_and_bandwidth_for_large_operations() {
    let t = TargetId(1);
    let lat = Duration::from_micros(100);
    let mut r = Resources::new(hw(), 1);
    let small: Vec<Instant> = (0..1000)
        .map(|_| {
            r.ssd(
                (t, Instant::ZERO),
                (4096, false),
                lat,
                NOBODY,
                &mut Rng::new(1),
            )
        })
        .collect();
    // 80k IOPS: 1000 operations start 12.5 us apart.
    let last = small.iter().max().expect("some").0;
    assert!((12_400_000..12_700_000).contains(&last), "{last}");
    let mut r = Resources::new(hw(), 1);
    let big = (0..10)
        .map(|_| {
            r.ssd(
                (t, Instant::ZERO),
                (1 << 20, false),
                lat,
                NOBODY,
                &mut Rng::new(1),
            )
        })
        .max()
        .expect("some");
    // 500 MB/s: ten MiB in ~21 ms.
    let want = 10 * bytes_ns(1 << 20, 500e6);
    assert!(
        big.0 >= want && big.0 < want + 200_000,
        "{} vs {want}",
        big.0
    );
    // Queue depth 1: operations run one after another.
    let mut h = hw();
    h.ssd_queue_depth = 1;
    let mut r = Resources::new(h, 1);
    let done: Vec<u64> = (0..3)
        .map(|_| {
            r.ssd(
                (t, Instant::ZERO),
                (0, false),
                lat,
                NOBODY,
                &mut Rng::new(1),
            )
            .0
        })
        .collect();
    assert_eq!(done, [100_000, 200_000, 300_000]);
}

#[test]
fn spreads_follow_their_median_and_tail_and_draw_nothing_when_absent() {
    let quantiles = |mut v: Vec<u64>| {
        v.sort();
        (v[v.len() / 2] as f64, v[v.len() * 99 / 100] as f64)
    };
    let mut h = hw();
    h.nic_message_p99 = h.nic_message * 3;
    h.ssd_sync_p99 = h.ssd_sync * 2;
    h.ssd_transfer_spread = 1.1; // Reads only: the write below draws its own.
    h.ssd_write_spread = 1.5;
    let mut rng = Rng::new(5);
    let (mut msg, mut write) = (Vec::new(), Vec::new());
    for _ in 0..20_000 {
        let mut r = Resources::new(h.clone(), 2);
        let z = Duration::ZERO;
        msg.push(
            r.message(Instant::ZERO, (NodeId(0), NodeId(1)), 0, z, &mut rng)
                .0,
        );
        write.push(
            r.ssd(
                (TargetId(1), Instant::ZERO),
                (1 << 20, true),
                z,
                NOBODY,
                &mut rng,
            )
            .0,
        );
    }
    let (p50, p99) = quantiles(msg);
    assert!((p50 / 5_000.0 - 1.0).abs() < 0.05, "message p50 {p50}");
    assert!((p99 / 15_000.0 - 1.0).abs() < 0.15, "message p99 {p99}");
    // A write: its transfer (spread 1.5) then its sync (200 us, 400 us at the p99).
    let transfer = bytes_ns(1 << 20, h.ssd_write_bytes) as f64;
    let (p50, p99) = quantiles(write);
    assert!(
        (p50 / (transfer + 200_000.0) - 1.0).abs() < 0.05,
        "write p50 {p50}"
    );
    assert!(p99 > transfer * 1.3 + 300_000.0, "write p99 {p99}");
    // No spread given: nothing drawn, the generator untouched.
    let (mut a, b) = (Rng::new(9), Rng::new(9));
    let mut r = Resources::new(hw(), 2);
    r.message(
        Instant::ZERO,
        (NodeId(0), NodeId(1)),
        9,
        Duration::ZERO,
        &mut a,
    );
    r.ssd(
        (TargetId(1), Instant::ZERO),
        (9, true),
        Duration::ZERO,
        NOBODY,
        &mut a,
    );
    assert_eq!(a.clone().unit(), b.clone().unit());
}

#[test]
fn ssd_latencies_follow_the_profiles_median_and_tail() {
    let r = Resources::new(hw(), 1);
    let mut rng = Rng::new(3);
    let mut v: Vec<Duration> = (0..20_000).map(|_| r.ssd_latency(&mut rng)).collect();
    v.sort();
    let (p50, p99) = (v[10_000].as_secs_f64(), v[19_800].as_secs_f64());
    assert!((p50 / 150e-6 - 1.0).abs() < 0.05, "p50 {p50}");
    assert!((p99 / 1500e-6 - 1.0).abs() < 0.15, "p99 {p99}");
}

#[test]
fn a_shared_ssd_slows_every_operation_that_overlaps_even_the_first() {
    let mut h = hw();
    (h.ssd_read_concurrency, h.ssd_write_concurrency) = (1.0, 1.0);
    let mut r = Resources::new(h.clone(), 1);
    let (t, lat) = (TargetId(1), Duration::ZERO);
    let lone = bytes_ns(1 << 20, h.ssd_write_lone_bytes) + ns(h.ssd_sync);
    let a = r.ssd(
        (t, Instant::ZERO),
        (1 << 20, true),
        lat,
        ((0, 0, 1), None),
        &mut Rng::new(1),
    );
    assert_eq!(a.0, lone, "alone, its lone time");
    // A second arrives half way through: from then on both go at half speed.
    let half = Instant(lone / 2);
    let b = r.ssd(
        (t, half),
        (1 << 20, true),
        lat,
        ((0, 0, 2), None),
        &mut Rng::new(1),
    );
    assert!(b.0 >= lone * 2, "{} vs {lone}", b.0);
    // The first was told `a`; when that comes it is not done, and is half a lone time later.
    let later = r.ssd_check((0, 0, 1), a).expect("postponed");
    assert!(
        later.0.abs_diff(lone + lone / 2) <= 2,
        "{} vs {}",
        later.0,
        lone + lone / 2
    );
    assert_eq!(r.ssd_check((0, 0, 1), later), None);
    assert_eq!(r.ssd_check((0, 0, 2), b), None);
    // In service from 0 until the second finished: busy the whole time, and no more.
    let report = r.summary(Duration::from_nanos(b.0), &|i| format!("n{i}"));
    assert!(
        report
            .iter()
            .any(|l| l == "busiest SSD in service: t1 100.0% (2 operations)"),
        "{report:?}"
    );
    // Without the concurrencies the first finishes as told and only the second waits.
    let mut fifo = Resources::new(hw(), 1);
    let a = fifo.ssd(
        (t, Instant::ZERO),
        (1 << 20, true),
        lat,
        ((0, 0, 1), None),
        &mut Rng::new(1),
    );
    assert_eq!(fifo.ssd_check((0, 0, 1), a), None);
}
