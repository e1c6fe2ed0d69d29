//! Data working-set classes over the recorded request bodies (`profiles/*.json`, rendered whole so
//! that the regions are the process-wide fit's): the accesses each class gets are the profile's
//! shares (equation 1), whatever the seed.

mod common;

use ditto_generator::knobs::Knobs;
use ditto_generator::synth::Stats;

/// The committed profiles' request bodies, by profile name and cluster.
const REQUEST_BODIES: [(&str, &str); 4] = [
    ("memcached", "c1"),
    ("nginx", "c1"),
    ("pix-baseline", "c1"),
    ("pix-optimized", "c1"),
];

/// The statistics of cluster `cluster`'s body in the clone rendered from `profiles/NAME.json`.
fn request_body_stats(name: &str, cluster: &str, seed: u64) -> Stats {
    request_body_stats_with(name, cluster, seed, &Knobs::default())
}

/// [`request_body_stats`] of the clone generated with `knobs`.
fn request_body_stats_with(name: &str, cluster: &str, seed: u64, knobs: &Knobs) -> Stats {
    let clone = common::render(&common::example_path(name), name, seed, knobs);
    let symbol = format!("ditto_body_{cluster}");
    clone
        .bodies
        .into_iter()
        .find(|b| b.body_symbol == symbol)
        .unwrap_or_else(|| panic!("{name} has no body {symbol}"))
        .stats
}

/// Total variation between a distribution's targets and what was realised (both normalised).
fn total_variation(pairs: &[(f64, f64)]) -> f64 {
    let t: f64 = pairs.iter().map(|p| p.0).sum();
    let r: f64 = pairs.iter().map(|p| p.1).sum();
    pairs
        .iter()
        .map(|(a, b)| (a / t.max(1e-12) - b / r.max(1e-12)).abs())
        .sum::<f64>()
        / 2.0
}

/// The request bodies' small classes (128 B – 2 KiB, 2–4-line regions) used to take the chunks'
/// three windows, and what found none went to the 64-byte class: nginx's, memcached's and Pix's
/// request bodies realised 53–67 % of their accesses there against 36–43 %, and every other class
/// at about 70 % of its share. nginx's also chased pointers through that class on 52 % of its loads,
/// past the class's whole share.
#[test]
fn every_request_body_realises_its_data_classes_shares() {
    for (name, cluster) in REQUEST_BODIES {
        for seed in 1..=3 {
            let st = request_body_stats(name, cluster, seed);
            let pairs: Vec<(f64, f64)> = st.data_classes.iter().map(|c| (c.1, c.2)).collect();
            let tv = total_variation(&pairs);
            let (smallest_target, smallest) = pairs[0];
            assert!(
                tv <= 0.05,
                "{name} seed {seed}: data classes {:.1} % off",
                100.0 * tv
            );
            assert!(
                smallest <= smallest_target + 0.02,
                "{name} seed {seed}: 64-byte class {:.1} % against {:.1} %",
                100.0 * smallest,
                100.0 * smallest_target
            );
        }
    }
}

/// The classes past the platform's L2 (1 MiB) are the ones whose accesses reach the last level. A
/// body's rare classes drawn by chunks that loop used to overshoot: memcached's timer body realised
/// 1.5 % of its accesses in the 32 MiB class against 0.2 %, and at a thousand calls a second it
/// made about six times the request workers' accesses past the L2.
#[test]
fn every_body_keeps_its_accesses_past_the_l2_near_their_share() {
    const PAST_L2: u64 = 1 << 20;
    for name in ["memcached", "nginx", "pix-baseline", "pix-optimized"] {
        for seed in 1..=3 {
            let clone = common::render(&common::example_path(name), name, seed, &Knobs::default());
            for b in &clone.bodies {
                let (target, realised) = b
                    .stats
                    .data_classes
                    .iter()
                    .filter(|c| c.0 >= PAST_L2)
                    .fold((0.0, 0.0), |(t, r), c| (t + c.1, r + c.2));
                assert!(
                    realised <= 1.5 * target + 0.001,
                    "{name} seed {seed} {}: {:.2} % of accesses past the L2 against {:.2} %",
                    b.body_symbol,
                    100.0 * realised,
                    100.0 * target
                );
            }
        }
    }
}

/// The strided share is realised among the accesses it steers: the one-line class's fixed offsets
/// and the windows (where the one-line class leaves room for it). Counted with the 2–4-line regions' fixed offsets too, it was used up before any
/// window opened (Pix baseline's request body: 75 % strided against 47 %), every window of a larger
/// class walked irregularly, and the clone's L1d missed on 0.07 % of accesses against 1.80 %.
#[test]
fn every_request_body_realises_its_strided_share() {
    for (name, cluster) in REQUEST_BODIES {
        let st = request_body_stats(name, cluster, 1);
        let (target, realised) = st.regular_fraction;
        // Where the one-line class alone holds more than the strided share (memcached's workers:
        // 43 % of accesses against 32 % strided), the share cannot be met; what matters there is
        // that the windows went irregular, which the L1d tuning covers.
        let one_line = st.data_classes.first().map_or(0.0, |c| c.2);
        if one_line >= target {
            continue;
        }
        assert!(
            (realised - target).abs() <= 0.05,
            "{name}: strided {:.1} % against {:.1} %",
            100.0 * realised,
            100.0 * target
        );
    }
}

/// An irregular window walks its region by rQ, which grows by rP at the end of every chunk that
/// uses it. rP only moved in chunks with a regular window, so in a body without one it stayed at
/// its initial 0, rQ with it, and every irregular window sat at the start of its region:
/// memcached's request workers hit the 1 MiB L2 on 99.9 % of their accesses to their 4 MiB region
/// (cachegrind, per line of `body.S`), where their class misses a 4 MiB cache.
#[test]
fn every_step_of_the_irregular_walk_moves_it() {
    for name in ["memcached", "nginx", "pix-baseline", "pix-optimized"] {
        let clone = common::render(&common::example_path(name), name, 1, &Knobs::default());
        for b in &clone.bodies {
            let lines: Vec<&str> = b.text.lines().map(str::trim).collect();
            for (i, l) in lines.iter().enumerate() {
                if *l == "add r10, r11" {
                    assert!(
                        i > 0 && lines[i - 1] == "add r11, 64",
                        "{name} {}: rQ steps by an rP that does not move (line {i})",
                        b.body_symbol
                    );
                }
            }
        }
    }
}

/// A service's first touches are the stores that fill memory it has just allocated (every LLC miss
/// of memcached's and Pix baseline's originals is a write under cachegrind): the first-touch class
/// goes to plain stores only, and still gets its share (the test above).
#[test]
fn the_first_touch_class_is_reached_by_stores_only() {
    let mut bodies_with_first_touches = 0;
    for (name, cluster) in REQUEST_BODIES {
        for seed in 1..=2 {
            let st = request_body_stats(name, cluster, seed);
            if let Some(share) = st.first_touch_store_share {
                bodies_with_first_touches += 1;
                assert_eq!(share, 1.0, "{name} seed {seed}: first touches by stores");
            }
        }
    }
    // nginx's and both Pix request bodies have first touches in their profiles (memcached's
    // misses past its footprint are fitted to its largest class instead).
    assert!(
        bodies_with_first_touches >= 6,
        "{bodies_with_first_touches}"
    );
}

/// The runtime warms every class region of two lines or more at start-up (runtime/src/warm.c), at
/// the accesses per call the plan gives it: config.c lists each such region of the request bodies,
/// inside the private buffer and apart from the others, and the regions' private and shared
/// accesses are in proportion to their classes' target shares.
#[test]
fn config_lists_every_region_the_runtime_warms_with_its_accesses_per_call() {
    for (name, cluster) in REQUEST_BODIES {
        let clone = common::render(&common::example_path(name), name, 1, &Knobs::default());
        let symbol = format!("ditto_body_{cluster}");
        let body = clone
            .bodies
            .iter()
            .find(|b| b.body_symbol == symbol)
            .unwrap_or_else(|| panic!("{name} has no body {symbol}"));
        let st = &body.stats;
        // Regions of two lines or more with a share: what the runtime should warm.
        let expected: Vec<(u64, f64)> = st
            .data_classes
            .iter()
            .filter(|c| c.3 >= 128 && c.1 > 0.0)
            .map(|c| (c.3, c.1))
            .collect();
        let warmed: Vec<u64> = body.warm.iter().map(|w| w.bytes).collect();
        assert!(
            expected.len() >= 3,
            "{name}: only {} regions of two lines or more",
            expected.len()
        );
        // The first-touch stream (never reused) is the one region of two lines or more left out.
        assert!(
            warmed.len() + 1 >= expected.len() && warmed.len() <= expected.len(),
            "{name}: {} regions warmed of {} with accesses",
            warmed.len(),
            expected.len()
        );
        let mut spans: Vec<(u64, u64)> = body
            .warm
            .iter()
            .map(|w| (w.offset, w.offset + w.bytes))
            .collect();
        spans.sort();
        for pair in spans.windows(2) {
            assert!(
                pair[0].1 <= pair[1].0,
                "{name}: warmed regions {pair:?} overlap"
            );
        }
        let top = spans.last().map(|s| s.1).unwrap_or(0);
        assert!(
            top <= body.priv_bytes,
            "{name}: a warmed region ends at {top}, past the {}-byte private buffer",
            body.priv_bytes
        );
        // Accesses per call of each warmed region, against its class's target share (both in class
        // order; the first-touch stream is skipped).
        let mut pairs: Vec<(f64, f64)> = Vec::new();
        let mut warm = body.warm.iter().peekable();
        for &(bytes, share) in &expected {
            if let Some(w) = warm.next_if(|w| w.bytes == bytes) {
                pairs.push((w.private_per_call + w.shared_per_call, share));
            }
        }
        assert_eq!(
            pairs.len(),
            body.warm.len(),
            "{name}: warmed regions out of class order"
        );
        let per_share = pairs[0].0 / pairs[0].1;
        for (i, &(per_call, share)) in pairs.iter().enumerate() {
            assert!(
                (per_call / per_share - share).abs() <= 1e-9 + 1e-6 * share,
                "{name}: warmed region {i} at share {:.6}, its class's target {share:.6}",
                per_call / per_share
            );
        }
        let config = String::from_utf8_lossy(&clone.files["src/config.c"]).to_string();
        assert!(
            config.contains(&format!(
                ".warm = warm_{cluster}, .n_warm = {}",
                body.warm.len()
            )),
            "{name}: config.c does not list {cluster}'s {} warmed regions",
            body.warm.len()
        );
    }
}

/// The runtime writes a first-touch stream's region before the rest of the buffers, so that it
/// starts out of every cache (runtime/src/main.c): config.c gives the region of each body that has a
/// stream (nginx's and the Pix bodies'; memcached's misses past its footprint are fitted to its
/// largest class), inside the private buffer and apart from every warmed region, and no region for
/// a body without one.
#[test]
fn config_gives_the_first_touch_streams_region_for_the_runtime_to_write_first() {
    for (name, cluster) in REQUEST_BODIES {
        let clone = common::render(&common::example_path(name), name, 1, &Knobs::default());
        let symbol = format!("ditto_body_{cluster}");
        let body = clone
            .bodies
            .iter()
            .find(|b| b.body_symbol == symbol)
            .unwrap_or_else(|| panic!("{name} has no body {symbol}"));
        let config = String::from_utf8_lossy(&clone.files["src/config.c"]).to_string();
        let line = config
            .lines()
            .find(|l| l.contains(&format!(".body = {symbol},")))
            .unwrap_or_else(|| panic!("{name}: config.c has no cluster entry for {symbol}"));
        let has_stream = body.stats.first_touch_store_share.is_some();
        assert_eq!(
            has_stream,
            name != "memcached",
            "{name}: a first-touch stream where the profile has first touches"
        );
        match &body.first_touch {
            Some(stream) => {
                assert!(has_stream, "{name}: a stream's region without a stream");
                assert!(
                    stream.start < stream.end && stream.end <= body.priv_bytes,
                    "{name}: stream region {stream:?} outside the {}-byte private buffer",
                    body.priv_bytes
                );
                for w in &body.warm {
                    assert!(
                        w.offset + w.bytes <= stream.start || w.offset >= stream.end,
                        "{name}: warmed region at {} ({} bytes) inside the stream's {stream:?}",
                        w.offset,
                        w.bytes
                    );
                }
                let fields = format!(
                    ".first_touch_lo = {}, .first_touch_bytes = {}",
                    stream.start,
                    stream.end - stream.start
                );
                assert!(line.contains(&fields), "{name}: {line} lacks {fields}");
            }
            None => {
                assert!(!has_stream, "{name}: a stream without its region");
                assert!(
                    !line.contains(".first_touch_"),
                    "{name}: {line} gives a region without a stream"
                );
            }
        }
    }
}

/// `data_working_set.tail_share_scale` multiplies the accesses that miss a cache of
/// `tail_from_bytes` (the L2's size): memcached's request body's classes past 1 MiB get its factor
/// of their shares, the classes up to the L1d's size keep theirs, and the classes past 1 MiB keep
/// their proportions (so the last level's misses per L2 miss stay).
#[test]
fn the_tail_share_multiplies_the_accesses_past_the_second_level_alone() {
    let base = request_body_stats("memcached", "c1", 1);
    let past = |st: &Stats, from: u64| -> Vec<f64> {
        st.data_classes
            .iter()
            .filter(|c| c.0 > from)
            .map(|c| c.1)
            .collect()
    };
    let within = |st: &Stats, to: u64| -> f64 {
        st.data_classes
            .iter()
            .filter(|c| c.0 <= to)
            .map(|c| c.1)
            .sum()
    };
    let far: f64 = past(&base, 1 << 20).iter().sum();
    assert!(far > 0.001, "memcached's body misses 1 MiB on {far}");
    for factor in [0.5, 1.6, 3.0] {
        let mut knobs = Knobs::default();
        knobs.data_working_set.tail_share_scale = factor;
        let st = &request_body_stats_with("memcached", "c1", 1, &knobs);
        let scaled: Vec<f64> = past(st, 1 << 20);
        let total: f64 = scaled.iter().sum();
        assert!(
            (total - factor * far).abs() < 1e-9,
            "×{factor}: {total:.6} of the accesses past 1 MiB, expected {:.6}",
            factor * far
        );
        for (a, b) in scaled.iter().zip(past(&base, 1 << 20)) {
            assert!(
                (a / total - b / far).abs() < 1e-9,
                "×{factor}: the classes past 1 MiB changed their proportions"
            );
        }
        assert!(
            (within(st, 32768) - within(&base, 32768)).abs() < 1e-9,
            "×{factor}: the classes within the L1d's size moved"
        );
    }
}

/// The top share moves the share of memcached's largest reuse class (64 MiB) to its reuses within
/// 2 MiB, and back, while the accesses past 1 MiB (the L2's misses) and every class between keep
/// their shares.
#[test]
fn the_top_share_moves_memcacheds_largest_reuses_to_the_second_levels_misses_and_back() {
    let base = request_body_stats("memcached", "c1", 1);
    let share_of = |st: &Stats, size: u64| -> f64 {
        st.data_classes
            .iter()
            .filter(|c| c.0 == size)
            .map(|c| c.1)
            .sum()
    };
    let past = |st: &Stats| -> f64 {
        st.data_classes
            .iter()
            .filter(|c| c.0 > 1 << 20)
            .map(|c| c.1)
            .sum()
    };
    let top = share_of(&base, 64 << 20);
    assert!(top > 0.001, "memcached's body reuses 64 MiB on {top}");
    for factor in [0.4, 1.5] {
        let mut knobs = Knobs::default();
        knobs.data_working_set.top_share_scale = factor;
        let st = &request_body_stats_with("memcached", "c1", 1, &knobs);
        let got = share_of(st, 64 << 20);
        assert!(
            (got - factor * top).abs() < 1e-9,
            "×{factor}: {got:.6} of the accesses in the 64 MiB class, expected {:.6}",
            factor * top
        );
        assert!(
            (past(st) - past(&base)).abs() < 1e-9,
            "×{factor}: the accesses past 1 MiB moved"
        );
        let moved = (share_of(st, 2 << 20) - share_of(&base, 2 << 20)).abs()
            + (share_of(st, 16 << 20) - share_of(&base, 16 << 20)).abs()
            + (share_of(st, 32 << 20) - share_of(&base, 32 << 20)).abs();
        assert!(
            (moved - (factor - 1.0).abs() * top).abs() < 1e-9,
            "×{factor}: the difference came from or went elsewhere than the reuses past 1 MiB"
        );
    }
}

/// The first-touch scale acts on the Pix bodies, whose curves end below 1 at 2-4 MiB, and on
/// nginx's (0.0013 % of its worker's accesses missing at 512 KiB), and has nothing to act on in
/// memcached's, whose curves reach 1 at 64 MiB, past half the buffer.
#[test]
fn the_pix_and_nginx_bodies_have_a_first_touch_stream_and_memcached_none() {
    let has = |name: &str| {
        let profile = ditto_profile::Profile::load(&common::example_path(name)).expect("profile");
        ditto_generator::has_first_touch_stream(&profile, &Knobs::default())
    };
    assert!(has("pix-baseline") && has("pix-optimized") && has("nginx"));
    assert!(!has("memcached"));
}

/// `data_working_set.far_share_scale` multiplies the accesses that miss a cache of
/// `far_from_bytes` (the L1d's size), not of `mid_from_bytes`, which the tuner moves to twice that
/// size where the mid leads the second level: Pix optimized's request body, with the mid from
/// 64 KiB, gets the factor on its classes past 32 KiB, and those past 1 MiB keep their share of
/// them (so the L2's misses per L1d miss stay).
#[test]
fn the_far_share_multiplies_the_accesses_past_its_own_size_whatever_the_mids_start() {
    let past = |st: &Stats, from: u64| -> f64 {
        st.data_classes
            .iter()
            .filter(|c| c.0 > from)
            .map(|c| c.1)
            .sum()
    };
    let stats = |far_share: f64| {
        let mut knobs = Knobs::default();
        knobs.data_working_set.mid_from_bytes = 65536;
        knobs.data_working_set.far_share_scale = far_share;
        let clone = common::render(
            &common::example_path("pix-optimized"),
            "pix-optimized",
            1,
            &knobs,
        );
        clone
            .bodies
            .into_iter()
            .find(|b| b.body_symbol == "ditto_body_c1")
            .expect("Pix optimized's request body")
            .stats
    };
    let base = stats(1.0);
    let (l1d, l2) = (past(&base, 32768), past(&base, 1 << 20));
    assert!(l1d > 0.01, "Pix optimized's body misses 32 KiB on {l1d}");
    for factor in [0.7, 1.3] {
        let st = stats(factor);
        assert!(
            (past(&st, 32768) - factor * l1d).abs() < 1e-9,
            "×{factor}: {:.6} of the accesses past 32 KiB, expected {:.6}",
            past(&st, 32768),
            factor * l1d
        );
        assert!(
            (past(&st, 1 << 20) / past(&st, 32768) - l2 / l1d).abs() < 1e-9,
            "×{factor}: the accesses past 1 MiB changed their share of those past 32 KiB"
        );
    }
}

/// The classes past the second level (the first-touch stream, and the reuses the second level
/// misses) each keep the plan's private / shared split, whatever the seed: split by the body's
/// total alone, their few heavy sites went wherever the body was short when they were drawn, and
/// Pix optimized's first-touch stream ran 27, 54 and 17 % shared with seeds 1-3, moving the last
/// level's misses with the draw (the private stream's accesses hit the LLC more often). The body's
/// total keeps the plan's share too: the smaller classes make up the difference.
#[test]
fn the_classes_past_the_second_level_keep_the_plans_shared_share_at_every_seed() {
    let mut with_past_tail = 0;
    for (name, cluster) in REQUEST_BODIES {
        for seed in 1..=4 {
            let st = request_body_stats(name, cluster, seed);
            let (target, realised) = st.shared_fraction;
            assert!(
                (realised - target).abs() <= 0.01,
                "{name} seed {seed}: body {realised} shared against {target}"
            );
            if let Some(past) = st.shared_fraction_past_tail {
                with_past_tail += 1;
                assert!(
                    (past - target).abs() <= 0.05,
                    "{name} seed {seed}: past the second level {past} shared against {target}"
                );
            }
        }
    }
    // Both Pix bodies and nginx's have first-touch streams, memcached's reuses past 1 MiB.
    assert!(with_past_tail >= 12, "{with_past_tail}");
}
