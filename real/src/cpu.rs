//! CPU accounting of a benchmark run from /proc: how busy the host's cores were, and how many
//! CPU seconds each process (the benchmark client itself, each service of the cluster) spent,
//! so a report can say whether CPU was the resource that saturated and what a GiB cost.
//!
//! Invariant: a sample is taken before and after the measured interval and only differences
//! are reported, so processes and host activity before the run do not count. Not here: deciding
//! what binds (roofline.rs).

use std::collections::BTreeMap;
use std::time::Duration;

/// This process's user and system CPU time so far, to the microsecond (getrusage), every
/// thread's together (io_uring's workers are this process's threads).
pub fn self_cpu() -> Duration {
    rusage(libc::RUSAGE_SELF)
}

/// User and system CPU time of `who` (`RUSAGE_SELF` or `RUSAGE_THREAD`) so far.
#[allow(unsafe_code)]
pub fn rusage(who: libc::c_int) -> Duration {
    // SAFETY: getrusage writes the struct it is given and nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut u) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Clock ticks per second of /proc's CPU times: USER_HZ, which Linux fixes at 100 in its ABI
/// on every architecture we run on (sysconf(_SC_CLK_TCK) reports the same).
const HZ: f64 = 100.0;

/// One reading of the host and the named processes.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    /// Busy, iowait and total ticks over all cores (/proc/stat's `cpu` line).
    host: (u64, u64, u64),
    /// utime + stime ticks by name (`client`, `storage-0`, …).
    procs: BTreeMap<String, u64>,
    /// Nanoseconds every thread of each process waited on a run queue, and its timeslices
    /// (/proc/PID/task/*/schedstat), by name.
    sched: BTreeMap<String, (u64, u64)>,
    at: Option<std::time::Instant>,
}

/// Run-queue wait (ns) and timeslices of every thread of `pid` so far: the time its threads
/// were ready to run but waited for a core (a wake-up on an idle virtual core counts, since the
/// core has to be woken first). A thread that ended is not counted.
fn proc_sched(pid: i32) -> Option<(u64, u64)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut sum = (0, 0);
    for t in tasks.flatten() {
        let Ok(text) = std::fs::read_to_string(t.path().join("schedstat")) else {
            continue;
        };
        let v: Vec<u64> = text
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        if let [_, wait, slices] = v[..] {
            sum = (sum.0 + wait, sum.1 + slices);
        }
    }
    Some(sum)
}

fn host_ticks() -> (u64, u64, u64) {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = text.lines().find(|l| l.starts_with("cpu ")) else {
        return (0, 0, 0);
    };
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    // idle and iowait are not busy.
    let iowait = v.get(4).copied().unwrap_or(0);
    let idle = v.get(3).copied().unwrap_or(0) + iowait;
    (total.saturating_sub(idle), iowait, total)
}

/// utime + stime of a process, in ticks (children not included).
fn proc_ticks(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces: fields start after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3, utime field 14, stime field 15 (1-based in proc(5)).
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

impl Sample {
    /// Reads the host and `procs` (name → pid); this process is `client`.
    pub fn take(procs: &BTreeMap<String, i32>) -> Self {
        let mut out = Self {
            host: host_ticks(),
            at: Some(std::time::Instant::now()),
            ..Self::default()
        };
        let me = (String::from("client"), std::process::id() as i32);
        for (name, pid) in procs.iter().map(|(n, p)| (n.clone(), *p)).chain([me]) {
            if let Some(t) = proc_ticks(pid) {
                out.procs.insert(name.clone(), t);
            }
            if let Some(w) = proc_sched(pid) {
                out.sched.insert(name, w);
            }
        }
        out
    }
}

/// CPU use between two samples.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    /// Fraction of all cores' time that was busy (0..=1).
    pub host_busy: f64,
    /// Fraction of all cores' time idle while some I/O of theirs was outstanding (iowait).
    pub host_iowait: f64,
    /// Cores of the host.
    pub cores: usize,
    /// Wall seconds between the samples.
    pub wall: f64,
    /// CPU seconds by process name, for processes alive at both samples (a process killed or
    /// restarted in between is left out rather than guessed).
    pub seconds: BTreeMap<String, f64>,
    /// Seconds the threads of those processes waited on run queues for a core, and their
    /// timeslices (each a wake-up or a preemption), all processes together.
    pub run_queue: (f64, u64),
}

impl Usage {
    /// The use between `a` and `b`.
    pub fn between(a: &Sample, b: &Sample) -> Self {
        let busy = b.host.0.saturating_sub(a.host.0) as f64;
        let iowait = b.host.1.saturating_sub(a.host.1) as f64;
        let total = b.host.2.saturating_sub(a.host.2) as f64;
        let seconds = b
            .procs
            .iter()
            .filter_map(|(n, t)| {
                let before = a.procs.get(n)?;
                Some((n.clone(), t.saturating_sub(*before) as f64 / HZ))
            })
            .collect();
        let run_queue = b
            .sched
            .iter()
            .fold((0.0, 0), |acc, (n, (w, k))| match a.sched.get(n) {
                Some((w0, k0)) => (
                    acc.0 + w.saturating_sub(*w0) as f64 / 1e9,
                    acc.1 + k.saturating_sub(*k0),
                ),
                None => acc,
            });
        Self {
            run_queue,
            host_busy: if total > 0.0 { busy / total } else { 0.0 },
            host_iowait: if total > 0.0 { iowait / total } else { 0.0 },
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            wall: match (a.at, b.at) {
                (Some(x), Some(y)) => y.saturating_duration_since(x).as_secs_f64(),
                _ => 0.0,
            },
            seconds,
        }
    }

    /// CPU seconds of processes whose name starts with `role` (`storage`, `client`).
    pub fn of(&self, role: &str) -> f64 {
        self.seconds
            .iter()
            .filter(|(n, _)| n.starts_with(role))
            .map(|(_, s)| s)
            .sum()
    }

    /// CPU seconds per GiB moved, by role (client, storage, mgmtd, meta, kv) with any CPU.
    pub fn per_gib(&self, bytes: u64) -> BTreeMap<String, f64> {
        let gib = bytes as f64 / (1u64 << 30) as f64;
        ["client", "storage", "meta", "mgmtd", "kv"]
            .iter()
            .map(|r| (r.to_string(), self.of(r)))
            .filter(|(_, s)| *s > 0.0)
            .map(|(r, s)| (r, if gib > 0.0 { s / gib } else { 0.0 }))
            .collect()
    }

    /// The threads' waits for a core per operation of `ops`, in words (none without
    /// operations or without /proc's scheduler statistics).
    pub fn run_queue_line(&self, ops: u64) -> Option<String> {
        let (wait, slices) = self.run_queue;
        (ops > 0 && slices > 0).then(|| {
            format!(
                "threads waited {:.1} us per operation for a core (run queues, over {:.1} \
                 timeslices per operation)",
                wait * 1e6 / ops as f64,
                slices as f64 / ops as f64
            )
        })
    }

    /// A sentence naming the CPU as the saturated resource when the host was at least 90% busy.
    pub fn saturation(&self) -> Option<String> {
        (self.host_busy >= 0.9).then(|| {
            let parts: Vec<String> = ["client", "storage", "meta", "mgmtd", "kv"]
                .iter()
                .map(|r| (r, self.of(r)))
                .filter(|(_, s)| *s > 0.05)
                .map(|(r, s)| format!("{r} {s:.2} s"))
                .collect();
            // Busy time no process of ours accounts for: loopback softirqs charged elsewhere,
            // kernel threads, other tenants of the host.
            let ours: f64 = self.seconds.values().sum();
            let other = self.host_busy * self.cores as f64 * self.wall - ours;
            format!(
                "host CPU {:.0}% busy on {} cores over {:.2} s ({}, other {:.2} s)",
                self.host_busy * 100.0,
                self.cores,
                self.wall,
                parts.join(", "),
                other.max(0.0)
            )
        })
    }
}

/// What limited a workload that reached `percent` of its binding bound `binding`: the bound
/// itself when it was (nearly) reached, else the CPU when the host was saturated (or nearly:
/// on a few cores, three quarters busy already makes operations wait for one), else no
/// resource: the run was latency-bound, each operation waiting on steps in series (disk syncs,
/// hops), with the host's iowait saying how much of that wait was the disk.
pub fn limit(percent: f64, binding: &str, usage: &Usage) -> String {
    if percent >= 90.0 {
        return format!("{binding} (reached {percent:.0}%)");
    }
    if let Some(s) = usage.saturation() {
        return s;
    }
    if usage.host_busy >= 0.75 {
        return format!(
            "CPU nearly saturated: host CPU {:.0}% busy on {} cores, {:.0}% of core time \
             waiting on I/O; operations queue for a core between their steps",
            usage.host_busy * 100.0,
            usage.cores,
            usage.host_iowait * 100.0
        );
    }
    format!(
        "none saturated: latency-bound (host CPU {:.0}% busy, {:.0}% of core time waiting on \
         I/O); more operations in flight or fewer steps in series per operation would move it",
        usage.host_busy * 100.0,
        usage.host_iowait * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinning_shows_as_cpu_of_this_process_and_busy_host_time() {
        let a = Sample::take(&BTreeMap::new());
        // Spins until the accounting shows 0.2 s of this process's CPU, not for a wall time: on
        // a loaded host (tests three at a time on two cores) 0.3 s of wall once gave it only
        // 0.06 s of CPU. The cap only keeps broken accounting from hanging the test.
        let t = std::time::Instant::now();
        let mut x = 0u64;
        let u = loop {
            for _ in 0..1_000_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            let u = Usage::between(&a, &Sample::take(&BTreeMap::new()));
            if u.of("client") >= 0.2 || t.elapsed() > std::time::Duration::from_secs(60) {
                break u;
            }
        };
        std::hint::black_box(x);
        assert!(u.of("client") >= 0.2, "{u:?}");
        assert!(u.host_busy > 0.0 && u.host_busy <= 1.0, "{u:?}");
        assert!(
            u.host_iowait >= 0.0 && u.host_busy + u.host_iowait <= 1.0,
            "{u:?}"
        );
        let per = u.per_gib(1 << 30);
        assert!((per["client"] - u.of("client")).abs() < 1e-9);
        // This process ran in timeslices meanwhile, each counted once.
        assert!(u.run_queue.1 > 0 && u.run_queue.0 >= 0.0, "{u:?}");
        let line = u.run_queue_line(u.run_queue.1).expect("a line");
        assert!(line.contains("1.0 timeslices per operation"), "{line}");
        assert!(u.run_queue_line(0).is_none());
    }

    #[test]
    fn the_limit_is_the_bound_the_cpu_or_latency() {
        let u = |busy: f64| Usage {
            host_busy: busy,
            host_iowait: 0.2,
            cores: 2,
            wall: 1.0,
            seconds: BTreeMap::from([("storage-0".to_string(), 0.5)]),
            run_queue: (0.0, 0),
        };
        assert!(limit(95.0, "loopback", &u(0.5)).starts_with("loopback (reached 95%)"));
        assert!(limit(70.0, "disk", &u(0.95)).starts_with("host CPU 95% busy"));
        assert!(limit(70.0, "disk", &u(0.8)).starts_with("CPU nearly saturated"));
        let l = limit(70.0, "disk", &u(0.6));
        assert!(
            l.contains("latency-bound") && l.contains("20% of core time waiting"),
            "{l}"
        );
    }
}
