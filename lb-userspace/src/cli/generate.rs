//! `fabriclb gen`: collective-shaped RoCEv2 traffic from this host.

use fabriclb::traffic;

/// Sends RoCEv2 traffic shaped like a collective from this host.
#[derive(clap::Args)]
pub struct GenArgs {
    /// Interface to send from (in the current network namespace).
    #[arg(long)]
    interface: String,
    /// The first hop; its MAC comes from the neighbour table.
    #[arg(long)]
    gateway: std::net::Ipv4Addr,
    /// `ring` (rank r to r+1), `all-to-all`, or `mixed`: two jobs at
    /// once, a ring over the even ranks and an all-to-all over the odd.
    #[arg(long, default_value = "ring")]
    pattern: traffic::Pattern,
    /// Receive address of every rank, in rank order.
    #[arg(long, required = true, value_delimiter = ',')]
    ranks: Vec<std::net::Ipv4Addr>,
    /// This host's rank.
    #[arg(long)]
    rank: usize,
    #[arg(long, default_value_t = 16)]
    qps: u32,
    #[arg(long, default_value_t = 65536)]
    message_bytes: u32,
    #[arg(long, default_value_t = 4096)]
    mtu: u32,
    /// Messages per connection.
    #[arg(long, default_value_t = 100)]
    messages: u32,
    /// Give every QP its own UDP source port (default: one per connection).
    #[arg(long)]
    port_per_qp: bool,
    /// Single-packet WRITE ONLY messages sent after each message, same QP.
    #[arg(long, default_value_t = 0)]
    small_messages: u32,
    /// Idle gap after each round of messages, in microseconds.
    #[arg(long, default_value_t = 0)]
    gap_us: u64,
    /// Target packets per second (default: as fast as possible).
    #[arg(long)]
    rate_pps: Option<u64>,
    /// Interleave each round's messages packet by packet and pace them
    /// through the round, as a NIC serving its QPs in turn.
    #[arg(long)]
    spread: bool,
}

pub fn run(args: GenArgs) -> anyhow::Result<()> {
    let sender = traffic::resolve_sender(&args.interface, args.gateway)?;
    let exchange = traffic::Exchange {
        pattern: args.pattern,
        qps_per_connection: args.qps,
        message_bytes: args.message_bytes,
        mtu: args.mtu,
        messages: args.messages,
        source_port_per_qp: args.port_per_qp,
        small_messages: args.small_messages,
    };
    let workload = exchange.for_rank(args.ranks, args.rank);
    anyhow::ensure!(
        workload.rank < workload.ranks.len(),
        "rank {} out of {} ranks",
        workload.rank,
        workload.ranks.len()
    );
    let pace = traffic::Pace {
        rate_pps: args.rate_pps,
        gap: std::time::Duration::from_micros(args.gap_us),
        spread: args.spread,
    };
    let report = traffic::send(
        &args.interface,
        traffic::Generator::new(workload, sender),
        pace,
    )?;
    println!(
        "sent {} packets, {} bytes in {:.3} s",
        report.packets,
        report.bytes,
        report.elapsed.as_secs_f64()
    );
    Ok(())
}
