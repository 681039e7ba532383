//! Planted bugs selectable in simulation: every broken storage variant (`PlantedBug`) and mgmtd
//! variant (`MgmtdBug`) of t3fs-core, by their command-line names.
//!
//! Not here: the bugs themselves (each lives at the one place in core its rule is enforced).

use t3fs_core::bugs::{MgmtdBug, PlantedBug};

/// Parses a bug name into the storage or the mgmtd variant.
pub fn parse(name: Option<&str>) -> Result<(Option<PlantedBug>, Option<MgmtdBug>), String> {
    let Some(name) = name else {
        return Ok((None, None));
    };
    if let Some(b) = PlantedBug::from_name(name) {
        return Ok((Some(b), None));
    }
    if let Some(b) = MgmtdBug::from_name(name) {
        return Ok((None, Some(b)));
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
        .collect()
}

/// Every bug name.
pub fn names() -> Vec<&'static str> {
    list().into_iter().map(|(n, _)| n).collect()
}
