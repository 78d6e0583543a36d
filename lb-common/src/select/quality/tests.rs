use super::*;

/// Queueing delay only, 8192 to 73728 us: a band is 8192 us wide; a
/// quarter band of hysteresis.
const QUEUE_ONLY: Profile = Profile {
    past_load: Scale {
        min: 0,
        max: 0,
        weight: 0,
    },
    current_load: Scale {
        min: 0,
        max: 0,
        weight: 0,
    },
    future_load: Scale {
        min: 8192,
        max: 73728,
        weight: 1,
    },
    smoothing_us: 30_000,
    worst_hold_us: 20_000,
    hysteresis: 64,
};

/// Samples [`STEP_US`] apart: with [`QUEUE_ONLY`]'s 30 ms, an EWMA moves a
/// quarter of the way per sample.
const STEP_US: u64 = 10_000;

/// A path sampled at a fixed interval.
struct Sampled {
    path: PathQuality,
    at_us: u64,
    step_us: u64,
    /// The port's speed each sample reports.
    speed: Option<u64>,
    /// Whether each sample is of a queue other switches fill too.
    shared: bool,
}

impl Sampled {
    fn every(step_us: u64, path: PathQuality) -> Self {
        Self {
            path,
            at_us: 0,
            step_us,
            speed: None,
            shared: false,
        }
    }

    fn take(&mut self, profile: &Profile, load: Option<u64>, queued: u64) -> u32 {
        self.at_us += self.step_us;
        self.path.sample(
            profile,
            Measures {
                at_us: self.at_us,
                load,
                queued,
                speed: self.speed,
                shared: self.shared,
            },
        )
    }

    fn queued(&mut self, queued: u64) -> u32 {
        self.take(&QUEUE_ONLY, None, queued)
    }
}

/// A path that drains at 1 MB/s: a byte queued is a microsecond.
fn draining() -> PathQuality {
    PathQuality {
        drain_rate: Some(1_000_000),
        ..PathQuality::default()
    }
}

#[test]
fn a_scale_is_linear_between_min_and_max_and_clamped_outside() {
    let scale = QUEUE_ONLY.future_load;
    assert_eq!(scale.level(0), 0);
    assert_eq!(scale.level(8192), 0);
    assert_eq!(scale.level(8192 + 4096), 128);
    assert_eq!(scale.level(8192 + 8192), 256);
    assert_eq!(scale.level(73727), 2047);
    assert_eq!(scale.level(73728), LEVEL_MAX);
    assert_eq!(scale.level(u64::MAX), LEVEL_MAX);
    // A degenerate scale is a threshold.
    let step = Scale {
        min: 10,
        max: 10,
        weight: 1,
    };
    assert_eq!((step.level(10), step.level(11)), (0, LEVEL_MAX));
}

#[test]
fn the_level_is_the_weighted_mean_of_the_three_measures() {
    let profile = Profile {
        past_load: Scale {
            min: 0,
            max: 800,
            weight: 1,
        },
        current_load: Scale {
            min: 0,
            max: 800,
            weight: 0,
        },
        future_load: Scale {
            min: 0,
            max: 800,
            weight: 3,
        },
        smoothing_us: 0,
        worst_hold_us: 0,
        hysteresis: 0,
    };
    // past 100 -> level 256; delay 700 -> level 1792; (256 + 3 * 1792) / 4.
    assert_eq!(profile.level(100, 800, 700), 1408);
    let none = Profile {
        future_load: Scale::default(),
        past_load: Scale::default(),
        ..profile
    };
    assert_eq!(none.level(100, 800, 700), 0, "no weight: always idle");
}

/// A sixteenth of the default quality per band, an eighth of it once the
/// worst band has held; full before a sample.
#[test]
fn bands_map_to_sixteenths_and_a_held_worst_band_to_an_eighth() {
    let qualities: Vec<u32> = (0..=BANDS).map(|b| band_quality(b, false)).collect();
    assert_eq!(qualities, [1024, 960, 896, 832, 768, 704, 640, 576, 576]);
    assert_eq!(band_quality(7, true), 128);
    assert_eq!(PathQuality::default().quality(), PATH_QUALITY_DEFAULT);
    assert_eq!(PathQuality::default().capacity(), None);
    // A queue that sent nothing between two samples says nothing of the
    // port's speed: the peak stands in, as for the delay.
    let stalled = PathQuality {
        drain_rate: Some(0),
        peak_rate: 3,
        ..PathQuality::default()
    };
    assert_eq!(stalled.capacity(), Some(3));
    assert_eq!(stalled.delay_us(3), 1_000_000);
}

/// Worse at once, better one band per sample while a queue remains; a
/// queue found empty twice in a row is idle at once.
#[test]
fn a_path_gets_worse_at_once_and_better_one_band_per_sample() {
    let mut path = Sampled::every(STEP_US, draining());
    let mut bands = Vec::new();
    let low = 8192 / 2;
    for bytes in [0, 8192 + 5 * 8192 + 100, 1 << 30, low, low, low, 0, 0, 0] {
        bands.push(path.queued(bytes));
    }
    assert_eq!(bands, [0, 5, 7, 6, 5, 4, 3, 0, 0]);
    // Empty once, between two queues: one band, as any sample.
    let mut bands = Vec::new();
    for bytes in [1 << 30, 0, low, 0, 0] {
        bands.push(path.queued(bytes));
    }
    assert_eq!(bands, [7, 6, 5, 4, 0]);
}

/// A profile that weighs the load too: an empty queue leaves the load's
/// level (half of the 8 MB/s scale, weighed half: band 2), and the band
/// steps down to it one per sample as before.
#[test]
fn an_empty_queue_is_idle_at_once_only_where_nothing_else_counts() {
    let profile = Profile {
        past_load: Scale {
            min: 0,
            max: 8_000_000,
            weight: 1,
        },
        ..QUEUE_ONLY
    };
    let mut path = Sampled::every(STEP_US, draining());
    let mut bands = Vec::new();
    for bytes in [1 << 30, 0, 0, 0, 0] {
        bands.push(path.take(&profile, Some(4_000_000), bytes));
    }
    assert_eq!(bands, [5, 4, 3, 2, 2]);
}

/// The quality follows the band a quarter of the way per 10 ms sample
/// (30 ms time constant), both ways, from the first sample's band's
/// quality.
#[test]
fn the_quality_follows_the_band_through_the_ewma() {
    let mut path = Sampled::every(STEP_US, draining());
    let mut qualities = Vec::new();
    for bytes in [0, 1 << 30, 1 << 30, 1 << 30, 0] {
        path.queued(bytes);
        qualities.push(path.path.quality());
    }
    // Band 7 is worth 576 until it has held 20 ms: 1024 - 448/4,
    // 912 - 336/4; then 128: 828 - 700/4; empty again, band 6 (640) pulls
    // it down a little.
    assert_eq!(qualities, [1024, 912, 828, 653, 650]);
    assert_eq!(
        (path.path.worst_since_us, path.path.worst_held),
        (None, false)
    );
    let mut first = Sampled::every(STEP_US, draining());
    first.queued(1 << 30);
    assert_eq!(first.path.quality(), band_quality(7, false));
}

/// A queue other leaves fill too (a destination's row) is never cut to
/// an eighth, however long it stays in the worst band: its quality
/// follows band 7's 576 and stays there.
#[test]
fn a_shared_queue_in_the_worst_band_is_not_cut_to_an_eighth() {
    let mut path = Sampled::every(STEP_US, draining());
    path.shared = true;
    let mut qualities = Vec::new();
    for bytes in [0, 1 << 30, 1 << 30, 1 << 30, 1 << 30, 1 << 30] {
        path.queued(bytes);
        qualities.push(path.path.quality());
    }
    // 1024 - 448/4, 912 - 336/4, 828 - 252/4, 765 - 189/4, 718 - 142/4.
    assert_eq!(qualities, [1024, 912, 828, 765, 718, 683]);
    assert_eq!(path.path.worst_since_us, Some(20_000));
    assert!(!path.path.worst_held);
}

/// The same time constant at four times the interval moves the EWMA
/// 40 / (30 + 40) of the way per sample, and the worst band held 20 ms
/// cuts at its second sample: the profile means the same in time.
#[test]
fn the_smoothing_counts_in_time_not_in_samples() {
    let mut path = Sampled::every(4 * STEP_US, draining());
    let mut qualities = Vec::new();
    for bytes in [0, 1 << 30, 1 << 30] {
        path.queued(bytes);
        qualities.push(path.path.quality());
    }
    // 1024 - 448 * 4/7 (rounded down); then 769 - 641 * 4/7 (held 40 ms:
    // an eighth).
    assert_eq!(qualities, [1024, 769, 403]);
    // A sample at the same instant as the previous moves nothing.
    let mut same = path.path;
    same.sample(
        &QUEUE_ONLY,
        Measures {
            at_us: path.at_us,
            load: None,
            queued: 0,
            speed: None,
            shared: false,
        },
    );
    assert_eq!(same.quality(), 403);
}

/// A level hovering just under a band edge does not flap the band: it
/// must fall a quarter band below the edge first.
#[test]
fn hysteresis_holds_a_band_until_the_level_is_clearly_below_it() {
    let mut path = Sampled::every(STEP_US, draining());
    let band_edge = |band: u64| 8192 + band * 8192;
    assert_eq!(path.queued(band_edge(3) + 10), 3);
    // Level 3 * 256 - 32: below the edge, inside the margin.
    assert_eq!(path.queued(band_edge(3) - 1024), 3);
    assert_eq!(path.queued(band_edge(3) + 10), 3);
    // Level 3 * 256 - 65: past the margin, one band better.
    assert_eq!(path.queued(band_edge(3) - 2100), 2);
}

#[test]
fn past_load_is_an_ewma_seeded_by_the_first_sample() {
    let profile = Profile {
        past_load: Scale {
            min: 0,
            max: 8000,
            weight: 1,
        },
        future_load: Scale::default(),
        ..QUEUE_ONLY
    };
    let mut path = Sampled::every(STEP_US, PathQuality::default());
    path.take(&profile, Some(4000), 0);
    assert_eq!(path.path.past_load, Some(4000));
    path.take(&profile, Some(8000), 0);
    assert_eq!(path.path.past_load, Some(5000), "a quarter of the way up");
    path.take(&profile, Some(0), 0);
    assert_eq!(path.path.past_load, Some(3750), "a quarter of the way down");
    assert_eq!(
        path.path.band, 4,
        "band 5 at 5000 of 8000, one better at 3750"
    );
}

/// The drain rate is the egress rate of intervals that began and ended
/// with a queue, through the median of the last three; until there is
/// one, the highest rate seen stands in; with no rate at all, a queue is
/// endless. Samples 40 ms apart: the drain rate's time constant, half of
/// the way per sample.
#[test]
fn delay_is_the_queue_over_the_measured_drain_rate() {
    let mut sampled = Sampled::every(4 * STEP_US, PathQuality::default());
    assert_eq!(sampled.path.delay_us(1), u64::MAX, "no rate known");
    assert_eq!(sampled.path.delay_us(0), 0);
    let sample = |sampled: &mut Sampled, load, queued| {
        sampled.take(&QUEUE_ONLY, Some(load), queued);
    };
    // Idle at 2 MB/s, then a queue builds: no busy interval yet; the peak
    // of the past load (4/7 of the way from 2 to 3 MB/s with the 30 ms
    // smoothing) stands in for the capacity.
    sample(&mut sampled, 2_000_000, 0);
    sample(&mut sampled, 3_000_000, 30_000);
    assert_eq!(sampled.path.drain_rate, None);
    assert_eq!(sampled.path.capacity(), Some(2_571_426));
    assert_eq!(
        sampled.path.delay_us(30_000),
        11_666,
        "against the 2.57 MB/s peak"
    );
    // Queued at both ends: the port drained at its rate, 1 MB/s; two
    // intervals are not yet a median of three.
    sample(&mut sampled, 1_000_000, 40_000);
    sample(&mut sampled, 1_000_000, 40_000);
    assert_eq!(sampled.path.drain_rate, None);
    sample(&mut sampled, 1_000_000, 40_000);
    assert_eq!(sampled.path.drain_rate, Some(1_000_000));
    assert_eq!(sampled.path.delay_us(40_000), 40_000);
    // One interval read far off does not move it.
    sample(&mut sampled, 3_000_000, 10_000);
    assert_eq!(sampled.path.drain_rate, Some(1_000_000));
    // A rate two intervals read moves the EWMA half way toward it.
    sample(&mut sampled, 2_000_000, 10_000);
    assert_eq!(sampled.path.drain_rate, Some(1_500_000));
    // An interval that ended empty says nothing about the drain rate.
    sample(&mut sampled, 500_000, 0);
    assert_eq!(sampled.path.drain_rate, Some(1_500_000));
    // A slower busy interval (of the three, the first began empty): the
    // median is still the 2 MB/s, and the EWMA goes half way up to it;
    // with the second it is the slower one, half way down.
    sample(&mut sampled, 500_000, 20_000);
    sample(&mut sampled, 500_000, 20_000);
    assert_eq!(sampled.path.drain_rate, Some(1_750_000));
    sample(&mut sampled, 500_000, 20_000);
    assert_eq!(sampled.path.drain_rate, Some(1_125_000));
    assert_eq!(sampled.path.peak_rate, 2_571_426);
    assert_eq!(sampled.path.capacity(), Some(1_125_000));
}

/// Readings of a path that carries 2 MB/s, rated over intervals their
/// counter's writes made a poll too short or too long: 1 and 3 MB/s by
/// turns. The speed it counts at is the smoothed peak, within a quarter
/// of what it carries, not the 3 MB/s that made a slow path beside it
/// look slower than it is. The first reading seeds the EWMA whole, as the
/// past load's: a path first read high keeps that peak.
#[test]
fn the_peak_rate_is_the_smoothed_rates_not_a_readings() {
    let peak = |first: u64| {
        let mut sampled = Sampled::every(4 * STEP_US, PathQuality::default());
        for k in 0..20 {
            let rate = if k % 2 == 0 { first } else { 4_000_000 - first };
            sampled.take(&QUEUE_ONLY, Some(rate), 0);
        }
        sampled.path.capacity().expect("a rate")
    };
    let low_first = peak(1_000_000);
    assert!((2_000_000..2_500_000).contains(&low_first), "{low_first}");
    assert_eq!(peak(3_000_000), 3_000_000);
}

/// A 50 Mbit/s path and a 200 Mbit/s one with the same bytes queued are
/// in different bands: what counts is how long the queue lasts.
#[test]
fn equal_queues_on_unequal_paths_rate_differently() {
    let profile = Profile {
        future_load: Scale {
            min: 500,
            max: 8500,
            weight: 1,
        },
        ..QUEUE_ONLY
    };
    let band = |rate_mbit: u64| {
        let rate = rate_mbit * 125_000;
        let mut path = Sampled::every(STEP_US, PathQuality::default());
        for _ in 0..2 {
            path.take(&profile, Some(rate), 60_000);
        }
        path.path.band
    };
    // 60 KB: 2.4 ms at 200 Mbit/s, 9.6 ms at 50.
    assert_eq!((band(200), band(50)), (1, 7));
}

/// A path that drains at a quarter of the fastest's rate is worth a
/// quarter of its quality; one not seen draining, the fastest itself and
/// one within three quarters of it, the whole; never 0.
#[test]
fn quality_scales_with_the_drain_rate() {
    let path = |drain_rate, quality| PathQuality {
        drain_rate,
        smoothed: Some(quality),
        ..PathQuality::default()
    };
    assert_eq!(path(Some(250), 1024).scaled_quality(1000), 256);
    assert_eq!(path(Some(250), 512).scaled_quality(1000), 128);
    assert_eq!(path(Some(700), 1024).scaled_quality(1000), 716);
    assert_eq!(path(Some(750), 1024).scaled_quality(1000), 1024);
    assert_eq!(path(Some(1000), 768).scaled_quality(1000), 768);
    assert_eq!(path(None, 1024).scaled_quality(1000), 1024);
    assert_eq!(path(Some(1), 64).scaled_quality(1 << 40), 1);
}

/// A row is scaled against its fast paths' median: equal paths read
/// apart by the noise of counters read over the network are not scaled
/// against the one that read highest, a slow path still is against the
/// fast ones, and a path faster than the rest is its own reference.
#[test]
fn a_row_is_scaled_against_its_fast_paths_median() {
    let reference = |capacities: &[u64]| row_reference(&mut capacities.to_vec());
    // Sixteen 50 Mbit/s spines as read in `equal-paths-16` (Mbit/s).
    let equal = [
        44, 44, 46, 46, 42, 42, 46, 44, 47, 45, 47, 48, 42, 47, 43, 57,
    ];
    assert_eq!(reference(&equal), 46);
    let scaled = |rate, of: u64| {
        PathQuality {
            drain_rate: Some(rate),
            smoothed: Some(1024),
            ..PathQuality::default()
        }
        .scaled_quality(of)
    };
    assert!(equal.iter().all(|&rate| scaled(rate, 46) == 1024));
    // Against the highest, the three at 42 would count as slower.
    assert_eq!(equal.iter().filter(|&&r| scaled(r, 57) < 1024).count(), 3);

    assert_eq!(reference(&[200, 190, 210, 50]), 200);
    assert_eq!(scaled(50, 200), 256);
    assert_eq!(reference(&[400, 100, 100, 100]), 400);
    assert_eq!(reference(&[100, 76, 60, 60]), 100);
    assert_eq!(reference(&[7]), 7);
    assert_eq!(reference(&[]), 0);
    assert_eq!(reference(&[u64::MAX, u64::MAX - 1]), u64::MAX);
}

/// A port whose switch says its speed drains at it from the first sample:
/// its queue's delay and its scaling need no busy interval. It drains at
/// the lower of its speed and a measured drain rate (a shaper below the
/// port's speed), and a change of speed forgets what was measured at the
/// old one, so a port that comes back to full speed counts at it at once.
#[test]
fn a_ports_speed_where_known_is_what_it_drains_at() {
    let mut sampled = Sampled::every(4 * STEP_US, PathQuality::default());
    sampled.speed = Some(1_000_000);
    sampled.take(&QUEUE_ONLY, None, 20_000);
    assert_eq!(sampled.path.capacity(), Some(1_000_000));
    assert_eq!(sampled.path.delay_us(20_000), 20_000);
    assert_eq!(
        sampled.path.scaled_quality(4_000_000),
        sampled.path.quality() / 4
    );

    // Shaped below its speed: queued at both ends, drained at 0.5 MB/s
    // three times (the median's).
    for _ in 0..3 {
        sampled.take(&QUEUE_ONLY, Some(500_000), 20_000);
    }
    assert_eq!(sampled.path.drain_rate, Some(500_000));
    assert_eq!(sampled.path.capacity(), Some(500_000));

    // Back at 4 MB/s: the drain rate measured before is gone.
    sampled.speed = Some(4_000_000);
    sampled.take(&QUEUE_ONLY, Some(600_000), 0);
    assert_eq!(sampled.path.drain_rate, None);
    assert_eq!(sampled.path.capacity(), Some(4_000_000));
    assert_eq!(
        sampled.path.scaled_quality(4_000_000),
        sampled.path.quality()
    );
    // Its speed gone from the switch's answer: back to what is measured,
    // here the peak of the past load (no busy interval).
    sampled.speed = None;
    sampled.take(&QUEUE_ONLY, Some(3_000_000), 0);
    assert_eq!(sampled.path.drain_rate, None);
    assert_eq!(sampled.path.capacity(), sampled.path.past_load);
}

/// A drain rate read low (a fifth of the path's speed) and then no busy
/// interval while the path carries a trickle: it holds for 200 ms, then
/// relaxes toward the 3 MB/s the path was seen to carry, a 400 ms time
/// constant; a busy interval measures it again and holds it again. A
/// path that carries half its drain rate or more keeps it.
#[test]
fn a_starved_paths_drain_rate_relaxes_toward_its_peak() {
    let measured_low = PathQuality {
        drain_rate: Some(600_000),
        drain_measured_us: Some(0),
        drain_readings: [Some(600_000); 2],
        peak_rate: 3_000_000,
        sampled_at_us: Some(0),
        ..PathQuality::default()
    };
    let mut carrying = Sampled::every(STEP_US, measured_low);
    for _ in 0..60 {
        carrying.take(&QUEUE_ONLY, Some(300_000), 0);
    }
    assert_eq!(carrying.path.drain_rate, Some(600_000), "carries half");

    let mut sampled = Sampled::every(STEP_US, measured_low);
    // Starved: a trickle, never queued.
    let trickle = |sampled: &mut Sampled| sampled.take(&QUEUE_ONLY, Some(50_000), 0);
    for _ in 0..20 {
        trickle(&mut sampled);
    }
    assert_eq!(sampled.path.drain_rate, Some(600_000), "held to 200 ms");
    trickle(&mut sampled);
    // 10 ms of a 400 ms time constant: 1598/65536 of the 2.4 MB/s gap.
    assert_eq!(
        sampled.path.drain_rate,
        Some(600_000 + 2_400_000 * 1598 / 65_536)
    );
    for _ in 0..39 {
        trickle(&mut sampled);
    }
    // 400 ms in: about 1 - 1/e of the way (0.62 at 10 ms steps).
    let drain = sampled.path.drain_rate.unwrap_or(0);
    assert!((2_080_000..2_110_000).contains(&drain), "{drain}");
    assert_eq!(sampled.path.peak_rate, 3_000_000);

    // Queued at 1 MB/s for four samples: the first began empty, and
    // relaxes it once more; each of the others measures it a fifth of the
    // way (10 ms of the 40 ms drain time constant) toward the median of
    // the last three busy intervals, the two that read it low and the new
    // ones. Then it holds again.
    let towards = |drain, rate, tau| follow(Some(drain), rate, Some(STEP_US), tau);
    let relaxed = towards(
        sampled.path.drain_rate.unwrap_or(0),
        3_000_000,
        DRAIN_RELAX_US,
    );
    let measured = [600_000, 1_000_000, 1_000_000]
        .into_iter()
        .fold(relaxed, |drain, median| {
            towards(drain, median, DRAIN_TIME_CONSTANT_US)
        });
    for _ in 0..4 {
        sampled.take(&QUEUE_ONLY, Some(1_000_000), 10_000);
    }
    assert_eq!(sampled.path.drain_rate, Some(measured));
    for _ in 0..20 {
        trickle(&mut sampled);
    }
    assert_eq!(sampled.path.drain_rate, Some(measured));
}
