use super::scrape::Series;
use super::{Reading, Target, TelemetryError, check_url, read};

fn series(name: &str, device: &str, kind: &str, value: f64) -> Series {
    Series {
        name: name.into(),
        labels: vec![
            ("device".into(), device.into()),
            ("kind".into(), kind.into()),
        ],
        value,
    }
}

fn target(device: &str) -> Target {
    Target {
        url: "http://192.0.2.1:9100/metrics".into(),
        device: device.into(),
    }
}

fn is_garbage(result: &Result<Reading, TelemetryError>, needle: &str) -> bool {
    matches!(result, Err(TelemetryError::Garbage { why, .. }) if why.contains(needle))
}

#[test]
fn reads_the_devices_backlog_and_bytes() {
    let scraped = [
        series("node_qdisc_backlog", "lo", "noqueue", 7.0),
        series("node_qdisc_backlog", "fleaf", "tbf", 1234.0),
        series("node_qdisc_bytes_total", "fleaf", "tbf", 5.6e7),
        series("node_qdisc_bytes_total", "lo", "noqueue", 9.0),
    ];
    assert_eq!(
        read(&scraped, &target("fleaf")),
        Ok(Reading {
            queued_bytes: 1234,
            tx_bytes: Some(56_000_000),
            speed_bytes_per_s: None,
            read_at: None,
        })
    );
    assert_eq!(
        read(&scraped, &target("lo")),
        Ok(Reading {
            queued_bytes: 7,
            tx_bytes: Some(9),
            speed_bytes_per_s: None,
            read_at: None,
        })
    );
}

#[test]
fn sums_a_devices_kinds() {
    let scraped = [
        series("node_qdisc_backlog", "fleaf", "tbf", 1000.0),
        series("node_qdisc_backlog", "fleaf", "fq", 234.0),
        series("node_qdisc_bytes_total", "fleaf", "tbf", 10.0),
        series("node_qdisc_bytes_total", "fleaf", "fq", 5.0),
    ];
    assert_eq!(
        read(&scraped, &target("fleaf")),
        Ok(Reading {
            queued_bytes: 1234,
            tx_bytes: Some(15),
            speed_bytes_per_s: None,
            read_at: None,
        })
    );
}

#[test]
fn bytes_are_optional_the_backlog_is_not() {
    let backlog_only = [series("node_qdisc_backlog", "fleaf", "tbf", 3.0)];
    assert_eq!(
        read(&backlog_only, &target("fleaf")),
        Ok(Reading {
            queued_bytes: 3,
            tx_bytes: None,
            speed_bytes_per_s: None,
            read_at: None,
        })
    );
    let bytes_only = [series("node_qdisc_bytes_total", "fleaf", "tbf", 3.0)];
    assert!(is_garbage(
        &read(&bytes_only, &target("fleaf")),
        "no node_qdisc_backlog series"
    ));
    assert!(is_garbage(
        &read(&backlog_only, &target("fleaf2")),
        "no node_qdisc_backlog series"
    ));
}

#[test]
fn refuses_values_that_are_not_bytes() {
    for bad in [f64::NAN, -1.0, f64::INFINITY, f64::NEG_INFINITY, 1e20] {
        let scraped = [series("node_qdisc_backlog", "fleaf", "tbf", bad)];
        let result = read(&scraped, &target("fleaf"));
        assert!(
            is_garbage(&result, "not a number of bytes"),
            "{bad}: {result:?}"
        );
        let scraped = [
            series("node_qdisc_backlog", "fleaf", "tbf", 0.0),
            series("node_qdisc_bytes_total", "fleaf", "tbf", bad),
        ];
        let result = read(&scraped, &target("fleaf"));
        assert!(
            is_garbage(&result, "not a number of bytes"),
            "{bad}: {result:?}"
        );
    }
    // Another device's nonsense is not this one's concern.
    let scraped = [
        series("node_qdisc_backlog", "lo", "noqueue", f64::NAN),
        series("node_qdisc_backlog", "fleaf", "tbf", 0.0),
    ];
    assert!(read(&scraped, &target("fleaf")).is_ok());
}

#[test]
fn refuses_a_series_given_twice() {
    let scraped = [
        series("node_qdisc_backlog", "fleaf", "tbf", 1.0),
        series("node_qdisc_backlog", "fleaf", "tbf", 1.0),
    ];
    assert!(is_garbage(&read(&scraped, &target("fleaf")), "twice"));
}

#[test]
fn the_garbage_names_device_and_url() {
    let result = read(&[], &target("fleaf"));
    let Err(TelemetryError::Garbage {
        source_name, what, ..
    }) = result
    else {
        panic!("{result:?}");
    };
    assert_eq!(source_name, "remote");
    assert_eq!(what, "device \"fleaf\" at http://192.0.2.1:9100/metrics");
}

#[test]
fn checks_urls() {
    for good in [
        "http://198.18.4.2:9100/metrics",
        "http://switch-4.example:9100/metrics",
        "http://[2001:db8::1]:9100/metrics",
        "http://198.18.4.2:9100",
    ] {
        assert_eq!(check_url(good), Ok(()), "{good}");
    }
    let bad = [
        ("https://198.18.4.2:9100/metrics", "https is not supported"),
        ("ftp://198.18.4.2:9100/metrics", "only"),
        ("198.18.4.2:9100/metrics", "no scheme"),
        ("/metrics", "no scheme"),
        ("http://198.18.4.2/metrics", "has no port"),
        ("http://user:pw@198.18.4.2:9100/metrics", "credentials"),
        ("http://:9100/metrics", "no host"),
        ("http://198.18.4.2:9100/a b", "not a URL"),
        ("", "no scheme"),
    ];
    for (url, needle) in bad {
        let error = check_url(url).expect_err(url);
        assert!(error.contains(needle), "{url}: {error}");
        assert!(error.contains("http"), "{url}: {error}");
    }
    assert_eq!(
        check_url("http://198.18.4.2/metrics").unwrap_err(),
        "\"http://198.18.4.2/metrics\" has no port; node_exporter listens on 9100, \
         e.g. \"http://198.18.4.2:9100/metrics\""
    );
}
