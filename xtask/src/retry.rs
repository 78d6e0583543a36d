//! The test step, with one more run for a test that times traffic.
//!
//! The `netns` and `telemetry` tests send real traffic through namespaces
//! and hold loss, shares and reaction times to bounds near what their
//! scenarios measure, on a machine of two cores. Now and then one misses
//! by a little because something else ran late (the other test's traffic
//! beside it, the kernel's own work), which says nothing of fabriclb;
//! loosening its bound until that never happens would let a real
//! regression through. So such a test that fails is run once more, alone,
//! and fails the step only if it fails again. Any other failure (a unit
//! test, a build, a test binary that crashed) fails the step at once. The
//! first run's failure stays in the log above its retry, and the step ends
//! by naming every test it retried.

use std::io::{BufRead, BufReader};
use std::path::Path;

use anyhow::{Context, Result, bail};

use std::process::Command;

use crate::{Failed, cargo, describe};

/// The test targets whose tests time traffic: (package, test target).
const TIMED: [(&str, &str); 2] = [("lb-userspace", "netns"), ("lb-userspace", "telemetry")];

/// `cargo test --workspace`, every target run (`--no-fail-fast`), then each
/// failed test of a [`TIMED`] target once more on its own.
pub fn test_step(root: &Path, harness_args: &[String]) -> Result<()> {
    println!(
        "xtask test: test: cargo test --workspace --no-fail-fast -- {} \
         (a failed test of {} is run once more, alone)",
        harness_args.join(" "),
        TIMED.map(|(_, target)| target).join(", ")
    );
    let mut cmd = cargo(root);
    cmd.args(["test", "--workspace", "--no-fail-fast", "--"])
        .args(harness_args);
    let (first, outcome) = echoed(cmd)?;
    let Err(first) = first else {
        return Ok(());
    };
    let retries = match outcome.retries() {
        Ok(retries) => retries,
        Err(why) => return Err(anyhow::Error::new(first).context(why)),
    };
    for (package, target, name) in &retries {
        println!("xtask test: retry: {target} {name} failed above; run once more, alone");
        let mut cmd = cargo(root);
        cmd.args(["test", "-p", package, "--test", target, "--"])
            .args(["--exact", name]);
        let (status, again) = echoed(cmd)?;
        let twice = || format!("{target} {name} failed twice");
        status.map_err(|failed| anyhow::Error::new(failed).context(twice()))?;
        // A retry that ran nothing proves nothing.
        if !again.passed(target, name) {
            bail!("{}: the retry did not run it", twice());
        }
    }
    println!(
        "xtask test: {} timed test(s) failed once and passed alone: {}",
        retries.len(),
        retries
            .iter()
            .map(|(_, target, name)| format!("{target} {name}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// Runs `cmd` with its output and errors printed line by line through
/// this process's stdout (so a test harness above captures them) and
/// read; returns how it ended and what the tests said.
fn echoed(mut cmd: Command) -> Result<(std::result::Result<(), Failed>, Outcome)> {
    let (reader, writer) = std::io::pipe().context("creating the test output pipe")?;
    let duplicate = writer
        .try_clone()
        .context("duplicating the test output pipe")?;
    cmd.stdout(duplicate).stderr(writer);
    let command = describe(&cmd);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("failed to start `{command}`"))?;
    // The command holds the pipe's write ends: it must go for the read to
    // end when the child does.
    drop(cmd);
    let mut outcome = Outcome::default();
    for line in BufReader::new(reader).lines() {
        let line = line.context("reading the tests' output")?;
        println!("{line}");
        outcome.read(&line);
    }
    let status = child
        .wait()
        .with_context(|| format!("waiting for `{command}`"))?;
    let ended = match status.success() {
        true => Ok(()),
        false => Err(Failed { command, status }),
    };
    Ok((ended, outcome))
}

/// What the tests' output said: tests that failed and passed, by target,
/// and which targets reported a result at all.
#[derive(Default)]
struct Outcome {
    /// The target whose output follows (cargo's `Running` line names it).
    current: Option<String>,
    /// Failed tests, with their target.
    failed: Vec<(Option<String>, String)>,
    /// Tests that passed, with their target.
    ok: Vec<(Option<String>, String)>,
    /// Targets that printed `test result:` (ran to the end).
    finished: Vec<String>,
}

impl Outcome {
    fn read(&mut self, line: &str) {
        let trimmed = line.trim_start();
        if let Some(running) = trimmed.strip_prefix("Running ") {
            self.current = target_of(running);
        } else if trimmed.starts_with("Doc-tests ") {
            self.current = None;
        } else if let Some((name, verdict)) = line
            .strip_prefix("test ")
            .and_then(|rest| rest.rsplit_once(" ... "))
        {
            let test = (self.current.clone(), name.to_owned());
            match verdict {
                "FAILED" => self.failed.push(test),
                "ok" => self.ok.push(test),
                _ => {}
            }
        } else if line.starts_with("test result: ")
            && let Some(target) = &self.current
        {
            self.finished.push(target.clone());
        }
    }

    /// Whether test `name` of `target` passed.
    fn passed(&self, target: &str, name: &str) -> bool {
        (self.ok.iter()).any(|(t, n)| t.as_deref() == Some(target) && n == name)
    }

    /// The tests to run once more, or why the failure stands as it is.
    fn retries(&self) -> Result<Vec<(&'static str, &'static str, String)>, String> {
        if self.failed.is_empty() {
            return Err(
                "no test reported a failure (a build error, or a test binary that \
                        crashed): nothing to retry"
                    .into(),
            );
        }
        let mut retries = Vec::new();
        for (target, name) in &self.failed {
            let timed = target
                .as_deref()
                .and_then(|t| TIMED.into_iter().find(|&(_, timed)| timed == t));
            let Some((package, target)) = timed else {
                return Err(format!(
                    "{name} failed, and it times no traffic: not retried"
                ));
            };
            if !self.finished.iter().any(|t| t == target) {
                return Err(format!(
                    "the {target} tests did not run to the end: not retried"
                ));
            }
            retries.push((package, target, name.clone()));
        }
        Ok(retries)
    }
}

/// The test target of a cargo `Running` line's rest, e.g. `netns` of
/// `../tests/netns/main.rs (target/debug/deps/netns-d7f0a4cfa03da55d)`.
fn target_of(running: &str) -> Option<String> {
    let executable = running.rsplit_once('(')?.1.strip_suffix(')')?;
    let file = Path::new(executable).file_name()?.to_str()?;
    Some(file.rsplit_once('-')?.0.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(output: &str) -> Outcome {
        let mut outcome = Outcome::default();
        output.lines().for_each(|line| outcome.read(line));
        outcome
    }

    const NETNS_FAILED: &str = "\
     Running unittests src/lib.rs (target/debug/deps/fabriclb-fbc3ac868a3b2101)
test config::tests::ok ... ok
test result: ok. 1 passed; 0 failed
     Running ../tests/netns/main.rs (target/debug/deps/netns-d7f0a4cfa03da55d)
test fabric::herd ... FAILED
test soak::round has been running for over 60 seconds
test soak::round ... FAILED
test overrides::pin ... ok
failures:
    fabric::herd
    soak::round
test result: FAILED. 1 passed; 2 failed
     Running ../tests/telemetry/main.rs (target/debug/deps/telemetry-0123456789abcdef)
test result: ok. 9 passed; 0 failed
";

    #[test]
    fn failed_timed_tests_are_retried_by_target() {
        assert_eq!(
            outcome(NETNS_FAILED).retries(),
            Ok(vec![
                ("lb-userspace", "netns", "fabric::herd".to_owned()),
                ("lb-userspace", "netns", "soak::round".to_owned()),
            ])
        );
    }

    /// A retry counts only if it ran the test and the test passed.
    #[test]
    fn a_test_passed_only_where_it_said_ok() {
        let output = outcome(NETNS_FAILED);
        assert!(output.passed("netns", "overrides::pin"));
        assert!(!output.passed("netns", "fabric::herd"));
        assert!(!output.passed("telemetry", "overrides::pin"));
        assert!(!outcome("running 0 tests\n").passed("netns", "fabric::herd"));
    }

    #[test]
    fn a_failed_unit_test_is_not_retried() {
        let output =
            NETNS_FAILED.replace("config::tests::ok ... ok", "config::tests::ok ... FAILED");
        assert_eq!(
            outcome(&output).retries(),
            Err("config::tests::ok failed, and it times no traffic: not retried".into())
        );
    }

    #[test]
    fn a_failed_doc_test_is_not_retried() {
        let output = format!(
            "{NETNS_FAILED}   Doc-tests lb_common\ntest src/lib.rs - x (line 3) ... FAILED\n"
        );
        assert_eq!(
            outcome(&output).retries(),
            Err("src/lib.rs - x (line 3) failed, and it times no traffic: not retried".into())
        );
    }

    /// A binary that aborted after a failure left other tests unrun.
    #[test]
    fn a_target_that_did_not_finish_is_not_retried() {
        let output = NETNS_FAILED.replace("test result: FAILED. 1 passed; 2 failed\n", "");
        assert_eq!(
            outcome(&output).retries(),
            Err("the netns tests did not run to the end: not retried".into())
        );
    }

    #[test]
    fn a_failure_without_a_failed_test_is_not_retried() {
        let output = "error[E0425]: cannot find value `x` in this scope\n";
        assert!(outcome(output).retries().is_err());
    }

    /// A scratch workspace whose `netns` target has a test that fails
    /// its first run and one that always fails, through the real cargo.
    #[test]
    fn a_timed_test_passes_on_its_retry_and_fails_if_it_fails_again() {
        let root = std::env::temp_dir().join(format!("xtask-retry-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("tests")).unwrap();
        std::fs::write(
            root.join("Cargo.toml"),
            "[package]\nname = \"lb-userspace\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
             [[test]]\nname = \"netns\"\npath = \"tests/netns.rs\"\n",
        )
        .unwrap();
        // `flaky` fails where the file `once` is not there yet, and
        // always where ALWAYS is true.
        let netns = |always: bool| {
            format!(
                "const ALWAYS: bool = {always};\n\
                 #[test]\nfn steady() {{}}\n\
                 #[test]\nfn flaky() {{\n\
                     let once = concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/once\");\n\
                     let first = std::fs::metadata(once).is_err();\n\
                     std::fs::write(once, \"\").unwrap();\n\
                     assert!(!first && !ALWAYS, \"missed\");\n\
                 }}\n"
            )
        };
        std::fs::write(root.join("tests/netns.rs"), netns(false)).unwrap();
        let once = test_step(&root, &[]);
        std::fs::write(root.join("tests/netns.rs"), netns(true)).unwrap();
        let twice = test_step(&root, &[]);
        std::fs::remove_dir_all(&root).unwrap();
        assert!(once.is_ok(), "{once:?}");
        assert_eq!(
            format!("{:#}", twice.unwrap_err()),
            format!(
                "netns flaky failed twice: `cargo test -p lb-userspace --test netns -- \
                 --exact flaky` failed (exit status: 101)"
            )
        );
    }

    #[test]
    fn targets_are_read_from_the_executables_name() {
        assert_eq!(
            target_of("../tests/netns/main.rs (target/debug/deps/netns-d7f0a4cfa03da55d)"),
            Some("netns".into())
        );
        assert_eq!(
            target_of("unittests src/lib.rs (target/debug/deps/lb_common-9027955fdb82ba3b)"),
            Some("lb_common".into())
        );
        assert_eq!(target_of("something else"), None);
    }
}
