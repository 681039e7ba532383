//! The fault RPC's resources and their query syntax: each fault layer a node has (its
//! transport's network faults, its disks', its clock's, the KV service's) is a
//! [`FaultResource`] the control endpoint (metrics.rs) reads and replaces as a whole, each
//! written as an URL query of `key=value` pairs parsed with the helpers here.
//!
//! Invariant: a query naming an unknown key or carrying a bad value is refused whole, with the
//! key named; nothing is half-applied. A leaf: each layer implements [`FaultResource`] beside
//! itself (transport/faults.rs, chunk_store/faults.rs, node/clock.rs, kv_faults.rs), so the
//! layers need this module and it needs none of them. Not here: authentication and HTTP
//! (metrics.rs), or what each fault does (the layers' own modules).

use std::sync::Arc;
use std::time::Duration;

/// A fault layer the control endpoint can read and replace.
pub trait FaultResource: Send + Sync {
    /// The faults now (and what the layer did), as text.
    fn describe(&self) -> String;
    /// Replaces the faults with the query's; says what is set now.
    fn put(&self, query: &str) -> Result<String, String>;
}

/// The `key=value` pairs of `query`, in order; a pair without `=` is an error.
pub fn pairs(query: &str) -> impl Iterator<Item = Result<(&str, &str), String>> {
    query.split('&').filter(|p| !p.is_empty()).map(|p| {
        p.split_once('=')
            .ok_or(format!("`{p}`: expected key=value"))
    })
}

/// A probability in [0, 1].
pub fn rate(k: &str, v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("{k}: `{v}` is not a rate in [0, 1]")),
    }
}

/// `0` or `1`.
pub fn flag(k: &str, v: &str) -> Result<bool, String> {
    match v {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(format!("{k}: `{v}` is not 0 or 1")),
    }
}

/// `LO-HI` in microseconds, LO ≤ HI.
pub fn span(k: &str, v: &str) -> Result<(Duration, Duration), String> {
    let (a, b) = v
        .split_once('-')
        .ok_or(format!("{k}: `{v}` is not LO-HI"))?;
    let us = |x: &str| x.parse::<u64>().map_err(|_| format!("{k}: `{x}`"));
    let (a, b) = (us(a)?, us(b)?);
    if a > b {
        return Err(format!("{k}: {a} > {b}"));
    }
    Ok((Duration::from_micros(a), Duration::from_micros(b)))
}

/// [`span`]'s text.
pub fn span_text((lo, hi): (Duration, Duration)) -> String {
    format!("{}-{}", lo.as_micros(), hi.as_micros())
}

/// A node's resources by path (`/fault`, `/disk`, `/clock`, `/kv`).
pub type Resources = Vec<(&'static str, Arc<dyn FaultResource>)>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_and_values_are_checked() {
        let p: Result<Vec<_>, _> = pairs("a=1&&b=x").collect();
        assert_eq!(p, Ok(vec![("a", "1"), ("b", "x")]));
        assert!(pairs("a").next().unwrap().is_err());
        assert_eq!(rate("r", "0.5"), Ok(0.5));
        assert!(rate("r", "1.5").is_err() && flag("f", "2").is_err());
        let s = (Duration::from_micros(5), Duration::from_micros(9));
        assert_eq!(span("s", &span_text(s)), Ok(s));
        assert!(span("s", "9-5").is_err());
    }
}
