//! The `[hardware]` section's parsing, validation and round trip, one behaviour per test.

use crate::load::parse;

fn with(hw: &str) -> String {
    format!("name = \"h\"\nabout = \"a\"\n\n[hardware]\n{hw}\n")
}

/// The hardware of scenario `text`, after checking that writing it back loads the same.
fn written_back(text: &str) -> super::Hardware {
    let s = parse("h.toml", text).unwrap();
    let again = parse("again.toml", &crate::write::to_toml(&s)).unwrap();
    assert_eq!(again.hardware, s.hardware);
    s.hardware.expect("hardware")
}

#[test]
fn profiles_load_and_keys_override_them() {
    let s = parse("h.toml", &with("profile = \"nvme-rdma\"\nnic_gbps = 100")).unwrap();
    let h = s.hardware.expect("hardware");
    assert_eq!(h.profile, "nvme-rdma");
    assert_eq!(h.nic_bytes, 12.5e9);
    assert_eq!(h.ssd_bytes, 7.0e9, "the rest from the profile");
    assert!(parse("h.toml", "name = \"h\"\nabout = \"a\"\n")
        .unwrap()
        .hardware
        .is_none());
}

#[test]
fn hardware_is_written_back_as_loaded() {
    let text = with(
        "profile = \"gbe-sata\"\nnic_gbps = 25\nssd_p50_us = 12.5\ncpu_cores = 2\n\
         nic_message_p99_us = 9\nssd_sync_p99_us = 450\nssd_transfer_spread = 1.25\n\
         ssd_write_spread = 1.75",
    );
    let s = parse("h.toml", &text).unwrap();
    let again = parse("again.toml", &crate::write::to_toml(&s)).unwrap();
    assert_eq!(again.hardware, s.hardware);
    let h = s.hardware.expect("hardware");
    assert_eq!((h.ssd_transfer_spread, h.ssd_write_spread), (1.25, 1.75));
    // Absent, a write's spread is the transfer spread: files from before it load as before.
    let text = with("profile = \"gbe-sata\"\nssd_transfer_spread = 1.25");
    let h = parse("h.toml", &text).unwrap().hardware.expect("hardware");
    assert_eq!(h.ssd_write_spread, 1.25);
    // A message latency is written back where set, and not at all where it is not.
    let text = with("profile = \"gbe-sata\"\nnic_latency_us = 30\nnic_latency_p99_us = 90");
    let h = written_back(&text);
    let us = core::time::Duration::from_micros;
    assert_eq!((h.nic_latency, h.nic_latency_p99), (us(30), us(90)));
    // So is the wake-up after a store's completion.
    let text = with("profile = \"gbe-sata\"\nssd_wake_us = 40\nssd_wake_p99_us = 90");
    let h = written_back(&text);
    assert_eq!((h.ssd_wake, h.ssd_wake_p99), (us(40), us(90)));
    // So are lone rates apart from the bandwidths; absent, they follow the bandwidths.
    let text = with("profile = \"gbe-sata\"\nssd_mb_s = 900\nssd_lone_mb_s = 300");
    let h = written_back(&text);
    assert_eq!((h.ssd_bytes, h.ssd_lone_bytes), (900e6, 300e6));
    assert_eq!((h.ssd_write_bytes, h.ssd_write_lone_bytes), (450e6, 450e6));
    // So is the CPU beside a message's path.
    let text = with(
        "profile = \"gbe-sata\"\ncpu_overlap_us = 12.5\ncpu_overlap_read_byte_ns = 0.6\n\
         cpu_overlap_write_byte_ns = 1.1",
    );
    let h = written_back(&text);
    assert_eq!(h.cpu_overlap, us(12) + us(1) / 2);
    let by_byte = (h.cpu_overlap_read_byte_ns, h.cpu_overlap_write_byte_ns);
    assert_eq!(by_byte, (0.6, 1.1));
    // So is the store's own CPU on its path, a fixed part and one per byte.
    let text = with(
        "profile = \"gbe-sata\"\ncpu_store_read_us = 30\ncpu_store_read_byte_ns = 0.125\n\
         cpu_store_write_us = 70\ncpu_store_write_byte_ns = 0.25",
    );
    let c = written_back(&text).cpu_store;
    assert_eq!((c.read, c.write), (us(30), us(70)));
    assert_eq!(c.of(8000, false), us(31));
    assert_eq!(c.of(4000, true), us(71));
    // So is a measured round trip, which replaces the message latency's median and p99.
    let text = with(
        "profile = \"gbe-sata\"\n\
         nic_latency_trip = [[0.0, 80.5], [0.5, 120.0], [0.99, 900.25], [1.0, 2400.0]]",
    );
    let h = written_back(&text);
    let trip = h.nic_latency_trip.clone().expect("a trip");
    assert_eq!(trip.points()[2], (0.99, us(900) + us(1) / 4));
    assert_eq!((h.nic_latency, h.nic_latency_p99), (us(0), us(0)));
    let plain = crate::write::hardware_toml(&super::Hardware::profile("gbe-sata").unwrap());
    assert!(!plain.contains("trip"), "{plain}");
    assert!(!plain.contains("nic_latency"), "{plain}");
    assert!(!plain.contains("cpu_overlap"), "{plain}");
    assert!(!plain.contains("cpu_store"), "{plain}");
    assert!(
        !plain.contains("lone") && !plain.contains("wake"),
        "{plain}"
    );
}

#[test]
fn the_shared_disks_concurrencies_come_together_and_are_written_back() {
    let text =
        with("profile = \"gbe-sata\"\nssd_read_concurrency = 1.25\nssd_write_concurrency = 0.8");
    let h = written_back(&text);
    assert_eq!(
        (h.ssd_read_concurrency, h.ssd_write_concurrency),
        (1.25, 0.8)
    );
    let plain = parse("p.toml", &with("profile = \"gbe-sata\"")).unwrap();
    let h = plain.hardware.clone().expect("hardware");
    assert_eq!(
        (h.ssd_read_concurrency, h.ssd_write_concurrency),
        (0.0, 0.0)
    );
    assert!(!crate::write::to_toml(&plain).contains("concurrency"));
}

#[test]
fn bad_values_name_their_line_and_key() {
    let e = parse("h.toml", &with("profile = \"nope\"")).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (5, "hardware.profile"));
    assert!(e.message.contains("nvme-rdma"), "{e}");
    let e = parse("h.toml", &with("profile = \"gbe-sata\"\nssd_mb_s = -3")).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (6, "hardware.ssd_mb_s"));
    let e = parse(
        "h.toml",
        &with("profile = \"gbe-sata\"\nssd_queue_depth = 0"),
    )
    .unwrap_err();
    assert_eq!(e.field, "hardware.ssd_queue_depth");
    let e = parse("h.toml", &with("profile = \"gbe-sata\"\nssd_p99_us = 10")).unwrap_err();
    assert_eq!(e.field, "hardware.ssd_p99_us");
    for (bad, key) in [
        ("nic_message_p99_us = 1", "nic_message_p99_us"),
        (
            "nic_latency_us = 50\nnic_latency_p99_us = 10",
            "nic_latency_p99_us",
        ),
        ("nic_latency_us = -1", "nic_latency_us"),
        ("ssd_sync_p99_us = 10", "ssd_sync_p99_us"),
        ("ssd_transfer_spread = 0.5", "ssd_transfer_spread"),
        ("ssd_write_spread = 0.9", "ssd_write_spread"),
        ("cpu_overlap_us = -2", "cpu_overlap_us"),
        ("ssd_lone_mb_s = 0", "ssd_lone_mb_s"),
        ("ssd_wake_us = 50\nssd_wake_p99_us = 10", "ssd_wake_p99_us"),
        ("ssd_read_concurrency = 1.5", "ssd_write_concurrency"),
        ("ssd_write_concurrency = 1.5", "ssd_read_concurrency"),
        (
            "ssd_read_concurrency = 0\nssd_write_concurrency = 1",
            "ssd_read_concurrency",
        ),
        ("cpu_overlap_read_byte_ns = nan", "cpu_overlap_read_byte_ns"),
        ("cpu_store_read_us = -1", "cpu_store_read_us"),
        ("cpu_store_write_byte_ns = inf", "cpu_store_write_byte_ns"),
        (
            "cpu_overlap_write_byte_ns = -1",
            "cpu_overlap_write_byte_ns",
        ),
        (
            "nic_latency_trip = [[0.0, 5.0], [0.5, 4.0], [1.0, 9.0]]",
            "nic_latency_trip",
        ),
        (
            "nic_latency_trip = [[0.2, 5.0], [1.0, 9.0]]",
            "nic_latency_trip",
        ),
        (
            "nic_latency_trip = [[0.0, -5.0], [1.0, 9.0]]",
            "nic_latency_trip",
        ),
        (
            "nic_latency_us = 5\nnic_latency_trip = [[0.0, 5.0], [1.0, 9.0]]",
            "nic_latency_trip",
        ),
    ] {
        let e = parse("h.toml", &with(&format!("profile = \"gbe-sata\"\n{bad}"))).unwrap_err();
        assert_eq!(e.field, format!("hardware.{key}"), "{bad}");
    }
    let e = parse("h.toml", &with("profile = \"gbe-sata\"\nnic_mbps = 3")).unwrap_err();
    assert_eq!(e.field, "hardware.nic_mbps");
    let e = parse("h.toml", &with("profile = \"this-host\"\nnic_gbps = 3")).unwrap_err();
    assert_eq!(
        e.field, "hardware.nic_message_us",
        "this-host needs every key"
    );
}
