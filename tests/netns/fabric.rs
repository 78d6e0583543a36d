//! The fabric of several leaves (`testbed up --leaves`): every leaf runs
//! fabriclb, and traffic between racks crosses two of them.

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use fabriclb::testbed::fabric::{Fabric, FabricShape, host_addr, link_addr};
use fabriclb::testbed::scenario::fabric_slow_link::{self, SLOW_LEAF, SLOW_SPINE};
use fabriclb::testbed::scenario::modes;
use fabriclb::testbed::{Daemon, LeafCounters, PATIENCE, in_netns, namespaces};

use crate::bed::{Turn, fabriclb, name};

const PORT: u16 = 7000;
/// Per host toward each other host: datagrams, in flows of their own.
const DATAGRAMS: u32 = 64;
const FLOWS: u32 = 16;
/// Messages per connection of the short `fabric-slow-link`: 0.75 s of
/// sending.
const MESSAGES: u32 = 12;

/// Four leaves, one host each, fabriclb on every leaf: each host sends to
/// every other; every datagram arrives, each leaf's fabriclb forwarded
/// its own host's (not the kernel), over more than one spine; the fabric
/// leaves no namespace behind.
#[test]
fn every_leaf_forwards_between_racks_through_fabriclb() {
    let _turn = Turn::shared();
    let name = name("F");
    let shape = FabricShape {
        leaves: 4,
        hosts: 1,
        ..FabricShape::default()
    };
    let workdir = std::env::temp_dir().join(format!("{name}-work"));
    std::fs::create_dir_all(&workdir).expect("workdir");
    let _work = RemoveOnDrop(workdir.clone());
    {
        let fabric = Fabric::up(&name, shape.clone()).expect("fabric");
        let daemons: Vec<Daemon> = (1..=shape.leaves)
            .map(|k| {
                let role = format!("l{k}");
                let config = fabric.leaf_config(k, "");
                Daemon::start_in(&fabric.ns(&role), &role, fabriclb(), &workdir, &config, &[])
                    .expect("fabriclb on every leaf")
            })
            .collect();
        let bind = |k: usize, port: u16| {
            let at = SocketAddr::from((host_addr(k, 1), port));
            in_netns(&fabric.ns(&format!("l{k}h1")), move || UdpSocket::bind(at))
                .expect("in the host")
                .expect("bound")
        };
        let receivers: Vec<UdpSocket> = (1..=shape.leaves).map(|k| bind(k, PORT)).collect();
        for k in 1..=shape.leaves {
            // A socket per flow: flows for the leaves' hashes to spread.
            for _ in 0..FLOWS {
                let sender = bind(k, 0);
                for m in (1..=shape.leaves).filter(|&m| m != k) {
                    for _ in 0..DATAGRAMS / FLOWS {
                        sender
                            .send_to(&[k as u8; 64], (host_addr(m, 1), PORT))
                            .expect("send");
                    }
                }
            }
        }
        let expected = DATAGRAMS as usize * (shape.leaves - 1);
        for (k, socket) in receivers.iter().enumerate() {
            assert_eq!(
                receive(socket, expected),
                expected,
                "host of leaf {}",
                k + 1
            );
        }
        for (k, daemon) in daemons.iter().enumerate() {
            let leaf = k + 1;
            let labels: Vec<String> = (1..=shape.spines)
                .map(|j| format!("s{j} {}", link_addr(leaf, j, true)))
                .collect();
            let counters = wait_for_forwarded(daemon, &labels, expected as u64);
            // 48 flows over 4 spines. Not every spine need get one: a CI
            // run split them 21, 18, 0 and 9 (the hash over sequential
            // source ports is uneven, issue 26's to measure); one spine
            // for all would be no balancing at all.
            let used = counters.spines.iter().filter(|s| s.packets > 0).count();
            assert!(used >= 2, "leaf {leaf}: {counters:?}");
        }
    }
    assert_eq!(namespaces(&name).expect("ip netns"), Vec::<String>::new());
}

/// `fabric-slow-link`, short, its ECMP row: spine 4's port toward leaf 3
/// at a quarter rate, an all-to-all over every host of four leaves, each
/// running fabriclb. Every packet is received or counted dropped at a
/// spine port; blind ECMP sends the slow port more than it carries
/// (13.5-15% of leaf 3's traffic where its capacity is 7.7%), and loses
/// there most (1108 of 1281 to 1151 of 1273, once 1144 of 1543), at least
/// 5 times what any fast port drops (9.6-26 times measured; they drop
/// what the hash piles on one of them); toward the other leaves spine 4
/// keeps its even share. (The steered rows are the demo's: on this machine their
/// polling alone, 16 scrapes every 40 ms, costs the ECMP row 4 points of
/// loss, and what they lose varies with it from run to run; issue 26's
/// telemetry that scales comes first.)
#[test]
fn a_slow_spine_port_toward_one_leaf_drops_what_ecmp_sends_it() {
    let _turn = Turn::alone();
    let name = name("E");
    let workdir = std::env::temp_dir().join(format!("{name}-work"));
    std::fs::create_dir_all(&workdir).expect("workdir");
    let _work = RemoveOnDrop(workdir.clone());
    let fabric = Fabric::up(&name, fabric_slow_link::shape()).expect("fabric");
    let ecmp = modes().into_iter().take(1).collect::<Vec<_>>();
    let rows = fabric_slow_link::measure(&fabric, fabriclb(), &workdir, MESSAGES, &ecmp)
        .expect("scenario run");
    eprintln!("{rows:#?}");
    let [row] = rows.as_slice() else {
        panic!("one row: {rows:?}")
    };
    assert_eq!(row.sent, 8 * 7 * u64::from(MESSAGES) * 32, "{row:?}");
    assert_eq!(row.unaccounted, 0, "{row:?}");
    assert_eq!(row.share.len(), 4);
    assert!(row.degraded_port_share > 0.12, "{row:?}");
    let slow_drops = row.port_dropped[SLOW_SPINE - 1][SLOW_LEAF - 1];
    assert!(slow_drops > 0, "{row:?}");
    assert!(slow_drops * 3 >= row.dropped * 2, "{row:?}");
    let busiest_other = (row.port_dropped.iter().enumerate())
        .flat_map(|(j, ports)| ports.iter().enumerate().map(move |(m, &d)| ((j, m), d)))
        .filter(|&(port, _)| port != (SLOW_SPINE - 1, SLOW_LEAF - 1))
        .map(|(_, d)| d)
        .max()
        .unwrap_or(0);
    assert!(busiest_other * 5 <= slow_drops, "{row:?}");
    assert!(
        (0.9..=1.1).contains(&row.healthy_share_on_degraded_spine),
        "{row:?}"
    );
}

/// Datagrams `socket` receives until it has `expected` or a patience
/// passes.
fn receive(socket: &UdpSocket, expected: usize) -> usize {
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let deadline = Instant::now() + PATIENCE;
    let mut received = 0;
    let mut buf = [0u8; 128];
    while received < expected && Instant::now() < deadline {
        if socket.recv_from(&mut buf).is_ok() {
            received += 1;
        }
    }
    received
}

/// The daemon's spine-group counters once they show `packets` forwarded.
fn wait_for_forwarded(daemon: &Daemon, labels: &[String], packets: u64) -> LeafCounters {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = daemon.metrics().expect("metrics");
        let counters = LeafCounters::parse("spines", labels, &text).expect("counters");
        if counters.forwarded >= packets || Instant::now() > deadline {
            assert_eq!(counters.forwarded, packets, "{counters:?}");
            return counters;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
