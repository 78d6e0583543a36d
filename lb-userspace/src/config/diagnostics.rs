//! How a config problem reaches the user: [`ConfigError`], rendered as
//! `{file}:{line}:{column}: {reason}` at the offending value's span, and
//! [`Warning`], the same with `warning: ` before the reason. Both shorten
//! every value their reason quotes ([`shorten_quoted`]).

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Why a config could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read (missing, unreadable, not UTF-8).
    /// The cause is in the message, not chained behind it: `anyhow`'s
    /// `{:#}` would print it twice.
    #[error("{}: {error}", file.display())]
    Io {
        file: PathBuf,
        error: std::io::Error,
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
    /// The file is not valid TOML, or not a valid fabriclb config: every
    /// problem validation found, in file order (see [`Problem`]).
    #[error("{}", Listed { file, problems })]
    Invalid {
        file: PathBuf,
        /// Never empty.
        problems: Vec<Problem>,
    },
}

/// One place a config is refused for. `line` and `column` are 1-based;
/// the column counts characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub line: usize,
    pub column: usize,
    pub reason: String,
}

/// The most problems an error's message lists: a file refused a thousand
/// times over (a route table generated wrong) would otherwise log and
/// print as many lines. `check-config --json` lists them all.
pub const PROBLEMS_LISTED: usize = 20;

/// An `Invalid` error's message: a line `{file}:{line}:{column}: {reason}`
/// per problem, at most [`PROBLEMS_LISTED`], then how many more there are.
struct Listed<'a> {
    file: &'a Path,
    problems: &'a [Problem],
}

impl fmt::Display for Listed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.file.display();
        for (i, p) in self.problems.iter().take(PROBLEMS_LISTED).enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{file}:{}:{}: {}", p.line, p.column, p.reason)?;
        }
        match self.problems.len().saturating_sub(PROBLEMS_LISTED) {
            0 => Ok(()),
            more => write!(
                f,
                "\n{file}: {more} more problems (`fabriclb check-config --json` lists them all)"
            ),
        }
    }
}

impl ConfigError {
    /// Each problem: where in the file it is (1-based line and character
    /// column; `None` for a problem with the file as a whole) and what is
    /// wrong, without the file and position the message starts with.
    pub fn problems(&self) -> Vec<(Option<(usize, usize)>, String)> {
        match self {
            Self::Io { error, .. } => vec![(None, error.to_string())],
            Self::NotAFile { .. } | Self::TooLarge { .. } => {
                let whole = self.to_string();
                let file = self.file().display().to_string();
                let reason = whole
                    .strip_prefix(&format!("{file}: "))
                    .unwrap_or(&whole)
                    .to_owned();
                vec![(None, reason)]
            }
            Self::Invalid { problems, .. } => problems
                .iter()
                .map(|p| (Some((p.line, p.column)), p.reason.clone()))
                .collect(),
        }
    }

    /// The file it is about.
    pub fn file(&self) -> &Path {
        match self {
            Self::Io { file, .. }
            | Self::NotAFile { file }
            | Self::TooLarge { file, .. }
            | Self::Invalid { file, .. } => file,
        }
    }
}

/// Something a valid config holds that is likely a mistake: a key that
/// has no effect in its group's mode, a group no route uses. The daemon
/// logs it and runs; `check-config` prints it and passes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    pub file: PathBuf,
    /// 1-based; the column counts characters.
    pub line: usize,
    pub column: usize,
    pub reason: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: warning: {}",
            self.file.display(),
            self.line,
            self.column,
            self.reason
        )
    }
}

/// The text being parsed and the file it came from: what every error
/// points into, and the problems and warnings found so far. Validation
/// adds its checks to it in [`super::validate`].
pub(super) struct Ctx<'a> {
    text: &'a str,
    file: &'a Path,
    warnings: RefCell<Vec<Warning>>,
    problems: RefCell<Vec<Problem>>,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(text: &'a str, file: &'a Path) -> Self {
        Self {
            text,
            file,
            warnings: RefCell::default(),
            problems: RefCell::default(),
        }
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
        ConfigError::Invalid {
            file: self.file.to_path_buf(),
            problems: vec![self.problem(span, reason.into())],
        }
    }

    /// `reason` at `span`, its quoted values shortened.
    fn problem(&self, span: Range<usize>, reason: String) -> Problem {
        let (line, column) = self.position(span.start);
        Problem {
            line,
            column,
            reason: shorten_quoted(&reason),
        }
    }

    /// What `checked` holds, or `None` with its error recorded: validation
    /// goes on with what does not depend on it, so that one pass over a
    /// file reports every problem (see [`Self::refusal`]).
    pub(super) fn recover<T>(&self, checked: Result<T, ConfigError>) -> Option<T> {
        let error = match checked {
            Ok(value) => return Some(value),
            Err(error) => error,
        };
        let mut problems = self.problems.borrow_mut();
        match error {
            ConfigError::Invalid { problems: more, .. } => problems.extend(more),
            other => problems.push(self.problem(0..0, other.to_string())),
        }
        None
    }

    /// Records a warning at `span`; validation goes on.
    pub(super) fn warn(&self, span: Range<usize>, reason: impl Into<String>) {
        let Problem {
            line,
            column,
            reason,
        } = self.problem(span, reason.into());
        self.warnings.borrow_mut().push(Warning {
            file: self.file.to_path_buf(),
            line,
            column,
            reason,
        });
    }

    /// Every problem [`Self::recover`] recorded, in file order, as one
    /// error; `None` if there was none.
    pub(super) fn refusal(&self) -> Option<ConfigError> {
        let mut problems = self.problems.take();
        if problems.is_empty() {
            return None;
        }
        problems.sort_by_key(|p| (p.line, p.column));
        Some(ConfigError::Invalid {
            file: self.file.to_path_buf(),
            problems,
        })
    }

    /// The warnings recorded so far, in the order they were found.
    pub(super) fn take_warnings(&self) -> Vec<Warning> {
        self.warnings.take()
    }

    pub(super) fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
        let span = e.span().unwrap_or(0..0);
        let message = e.message().trim().replace('\n', "; ");
        let reason = self.explain(&span, &message).unwrap_or(message);
        self.error(span, reason)
    }

    /// serde's type errors name Rust types ("expected i64", "struct
    /// RawSwitch") and no key, a table written with the wrong brackets
    /// reads as a type error or a duplicate at its header, and the toml
    /// crate's "duplicate key" names no key: say what the file should hold
    /// instead. `None` keeps the crate's message.
    fn explain(&self, span: &Range<usize>, message: &str) -> Option<String> {
        let line = self.line_of(span.start);
        // A comment after a header; a '#' in a quoted table name is rare.
        let line = line.split('#').next().unwrap_or_default().trim();
        let duplicate = message == "duplicate key";
        if let Some(table) = header(line, "[[", "]]") {
            if SINGLE_TABLES.contains(&table) {
                return Some(format!(
                    "there is one [{table}] table, not a list of them: write [{table}]"
                ));
            }
            if duplicate && ARRAYS_OF_TABLES.contains(&table) {
                return Some(format!(
                    "[[{table}]] after a [{table}]: a config lists {table}s, \
                     so write [[{table}]] above each one"
                ));
            }
        } else if let Some(table) = header(line, "[", "]") {
            if ARRAYS_OF_TABLES.contains(&table) {
                return Some(format!(
                    "[{table}] is a single table, but a config lists {table}s: \
                     write [[{table}]] above each one"
                ));
            }
        }
        if duplicate {
            let key = self.text.get(span.clone()).unwrap_or_default();
            return Some(if line.starts_with('[') {
                format!("table [{key}] is defined twice: put all its keys under one [{key}]")
            } else {
                format!("duplicate key `{key}`: a key may be set once per table")
            });
        }
        let key = self.key_before(span.start);
        if let Some(value) = message
            .strip_prefix("invalid value: integer `")
            .and_then(|m| m.strip_suffix("`, expected u32"))
        {
            return Some(format!(
                "{} = {value} is out of range: it takes 0..={}",
                key?,
                u32::MAX
            ));
        }
        let (found, expected) = message
            .strip_prefix("invalid type: ")?
            .rsplit_once(", expected ")?;
        if matches!(expected, "i64" | "u32") {
            if let Some(value) = found
                .strip_prefix("integer `")
                .and_then(|f| f.split_once('`'))
            {
                // Past i64: toml reads it as an i128.
                return Some(format!("{} = {} is out of range", key?, value.0));
            }
        }
        let found = match found {
            "sequence" => "list",
            "map" => "table",
            value => value,
        };
        let Some(key) = key else {
            let what = EXPECTED.iter().find(|(e, _)| *e == expected)?.1;
            return Some(format!("expected {what}, not the {found}"));
        };
        Some(match expected {
            "i64" | "u32" => format!(
                "{key} takes a whole number, not the {found}: write it without quotes or a unit"
            ),
            "a sequence" => {
                format!("{key} takes a list in brackets, not the {found}: e.g. {key} = [...]")
            }
            "a string" => format!("{key} takes a string in quotes, not the {found}"),
            _ => {
                let what = EXPECTED.iter().find(|(e, _)| *e == expected)?.1;
                format!("{key} takes {what}, not the {found}")
            }
        })
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

/// `name` if `line` is a table header `{open}name{close}`.
fn header<'a>(line: &'a str, open: &str, close: &str) -> Option<&'a str> {
    Some(line.strip_prefix(open)?.strip_suffix(close)?.trim())
}

/// What serde expects, in the file's words; see [`super::raw`].
const EXPECTED: [(&str, &str); 9] = [
    ("a string", "a string in quotes"),
    ("a sequence", "a list in brackets"),
    ("i64", "a whole number"),
    ("struct RawSwitch", "the [switch] table"),
    ("struct RawGroup", "a [[group]] table"),
    (
        "struct RawNextHop",
        "a next hop, e.g. { interface = \"eth1\", ip = \"10.0.0.1\" }",
    ),
    ("struct RawRoute", "a [[route]] table"),
    ("struct RawArsProfile", "the [ars_profile] table"),
    ("struct RawTelemetry", "the [telemetry] table"),
];

/// Top-level tables a config has once, and those it lists; see [`super::raw`].
const SINGLE_TABLES: [&str; 3] = ["switch", "ars_profile", "telemetry"];
const ARRAYS_OF_TABLES: [&str; 2] = ["group", "route"];

/// The most characters of a value a message quotes in full: enough to
/// recognise any name or address a config holds.
const QUOTED_MAX_CHARS: usize = 64;

/// `reason` with each value it quotes (`"..."` as Rust's `{:?}` escapes
/// it, or `` `...` `` as the toml crate quotes keys) that is longer than
/// [`QUOTED_MAX_CHARS`] cut there, ending in "…" and followed by the
/// value's length in bytes: `"aaaa…" (10485760 bytes)`. Every message
/// passes here, so none repeats a value of whatever size the file holds.
fn shorten_quoted(reason: &str) -> String {
    let mut out = String::with_capacity(reason.len().min(1024));
    let mut rest = reason;
    while let Some(open) = rest.find(['"', '`']) {
        let quote = char::from(rest.as_bytes()[open]);
        out.push_str(&rest[..=open]);
        let value = &rest[open + 1..];
        let Some(quoted) = QuotedValue::scan(value, quote) else {
            // Unclosed: prose, not a value. Nothing of a value follows.
            out.push_str(value);
            return out;
        };
        match quoted.cut {
            Some(cut) => {
                out.push_str(&value[..cut]);
                out.push('…');
                out.push(quote);
                // Writing to a String cannot fail.
                let _ = write!(out, " ({} bytes)", quoted.bytes);
            }
            None => {
                out.push_str(&value[..quoted.end]);
                out.push(quote);
            }
        }
        rest = &value[quoted.end + quote.len_utf8()..];
    }
    out.push_str(rest);
    out
}

/// A quoted value as [`shorten_quoted`] reads it.
struct QuotedValue {
    /// Byte offset of the closing quote.
    end: usize,
    /// Where to cut the quoted text if the value is too long to repeat.
    cut: Option<usize>,
    /// The value's length before escaping.
    bytes: usize,
}

impl QuotedValue {
    /// Reads `text` up to the closing `quote`, unescaping as `{:?}` escapes
    /// inside double quotes; `None` if it is not closed.
    fn scan(text: &str, quote: char) -> Option<Self> {
        let (mut chars, mut bytes, mut cut) = (0, 0, None);
        let mut iter = text.char_indices();
        while let Some((at, c)) = iter.next() {
            if c == quote {
                return Some(Self {
                    end: at,
                    cut,
                    bytes,
                });
            }
            if chars == QUOTED_MAX_CHARS {
                cut = Some(at);
            }
            chars += 1;
            bytes += match c {
                '\\' if quote == '"' => match iter.next() {
                    Some((_, 'u')) => {
                        let code: String = iter
                            .by_ref()
                            .map(|(_, c)| c)
                            .take_while(|&c| c != '}')
                            .filter(char::is_ascii_hexdigit)
                            .collect();
                        u32::from_str_radix(&code, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .map_or(1, char::len_utf8)
                    }
                    _ => 1,
                },
                c => c.len_utf8(),
            };
        }
        None
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
