//! The `linux` source against the kernel, in a namespace of the test's
//! own: veth pairs whose sending side has a TBF at 1 Mbit/s, filled with
//! UDP from a socket in the namespace, then frozen (its bucket made smaller
//! than a packet, which keeps what is queued) so the backlog holds still
//! and the source's reading can be held to `tc -s -j qdisc` byte for byte.
//!
//! The namespace has no IPv6, so no solicitation queues behind a frozen
//! TBF and moves the backlog between two reads. The source polls from a
//! thread inside the namespace; sysfs there is still the host's, which
//! does not list the test's veths, and veths keep no BQL anyway: BQL
//! counts 0 and the qdisc backlog is the whole reading.

use std::net::{Ipv4Addr, UdpSocket};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use fabriclb::netlink::StatsSocket;
use fabriclb::telemetry::linux::Linux;
use fabriclb::telemetry::{Reading, Source, TelemetryError};
use fabriclb::testbed::{PATIENCE, in_netns};
use serde_json::Value;

/// A network namespace of this process and `tag`, deleted when this drops,
/// also when an assertion failed.
struct Namespace(String);

impl Namespace {
    fn new(tag: &str) -> Self {
        let name = format!("fllnx{}{tag}", std::process::id() % 100_000);
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        run("ip", &["netns", "add", &name]).expect("creating the namespace");
        let ns = Self(name);
        run(
            "ip",
            &[
                "netns",
                "exec",
                &ns.0,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ],
        )
        .expect("disabling IPv6");
        ns
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program}"))?;
    ensure!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ip(ns: &str, args: &[&str]) -> Result<String> {
    run("ip", &[&["-n", ns], args].concat())
}

fn tc(ns: &str, args: &[&str]) -> Result<String> {
    run("tc", &[&["-n", ns], args].concat())
}

/// Veth `dev` (peer `<dev>p`, both up) with `queues` transmit queues;
/// `dev` gets 10.71.`subnet`.1/24 and a permanent neighbour .2 (the peer
/// drops what it gets: the address is nobody's).
fn veth(ns: &str, dev: &str, queues: u32, subnet: u8) -> Result<()> {
    let peer = format!("{dev}p");
    let queues = queues.to_string();
    ip(
        ns,
        &[
            "link",
            "add",
            dev,
            "numtxqueues",
            &queues,
            "type",
            "veth",
            "peer",
            "name",
            &peer,
            "numtxqueues",
            &queues,
        ],
    )?;
    ip(ns, &["link", "set", dev, "up"])?;
    ip(ns, &["link", "set", &peer, "up"])?;
    ip(
        ns,
        &["addr", "add", &format!("10.71.{subnet}.1/24"), "dev", dev],
    )?;
    ip(
        ns,
        &[
            "neigh",
            "add",
            &format!("10.71.{subnet}.2"),
            "lladdr",
            "02:00:00:00:00:02",
            "dev",
            dev,
            "nud",
            "permanent",
        ],
    )?;
    Ok(())
}

/// A TBF at 1 Mbit/s under `parent` (`root`, or an mq class) of `dev`,
/// with room for far more than the sockets can queue.
fn slow_tbf(ns: &str, dev: &str, parent: &[&str]) -> Result<()> {
    let tbf = ["tbf", "rate", "1mbit", "burst", "4kb", "limit", "4mb"];
    tc(
        ns,
        &[&["qdisc", "replace", "dev", dev], parent, &tbf].concat(),
    )?;
    Ok(())
}

/// Stops the TBF under `parent` of `dev` while keeping what it holds: its
/// bucket, now smaller than one queued packet, never holds the tokens the
/// head needs. (With a bucket of a few packets the change refills it, and
/// that many leave when the timer set at the old rate fires, milliseconds
/// later: too late for one comparison, too early for the next.)
fn freeze(ns: &str, dev: &str, parent: &[&str]) -> Result<()> {
    let tbf = ["tbf", "rate", "1kbit", "burst", "1000", "limit", "4mb"];
    tc(
        ns,
        &[&["qdisc", "change", "dev", dev], parent, &tbf].concat(),
    )?;
    Ok(())
}

/// Sends 1000-byte datagrams from 10.71.`subnet`.1 to .2's discard port on
/// four sockets (four flows, spread over the transmit queues), each until
/// its send buffer is full: what the qdisc holds counts against it, so
/// this fills the queue and stops. The sockets are returned so the
/// datagrams stay theirs.
fn fill(subnet: u8) -> Result<Vec<UdpSocket>> {
    let from = Ipv4Addr::new(10, 71, subnet, 1);
    let to = (Ipv4Addr::new(10, 71, subnet, 2), 9);
    let mut sockets = Vec::new();
    for _ in 0..4 {
        let socket = UdpSocket::bind((from, 0)).context("binding a sender")?;
        socket.set_nonblocking(true)?;
        let mut sent = 0;
        while sent < 10_000 {
            match socket.send_to(&[0x5a; 1000], to) {
                Ok(_) => sent += 1,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e).context("sending"),
            }
        }
        ensure!(sent > 0, "a sender sent nothing");
        sockets.push(socket);
    }
    Ok(sockets)
}

/// `tc -s -j qdisc show dev <dev>`: every qdisc of `dev`.
fn qdiscs(ns: &str, dev: &str) -> Result<Vec<Value>> {
    let json = tc(ns, &["-s", "-j", "qdisc", "show", "dev", dev])?;
    Ok(serde_json::from_str(&json)?)
}

/// (backlog, bytes sent) of `dev`'s root qdisc, as `tc` reports them.
fn root_stats(ns: &str, dev: &str) -> Result<(u64, u64)> {
    root_of(&qdiscs(ns, dev)?)
}

fn root_of(qdiscs: &[Value]) -> Result<(u64, u64)> {
    let root = qdiscs
        .iter()
        .find(|q| q["root"] == Value::Bool(true))
        .context("no root qdisc")?;
    Ok((number(root, "backlog")?, number(root, "bytes")?))
}

fn number(qdisc: &Value, field: &str) -> Result<u64> {
    qdisc[field]
        .as_u64()
        .with_context(|| format!("no {field} in {qdisc}"))
}

/// Path `path`'s reading, which must be one.
/// Each `(device, qdiscs, rate)`: the device's qdiscs as this namespace's
/// dump lists them, its TBFs at `rate` bytes per second and the rest
/// (mq) of no rate.
fn tbf_rates_read_back(devices: &[(&str, usize, u64)]) -> Result<()> {
    let mut socket = StatsSocket::open()?;
    let qdiscs = socket.qdiscs()?;
    for &(dev, count, rate) in devices {
        let ifindex = socket.ifindex(dev)?;
        let rates: Vec<(String, Option<u64>)> = (qdiscs.iter())
            .filter(|q| q.ifindex == ifindex)
            .map(|q| (q.kind.clone(), q.rate_bytes_per_s))
            .collect();
        ensure!(rates.len() == count, "{dev}: {rates:?}");
        for (kind, read) in &rates {
            let expected = (kind == "tbf").then_some(rate);
            ensure!(*read == expected, "{dev}: {rates:?}, not {rate} B/s");
        }
    }
    Ok(())
}

fn reading(source: &mut Linux, path: usize) -> Result<Reading> {
    match source.poll().into_iter().nth(path) {
        Some(Ok(reading)) => Ok(reading),
        Some(Err(e)) => bail!("path {path}: {e}"),
        None => bail!("no path {path}"),
    }
}

/// Waits (up to [`PATIENCE`]) until path `path` and `tc` agree on `dev`'s
/// backlog: a poll, `tc`, and a poll again all give the same bytes. Returns
/// them and `tc`'s bytes sent.
fn settled(source: &mut Linux, path: usize, ns: &str, dev: &str) -> Result<(u64, u64)> {
    let start = Instant::now();
    loop {
        let before = reading(source, path)?.queued_bytes;
        let (backlog, sent) = root_stats(ns, dev)?;
        let after = reading(source, path)?.queued_bytes;
        if before == backlog && backlog == after {
            return Ok((backlog, sent));
        }
        ensure!(
            start.elapsed() < PATIENCE,
            "{dev}: the source read {before} then {after} bytes, tc {backlog}, still after {PATIENCE:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Each path's egress backlog, exactly as `tc` reports it, for a TBF root,
/// an mq root over TBFs (whose backlog is its children's) and a plain veth
/// (noqueue: nothing); and the links' tx bytes growing by what left.
#[test]
fn linux_reads_root_backlog_and_tx_bytes() {
    let ns = Namespace::new("q");
    let name = ns.0.clone();
    in_netns(&ns.0, move || -> Result<()> {
        let ns = name.as_str();
        veth(ns, "lxtbf", 1, 0)?;
        slow_tbf(ns, "lxtbf", &["root"])?;
        veth(ns, "lxmq", 2, 1)?;
        tc(
            ns,
            &["qdisc", "add", "dev", "lxmq", "root", "handle", "1:", "mq"],
        )?;
        for class in ["1:1", "1:2"] {
            slow_tbf(ns, "lxmq", &["parent", class])?;
        }
        veth(ns, "lxplain", 1, 2)?;
        // 1 Mbit/s: 125,000 bytes a second.
        tbf_rates_read_back(&[("lxtbf", 1, 125_000), ("lxmq", 3, 125_000)])?;

        let mut source = Linux::new(vec!["lxtbf".into(), "lxmq".into(), "lxplain".into()]);
        assert_eq!(source.name(), "linux");
        let first: Vec<Reading> = source.poll().into_iter().collect::<Result<_, _>>()?;
        let sent_before = [root_stats(ns, "lxtbf")?.1, root_stats(ns, "lxmq")?.1];

        let _tbf_senders = fill(0)?;
        let _mq_senders = fill(1)?;
        let _plain_senders = fill(2)?;
        // Draining at 1 Mbit/s: the queues hold for seconds.
        let draining = source.poll();
        for (path, dev) in ["lxtbf", "lxmq"].into_iter().enumerate() {
            let queued = draining[path]
                .as_ref()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            ensure!(
                queued.queued_bytes > 0,
                "{dev}: nothing queued while draining"
            );
        }

        freeze(ns, "lxtbf", &["root"])?;
        for class in ["1:1", "1:2"] {
            freeze(ns, "lxmq", &["parent", class])?;
        }
        tbf_rates_read_back(&[("lxtbf", 1, 125), ("lxmq", 3, 125)])?;
        let (tbf_backlog, tbf_sent) = settled(&mut source, 0, ns, "lxtbf")?;
        let (mq_backlog, mq_sent) = settled(&mut source, 1, ns, "lxmq")?;
        ensure!(tbf_backlog > 0 && mq_backlog > 0, "a frozen queue is empty");
        // mq's own stats are its children's, summed when dumped: the
        // source reads the root alone.
        let mq = qdiscs(ns, "lxmq")?;
        let children: u64 = mq
            .iter()
            .filter(|q| q["kind"] == "tbf")
            .map(|q| number(q, "backlog"))
            .sum::<Result<_>>()?;
        assert_eq!(root_of(&mq)?.0, children, "mq's backlog is its children's");
        assert_eq!(children, mq_backlog);

        let last = source.poll();
        let plain = last[2].as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
        assert_eq!(plain.queued_bytes, 0, "a noqueue veth queues nothing");
        for (path, sent) in [
            (0, tbf_sent - sent_before[0]),
            (1, mq_sent - sent_before[1]),
        ] {
            let now = last[path].as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
            let (before, after) = (first[path].tx_bytes, now.tx_bytes);
            let (Some(before), Some(after)) = (before, after) else {
                bail!("path {path}: no tx bytes");
            };
            ensure!(sent > 0, "path {path}: nothing left the TBF");
            ensure!(
                after - before >= sent,
                "path {path}: tx bytes grew by {}, the qdisc sent {sent}",
                after - before
            );
        }
        // What left the plain veth went straight to the driver.
        let plain_grew = plain.tx_bytes.zip(first[2].tx_bytes).map(|(a, b)| a - b);
        ensure!(
            plain_grew >= Some(1042),
            "plain veth's tx bytes grew by {plain_grew:?}"
        );
        Ok(())
    })
    .expect("in the namespace")
    .expect("linux source against tc");
}

/// Interfaces are followed by name: one deleted reads as unreachable while
/// the other path still reads, and one created again under the name reads
/// again, from its new index.
#[test]
fn linux_follows_interfaces_by_name() {
    let ns = Namespace::new("f");
    let name = ns.0.clone();
    in_netns(&ns.0, move || -> Result<()> {
        let ns = name.as_str();
        veth(ns, "lxkeep", 1, 3)?;
        veth(ns, "lxgone", 1, 4)?;
        let mut source = Linux::new(vec!["lxkeep".into(), "lxgone".into()]);
        let both = source.poll();
        ensure!(both.iter().all(Result::is_ok), "before: {both:?}");
        let old_index = ifindex(ns, "lxgone")?;

        ip(ns, &["link", "del", "lxgone"])?;
        let after = source.poll();
        ensure!(after[0].is_ok(), "the kept path: {:?}", after[0]);
        match &after[1] {
            Err(TelemetryError::Unreachable { source_name, why }) => {
                assert_eq!(*source_name, "linux");
                ensure!(why.contains("lxgone"), "why: {why}");
            }
            other => bail!("the deleted path: {other:?}"),
        }

        // Back, and holding a frozen backlog the source must find at the
        // new index.
        veth(ns, "lxgone", 1, 4)?;
        ensure!(ifindex(ns, "lxgone")? != old_index, "same index again");
        slow_tbf(ns, "lxgone", &["root"])?;
        let _senders = fill(4)?;
        freeze(ns, "lxgone", &["root"])?;
        let (backlog, _) = settled(&mut source, 1, ns, "lxgone")?;
        ensure!(backlog > 0, "nothing queued on the new lxgone");
        ensure!(source.poll()[0].is_ok(), "the kept path after");
        Ok(())
    })
    .expect("in the namespace")
    .expect("linux source following names");
}

fn ifindex(ns: &str, dev: &str) -> Result<u64> {
    let json: Value = serde_json::from_str(&ip(ns, &["-j", "link", "show", dev])?)?;
    json[0]["ifindex"].as_u64().context("no ifindex")
}
