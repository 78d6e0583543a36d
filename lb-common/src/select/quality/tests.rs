use super::*;

/// Queue only, 8 KiB to 72 KiB: a band is 8 KiB wide; a quarter band of
/// hysteresis.
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
    ewma_shift: 2,
    hysteresis: 64,
};

fn queued(bytes: u64) -> Measures {
    Measures {
        load: 0,
        queued: bytes,
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
        ewma_shift: 0,
        hysteresis: 0,
    };
    // past 100 -> level 256; queue 700 -> level 1792; (256 + 3 * 1792) / 4.
    let level = profile.level(
        100,
        Measures {
            load: 800,
            queued: 700,
        },
    );
    assert_eq!(level, 1408);
    let none = Profile {
        future_load: Scale::default(),
        past_load: Scale::default(),
        ..profile
    };
    assert_eq!(none.level(100, queued(700)), 0, "no weight: always idle");
}

#[test]
fn bands_map_to_eighths_of_the_default_quality() {
    let qualities: Vec<u32> = (0..=BANDS).map(band_quality).collect();
    assert_eq!(qualities, [1024, 896, 768, 640, 512, 384, 256, 128, 128]);
    assert_eq!(PathQuality::default().quality(), PATH_QUALITY_DEFAULT);
}

#[test]
fn a_path_gets_worse_at_once_and_better_one_band_per_sample() {
    let mut path = PathQuality::default();
    let mut bands = Vec::new();
    for bytes in [0, 8192 + 5 * 8192 + 100, 1 << 30, 0, 0, 0, 0, 0, 0, 0, 0] {
        bands.push(path.sample(&QUEUE_ONLY, queued(bytes)));
    }
    assert_eq!(bands, [0, 5, 7, 6, 5, 4, 3, 2, 1, 0, 0]);
}

/// A level hovering just under a band edge does not flap the band: it
/// must fall a quarter band below the edge first.
#[test]
fn hysteresis_holds_a_band_until_the_level_is_clearly_below_it() {
    let mut path = PathQuality::default();
    let band_edge = |band: u64| 8192 + band * 8192;
    assert_eq!(path.sample(&QUEUE_ONLY, queued(band_edge(3) + 10)), 3);
    // Level 3 * 256 - 32: below the edge, inside the margin.
    assert_eq!(path.sample(&QUEUE_ONLY, queued(band_edge(3) - 1024)), 3);
    assert_eq!(path.sample(&QUEUE_ONLY, queued(band_edge(3) + 10)), 3);
    // Level 3 * 256 - 65: past the margin, one band better.
    assert_eq!(path.sample(&QUEUE_ONLY, queued(band_edge(3) - 2100)), 2);
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
    let load = |load| Measures { load, queued: 0 };
    let mut path = PathQuality::default();
    path.sample(&profile, load(4000));
    assert_eq!(path.past_load, Some(4000));
    path.sample(&profile, load(8000));
    assert_eq!(path.past_load, Some(5000), "a quarter of the way up");
    path.sample(&profile, load(0));
    assert_eq!(path.past_load, Some(3750), "a quarter of the way down");
    assert_eq!(path.band, 4, "band 5 at 5000 of 8000, one better at 3750");
}
