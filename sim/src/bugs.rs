//! Planted bugs selectable in simulation: every broken storage variant (`PlantedBug`) and mgmtd
//! variant (`MgmtdBug`) of t3fs-core, by their command-line names.
//!
//! Not here: the bugs themselves (each lives at the one place in core its rule is enforced).

use t3fs_core::bugs::{MetaBug, MgmtdBug, PlantedBug};

/// The planted bugs of one run (at most one is set).
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
pub struct Bugs {
    /// Storage.
    pub storage: Option<PlantedBug>,
    /// mgmtd.
    pub mgmtd: Option<MgmtdBug>,
    /// Meta.
    pub meta: Option<MetaBug>,
}

/// Parses a bug name into the storage, mgmtd or meta variant.
pub fn parse(name: Option<&str>) -> Result<Bugs, String> {
    let mut bugs = Bugs::default();
    let Some(name) = name else {
        return Ok(bugs);
    };
    bugs.storage = PlantedBug::from_name(name);
    bugs.mgmtd = MgmtdBug::from_name(name);
    bugs.meta = MetaBug::from_name(name);
    if bugs != Bugs::default() {
        return Ok(bugs);
    }
    Err(format!(
        "unknown bug `{name}`; known: {}",
        names().join(", ")
    ))
}

/// Every bug name with its one-line description.
pub fn list() -> Vec<(&'static str, &'static str)> {
    PlantedBug::ALL
        .iter()
        .map(|b| (b.name(), b.about()))
        .chain(MgmtdBug::ALL.iter().map(|b| (b.name(), b.about())))
        .chain(MetaBug::ALL.iter().map(|b| (b.name(), b.about())))
        .collect()
}

/// Every bug name.
pub fn names() -> Vec<&'static str> {
    list().into_iter().map(|(n, _)| n).collect()
}
