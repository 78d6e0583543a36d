//! What `fabriclb run` says at start: command lines it refuses before
//! doing anything, and its log as plain text when stderr is a file or a
//! pipe (journald, a log collector), as operators grep it.

use std::process::Command;

use crate::bed::name;

/// Removes the namespace on drop, also after a failed assertion.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// `fabriclb run` with stderr piped and NO_COLOR unset, in a namespace of
/// its own where its only interface does not exist: it warns, fails to
/// attach, and none of what it wrote carries a terminal escape.
#[test]
fn a_log_to_a_pipe_has_no_colours() {
    let ns = Netns(name("g"));
    let status = Command::new("ip").args(["netns", "add", &ns.0]).status();
    assert!(status.is_ok_and(|s| s.success()), "ip netns add");
    let dir = std::env::temp_dir().join(format!("{}-logs", ns.0));
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.join("leaf.toml");
    std::fs::write(
        &config,
        "[switch]\ninterfaces = [\"nosuch0\"]\n\n[[group]]\nname = \"g\"\n\
         next_hops = [{ interface = \"nosuch1\", mac = \"02:00:00:00:00:01\" }]\n\n\
         [[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"g\"\n",
    )
    .expect("config");
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.0,
            env!("CARGO_BIN_EXE_fabriclb"),
            "run",
            "--config",
        ])
        .arg(&config)
        .env_remove("NO_COLOR")
        .env("RUST_LOG", "info")
        .output()
        .expect("fabriclb run");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("WARN"), "{stderr}");
    assert!(stderr.contains("nosuch0"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

/// Intervals of 0 and a metrics file in a directory that does not exist
/// are refused at once with what is wrong, not clamped or warned about at
/// every interval.
#[test]
fn bad_run_arguments_are_refused_at_start() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_fabriclb"))
            .args(["run", "--config", "/nonexistent/leaf.toml"])
            .args(args)
            .output()
            .expect("fabriclb run");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for flag in ["--metrics-interval-ms", "--refresh-interval-ms"] {
        let (code, stderr) = run(&[flag, "0"]);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!("invalid value '0' for '{flag}")),
            "{stderr}"
        );
    }
    let (code, stderr) = run(&["--metrics-file", "/nonexistent-fabriclb-dir/m.prom"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "fabriclb: --metrics-file /nonexistent-fabriclb-dir/m.prom: the directory \
         /nonexistent-fabriclb-dir does not exist"
    );
}

/// `check-config` prints a valid config's warnings on stderr, counts them
/// on stdout and passes: the daemon would run it.
#[test]
fn check_config_prints_warnings_and_passes() {
    let dir = std::env::temp_dir().join(format!("fabriclb-check-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.join("leaf.toml");
    std::fs::write(
        &config,
        "[switch]\ninterfaces = [\"eth0\"]\n\n[[group]]\nname = \"spines\"\n\
         flowlet_gap_us = 256\nnext_hops = [{ interface = \"eth1\", ip = \"10.0.0.1\" }]\n\n\
         [[group]]\nname = \"spare\"\n\
         next_hops = [{ interface = \"eth2\", ip = \"10.0.0.2\" }]\n\n\
         [[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"spines\"\n",
    )
    .expect("config");
    let out = Command::new(env!("CARGO_BIN_EXE_fabriclb"))
        .arg("check-config")
        .arg(&config)
        .output()
        .expect("fabriclb check-config");
    let _ = std::fs::remove_dir_all(&dir);
    let file = config.display();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{file}: ok (2 groups, 1 routes, 2 warnings)\n")
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "{file}:6:18: warning: group \"spines\": flowlet_gap_us has no effect while \
             the mode is ecmp\n{file}:10:8: warning: group \"spare\" is used by no route\n"
        )
    );
}
