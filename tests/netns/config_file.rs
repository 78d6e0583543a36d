//! The watched config file as editors and scripts treat it: written in
//! place in several writes, deleted, replaced by a symlink loop.

use std::io::Write as _;
use std::time::Duration;

use crate::bed::Bed;

/// The leaf's config with a second route after the first: a prefix of the
/// file that stops before it is a valid config without that route.
fn two_routes(bed: &Bed, gap_us: u32) -> String {
    bed.config(&format!("mode = \"flowlet\"\nflowlet_gap_us = {gap_us}"))
        + "\n[[route]]\nprefix = \"198.18.0.0/16\"\ngroup = \"spines\"\n"
}

/// A file rewritten in place in two writes 150 ms apart, with a tick of
/// the watch between them, is taken whole: each
/// rewrite is one reload with only its own change, never the valid prefix
/// that lacks the last route.
#[test]
fn a_file_written_in_place_in_pieces_is_taken_whole() {
    let bed = Bed::up("3", 1);
    let daemon = bed.daemon(&two_routes(&bed, 1000), &[]).expect("fabriclb");
    for rewrite in 1..=6u32 {
        daemon.skip_log().expect("log");
        // The last reload came at a tick of the watch, 250 ms apart: the
        // pause below then spans the next one.
        std::thread::sleep(Duration::from_millis(170));
        let text = two_routes(&bed, 1000 + rewrite * 100);
        let cut = text.rfind("[[route]]").expect("second route");
        let mut file = std::fs::File::create(daemon.config_file()).expect("truncate");
        file.write_all(&text.as_bytes()[..cut]).expect("prefix");
        std::thread::sleep(Duration::from_millis(150));
        file.write_all(&text.as_bytes()[cut..]).expect("rest");
        drop(file);
        let log = daemon.wait_for_log("config reloaded").expect("reloaded");
        let change = format!(
            "config change: group \"spines\": flowlet_gap_us {} -> {}",
            1000 + (rewrite - 1) * 100,
            1000 + rewrite * 100
        );
        assert!(log.contains(&change), "rewrite {rewrite}: {log}");
        assert!(
            !log.contains("removed") && !log.contains("refused"),
            "rewrite {rewrite} was read half written:\n{log}"
        );
        assert_eq!(log.matches("changed: reloading").count(), 1, "{log}");
    }
    daemon.stop().expect("stop");
}

/// A deleted config file, and one replaced by a symlink loop, is said once
/// while it lasts, changes nothing, and is reloaded when it is back, with
/// its warnings logged.
#[test]
fn a_config_file_gone_or_looping_is_said_once_and_changes_nothing() {
    let bed = Bed::up("4", 1);
    let config = bed.config("");
    let daemon = bed.daemon(&config, &[]).expect("fabriclb");
    let path = daemon.config_file().to_path_buf();
    // Four ticks of the watch: an unreadable file would be said each time.
    let ticks = Duration::from_secs(1);

    daemon.skip_log().expect("log");
    std::fs::remove_file(&path).expect("delete");
    daemon
        .wait_for_log("config file unreadable (No such file or directory")
        .expect("deletion said");
    std::thread::sleep(ticks);
    let log = daemon.log().expect("log");
    assert_eq!(log.matches("config file unreadable").count(), 1, "{log}");
    assert!(!log.contains("refused"), "{log}");

    std::fs::write(&path, &config).expect("back");
    daemon
        .wait_for_log("config file readable again")
        .expect("return said");
    daemon.wait_for_log("config unchanged").expect("reloaded");

    std::fs::remove_file(&path).expect("delete");
    std::os::unix::fs::symlink(&path, &path).expect("symlink loop");
    daemon
        .wait_for_log("config file unreadable (Too many levels of symbolic links")
        .expect("loop said");
    std::thread::sleep(ticks);
    let log = daemon.log().expect("log");
    assert_eq!(log.matches("config file unreadable").count(), 2, "{log}");
    assert_eq!(bed.counters(&daemon).expect("metrics").mode, "ecmp");

    std::fs::remove_file(&path).expect("unlink the loop");
    let spare = "\n[[group]]\nname = \"spare\"\nnext_hops = [{ interface = \"s1\", mac = \"02:00:00:00:00:09\" }]\n";
    std::fs::write(&path, bed.config("mode = \"flowlet\"") + spare).expect("back");
    let log = daemon.wait_for_log("config reloaded").expect("reloaded");
    assert!(
        log.contains("config change: group \"spines\": mode ecmp -> flowlet"),
        "{log}"
    );
    // A reload logs the new file's warnings.
    assert!(
        log.contains("warning: group \"spare\" is used by no route"),
        "{log}"
    );
    daemon.stop().expect("stop");
}
