//! Human durations in scenario files: `"250us"`, `"10ms"`, `"2s"`, `"1.5s"`, `"2m"`, and ranges
//! `"1ms..5ms"`.
//!
//! Invariant: parsing is exact to the nanosecond for the integer forms and never panics.
//! Not here: where durations are used.

use core::ops::Range;
use core::time::Duration;

/// Parses one duration; the error says what was expected.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("`{s}` has no unit (use ns, us, ms, s or m)"))?;
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` does not start with a number"))?;
    let nanos_per = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        _ => {
            return Err(format!(
                "`{s}` has unknown unit `{unit}` (use ns, us, ms, s or m)"
            ))
        }
    };
    let nanos = value * nanos_per;
    if !nanos.is_finite() || !(0.0..=1e18).contains(&nanos) {
        return Err(format!("`{s}` is out of range"));
    }
    Ok(Duration::from_nanos(nanos.round() as u64))
}

/// Parses `"a..b"` (or a single duration, meaning exactly that long).
pub fn parse_range(s: &str) -> Result<Range<Duration>, String> {
    match s.split_once("..") {
        Some((a, b)) => {
            let (a, b) = (parse_duration(a)?, parse_duration(b)?);
            if b < a {
                return Err(format!("`{s}`: the range ends before it starts"));
            }
            Ok(a..b)
        }
        None => {
            let d = parse_duration(s)?;
            Ok(d..d)
        }
    }
}

/// Formats a duration exactly, in the largest unit that divides it (`2s`, `1500ms`, `250us`), so
/// formatting then parsing gives the same duration.
pub fn fmt_duration(d: Duration) -> String {
    let n = d.as_nanos();
    if n == 0 {
        "0s".into()
    } else if n.is_multiple_of(1_000_000_000) {
        format!("{}s", n / 1_000_000_000)
    } else if n.is_multiple_of(1_000_000) {
        format!("{}ms", n / 1_000_000)
    } else if n.is_multiple_of(1000) {
        format!("{}us", n / 1000)
    } else {
        format!("{n}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_ranges() {
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(
            parse_range("1ms..5ms"),
            Ok(Duration::from_millis(1)..Duration::from_millis(5))
        );
        assert!(parse_duration("5").unwrap_err().contains("no unit"));
        assert!(parse_duration("5h").unwrap_err().contains("unknown unit"));
        assert!(parse_range("5ms..1ms").is_err());
        assert_eq!(fmt_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(fmt_duration(Duration::from_millis(20)), "20ms");
    }
}
