//! The testbed's exporters: every spine's queue read from the leaf, and
//! what scraping them every 10 ms costs.

use std::time::{Duration, Instant};

use fabriclb::telemetry::Source;
use fabriclb::telemetry::remote::Remote;
use fabriclb::testbed::{Exporters, Shape, Testbed, in_netns};

use super::timed_poll;

/// A testbed name of this process and `tag`.
fn bed_name(tag: &str) -> String {
    format!("rmt{}{tag}", std::process::id() % 100_000)
}

#[test]
fn remote_reads_every_spine_from_the_leaf() {
    let shape = Shape {
        hosts: 1,
        spines: 4,
        spine_rates_mbit: vec![100],
        ..Shape::default()
    };
    let bed = Testbed::up(&bed_name("bed"), shape).expect("testbed");
    let exporters = Exporters::start(&bed).expect("exporters");
    let targets = exporters.targets();
    assert_eq!(
        targets.iter().map(|t| t.url.as_str()).collect::<Vec<_>>(),
        (1..=4).map(Exporters::url).collect::<Vec<_>>()
    );
    assert_eq!(targets[3].url, "http://198.18.4.2:9100/metrics");
    assert_eq!(targets[3].device, "fleaf");
    let readings = in_netns(&bed.ns("leaf"), move || {
        Remote::new(targets, Duration::from_secs(1)).poll()
    })
    .unwrap();
    for (j, reading) in readings.iter().enumerate() {
        let reading = reading
            .as_ref()
            .unwrap_or_else(|e| panic!("spine {}: {e}", j + 1));
        assert!(reading.tx_bytes.is_some(), "spine {}: {reading:?}", j + 1);
    }
    // A second set cannot bind the spines' addresses; the first set
    // answering there does not make it ready.
    let error = Exporters::start(&bed)
        .err()
        .expect("a second set of exporters");
    assert!(
        format!("{error:#}").contains("address already in use"),
        "{error:#}"
    );
    // The exporters exist only in the spines: not in the leaf itself.
    let leaf_local = in_netns(&bed.ns("leaf"), || {
        std::net::TcpStream::connect("127.0.0.1:9100").is_err()
    })
    .unwrap();
    assert!(leaf_local, "something listens on the leaf's own port 9100");
}

/// The cost of the `remote` source on the testbed: 4 spines scraped every
/// 10 ms for 10 s. Run by hand:
/// `cargo test -p lb-userspace --test telemetry remote_scrape_cost -- --ignored --nocapture`
#[test]
#[ignore = "a 10 s measurement"]
fn remote_scrape_cost() {
    let shape = Shape {
        hosts: 1,
        spines: 4,
        spine_rates_mbit: vec![100],
        ..Shape::default()
    };
    let bed = Testbed::up(&bed_name("cost"), shape).expect("testbed");
    let exporters = Exporters::start(&bed).expect("exporters");
    let targets = exporters.targets();
    let exporters_before = exporters.cpu_time().unwrap();
    let (polls, failed, wall, own_cpu, slowest) = in_netns(&bed.ns("leaf"), move || {
        let mut remote = Remote::new(targets, Duration::from_millis(100));
        let (user_before, system_before) = process_cpu();
        let start = Instant::now();
        let (mut polls, mut failed, mut slowest) = (0u32, 0u32, Duration::ZERO);
        while start.elapsed() < Duration::from_secs(10) {
            let (readings, took) = timed_poll(&mut remote);
            failed += readings.iter().filter(|r| r.is_err()).count() as u32;
            slowest = slowest.max(took);
            polls += 1;
            // A poll every 10 ms, as the daemon's thread would: the next
            // tick, or at once if this poll ran past it.
            let next = start + Duration::from_millis(10) * polls;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
        let wall = start.elapsed();
        let (user, system) = process_cpu();
        let own_cpu = (user - user_before, system - system_before);
        (polls, failed, wall, own_cpu, slowest)
    })
    .unwrap();
    let spent = exporters.cpu_time().unwrap() - exporters_before;
    let scrapes = 4.0 * f64::from(polls);
    println!(
        "{polls} polls of 4 exporters in {wall:.2?} (the slowest {slowest:.2?}; \
         {failed} failed paths): node_exporters used {spent:.2?} CPU ({:.1}% \
         of one core, {:.0} us a scrape), this process {:.2?} user and {:.2?} \
         system ({:.1}%)",
        100.0 * spent.as_secs_f64() / wall.as_secs_f64(),
        1e6 * spent.as_secs_f64() / scrapes,
        own_cpu.0,
        own_cpu.1,
        100.0 * (own_cpu.0 + own_cpu.1).as_secs_f64() / wall.as_secs_f64(),
    );
    assert_eq!(failed, 0);
}

/// This process's user and system CPU time (all threads), from
/// `/proc/self/stat`'s utime and stime, in the kernel's 100 Hz user ticks.
/// System time includes the softirq work of the veths the scrapes cross,
/// which the kernel charges to whoever was running.
fn process_cpu() -> (Duration, Duration) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|f| f.parse().unwrap())
        .collect();
    (
        Duration::from_millis(10 * fields[0]),
        Duration::from_millis(10 * fields[1]),
    )
}
