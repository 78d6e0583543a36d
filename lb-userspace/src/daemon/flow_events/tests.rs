use std::path::Path;

use lb_common::abi::NextHop;
use lb_common::abi::events::{CAUSE_CHOICE, EVENT_MOVE, PathSeen};
use lb_common::packet::parse::FlowFields;

use super::*;
use crate::config;

fn tables() -> Tables {
    let text = "[switch]\ninterfaces = [\"eth0\"]\n\n[[group]]\nname = \"spines\"\n\
                mode = \"flowlet\"\nnext_hops = [\n\
                { interface = \"up0\", ip = \"10.0.1.1\" },\n\
                { interface = \"up1\", ip = \"10.0.2.1\", vlan = 7 },\n]\n\n\
                [[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"spines\"\n";
    let config = config::parse(text, Path::new("events.toml")).expect("valid config");
    Tables::build(&config, None, |_| NextHop::default()).expect("tables")
}

/// A move as the data plane reports it comes out in the config's names:
/// the next hops as the metrics label them, the flow as `explain` takes
/// a packet, the band of the path it left; its JSON reads back as it was.
#[test]
fn a_move_is_named_by_the_tables_and_reads_back_from_json() {
    let tables = tables();
    let group = &tables.groups[0];
    let (up0, up1) = (group.members[0], group.members[1]);
    let mut flow = FlowFields {
        dest_qp: 0x1a2b,
        src_port: 49152,
        dst_port: 4791,
        protocol: 17,
        ..FlowFields::default()
    };
    flow.src[..4].copy_from_slice(&[10, 0, 0, 1]);
    flow.dst[..4].copy_from_slice(&[10, 1, 2, 3]);
    let raw = FlowEvent {
        time_ns: 5_000_000_000,
        gap_ns: 312_400,
        from: PathSeen {
            nh_id: up0,
            quality: 128,
            load: 45_056,
        },
        to: PathSeen {
            nh_id: up1,
            quality: 1024,
            load: 12_000,
        },
        flow,
        kind: EVENT_MOVE,
        cause: CAUSE_CHOICE,
        group: group.id,
        class: 0,
        override_index: NO_NEXTHOP,
        cpu: 3,
    };
    let band = |index| (index == up0).then_some(7);
    let offset = 3_600 * 1_000_000_000 - 5_000_000_000 + 1_500;
    let event = describe(&raw, &tables, band, offset).expect("its group is in the tables");
    assert_eq!(
        event.to_string(),
        "01:00:00.000001 spines flowlet_move (choice) udp 10.0.0.1:49152 -> 10.1.2.3:4791 \
         qp 0x1a2b: up0 10.0.1.1 (quality 128, band 7, load 45056 B) -> up1 10.0.2.1 vlan 7 \
         (quality 1024, load 12000 B) after 312 us idle"
    );
    let line = serde_json::to_string(&WatchLine::Event(Box::new(event.clone()))).expect("JSON");
    assert_eq!(
        serde_json::from_str::<WatchLine>(&line).expect("reads back"),
        WatchLine::Event(Box::new(event))
    );
    let other_group = FlowEvent {
        group: group.id + 1,
        ..raw
    };
    assert_eq!(describe(&other_group, &tables, band, offset), None);
}

#[test]
fn a_lost_line_is_not_an_event() {
    let line = serde_json::to_string(&WatchLine::Lost { lost: 12 }).expect("JSON");
    assert_eq!(line, "{\"lost\":12}");
    assert_eq!(
        serde_json::from_str::<WatchLine>(&line).expect("reads back"),
        WatchLine::Lost { lost: 12 }
    );
}
