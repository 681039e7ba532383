//! The scenario loader's error and the context that builds it (file name, text, line of an
//! offset): shared by the loader (load.rs) and the step parser (load_step.rs), so neither names
//! the other for it. A leaf; not here: parsing.

use core::fmt;

/// Why a scenario file was rejected.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct ScenarioError {
    /// The file (or `<text>`).
    pub file: String,
    /// 1-based line, 0 when unknown.
    pub line: usize,
    /// The field, dotted (`cluster.replicas`, `step[2].node`), empty when not about one field.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: ", self.file, self.line)?;
        if !self.field.is_empty() {
            write!(f, "field `{}`: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ScenarioError {}

pub(crate) struct Cx<'a> {
    pub(crate) file: &'a str,
    pub(crate) text: &'a str,
}

impl Cx<'_> {
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())]
            .matches('\n')
            .count()
            + 1
    }

    pub(crate) fn err(
        &self,
        offset: usize,
        field: &str,
        message: impl Into<String>,
    ) -> ScenarioError {
        self.err_line(self.line_of(offset), field, message)
    }

    pub(crate) fn err_line(
        &self,
        line: usize,
        field: &str,
        message: impl Into<String>,
    ) -> ScenarioError {
        ScenarioError {
            file: self.file.to_string(),
            line,
            field: field.to_string(),
            message: message.into(),
        }
    }
}
