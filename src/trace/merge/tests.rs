//! The merge's tests.

use super::chrome::{MsgEnd, pair_messages};
use super::*;
use std::collections::HashMap;

/// The percentages of each row of a utilisation table.
fn rows(table: &str) -> Vec<Vec<f64>> {
    table
        .lines()
        .map(|l| {
            l.split_whitespace()
                .filter_map(|w| w.strip_suffix('%')?.parse().ok())
                .collect::<Vec<f64>>()
        })
        .filter(|r| !r.is_empty())
        .collect()
}

fn end(pid: usize, t: i128) -> MsgEnd {
    MsgEnd {
        pid,
        tid: 0,
        t,
        bytes: 8,
        kind: 0,
        steal: false,
    }
}

#[test]
fn a_receive_stamped_before_its_send_still_pairs_with_it() {
    // Two parts' clocks disagree by 300 ns: the message flew in 200.
    // Two messages of the same key (its sequence number wrapped) pair
    // each with its own receive.
    let key = (0, 1, 0, 7);
    let sends = HashMap::from([(key, vec![end(0, 1_000), end(0, 9_000_000)])]);
    let mut recvs = HashMap::from([(key, vec![end(1, 9_000_150), end(1, 900)])]);
    let mut pairs: Vec<(i128, i128)> = pair_messages(&sends, &mut recvs)
        .into_iter()
        .map(|(_, s, r)| (s.t, r.t))
        .collect();
    pairs.sort();
    assert_eq!(pairs, [(1_000, 900), (9_000_000, 9_000_150)]);
    assert!(recvs[&key].is_empty());
}

#[test]
fn messages_of_many_keys_pair_in_key_order_whatever_the_map_s_order() {
    // Sixty-four keys: two maps with their own random orders would walk
    // them differently; the pairs come out the same, sorted by key.
    let keys: Vec<(usize, usize, u16, u64)> = (0..64).map(|n| (n % 3, 1, 0, n as u64)).collect();
    let sends: HashMap<_, _> = keys
        .iter()
        .map(|&k| (k, vec![end(0, k.3 as i128)]))
        .collect();
    let recvs: HashMap<_, _> = keys
        .iter()
        .map(|&k| (k, vec![end(1, 10 + k.3 as i128)]))
        .collect();
    let again_sends: HashMap<_, _> = sends.clone();
    let walk = |sends: &HashMap<_, Vec<MsgEnd>>, mut recvs: HashMap<_, Vec<MsgEnd>>| {
        pair_messages(sends, &mut recvs)
            .into_iter()
            .map(|(k, s, r)| (*k, s.t, r.t))
            .collect::<Vec<_>>()
    };
    let first = walk(&sends, recvs.clone());
    let mut sorted = first.clone();
    sorted.sort();
    assert_eq!(first, sorted, "the pairs come in key order");
    assert_eq!(first.len(), 64);
    assert_eq!(first, walk(&again_sends, recvs));
}

#[test]
fn a_utilisation_row_adds_up_to_the_lane_s_time() {
    let lane = LaneUse {
        name: "worker 0".into(),
        busy_ns: 60,
        idle_ns: 35,
        sleep_ns: 30,
        span_ns: 100,
        ..LaneUse::default()
    };
    let s = Summary {
        locales: vec![(0, true, vec![lane])],
        ..Summary::default()
    }
    .to_string();
    // busy 60, idle awake 5, asleep 30, other 5.
    assert_eq!(rows(&s), [[60.0, 5.0, 30.0, 5.0]], "{s}");
    assert!(s.contains("a row adds up to 100%"), "{s}");
}
