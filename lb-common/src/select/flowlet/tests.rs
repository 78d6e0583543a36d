use super::*;
use crate::packet::roce::*;

const GAP: u64 = 256_000;

fn state(slot: u32, last_seen_ns: u64) -> FlowletState {
    FlowletState {
        last_seen_ns,
        slot,
        generation: 3,
        ..FlowletState::default()
    }
}

#[test]
fn packets_inside_the_gap_continue_on_their_slot() {
    let s = state(2, 1_000_000);
    assert_eq!(
        step(Some(&s), 1_000_000, GAP, 3, 4),
        FlowletStep::Continue(2)
    );
    assert_eq!(
        step(Some(&s), 1_000_000 + GAP, GAP, 3, 4),
        FlowletStep::Continue(2)
    );
}

#[test]
fn a_packet_after_the_gap_starts_a_new_flowlet_from_its_slot() {
    let s = state(2, 1_000_000);
    assert_eq!(
        step(Some(&s), 1_000_001 + GAP, GAP, 3, 4),
        FlowletStep::Choose { current: Some(2) }
    );
}

#[test]
fn a_slot_the_group_no_longer_has_forces_a_choice() {
    let s = state(5, 1_000_000);
    assert_eq!(
        step(Some(&s), 1_000_001, GAP, 3, 4),
        FlowletStep::Choose { current: None }
    );
}

#[test]
fn no_state_or_another_generations_idle_state_starts_where_ecmp_would() {
    assert_eq!(step(None, 5, GAP, 3, 4), FlowletStep::Start);
    assert_eq!(
        step(Some(&state(1, 4)), 5 + GAP, GAP, 4, 4),
        FlowletStep::Start
    );
    // A CPU that never saw the flow holds zeros: generation 0 never matches.
    assert_eq!(
        step(Some(&FlowletState::default()), 5, GAP, 1, 4),
        FlowletStep::Start
    );
}

fn cand(slot: u32, load: u64) -> Candidate {
    Candidate {
        slot,
        load,
        quality: PATH_QUALITY_DEFAULT,
    }
}

fn choice(candidates: &[Candidate]) -> PathChoice {
    let mut c = PathChoice::default();
    for &x in candidates {
        c.consider(x);
    }
    c
}

#[test]
fn the_least_loaded_wins_and_the_first_wins_ties() {
    let c = choice(&[cand(0, 500), cand(1, 100), cand(2, 100), cand(3, 900)]);
    assert_eq!(c.best().map(|b| b.slot), Some(1));
    assert_eq!(c.decide(None, 0), Some(1));
    assert_eq!(PathChoice::default().decide(None, 0), None);
}

#[test]
fn quality_scales_cost() {
    // Cost is (load + bias) / quality: twice the cost-bearing load on a
    // path of twice the quality is a tie, which the earlier slot keeps.
    let half = Candidate {
        quality: PATH_QUALITY_DEFAULT / 2,
        ..cand(0, 0)
    };
    assert_eq!(
        choice(&[half, cand(1, LOAD_BIAS)]).best().map(|b| b.slot),
        Some(0)
    );
    assert_eq!(
        choice(&[half, cand(1, LOAD_BIAS - 1)])
            .best()
            .map(|b| b.slot),
        Some(1)
    );
    // Idle paths rank by quality.
    assert_eq!(choice(&[half, cand(1, 0)]).best().map(|b| b.slot), Some(1));
    // Quality 0 is avoided even when idle.
    let zero = Candidate {
        quality: 0,
        ..cand(2, 0)
    };
    assert_eq!(
        choice(&[zero, cand(3, 100_000)]).best().map(|b| b.slot),
        Some(3)
    );
}

#[test]
fn a_flow_starts_on_ecmp_unless_it_is_down_or_degraded() {
    assert!(starts_on_ecmp(true, PATH_QUALITY_DEFAULT));
    assert!(!starts_on_ecmp(false, PATH_QUALITY_DEFAULT));
    assert!(!starts_on_ecmp(true, PATH_QUALITY_DEFAULT - 1));
}

#[test]
fn hysteresis_keeps_a_flowlet_unless_the_gain_is_real() {
    // Two flows of 64k on slot 0, nothing on slot 1: one moves.
    let c = choice(&[cand(0, 131_072), cand(1, 0)]);
    assert_eq!(c.decide(Some(cand(0, 131_072)), 65_536), Some(1));
    // One flow alone on slot 0: moving gains nothing.
    let c = choice(&[cand(0, 65_536), cand(1, 0)]);
    assert_eq!(c.decide(Some(cand(0, 65_536)), 65_536), Some(0));
    // 100k vs 90k with a flow of 1k: 91k (+bias) is not below 7/8 of
    // 100k (+bias).
    let c = choice(&[cand(0, 100_000), cand(1, 90_000)]);
    assert_eq!(c.decide(Some(cand(0, 100_000)), 1000), Some(0));
    // 100k vs 80k: 81k is.
    let c = choice(&[cand(0, 100_000), cand(1, 80_000)]);
    assert_eq!(c.decide(Some(cand(0, 100_000)), 1000), Some(1));
    // Idle paths are a tie: nobody moves.
    let c = choice(&[cand(0, 0), cand(1, 0)]);
    assert_eq!(c.decide(Some(cand(1, 0)), 0), Some(1));
    // A current next hop that is down is not offered: the best is taken.
    assert_eq!(c.decide(None, 5000), Some(0));
}

#[test]
fn a_flowlet_leaves_a_queued_path_for_a_lighter_or_clearly_better_one() {
    let with = |slot, load, quality| Candidate {
        slot,
        load,
        quality,
    };
    // Two flows of 64k met on slot 0, whose queue rated it to band 7
    // (576); slot 1 carries one such flow at full quality. By cost the
    // move pays (128k + 64k over 1024 against 7/8 of 128k over 576), but
    // slot 1 would then carry 128k, as slot 0 does now: it stays.
    let current = with(0, 131_072, 576);
    let c = choice(&[current, with(1, 65_536, 1024)]);
    assert_eq!(c.decide(Some(current), 65_536), Some(0));
    // An idle path is lighter: it moves.
    let c = choice(&[current, with(1, 0, 1024)]);
    assert_eq!(c.decide(Some(current), 65_536), Some(1));
    // A path twice as good is clearly better, loaded or not: it moves.
    let slowed = with(0, 131_072, 512);
    let c = choice(&[slowed, with(1, 65_536, 1024)]);
    assert_eq!(c.decide(Some(slowed), 65_536), Some(1));
}

#[test]
fn a_pair_parts_onto_an_idle_path_not_onto_an_occupied_one() {
    const FLOW: u64 = 65_536;
    let pair = cand(0, 2 * FLOW);
    // The other path's flow reads at 40% of this one's (between
    // messages): the cost pays by the hysteresis, but the pair would only
    // move there together.
    let c = choice(&[pair, cand(1, FLOW * 2 / 5)]);
    assert_eq!(c.decide(Some(pair), FLOW), Some(0));
    // Under a quarter of a flow is idle: the flow leaves.
    let c = choice(&[pair, cand(1, FLOW / 4 - 1)]);
    assert_eq!(c.decide(Some(pair), FLOW), Some(1));
    assert_eq!(
        choice(&[pair, cand(1, FLOW / 4)]).decide(Some(pair), FLOW),
        Some(0)
    );
    // Three on a path, one on the other: two flows fewer, it moves.
    let three = cand(0, 3 * FLOW);
    let c = choice(&[three, cand(1, FLOW)]);
    assert_eq!(c.decide(Some(three), FLOW), Some(1));
}

#[test]
fn only_self_contained_roce_is_sprayed_by_default() {
    let bth = |opcode| Bth {
        opcode,
        dest_qp: 1,
        psn: 0,
    };
    for op in [
        WRITE_ONLY,
        WRITE_ONLY_IMM,
        SEND_ONLY,
        SEND_ONLY_IMM,
        READ_RESPONSE_ONLY,
        ACKNOWLEDGE,
    ] {
        assert!(
            sprays(MODE_PER_PACKET, SPRAY_SELF_CONTAINED, Some(&bth(op))),
            "{op:#x}"
        );
        assert!(
            !sprays(MODE_FLOWLET, SPRAY_SELF_CONTAINED, Some(&bth(op))),
            "{op:#x}"
        );
        assert!(!sprays(MODE_ECMP, SPRAY_ALL, Some(&bth(op))), "{op:#x}");
    }
    for op in [
        WRITE_FIRST,
        WRITE_MIDDLE,
        WRITE_LAST,
        WRITE_LAST_IMM,
        SEND_FIRST,
        SEND_MIDDLE,
        SEND_LAST,
        READ_RESPONSE_MIDDLE,
        READ_REQUEST,
    ] {
        assert!(
            !sprays(MODE_PER_PACKET, SPRAY_SELF_CONTAINED, Some(&bth(op))),
            "{op:#x}"
        );
        assert!(
            sprays(MODE_PER_PACKET, SPRAY_ALL, Some(&bth(op))),
            "{op:#x}"
        );
    }
    assert!(!sprays(MODE_PER_PACKET, SPRAY_ALL, None));
}

#[test]
fn another_generations_live_flowlet_is_left_alone_until_idle() {
    let s = state(1, 1_000_000);
    assert_eq!(
        step(Some(&s), 1_000_000 + GAP, GAP, 4, 4),
        FlowletStep::Occupied
    );
    assert_eq!(
        step(Some(&s), 1_000_001 + GAP, GAP, 4, 4),
        FlowletStep::Start
    );
}

#[test]
fn flowlet_indexes_stay_in_the_table_and_tell_groups_apart() {
    for size in [1, 1024, 65_536, 1_000_003] {
        for hash in [0, 1, 0xdead_beef, u32::MAX] {
            assert!(flowlet_index(7, hash, size) < size);
        }
    }
    // The whole table is used, its ends included.
    assert_eq!(flowlet_index(0, 0, 1000), 0);
    assert_eq!(flowlet_index(0, u32::MAX, 1000), 999);
    // Same hash, neighbouring groups: entries far apart.
    let a = flowlet_index(1, 0x1234_5678, 65_536);
    let b = flowlet_index(2, 0x1234_5678, 65_536);
    assert!(a.abs_diff(b) > 1024, "{a} {b}");
    assert_eq!(a, flowlet_index(1, 0x1234_5678, 65_536));
}

#[test]
fn only_a_draining_ecmp_group_follows_flowlet_rules() {
    assert_eq!(flowlet_rules(MODE_ECMP, MODE_ECMP), MODE_ECMP);
    assert_eq!(flowlet_rules(MODE_ECMP, MODE_FLOWLET), MODE_FLOWLET);
    assert_eq!(flowlet_rules(MODE_ECMP, MODE_PER_PACKET), MODE_PER_PACKET);
    // A flowlet group's own mode rules, whatever a stale flag says.
    assert_eq!(flowlet_rules(MODE_FLOWLET, MODE_PER_PACKET), MODE_FLOWLET);
    assert_eq!(flowlet_rules(MODE_PER_PACKET, MODE_ECMP), MODE_PER_PACKET);
}

const ALL_UP: fn(u32) -> bool = |_| true;
const SLOT_2_DOWN: fn(u32) -> bool = |slot| slot != 2;

#[test]
fn a_draining_flow_keeps_its_live_flowlet_and_takes_ecmp_after_a_pause() {
    let s = state(2, 1_000_000);
    // Busy: inside the gap it stays on slot 2, though ECMP says 0.
    let busy = step(Some(&s), 1_000_000 + GAP, GAP, 3, 4);
    assert_eq!(drain(busy, ALL_UP, 0), 2);
    // Paused longer than the gap: its ECMP slot.
    let paused = step(Some(&s), 1_000_001 + GAP, GAP, 3, 4);
    assert_eq!(drain(paused, ALL_UP, 0), 0);
    // Once there, the state names the ECMP slot and it stays.
    let moved = step(Some(&state(0, 2_000_000)), 2_000_001, GAP, 3, 4);
    assert_eq!(drain(moved, ALL_UP, 0), 0);
}

#[test]
fn a_draining_flow_leaves_a_dead_flowlet_and_new_flows_take_ecmp() {
    let busy = step(Some(&state(2, 1_000_000)), 1_000_001, GAP, 3, 4);
    assert_eq!(drain(busy, SLOT_2_DOWN, 1), 1);
    assert_eq!(drain(step(None, 5, GAP, 3, 4), ALL_UP, 3), 3);
    // A slot the group lost.
    let lost = step(Some(&state(7, 1_000_000)), 1_000_001, GAP, 3, 4);
    assert_eq!(drain(lost, ALL_UP, 1), 1);
}

#[test]
fn draining_from_per_packet_sprays_nothing_but_sends_sprayable_packets_to_ecmp() {
    let bth = |opcode| Bth {
        opcode,
        dest_qp: 1,
        psn: 0,
    };
    let (only, middle) = (bth(WRITE_ONLY), bth(WRITE_MIDDLE));
    // The data plane asks `sprays` with the mode being left: those packets
    // skip the flowlet and take ECMP, the rest drain.
    let rules = flowlet_rules(MODE_ECMP, MODE_PER_PACKET);
    assert!(sprays(rules, SPRAY_SELF_CONTAINED, Some(&only)));
    assert!(!sprays(rules, SPRAY_SELF_CONTAINED, Some(&middle)));
    assert!(sprays(rules, SPRAY_ALL, Some(&middle)));
    let from_flowlet = flowlet_rules(MODE_ECMP, MODE_FLOWLET);
    assert!(!sprays(from_flowlet, SPRAY_SELF_CONTAINED, Some(&only)));
}
