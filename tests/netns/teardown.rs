//! The testbed itself: what it builds, and that nothing stays behind.

use fabriclb::testbed::{self, Shape, Testbed};

use crate::bed;

/// Building, dropping, keeping and removing a testbed leave no namespace
/// behind, also when the code using it panics; spine links get their TBF,
/// each at its own rate.
#[test]
fn testbed_teardown_leaves_nothing_behind() {
    let name = bed::name("t");
    let shape = Shape {
        hosts: 2,
        spines: 2,
        spine_rates_mbit: vec![100, 50],
        ..Shape::default()
    };
    let none = Vec::<String>::new();

    let bed = Testbed::up(&name, shape.clone()).expect("testbed");
    // leaf, far leaf, 2 senders, 2 receivers, 2 spines.
    assert_eq!(testbed::namespaces(&name).expect("list").len(), 8);
    for (spine, rate) in [("s1", "100Mbit"), ("s2", "50Mbit")] {
        let qdisc = std::process::Command::new("tc")
            .args(["-n", &bed.ns(spine), "qdisc", "show", "dev", "fleaf"])
            .output()
            .expect("tc");
        let qdisc = String::from_utf8_lossy(&qdisc.stdout);
        assert!(
            qdisc.contains("tbf") && qdisc.contains(rate),
            "{spine}: {qdisc}"
        );
    }
    drop(bed);
    assert_eq!(testbed::namespaces(&name).expect("list"), none);

    // Only the deliberate panic may be caught here: a failed build would
    // panic with another message.
    let panicked = std::panic::catch_unwind(|| {
        let _bed = Testbed::up(&name, shape.clone()).expect("testbed");
        std::panic::panic_any("on purpose");
    })
    .expect_err("the closure panics");
    assert_eq!(panicked.downcast_ref::<&str>(), Some(&"on purpose"));
    assert_eq!(testbed::namespaces(&name).expect("list"), none);

    Testbed::up(&name, shape).expect("testbed").keep();
    assert_eq!(testbed::namespaces(&name).expect("list").len(), 8);
    assert_eq!(testbed::remove_namespaces(&name).expect("down"), 8);
    assert_eq!(testbed::namespaces(&name).expect("list"), none);
}
