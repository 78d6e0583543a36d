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
    /// Not a regular file: reading a FIFO or a device could block or never
    /// end.
    #[error(
        "{}: not a regular file (a FIFO, a device or a directory); a config is read \
         only from a regular file",
        file.display()
    )]
    NotAFile { file: PathBuf },
    /// Larger than any config needs.
    #[error("{}: {len} bytes; a config may be at most {max} bytes", file.display())]
    TooLarge { file: PathBuf, len: u64, max: u64 },
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
        let span = e.span().unwrap_or(0..0);
        let message = e.message().trim().replace('\n', "; ");
        let reason = self.explain(&span, &message).unwrap_or(message);
        self.error(span, reason)
    }

    /// serde's type errors name Rust types ("expected i64") and no key, and
    /// a table written with the wrong brackets reads as a type error at its
    /// header; say what the file should hold instead. `None` keeps serde's
    /// message.
    fn explain(&self, span: &Range<usize>, message: &str) -> Option<String> {
        let line = self.line_of(span.start).trim();
        if let Some(table) = line.strip_prefix("[[").and_then(|l| l.strip_suffix("]]")) {
            let table = table.trim();
            return SINGLE_TABLES.contains(&table).then(|| {
                format!("there is one [{table}] table, not a list of them: write [{table}]")
            });
        }
        if let Some(table) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let table = table.trim();
            return ARRAYS_OF_TABLES.contains(&table).then(|| {
                format!(
                    "[{table}] is a single table, but a config lists {table}s: \
                     write [[{table}]] above each one"
                )
            });
        }
        let key = self.key_before(span.start)?;
        if let Some(found) = message.strip_prefix("invalid type: ").and_then(|m| {
            m.strip_suffix(", expected i64")
                .or(m.strip_suffix(", expected u32"))
        }) {
            return Some(format!(
                "{key} takes a whole number, not the {found}: write it without quotes or a unit"
            ));
        }
        if let Some(value) = message
            .strip_prefix("invalid value: integer `")
            .and_then(|m| m.strip_suffix("`, expected u32"))
        {
            return Some(format!(
                "{key} = {value} is out of range: it takes 0..={}",
                u32::MAX
            ));
        }
        let found = message
            .strip_prefix("invalid type: ")?
            .strip_suffix(", expected a sequence")?;
        Some(format!(
            "{key} takes a list in brackets, not the {found}: e.g. {key} = [...]"
        ))
    }

    /// The line holding byte `offset`, without its newline.
    fn line_of(&self, offset: usize) -> &str {
        let (line, _) = self.position(offset);
        self.text.lines().nth(line - 1).unwrap_or("")
    }

    /// The key whose value starts at byte `offset`: `key = value`, also
    /// inside an inline table.
    fn key_before(&self, offset: usize) -> Option<&str> {
        let before = self.text.get(..offset)?.trim_end().strip_suffix('=')?;
        let key = before
            .trim_end()
            .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .next()?;
        (!key.is_empty()).then_some(key)
    }
}

/// Top-level tables a config has once, and those it lists; see [`super::raw`].
const SINGLE_TABLES: [&str; 1] = ["switch"];
const ARRAYS_OF_TABLES: [&str; 2] = ["group", "route"];

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
