//! How a config problem reaches the user: [`ConfigError`], rendered as
//! `{file}:{line}:{column}: {reason}` at the offending value's span.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Why a config could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read (missing, unreadable, not UTF-8).
    #[error("{}: {source}", file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML, or not a valid fabriclb config.
    /// `line` and `column` are 1-based; the column counts characters.
    #[error("{}:{line}:{column}: {reason}", file.display())]
    Invalid {
        file: PathBuf,
        line: usize,
        column: usize,
        reason: String,
    },
}

/// The text being parsed and the file it came from: what every error
/// points into. Validation adds its checks to it in [`super::validate`].
pub(super) struct Ctx<'a> {
    text: &'a str,
    file: &'a Path,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(text: &'a str, file: &'a Path) -> Self {
        Self { text, file }
    }

    /// 1-based line and character column of byte `offset`.
    fn position(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &self.text[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line = before.matches('\n').count() + 1;
        let column = before[line_start..].chars().count() + 1;
        (line, column)
    }

    /// "line L, column C", for pointing back at an earlier definition.
    pub(super) fn at(&self, span: &Range<usize>) -> String {
        let (line, column) = self.position(span.start);
        format!("line {line}, column {column}")
    }

    pub(super) fn error(&self, span: Range<usize>, reason: impl Into<String>) -> ConfigError {
        let (line, column) = self.position(span.start);
        ConfigError::Invalid {
            file: self.file.to_path_buf(),
            line,
            column,
            reason: reason.into(),
        }
    }

    pub(super) fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
        let reason = e.message().trim().replace('\n', "; ");
        self.error(e.span().unwrap_or(0..0), reason)
    }
}

/// A names table's names, as `"a", "b", "c"`.
pub(super) struct Quoted<'a, T>(pub(super) &'a [(&'a str, T)]);

impl<T> fmt::Display for Quoted<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, _)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{name:?}")?;
        }
        Ok(())
    }
}
