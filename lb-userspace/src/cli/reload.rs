//! `fabriclb reload`: asks the running daemon over its control socket to
//! read its config again, and exits with what it answered: 0 once the
//! config is in force (or unchanged), 78 with the refusal's text when the
//! daemon refused it and kept the running one. The packaged unit's
//! `ExecReload`, so that `systemctl reload` fails as the daemon did.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use fabriclb::daemon::control::{self, DEFAULT_RUN_DIR, Request};
use fabriclb::dataplane::pins::DEFAULT_INSTANCE;

/// Where the control socket is, as `run` and `reload` take it.
#[derive(clap::Args, Clone, Debug)]
pub struct ControlArgs {
    /// The directory of the control socket, INSTANCE.sock, which
    /// `fabriclb reload` connects to.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_RUN_DIR)]
    pub run_dir: PathBuf,
}

#[derive(clap::Args)]
pub struct ReloadArgs {
    /// The instance whose daemon reloads.
    #[arg(long, default_value = DEFAULT_INSTANCE)]
    instance: String,
    #[command(flatten)]
    control: ControlArgs,
}

/// How long the daemon may take to answer: a reload that resolves many
/// next hops waits for their neighbours.
const ANSWER_WAIT: Duration = Duration::from_secs(60);

/// The daemon refused the config; the running one stays.
#[derive(Debug, thiserror::Error)]
#[error("the daemon refused the config and keeps the running one: {0}")]
pub struct Refused(String);

/// A connection to `instance`'s daemon's control socket under `control`.
pub fn connect(control: &ControlArgs, instance: &str) -> Result<(UnixStream, PathBuf)> {
    let socket = control::socket_path(&control.run_dir, instance);
    match UnixStream::connect(&socket) {
        Ok(stream) => Ok((stream, socket)),
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused) => {
            bail!(
                "no fabriclb daemon answers at {} (is `fabriclb run --instance {instance}` \
                 running, with this --run-dir?)",
                socket.display(),
            )
        }
        Err(e) => Err(e).with_context(|| format!("connecting to {}", socket.display())),
    }
}

pub fn run(args: ReloadArgs) -> Result<()> {
    let (mut stream, socket) = connect(&args.control, &args.instance)?;
    stream.set_read_timeout(Some(ANSWER_WAIT))?;
    stream.write_all(Request::Reload.line().as_bytes())?;
    let mut text = String::new();
    stream
        .read_to_string(&mut text)
        .with_context(|| format!("waiting for the daemon's answer at {}", socket.display()))?;
    match control::decode(&text) {
        Some(Ok(done)) => {
            println!("{done}");
            Ok(())
        }
        Some(Err(why)) => Err(Refused(why).into()),
        None => bail!("the daemon at {} answered {text:?}", socket.display()),
    }
}
