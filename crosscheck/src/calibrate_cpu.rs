//! CPU time spent while calibrate's probes run: this process's (getrusage, to the
//! microsecond) and a running cluster's processes' (/proc, to the clock tick), so the profile
//! can split a request's measured time into the CPU work that queues on the host's cores and
//! the latency that concurrent requests overlap.
//!
//! Invariant: only differences between two readings are used, so what ran before a probe does
//! not count; a process that exits meanwhile is left out (`t3fs_real::cpu`). Not here: turning
//! the figures into the profile (`calibrate_profile.rs`).

use std::collections::BTreeMap;
use std::path::Path;

use t3fs_real::cpu::self_cpu;

/// CPU seconds `f` cost this process.
pub fn self_cpu_of<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let before = self_cpu();
    let out = f();
    (out, self_cpu().saturating_sub(before).as_secs_f64())
}

/// CPU seconds `f` cost this process and every process of the cluster in `cluster` together.
pub fn cluster_cpu_of<T>(cluster: &Path, f: impl FnOnce() -> T) -> (T, f64) {
    let pids: BTreeMap<String, i32> = t3fs_real::cluster::pids(cluster);
    let before = t3fs_real::cpu::Sample::take(&pids);
    let out = f();
    let after = t3fs_real::cpu::Sample::take(&pids);
    let used = t3fs_real::cpu::Usage::between(&before, &after);
    (out, used.seconds.values().sum())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use t3fs_real::cpu::rusage;

    #[test]
    fn spinning_costs_cpu_and_sleeping_does_not() {
        // This thread's clock, read the way the process's is: other tests running in this
        // process meanwhile must not count. Spin until it moved 20 ms (whatever the host's
        // load, within a generous wall bound), then sleep.
        let thread = || rusage(libc::RUSAGE_THREAD);
        let start = std::time::Instant::now();
        let before = thread();
        let mut x = 0u64;
        while thread().saturating_sub(before) < Duration::from_millis(20)
            && start.elapsed() < Duration::from_secs(30)
        {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        }
        let busy = thread().saturating_sub(before);
        assert!(
            busy >= Duration::from_millis(20),
            "spinning cost {busy:?} of CPU"
        );
        let before = thread();
        std::thread::sleep(Duration::from_millis(50));
        let idle = thread().saturating_sub(before);
        assert!(
            idle < Duration::from_millis(10),
            "a 50 ms sleep cost {idle:?} of CPU"
        );
        assert!(self_cpu() >= busy, "the process's CPU holds its threads'");
    }
}
