//! What `fabriclb run` says at start: command lines it refuses before
//! doing anything, and its log as plain text when stderr is a file or a
//! pipe (journald, a log collector), as operators grep it.

use std::path::{Path, PathBuf};
use std::process::Command;

use fabriclb::testbed::bpffs::Bpffs;

use crate::bed::{name, wait_for};

/// Removes the namespace on drop, also after a failed assertion.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Writes into `dir` (created) a valid config whose ingress interface
/// `nosuch0` and next-hop interface `nosuch1` do not exist.
pub fn config_without_interfaces(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("dir");
    let config = dir.join("leaf.toml");
    std::fs::write(
        &config,
        "[switch]\ninterfaces = [\"nosuch0\"]\n\n[[group]]\nname = \"g\"\n\
         next_hops = [{ interface = \"nosuch1\", mac = \"02:00:00:00:00:01\" }]\n\n\
         [[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"g\"\n",
    )
    .expect("config");
    config
}

/// `fabriclb run` with stderr to a file and NO_COLOR unset, in a
/// namespace of its own where its interfaces do not exist: it warns once
/// per interface, naming it once, says its one group has nothing to
/// forward to, runs until told to stop, and none of what it wrote carries
/// a terminal escape.
#[test]
fn a_log_to_a_file_has_no_colours() {
    let ns = Netns(name("g"));
    let status = Command::new("ip").args(["netns", "add", &ns.0]).status();
    assert!(status.is_ok_and(|s| s.success()), "ip netns add");
    let dir = std::env::temp_dir().join(format!("{}-logs", ns.0));
    let config = config_without_interfaces(&dir);
    let log = dir.join("log");
    // Pins of its own, gone with the test (the default bpffs would keep
    // them in the host's namespace).
    let bpffs = Bpffs::mount("startup-log").expect("bpffs");
    let mut child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.0,
            env!("CARGO_BIN_EXE_fabriclb"),
            "run",
            "--config",
        ])
        .arg(&config)
        .args(bpffs.args("log"))
        .arg("--run-dir")
        .arg(dir.join("run"))
        .env_remove("NO_COLOR")
        .env("RUST_LOG", "info")
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("fabriclb run");
    let ready = wait_for("the daemon's ready line", || {
        let text = std::fs::read_to_string(&log)?;
        Ok(text.contains("ready").then_some(()))
    });
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let status = child.wait().expect("wait");
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ready.is_ok() && status.success(), "{status}: {stderr}");
    assert!(stderr.contains("WARN"), "{stderr}");
    assert!(stderr.contains("nosuch0"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    // Named once, and no fallback to generic mode, which cannot help.
    let warning = stderr
        .lines()
        .find(|l| l.contains("ingress interface does not exist"))
        .unwrap_or_default();
    assert_eq!(warning.matches("nosuch0").count(), 1, "{stderr}");
    assert!(!stderr.contains("falling back"), "{stderr}");
    // Starting with nothing to forward to is said, group by group.
    assert!(
        stderr.contains("interface nosuch1 missing")
            && stderr.contains("no next hop usable: the group's routes go to the kernel"),
        "{stderr}"
    );
}

/// Intervals of 0, a metrics file in a directory that does not exist and
/// a config file that does not exist are refused at once with what is
/// wrong, not clamped or warned about at every interval.
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
    // The cause once, not again behind itself; a config that cannot be
    // had exits with EX_CONFIG, which the unit keeps systemd from
    // restarting into.
    let (code, stderr) = run(&[]);
    assert_eq!(code, Some(78), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "fabriclb: /nonexistent/leaf.toml: No such file or directory (os error 2)"
    );
}

/// Without CAP_PERFMON (nor CAP_SYS_ADMIN, which stands in for it) the
/// kernel's verifier would refuse the program with a log of tens of
/// kilobytes; `run` refuses first, in one line naming what lacks.
#[test]
fn a_run_without_cap_perfmon_is_refused_in_one_line() {
    let dir = std::env::temp_dir().join(format!("fl{}-caps", std::process::id()));
    // Valid, so that only the capability stands between it and loading.
    let config = config_without_interfaces(&dir);
    let out = Command::new("capsh")
        .args(["--drop=cap_perfmon,cap_sys_admin", "--", "-c"])
        .arg(format!(
            "exec {} run --config {}",
            env!("CARGO_BIN_EXE_fabriclb"),
            config.display()
        ))
        .output()
        .expect("capsh");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr,
        "fabriclb: fabriclb run needs CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON, CAP_NET_RAW; \
         missing: CAP_PERFMON\n"
    );
    assert!(stderr.len() < 200, "{} bytes", stderr.len());
}

/// A config with two warnings, one the daemon refuses (an unknown key)
/// and one it refuses twice over, in a directory of their own; removed
/// on drop.
struct CheckConfigFiles {
    dir: PathBuf,
    warned: PathBuf,
    refused: PathBuf,
    twice: PathBuf,
}

impl CheckConfigFiles {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "fabriclb-check-config-{tag}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("dir");
        let warned = dir.join("leaf.toml");
        std::fs::write(
            &warned,
            "[switch]\ninterfaces = [\"eth0\"]\n\n[[group]]\nname = \"spines\"\n\
             spray = \"all\"\nnext_hops = [{ interface = \"eth1\", ip = \"10.0.0.1\" }]\n\n\
             [[group]]\nname = \"spare\"\n\
             next_hops = [{ interface = \"eth2\", ip = \"10.0.0.2\" }]\n\n\
             [[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"spines\"\n",
        )
        .expect("config");
        let refused = dir.join("bad.toml");
        std::fs::write(
            &refused,
            "[switch]\ninterfaces = [\"eth0\"]\nhash_sead = 1\n",
        )
        .expect("config");
        let twice = dir.join("twice.toml");
        std::fs::write(
            &twice,
            "[switch]\ninterfaces = [\"eth0\"]\n\n[[group]]\nname = \"spines\"\n\
             mode = \"sprinkle\"\nnext_hops = [{ interface = \"eth1\", ip = \"10.0.0.1\" }]\n\n\
             [[route]]\nprefix = \"10.0.0.0/33\"\ngroup = \"spines\"\n",
        )
        .expect("config");
        Self {
            dir,
            warned,
            refused,
            twice,
        }
    }
}

impl Drop for CheckConfigFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn check_config(args: &[&str], files: &[&Path]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fabriclb"))
        .arg("check-config")
        .args(args)
        .args(files)
        .output()
        .expect("fabriclb check-config")
}

/// `check-config` prints a valid config's warnings on stderr, counts them
/// on stdout and passes: the daemon would run it.
#[test]
fn check_config_prints_warnings_and_passes() {
    let files = CheckConfigFiles::new("warned");
    let config = &files.warned;
    let out = check_config(&[], &[config]);
    let file = config.display();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{file}: ok (2 groups, 1 routes, 2 warnings)\n")
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "{file}:6:9: warning: group \"spines\": spray has no effect while the mode is \
             ecmp\n{file}:10:8: warning: group \"spare\" is used by no route\n"
        )
    );
}

/// A refused file exits with EX_CONFIG (78) after the others were
/// checked, each of its problems on a line; `--strict` refuses a file for
/// its warnings; `--json` says the same of every file in one document on
/// stdout, positions apart.
#[test]
fn check_config_exits_78_on_a_refusal_and_reports_json() {
    let files = CheckConfigFiles::new("refused");
    let (warned, refused, twice) = (
        files.warned.display(),
        files.refused.display(),
        files.twice.display(),
    );
    let unknown = "unknown field `hash_sead`, expected one of `hash_seed`, `interfaces`, \
                   `xdp_mode`, `flowlet_table_size`, `dlb_mac`";
    let mode = "unsupported group mode \"sprinkle\" (supported modes: \"ecmp\", \"flowlet\", \
                \"per-packet\")";
    let prefix = "invalid prefix \"10.0.0.0/33\": length 33 is out of range for IPv4 (0..=32)";

    let out = check_config(&[], &[&files.refused, &files.twice, &files.warned]);
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{warned}: ok (2 groups, 1 routes, 2 warnings)\n")
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "{refused}:3:1: {unknown}\n{twice}:6:8: {mode}\n{twice}:10:10: {prefix}\n"
        )),
        "{stderr}"
    );
    assert!(
        stderr.ends_with("fabriclb: 2 of 3 config files invalid\n"),
        "{stderr}"
    );

    let out = check_config(&["--strict"], &[&files.warned]);
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{warned}: invalid with --strict (2 groups, 1 routes, 2 warnings)\n")
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .ends_with("fabriclb: 1 of 1 config files invalid (warnings count, --strict)\n")
    );

    let out = check_config(&["--json"], &[&files.warned, &files.refused, &files.twice]);
    assert_eq!(out.status.code(), Some(78));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        report,
        serde_json::json!({"files": [
            {
                "file": files.warned, "valid": true, "groups": 2, "routes": 1, "errors": [],
                "warnings": [
                    {"line": 6, "column": 9,
                     "message": "group \"spines\": spray has no effect while the mode is ecmp"},
                    {"line": 10, "column": 8, "message": "group \"spare\" is used by no route"}
                ]
            },
            {
                "file": files.refused, "valid": false, "groups": null, "routes": null,
                "errors": [{"line": 3, "column": 1, "message": unknown}],
                "warnings": []
            },
            {
                "file": files.twice, "valid": false, "groups": null, "routes": null,
                "errors": [
                    {"line": 6, "column": 8, "message": mode},
                    {"line": 10, "column": 10, "message": prefix}
                ],
                "warnings": []
            }
        ]})
    );
    // Only the verdict on stderr: the document says the rest.
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "fabriclb: 2 of 3 config files invalid\n"
    );
}
