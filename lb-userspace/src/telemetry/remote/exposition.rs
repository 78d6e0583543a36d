//! A strict parser of the Prometheus text exposition format (version
//! 0.0.4), the subset a metrics endpoint such as node_exporter writes:
//! blank lines, comments (`# HELP name text`, `# TYPE name kind`, any other
//! `#` line), and samples `name{label="value",...} value [timestamp]` with
//! `\\`, `\"` and `\n` escaped in label values.
//!
//! Strict means a body is rejected as a whole at its first bad line, as
//! Prometheus itself fails such a scrape: an HTML error page, a truncated
//! line or a value like `abc` is never read as "no samples" or skipped.
//! Values keep what the format allows (`NaN`, `+Inf`); whether a value
//! makes sense is the caller's business.

use std::borrow::Cow;

/// One sample line.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample<'a> {
    pub name: &'a str,
    /// In the order written; names are distinct.
    pub labels: Vec<(&'a str, Cow<'a, str>)>,
    pub value: f64,
}

/// Why a body is not exposition text: the first bad line (1-based) and
/// what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub why: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.why)
    }
}

/// Every sample of `text`, in order, or the first line that is not
/// exposition text.
pub fn parse(text: &str) -> Result<Vec<Sample<'_>>, ParseError> {
    let mut samples = Vec::new();
    for (index, line) in text.split('\n').enumerate() {
        let fail = |why: String| ParseError {
            line: index + 1,
            why,
        };
        let line = line.trim_start_matches(BLANK);
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            comment_line(comment).map_err(fail)?;
        } else {
            samples.push(sample_line(line).map_err(fail)?);
        }
    }
    Ok(samples)
}

const BLANK: [char; 2] = [' ', '\t'];

/// `# HELP` and `# TYPE` must be well formed; any other comment is free.
fn comment_line(comment: &str) -> Result<(), String> {
    let mut words = comment.split(BLANK).filter(|w| !w.is_empty());
    let keyword = words.next().unwrap_or_default();
    if keyword != "HELP" && keyword != "TYPE" {
        return Ok(());
    }
    let name = words.next().unwrap_or_default();
    if !is_metric_name(name) {
        return Err(format!("# {keyword} names no valid metric: {name:?}"));
    }
    if keyword == "TYPE" {
        let kind = words.next().unwrap_or_default();
        if !matches!(
            kind,
            "counter" | "gauge" | "histogram" | "summary" | "untyped"
        ) {
            return Err(format!("# TYPE {name} has unknown type {kind:?}"));
        }
        if let Some(extra) = words.next() {
            return Err(format!("# TYPE {name} {kind}: unexpected {extra:?}"));
        }
    }
    Ok(())
}

fn sample_line(line: &str) -> Result<Sample<'_>, String> {
    let name_end = line
        .find(|c: char| !is_name_char(c, true))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if !is_metric_name(name) {
        let start: String = line.chars().take(24).collect();
        return Err(format!("expected a metric name, found {start:?}"));
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after_brace) = rest.strip_prefix('{') {
        // As in Prometheus, the blank after the label set is optional.
        rest = label_set(after_brace, &mut labels)?;
    } else if !rest.starts_with(BLANK) {
        return Err(format!("{name}: expected a blank or '{{' after the name"));
    }
    let mut fields = rest.split(BLANK).filter(|f| !f.is_empty());
    let value = fields.next().ok_or_else(|| format!("{name}: no value"))?;
    let value =
        parse_value(value).ok_or_else(|| format!("{name}: value {value:?} is not a number"))?;
    if let Some(timestamp) = fields.next()
        && timestamp.parse::<i64>().is_err()
    {
        return Err(format!("{name}: timestamp {timestamp:?} is not an integer"));
    }
    if let Some(extra) = fields.next() {
        return Err(format!("{name}: unexpected {extra:?} after the value"));
    }
    Ok(Sample {
        name,
        labels,
        value,
    })
}

/// Parses `label="value",...}` (the opening brace already consumed) into
/// `labels`; returns what follows the closing brace.
fn label_set<'a>(
    mut rest: &'a str,
    labels: &mut Vec<(&'a str, Cow<'a, str>)>,
) -> Result<&'a str, String> {
    loop {
        rest = rest.trim_start_matches(BLANK);
        if let Some(after) = rest.strip_prefix('}') {
            return Ok(after);
        }
        let name_end = rest
            .find(|c: char| !is_name_char(c, false))
            .unwrap_or(rest.len());
        let name = &rest[..name_end];
        if !is_label_name(name) {
            return Err(format!(
                "expected a label name or '}}', found {:?}",
                head(rest)
            ));
        }
        if labels.iter().any(|(n, _)| *n == name) {
            return Err(format!("label {name} given twice"));
        }
        rest = rest[name_end..].trim_start_matches(BLANK);
        rest = rest
            .strip_prefix('=')
            .ok_or_else(|| format!("label {name}: expected '='"))?
            .trim_start_matches(BLANK);
        rest = rest
            .strip_prefix('"')
            .ok_or_else(|| format!("label {name}: expected a quoted value"))?;
        let (value, after) = label_value(rest).map_err(|why| format!("label {name}: {why}"))?;
        labels.push((name, value));
        rest = after.trim_start_matches(BLANK);
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
        } else if !rest.starts_with('}') {
            return Err(format!(
                "label {name}: expected ',' or '}}', found {:?}",
                head(rest)
            ));
        }
    }
}

/// A label value after its opening quote: the unescaped value and what
/// follows the closing quote.
fn label_value(text: &str) -> Result<(Cow<'_, str>, &str), String> {
    let mut owned: Option<String> = None;
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                let value = match owned {
                    Some(s) => Cow::Owned(s),
                    None => Cow::Borrowed(&text[..i]),
                };
                return Ok((value, &text[i + 1..]));
            }
            '\\' => {
                let unescaped = match chars.next() {
                    Some((_, '\\')) => '\\',
                    Some((_, '"')) => '"',
                    Some((_, 'n')) => '\n',
                    Some((_, other)) => return Err(format!("unknown escape \\{other}")),
                    None => return Err("unterminated value".into()),
                };
                owned
                    .get_or_insert_with(|| text[..i].to_owned())
                    .push(unescaped);
            }
            c => {
                if let Some(s) = owned.as_mut() {
                    s.push(c);
                }
            }
        }
    }
    Err("unterminated value".into())
}

/// A sample value as Go's `ParseFloat` writes it: a decimal number, `NaN`,
/// `+Inf` or `-Inf`. Rust's float parser takes the same, and also the
/// spellings Go reads too (`infinity`, `nan`, any case); anything else is
/// `None`.
fn parse_value(text: &str) -> Option<f64> {
    text.parse().ok()
}

fn is_name_char(c: char, colon: bool) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || (colon && c == ':')
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`
fn is_metric_name(name: &str) -> bool {
    name.chars().next().is_some_and(|c| !c.is_ascii_digit())
        && name.chars().all(|c| is_name_char(c, true))
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`
fn is_label_name(name: &str) -> bool {
    name.chars().next().is_some_and(|c| !c.is_ascii_digit())
        && name.chars().all(|c| is_name_char(c, false))
}

fn head(text: &str) -> String {
    text.chars().take(16).collect()
}

#[cfg(test)]
mod tests;
