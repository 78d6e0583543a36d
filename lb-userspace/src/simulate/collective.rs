//! A collective described in one line, `--collective SPEC`: comma-
//! separated `KEY=VALUE`s, e.g.
//! `pattern=ring,ranks=16,qps=4,message=256KiB,messages=40,rate=40Mbit,gap=30ms`.
//! Its frames are the testbed's generator's ([`crate::workload`]), each
//! rank sending its rounds at `rate` with `gap` after each.

use std::net::Ipv4Addr;
use std::str::FromStr;

use super::Arriving;
use crate::workload::{Exchange, Generator, Pattern, Sender, Workload};

/// Every key, with what it means and its default, as errors list them.
pub const KEYS: &str = "pattern (ring, all-to-all, mixed; ring), ranks (8), senders (ranks \
     0.. that send; all), qps (QPs per connection; 1), message (bytes, or with KiB/MiB/GiB; 1MiB), messages (per connection; \
     16), mtu (RDMA payload per packet; 4096), small (single-packet messages after each; 0), \
     port-per-qp (a UDP source port per QP: yes/no; yes), rate (a rank's while it sends, \
     with bit/Kbit/Mbit/Gbit; 100Gbit), gap (the pause after each round, with ns/us/ms/s; \
     0), jitter (each round starts up to this much later, drawn per rank and round; 0), src (rank 0's address; 198.18.101.1), dst (rank 0's receive address; \
     198.19.101.1), stride (between ranks' addresses; 256)";

/// A collective: who sends what to whom, and how fast.
#[derive(Clone, Debug, PartialEq)]
pub struct CollectiveSpec {
    pub exchange: Exchange,
    pub ranks: usize,
    /// Ranks `0..senders` send; all receive.
    pub senders: usize,
    /// A rank's sending rate, bits per second.
    pub rate_bits_per_s: u64,
    pub gap_ns: u64,
    /// Each round of each rank starts up to this much later than its
    /// pacing says, drawn from a generator seeded by the rank (the same
    /// every run): senders that are not in lockstep.
    pub jitter_ns: u64,
    /// Rank r sends from `src + r * stride` to `dst + p * stride` for
    /// each of its peers p.
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub stride: u32,
}

impl Default for CollectiveSpec {
    fn default() -> Self {
        Self {
            exchange: Exchange {
                pattern: Pattern::Ring,
                qps_per_connection: 1,
                message_bytes: 1 << 20,
                messages: 16,
                mtu: 4096,
                small_messages: 0,
                source_port_per_qp: true,
            },
            ranks: 8,
            senders: 8,
            rate_bits_per_s: 100_000_000_000,
            gap_ns: 0,
            jitter_ns: 0,
            src: Ipv4Addr::new(198, 18, 101, 1),
            dst: Ipv4Addr::new(198, 19, 101, 1),
            stride: 256,
        }
    }
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("{0:?} is not KEY=VALUE (keys: {KEYS})")]
    NotKeyValue(String),
    #[error("unknown key {0:?} (keys: {KEYS})")]
    UnknownKey(String),
    #[error("{key}={value:?}: {why}")]
    Value {
        key: String,
        value: String,
        why: String,
    },
}

impl FromStr for CollectiveSpec {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Self, SpecError> {
        let mut spec = Self::default();
        let mut senders = None;
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| SpecError::NotKeyValue(item.to_owned()))?;
            let bad = |why: &str| SpecError::Value {
                key: key.to_owned(),
                value: value.to_owned(),
                why: why.to_owned(),
            };
            let count = |min: u32, max: u32| {
                (value.parse::<u32>().ok())
                    .filter(|n| (min..=max).contains(n))
                    .ok_or_else(|| bad(&format!("a whole number in {min}..={max}")))
            };
            match key {
                "pattern" => spec.exchange.pattern = value.parse().map_err(|e: String| bad(&e))?,
                "ranks" => spec.ranks = count(2, 256)? as usize,
                "senders" => senders = Some(count(1, 256)? as usize),
                "qps" => spec.exchange.qps_per_connection = count(1, 4096)?,
                "message" => {
                    spec.exchange.message_bytes = (scaled(value, BYTE_UNITS).filter(|b| *b >= 1))
                        .and_then(|b| u32::try_from(b).ok())
                        .ok_or_else(|| bad("bytes, 1 to 4GiB, with KiB, MiB or GiB"))?
                }
                "messages" => spec.exchange.messages = count(1, 1_000_000)?,
                "mtu" => spec.exchange.mtu = count(256, 9000)?,
                "small" => spec.exchange.small_messages = count(0, 1024)?,
                "port-per-qp" => {
                    spec.exchange.source_port_per_qp = match value {
                        "yes" => true,
                        "no" => false,
                        _ => return Err(bad("yes or no")),
                    }
                }
                "rate" => spec.rate_bits_per_s = rate(value).map_err(|e| bad(&e.to_string()))?,
                "gap" => {
                    spec.gap_ns = scaled(value, TIME_UNITS)
                        .ok_or_else(|| bad("a time, with ns, us, ms or s"))?
                }
                "jitter" => {
                    spec.jitter_ns = scaled(value, TIME_UNITS)
                        .ok_or_else(|| bad("a time, with ns, us, ms or s"))?
                }
                "src" => spec.src = value.parse().map_err(|_| bad("an IPv4 address"))?,
                "dst" => spec.dst = value.parse().map_err(|_| bad("an IPv4 address"))?,
                "stride" => spec.stride = count(1, 1 << 16)?,
                _ => return Err(SpecError::UnknownKey(key.to_owned())),
            }
        }
        spec.senders = senders.unwrap_or(spec.ranks);
        if spec.senders > spec.ranks {
            return Err(SpecError::Value {
                key: "senders".to_owned(),
                value: spec.senders.to_string(),
                why: format!("more than the {} ranks", spec.ranks),
            });
        }
        Ok(spec)
    }
}

const BYTE_UNITS: &[(&str, u64)] = &[
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
    ("", 1),
];
const RATE_UNITS: &[(&str, u64)] = &[
    ("Gbit", 1_000_000_000),
    ("Mbit", 1_000_000),
    ("Kbit", 1_000),
    ("bit", 1),
];
const TIME_UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
];

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("a rate from 1Kbit, with bit, Kbit, Mbit or Gbit")]
pub struct RateError;

/// A rate, `400Gbit` or `40.5Mbit`, in bits per second.
pub fn rate(text: &str) -> Result<u64, RateError> {
    scaled(text, RATE_UNITS)
        .filter(|r| *r >= 1000)
        .ok_or(RateError)
}

/// `text`, a decimal number and one of `units`' suffixes, in the base
/// unit (rounded down); a plain 0 needs none.
fn scaled(text: &str, units: &[(&str, u64)]) -> Option<u64> {
    if text == "0" {
        return Some(0);
    }
    let (number, scale) = units
        .iter()
        .find_map(|(suffix, scale)| Some((text.strip_suffix(suffix)?, *scale)))?;
    let value: f64 = number.trim().parse().ok()?;
    (value.is_finite() && value >= 0.0 && value * scale as f64 <= u64::MAX as f64)
        .then_some((value * scale as f64) as u64)
}

/// A rank's round delays: uniform in `0..max_ns`, from xorshift64*
/// seeded by the rank, so a spec's frames are the same every run.
struct Jitter {
    state: u64,
    max_ns: u64,
}

impl Jitter {
    fn new(rank: usize, max_ns: u64) -> Self {
        Self {
            state: 0x9e37_79b9_7f4a_7c15 ^ (rank as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9),
            max_ns,
        }
    }

    fn next(&mut self) -> u64 {
        if self.max_ns == 0 {
            return 0;
        }
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d) % self.max_ns
    }
}

impl CollectiveSpec {
    /// Rank `rank`'s address plus `base`'s offset.
    fn address(&self, base: Ipv4Addr, rank: usize) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(base).wrapping_add(self.stride * rank as u32))
    }

    /// What rank `rank` sends, as the testbed's generator takes it.
    pub fn workload(&self, rank: usize) -> Workload {
        let ranks = (0..self.ranks).map(|r| self.address(self.dst, r));
        self.exchange.for_rank(ranks.collect(), rank)
    }

    /// Every rank's frames as they reach the box, in time order: each
    /// rank from time 0, a round's frames back to back at `rate`, `gap`
    /// after each round.
    pub fn frames(&self) -> Vec<Arriving> {
        let mut all = Vec::new();
        for rank in 0..self.senders {
            let sender = Sender {
                ip: self.address(self.src, rank),
                // Locally administered; no MAC is checked offline.
                mac: [0x02, 0, 0, 0, (rank >> 8) as u8, rank as u8],
                gateway_mac: [0x02, 0, 0, 0, 0xff, 0xff],
            };
            let mut generator = Generator::new(self.workload(rank), sender);
            let mut at_ns = 0u64;
            let mut draws = Jitter::new(rank, self.jitter_ns);
            loop {
                let round = generator.next_round();
                if round.is_empty() {
                    break;
                }
                at_ns += draws.next();
                for frame in round {
                    let bits = frame.len() as u128 * 8;
                    all.push(Arriving { at_ns, frame });
                    at_ns += (bits * 1_000_000_000 / u128::from(self.rate_bits_per_s)) as u64;
                }
                at_ns += self.gap_ns;
            }
        }
        all.sort_by_key(|a| a.at_ns);
        all
    }

    /// The spec as it would be written, every key given.
    pub fn describe(&self) -> String {
        let Exchange {
            pattern,
            qps_per_connection,
            message_bytes,
            mtu,
            messages,
            small_messages,
            source_port_per_qp,
        } = &self.exchange;
        format!(
            "pattern={},ranks={},senders={},qps={},message={},messages={},mtu={},small={},port-per-qp={},\
             rate={}bit,gap={}ns,jitter={}ns,src={},dst={},stride={}",
            pattern.as_str(),
            self.ranks,
            self.senders,
            qps_per_connection,
            message_bytes,
            messages,
            mtu,
            small_messages,
            if *source_port_per_qp { "yes" } else { "no" },
            self.rate_bits_per_s,
            self.gap_ns,
            self.jitter_ns,
            self.src,
            self.dst,
            self.stride
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_reads_every_key_with_its_units() {
        let spec: CollectiveSpec = "pattern=all-to-all, ranks=16,qps=4,message=256KiB,messages=40,\
             mtu=1024,small=2,port-per-qp=no,rate=40.5Mbit,gap=30ms,jitter=2us,src=10.0.0.1,dst=10.1.0.1,\
             stride=1"
            .parse()
            .unwrap();
        assert_eq!(
            spec,
            CollectiveSpec {
                exchange: Exchange {
                    pattern: Pattern::AllToAll,
                    qps_per_connection: 4,
                    message_bytes: 256 << 10,
                    messages: 40,
                    mtu: 1024,
                    small_messages: 2,
                    source_port_per_qp: false,
                },
                ranks: 16,
                senders: 16,
                rate_bits_per_s: 40_500_000,
                gap_ns: 30_000_000,
                jitter_ns: 2_000,
                src: Ipv4Addr::new(10, 0, 0, 1),
                dst: Ipv4Addr::new(10, 1, 0, 1),
                stride: 1,
            }
        );
        assert_eq!(spec.describe().parse::<CollectiveSpec>().unwrap(), spec);
    }

    #[test]
    fn a_bad_spec_says_which_key_and_why() {
        let error = |text: &str| text.parse::<CollectiveSpec>().unwrap_err().to_string();
        assert_eq!(error("ranks=1"), "ranks=\"1\": a whole number in 2..=256");
        assert_eq!(
            error("message=1TiB"),
            "message=\"1TiB\": bytes, 1 to 4GiB, with KiB, MiB or GiB"
        );
        assert_eq!(
            error("gap=5 minutes"),
            "gap=\"5 minutes\": a time, with ns, us, ms or s"
        );
        assert_eq!(error("gap=5"), "gap=\"5\": a time, with ns, us, ms or s");
        assert_eq!("gap=0".parse::<CollectiveSpec>().unwrap().gap_ns, 0);
        assert_eq!(
            error("ranks=4,senders=5"),
            "senders=\"5\": more than the 4 ranks"
        );
        assert_eq!(
            "ranks=4,senders=2,message=4KiB,messages=1"
                .parse::<CollectiveSpec>()
                .unwrap()
                .frames()
                .len(),
            2
        );
        assert!(error("ranks").starts_with("\"ranks\" is not KEY=VALUE (keys: pattern"));
        assert!(error("speed=1").starts_with("unknown key \"speed\" (keys: "));
        assert_eq!(
            error("pattern=tree"),
            "pattern=\"tree\": unknown pattern \"tree\" (valid: \"ring\", \"all-to-all\", \"mixed\")"
        );
    }

    /// A ring of 4 ranks, 2 messages of 2 packets each: every rank's
    /// rounds paced at its rate, the gap after each round.
    #[test]
    fn frames_are_paced_per_rank_with_the_gap_after_each_round() {
        let spec: CollectiveSpec = "ranks=4,message=8KiB,messages=2,rate=1Gbit,gap=1ms"
            .parse()
            .unwrap();
        let frames = spec.frames();
        assert_eq!(frames.len(), 4 * 2 * 2);
        // At 1 Gbit/s a byte takes 8 ns; the ranks send alike, so each
        // instant holds one frame of each, in rank order.
        let ns = |i: usize| frames[4 * i].frame.len() as u64 * 8;
        let mut times: Vec<u64> = frames.iter().map(|f| f.at_ns).collect();
        times.dedup();
        let second_round = ns(0) + ns(1) + 1_000_000;
        assert_eq!(times, [0, ns(0), second_round, second_round + ns(2)]);

        // With jitter, each rank's rounds start apart, within it, the
        // same every time.
        let jittered: CollectiveSpec =
            "ranks=4,message=8KiB,messages=2,rate=1Gbit,gap=1ms,jitter=100us"
                .parse()
                .unwrap();
        // Each rank's first frame, by its IPv4 source address.
        let firsts = |frames: &[Arriving]| -> Vec<u64> {
            (0..4u8)
                .map(|rank| {
                    let source = [198, 18, 101 + rank, 1];
                    (frames.iter())
                        .find(|f| f.frame[26..30] == source)
                        .map(|f| f.at_ns)
                        .unwrap()
                })
                .collect()
        };
        let frames = jittered.frames();
        let starts = firsts(&frames);
        assert!(starts.iter().all(|&t| t < 100_000), "{starts:?}");
        assert!(starts.windows(2).all(|w| w[0] != w[1]), "{starts:?}");
        assert_eq!(firsts(&jittered.frames()), starts);
    }
}
