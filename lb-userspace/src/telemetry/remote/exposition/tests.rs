use std::borrow::Cow;

use super::{Sample, parse};

/// The value of label `name` of `sample`.
fn label<'a>(sample: &'a Sample<'_>, name: &str) -> Option<&'a str> {
    sample
        .labels
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.as_ref())
}

fn labels<'a>(pairs: &[(&'a str, &'a str)]) -> Vec<(&'a str, Cow<'a, str>)> {
    pairs.iter().map(|(n, v)| (*n, Cow::Borrowed(*v))).collect()
}

/// What node_exporter 1.5's qdisc collector writes, cut short.
const NODE_EXPORTER: &str = r#"# HELP node_qdisc_backlog Number of bytes currently in queue to be sent.
# TYPE node_qdisc_backlog gauge
node_qdisc_backlog{device="fleaf",kind="tbf"} 1234
node_qdisc_backlog{device="lo",kind="noqueue"} 0
# HELP node_qdisc_bytes_total Number of bytes sent.
# TYPE node_qdisc_bytes_total counter
node_qdisc_bytes_total{device="fleaf",kind="tbf"} 1.234567e+06
node_scrape_collector_duration_seconds{collector="qdisc"} 0.000351571
"#;

#[test]
fn reads_node_exporter() {
    let samples = parse(NODE_EXPORTER).unwrap();
    assert_eq!(samples.len(), 4);
    assert_eq!(
        samples[0],
        Sample {
            name: "node_qdisc_backlog",
            labels: labels(&[("device", "fleaf"), ("kind", "tbf")]),
            value: 1234.0,
        }
    );
    assert_eq!(samples[2].value, 1_234_567.0);
    assert_eq!(label(&samples[2], "device"), Some("fleaf"));
    assert_eq!(label(&samples[2], "queue"), None);
    assert_eq!(samples[3].value, 0.000351571);
}

#[test]
fn reads_the_formats_corners() {
    let text = "  # a free comment\n\
                \t\n\
                # HELP bare\n\
                # TYPE  spaced \t untyped\n\
                bare 1\n\
                with_ts{a=\"1\"} 2 -1395066363000\n\
                trailing_comma{a=\"1\",} 3\n\
                no_blank{ a = \"1\" , b=\"2\" }4\n\
                colon:name 5\r\n\
                nan NaN\n\
                inf +Inf\n\
                ninf -Inf\n\
                empty{a=\"\"} 6\n\
                no_labels{} 7";
    // A CR before the newline is not part of the format: the value "5\r"
    // is refused.
    assert_eq!(parse(text).unwrap_err().line, 9);
    let text = text.replace('\r', "");
    let samples = parse(&text).unwrap();
    let names: Vec<&str> = samples.iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        [
            "bare",
            "with_ts",
            "trailing_comma",
            "no_blank",
            "colon:name",
            "nan",
            "inf",
            "ninf",
            "empty",
            "no_labels"
        ]
    );
    assert_eq!(samples[3].labels, labels(&[("a", "1"), ("b", "2")]));
    assert_eq!(samples[3].value, 4.0);
    assert!(samples[5].value.is_nan());
    assert_eq!(samples[6].value, f64::INFINITY);
    assert_eq!(samples[7].value, f64::NEG_INFINITY);
    assert_eq!(label(&samples[8], "a"), Some(""));
    assert!(samples[9].labels.is_empty());
}

#[test]
fn unescapes_label_values() {
    let text = r#"m{path="C:\\DIR\\FILE.TXT",error="Cannot find file:\n\"FILE.TXT\"",plain="a,b=c}"} 1.458255915e9"#;
    let samples = parse(text).unwrap();
    let sample = &samples[0];
    assert_eq!(label(sample, "path"), Some(r"C:\DIR\FILE.TXT"));
    assert_eq!(
        label(sample, "error"),
        Some("Cannot find file:\n\"FILE.TXT\"")
    );
    // Commas, equals signs and braces inside quotes are the value's.
    assert_eq!(label(sample, "plain"), Some("a,b=c}"));
    assert!(matches!(sample.labels[2].1, Cow::Borrowed(_)));
    assert!(matches!(sample.labels[0].1, Cow::Owned(_)));
}

#[test]
fn an_empty_body_has_no_samples() {
    assert_eq!(parse("").unwrap(), []);
    assert_eq!(parse("# only comments\n\n").unwrap(), []);
}

/// Each of these is refused as a whole, with the line it failed on.
#[test]
fn refuses_what_is_not_exposition_text() {
    let bad = [
        ("<!DOCTYPE html>\n<html><body>Oops</body></html>", 1),
        ("ok 1\n<html>", 2),
        ("m{device=\"x\"} abc", 1),
        ("m 1 2 3", 1),
        ("m 1 1.5", 1),
        ("m", 1),
        ("m{a=\"1\"}", 1),
        ("m{a=\"1\"", 1),
        ("m{a=\"1} 1", 1),
        ("m{a=1} 1", 1),
        ("m{a\"1\"} 1", 1),
        ("m{a=\"1\" b=\"2\"} 1", 1),
        ("m{a=\"1\",a=\"2\"} 1", 1),
        ("m{a=\"\\t\"} 1", 1),
        ("m{1a=\"1\"} 1", 1),
        ("m{a:b=\"1\"} 1", 1),
        ("1m 1", 1),
        ("m-x 1", 1),
        ("{a=\"1\"} 1", 1),
        ("ok 1\n\n# TYPE m gauges\nm 1", 3),
        ("# TYPE m gauge extra", 1),
        ("# HELP 9m text", 1),
        ("# TYPE", 1),
        ("m 0x10", 1),
        ("m 1,5", 1),
    ];
    for (text, line) in bad {
        let error = parse(text).expect_err(text);
        assert_eq!(error.line, line, "{text:?}: {error}");
    }
}

#[test]
fn errors_say_where_and_what() {
    let error = parse("fine 1\nm{device=\"x\"} abc").unwrap_err();
    assert_eq!(
        error.to_string(),
        "line 2: m: value \"abc\" is not a number"
    );
    let error = parse("<html>").unwrap_err();
    assert_eq!(
        error.to_string(),
        "line 1: expected a metric name, found \"<html>\""
    );
}
