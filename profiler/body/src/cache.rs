//! Hit curves for every cache size in one pass: Mattson stack simulation per set count, with set
//! sampling for the large caches.
//!
//! The paper's geometry (64-byte lines, 8-way below 1 MiB, 16-way from 1 MiB) gives, for each power-of-two
//! size, a set count `S = size / (64 · ways)`. For a fixed set count, one LRU stack per set answers every
//! associativity at once (Mattson's inclusion property holds within a set), so one structure per distinct
//! set count (19 of them for 64 B–256 MiB) yields the whole curve, including the set conflicts a fully
//! associative stack distance misses (a contiguous 4 KiB block fits an 8-way 4 KiB cache exactly, which a
//! random-mapping model of a fully associative distance would get wrong by tens of points).
//!
//! Cost control, exact where it is cheap and sampled where it is not:
//! - a re-access of the most recently used line is a hit in every cache and changes no LRU state, so it
//!   is counted and skipped (most instruction fetches and many data accesses);
//! - set counts up to 128 are simulated for every set; larger ones only for a hashed subset of sets
//!   (at least 128 sets), the classic set-sampling estimator, applied only to the accesses that miss
//!   the largest exact cache (64 KiB): by LRU inclusion those that hit there hit in every larger cache.
//!   The sampled sets are split in two halves by another hash bit and the difference of the halves'
//!   hit rates, scaled by the share of accesses they estimate, is reported as the error bound.

use std::collections::HashSet;

pub const LINE_SHIFT: u32 = 6;
/// Smallest and largest cache sizes of a curve.
pub const MIN_SIZE: u64 = 64;
pub const MAX_SIZE: u64 = 256 << 20;
const ASSOC_SWITCH: u64 = 1 << 20;
const FULL_SETS_UP_TO: u64 = 128;
/// The base: the largest fully simulated cache (128 sets, 8 ways = 64 KiB).
const BASE_SETS: u64 = FULL_SETS_UP_TO;
const BASE_WAYS: usize = 8;
/// Footprint estimate: lines whose hash falls below 1/64 are remembered.
const FOOTPRINT_SHIFT: u32 = 6;

/// Ways and sets of the paper's geometry for a cache of `size` bytes.
pub fn geometry(size: u64) -> (u64, u64) {
    let lines = (size >> LINE_SHIFT).max(1);
    let ways = if size < ASSOC_SWITCH { 8 } else { 16 };
    if lines <= ways {
        (lines, 1)
    } else {
        (ways, lines / ways)
    }
}

pub fn line_hash(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// LRU stacks of `depth` lines for each (sampled) set of one set count: the cache state only. What
/// the accesses did is counted apart, per accessor (`StackCounts`), so that threads sharing one
/// cache each get their own curve.
///
/// Sampling keeps one set out of every group of `2^rate_shift` consecutive sets, chosen by a hash of
/// the group number: the sampled sets are pseudo-random (no bias from strides or clustered data) and
/// the group number is a dense slot index, so no lookup table is needed on the hot path.
#[derive(Debug, Clone)]
struct SetStacks {
    sets: u64,
    depth: usize,
    rate_shift: u32,
    tags: Vec<u64>,
    sampled: bool,
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

impl SetStacks {
    fn new(sets: u64, depth: usize) -> SetStacks {
        let rate = (sets / FULL_SETS_UP_TO).clamp(1, 16);
        let rate_shift = rate.trailing_zeros();
        SetStacks {
            sets,
            depth,
            rate_shift,
            tags: vec![u64::MAX; (sets >> rate_shift) as usize * depth],
            sampled: rate > 1,
        }
    }

    /// The slot (group) of `line`'s set and its half, or `None` when the set is not sampled.
    #[inline]
    fn locate(&self, line: u64) -> Option<(u64, usize)> {
        let set = line & (self.sets - 1);
        let group = set >> self.rate_shift;
        let mixed = group.wrapping_mul(GOLDEN);
        if self.rate_shift > 0 {
            let pick = mixed >> (64 - self.rate_shift);
            if set & ((1 << self.rate_shift) - 1) != pick {
                return None;
            }
        }
        Some((group, ((mixed >> 32) & 1) as usize))
    }

    /// Updates the LRU state. Returns the half of the sampled sets `line`'s set is in and the stack
    /// position of a hit (`None` for a miss), or `None` when the set is not sampled.
    #[inline]
    fn access(&mut self, line: u64) -> Option<(usize, Option<usize>)> {
        let (group, half) = self.locate(line)?;
        let start = group as usize * self.depth;
        let stack = &mut self.tags[start..start + self.depth];
        // Small stacks: a plain scan and shift beat memmove calls.
        let mut p = 0;
        while p < stack.len() && stack[p] != line {
            p += 1;
        }
        let hit = p < stack.len();
        let mut i = if hit { p } else { stack.len() - 1 };
        while i > 0 {
            stack[i] = stack[i - 1];
            i -= 1;
        }
        stack[0] = line;
        Some((half, hit.then_some(p)))
    }

    /// Moves `line`, known to be at stack position `rank` of its set, to the front. Returns the
    /// half of the sampled sets its set is in, `None` when the set is not sampled.
    #[inline]
    fn touch_at(&mut self, line: u64, rank: usize) -> Option<usize> {
        let (group, half) = self.locate(line)?;
        if rank > 0 {
            let start = group as usize * self.depth;
            let stack = &mut self.tags[start..start + self.depth];
            debug_assert_eq!(stack[rank], line);
            let mut i = rank;
            while i > 0 {
                stack[i] = stack[i - 1];
                i -= 1;
            }
            stack[0] = line;
        }
        Some(half)
    }
}

/// One accessor's counts in one set-count structure.
#[derive(Debug, Clone)]
struct StackCounts {
    sets: u64,
    sampled: bool,
    /// Hits by stack position, for each half of the sampled sets.
    hits_at: [[u64; 16]; 2],
    accesses: [u64; 2],
    /// Hits at the top of their set found without touching the set (exact structures only).
    top_hits: u64,
}

impl StackCounts {
    fn count(&mut self, half: usize, pos: Option<usize>) {
        self.accesses[half] += 1;
        if let Some(p) = pos {
            self.hits_at[half][p] += 1;
        }
    }

    /// Hit rate of the non-repeat accesses for a cache with `ways` ways, and the half-difference.
    fn hit_rate(&self, ways: u64) -> Option<(f64, f64)> {
        let total = self.accesses[0] + self.accesses[1] + self.top_hits;
        if total == 0 {
            return None;
        }
        let hits = |h: usize| -> u64 { self.hits_at[h][..ways as usize].iter().sum() };
        let rate = (hits(0) + hits(1) + self.top_hits) as f64 / total as f64;
        let spread = if self.sampled && self.accesses[0] > 0 && self.accesses[1] > 0 {
            (hits(0) as f64 / self.accesses[0] as f64 - hits(1) as f64 / self.accesses[1] as f64)
                .abs()
        } else {
            0.0
        };
        Some((rate, spread))
    }

    fn absorb(&mut self, other: &StackCounts) {
        self.top_hits += other.top_hits;
        for h in 0..2 {
            self.accesses[h] += other.accesses[h];
            for p in 0..16 {
                self.hits_at[h][p] += other.hits_at[h][p];
            }
        }
    }
}

/// What one accessor's accesses did in a shared `CurveSim`: enough to give its hit curve.
#[derive(Debug, Clone)]
pub struct CurveCounts {
    repeats: u64,
    others: u64,
    /// Non-repeat accesses that hit in the base structure.
    base_hits: u64,
    stacks: Vec<StackCounts>,
}

impl CurveCounts {
    fn new(stacks: &[SetStacks]) -> CurveCounts {
        CurveCounts {
            repeats: 0,
            others: 0,
            base_hits: 0,
            stacks: stacks
                .iter()
                .map(|s| StackCounts {
                    sets: s.sets,
                    sampled: s.sampled,
                    hits_at: [[0; 16]; 2],
                    accesses: [0; 2],
                    top_hits: 0,
                })
                .collect(),
        }
    }

    fn reset(&mut self) {
        self.repeats = 0;
        self.others = 0;
        self.base_hits = 0;
        for s in &mut self.stacks {
            s.hits_at = [[0; 16]; 2];
            s.accesses = [0; 2];
            s.top_hits = 0;
        }
    }

    pub fn accesses(&self) -> u64 {
        self.repeats + self.others
    }

    /// Adds another accessor's counts (same geometry).
    pub fn absorb(&mut self, other: &CurveCounts) {
        self.repeats += other.repeats;
        self.others += other.others;
        self.base_hits += other.base_hits;
        for (a, b) in self.stacks.iter_mut().zip(&other.stacks) {
            a.absorb(b);
        }
    }

    /// Hit rate at `size` bytes and its sampling error bound; `None` without accesses.
    pub fn hit_rate(&self, size: u64) -> Option<(f64, f64)> {
        let total = self.accesses();
        if total == 0 {
            return None;
        }
        let (ways, sets) = geometry(size);
        let s = self.stacks.iter().find(|s| s.sets == sets)?;
        if !s.sampled {
            let (rate, _) = s.hit_rate(ways).unwrap_or((0.0, 0.0));
            let hits = self.repeats as f64 + self.others as f64 * rate;
            return Some((hits / total as f64, 0.0));
        }
        // Sampled sets counted only the base's misses: hit rate = base hits + misses × their rate.
        let misses = self.others.saturating_sub(self.base_hits) as f64;
        let (miss_rate, spread) = s.hit_rate(ways).unwrap_or((0.0, 0.0));
        let hits = self.repeats as f64 + self.base_hits as f64 + misses * miss_rate;
        Some((hits / total as f64, spread * misses / total as f64))
    }

    /// Curve points from 64 B to `footprint_bytes` (rounded up to a power of two, at most 256 MiB).
    pub fn curve(&self, footprint_bytes: u64) -> (Vec<(u64, f64)>, f64) {
        let top = footprint_bytes
            .max(MIN_SIZE)
            .next_power_of_two()
            .min(MAX_SIZE);
        let mut points = Vec::new();
        let mut err: f64 = 0.0;
        let mut size = MIN_SIZE;
        while size <= top {
            if let Some((h, e)) = self.hit_rate(size) {
                points.push((size, h));
                err = err.max(e);
            }
            size *= 2;
        }
        (points, err)
    }
}

/// One access stream (instruction or data side) simulated for every cache size at once.
///
/// The cache is shared: every accessor (a thread of the process) moves the same LRU state, and each
/// access is counted for the accessor that made it (`set_accessor`). A cluster's curve is then the
/// hit rate of its own threads' accesses in the cache they share with the rest of the process, not
/// the process's mix: memcached's timer thread and its request workers run different code over
/// different data, and one process-wide curve gave both the same classes.
#[derive(Debug, Clone)]
pub struct CurveSim {
    stacks: Vec<SetStacks>,
    last_line: u64,
    /// Counts per accessor; `accessor` indexes it.
    counts: Vec<CurveCounts>,
    accessor: usize,
    footprint_sample: HashSet<u64>,
}

impl Default for CurveSim {
    fn default() -> Self {
        CurveSim::new()
    }
}

impl CurveSim {
    pub fn new() -> CurveSim {
        // One structure per distinct set count, deep enough for the most ways any size needs of it
        // (512 KiB 8-way and 1 MiB 16-way share 1024 sets).
        let mut plan: Vec<(u64, usize)> = Vec::new();
        let mut size = MIN_SIZE;
        while size <= MAX_SIZE {
            let (ways, sets) = geometry(size);
            let depth = ways.max(8) as usize;
            match plan.iter_mut().find(|(s, _)| *s == sets) {
                Some(p) => p.1 = p.1.max(depth),
                None => plan.push((sets, depth)),
            }
            size *= 2;
        }
        let stacks: Vec<SetStacks> = plan
            .into_iter()
            .map(|(s, d)| SetStacks::new(s, d))
            .collect();
        let counts = vec![CurveCounts::new(&stacks)];
        CurveSim {
            stacks,
            last_line: u64::MAX,
            counts,
            accessor: 0,
            footprint_sample: HashSet::new(),
        }
    }

    /// Counts the accesses that follow for accessor `k` (a dense index, e.g. a thread's).
    #[inline]
    pub fn set_accessor(&mut self, k: usize) {
        if k >= self.counts.len() {
            let fresh = CurveCounts::new(&self.stacks);
            self.counts.resize(k + 1, fresh);
        }
        self.accessor = k;
    }

    /// One access to the cache line `line` (address >> 6).
    #[inline]
    pub fn access(&mut self, line: u64) {
        let c = &mut self.counts[self.accessor];
        if line == self.last_line {
            c.repeats += 1;
            return;
        }
        self.last_line = line;
        c.others += 1;
        if line_hash(line) >> (64 - FOOTPRINT_SHIFT) == 0 {
            self.footprint_sample.insert(line);
        }
        // Fast path: the line is among the 8 most recent distinct lines (the stack of the one-set
        // structure). Then its position in every set of every structure is known without searching:
        // the lines more recent than it that share its set. Alternating streams (memcpy's source and
        // destination, stack and heap) take this path.
        if let Some(p) = self.stacks[0].tags.iter().position(|&t| t == line) {
            // rank_at_least[k]: lines more recent than this one that share its set when there are
            // 2^k sets (their address differs from it only above bit k).
            let mut rank_at_least = [0u8; 65];
            for &t in &self.stacks[0].tags[..p] {
                rank_at_least[(t ^ line).trailing_zeros() as usize] += 1;
            }
            for k in (0..64).rev() {
                rank_at_least[k] += rank_at_least[k + 1];
            }
            for (s, sc) in self.stacks.iter_mut().zip(&mut c.stacks) {
                let rank = rank_at_least[s.sets.trailing_zeros() as usize] as usize;
                if rank == 0 {
                    // Already on top of its set: no state change. Exact structures count the hit;
                    // sampled ones do not (a hit in the base).
                    if !s.sampled {
                        sc.top_hits += 1;
                    }
                    continue;
                }
                if let Some(half) = s.touch_at(line, rank) {
                    if !s.sampled {
                        sc.count(half, Some(rank));
                    }
                }
            }
            c.base_hits += 1;
            return;
        }
        // Structures are in increasing set count: the fully simulated ones come first. A hit in the
        // largest of them (the base, 8-way 64 KiB) is a hit in every larger cache (LRU inclusion holds
        // under set refinement and added ways), so sampled structures only estimate the hit rate of
        // the base's misses; hot lines outside the sampled sets then cannot bias the larger sizes.
        let mut base_hit = false;
        for (s, sc) in self.stacks.iter_mut().zip(&mut c.stacks) {
            let found = s.access(line);
            if !s.sampled {
                if let Some((half, pos)) = found {
                    sc.count(half, pos);
                }
                if s.sets == BASE_SETS {
                    base_hit = matches!(found, Some((_, Some(p))) if p < BASE_WAYS);
                }
            } else if !base_hit {
                if let Some((half, pos)) = found {
                    sc.count(half, pos);
                }
            }
        }
        if base_hit {
            c.base_hits += 1;
        }
    }

    /// `n` more accesses to the line accessed last (the rest of an instruction run within one line).
    #[inline]
    pub fn repeat(&mut self, n: u64) {
        self.counts[self.accessor].repeats += n;
    }

    /// Accesses counted, for every accessor.
    pub fn accesses(&self) -> u64 {
        self.counts.iter().map(CurveCounts::accesses).sum()
    }

    /// Estimated distinct bytes touched (in whole lines) since the simulation started.
    pub fn footprint_bytes(&self) -> u64 {
        (self.footprint_sample.len() as u64) << (FOOTPRINT_SHIFT + LINE_SHIFT)
    }

    /// Starts a measurement window: counts go to zero, cache contents stay (warm).
    pub fn reset_counts(&mut self) {
        for c in &mut self.counts {
            c.reset();
        }
    }

    /// The counts of every accessor together.
    pub fn total(&self) -> CurveCounts {
        let mut all = CurveCounts::new(&self.stacks);
        for c in &self.counts {
            all.absorb(c);
        }
        all
    }

    /// The counts of accessor `k` (empty when it made no access).
    pub fn counts_of(&self, k: usize) -> CurveCounts {
        self.counts
            .get(k)
            .cloned()
            .unwrap_or_else(|| CurveCounts::new(&self.stacks))
    }

    /// Counts with nothing in them, of this simulation's geometry (to absorb others into).
    pub fn empty_counts(&self) -> CurveCounts {
        CurveCounts::new(&self.stacks)
    }

    /// Hit rate of every accessor's accesses at `size` bytes and its sampling error bound.
    pub fn hit_rate(&self, size: u64) -> Option<(f64, f64)> {
        self.total().hit_rate(size)
    }

    /// The curve of every accessor's accesses, from 64 B to the footprint.
    pub fn curve(&self) -> (Vec<(u64, f64)>, f64) {
        self.total().curve(self.footprint_bytes())
    }

    /// Adds another simulation's counts (same geometry), accessor by accessor, and its footprint;
    /// used to merge per-stream results.
    pub fn absorb_counts(&mut self, other: &CurveSim) {
        if let Some(last) = other.counts.len().checked_sub(1) {
            if last >= self.counts.len() {
                let fresh = CurveCounts::new(&self.stacks);
                self.counts.resize(last + 1, fresh);
            }
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            a.absorb(b);
        }
        self.footprint_sample
            .extend(other.footprint_sample.iter().copied());
    }

    /// Estimated distinct bytes several simulations touched together (a curve over processes).
    pub fn footprint_bytes_of(sims: &[&CurveSim]) -> u64 {
        let mut lines: HashSet<u64> = HashSet::new();
        for s in sims {
            lines.extend(s.footprint_sample.iter().copied());
        }
        (lines.len() as u64) << (FOOTPRINT_SHIFT + LINE_SHIFT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Direct simulation of one set-associative LRU cache, the reference for the stack structures.
    fn reference_hit_rate(lines: &[u64], size: u64) -> f64 {
        let (ways, sets) = geometry(size);
        let mut cache: Vec<Vec<u64>> = vec![Vec::new(); sets as usize];
        let mut hits = 0;
        for &l in lines {
            let set = &mut cache[(l % sets) as usize];
            if let Some(p) = set.iter().position(|&t| t == l) {
                hits += 1;
                set.remove(p);
            } else if set.len() == ways as usize {
                set.pop();
            }
            set.insert(0, l);
        }
        hits as f64 / lines.len() as f64
    }

    fn lcg_lines(n: usize, span: u64, seed: u64) -> Vec<u64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 33) % span
            })
            .collect()
    }

    #[test]
    fn geometry_follows_the_paper() {
        assert_eq!(geometry(64), (1, 1));
        assert_eq!(geometry(512), (8, 1));
        assert_eq!(geometry(4096), (8, 8));
        assert_eq!(geometry(512 << 10), (8, 1024));
        assert_eq!(geometry(1 << 20), (16, 1024));
        assert_eq!(geometry(256 << 20), (16, 262144));
    }

    #[test]
    fn exact_sizes_equal_a_direct_simulation() {
        // Random lines over 24 KiB plus a sequential sweep: conflicts and capacity misses both occur.
        let mut lines = lcg_lines(200_000, 384, 7);
        lines.extend((0..50_000u64).map(|i| i % 100));
        let mut sim = CurveSim::new();
        for &l in &lines {
            sim.access(l);
        }
        for size in [64, 128, 512, 1024, 4096, 8192, 16384, 32768] {
            let (h, e) = sim.hit_rate(size).unwrap();
            let r = reference_hit_rate(&lines, size);
            assert!((h - r).abs() < 1e-12, "size {size}: {h} vs {r}");
            assert_eq!(e, 0.0);
        }
    }

    #[test]
    fn sampled_sizes_stay_close_to_a_direct_simulation() {
        let lines = lcg_lines(400_000, 40_000, 11);
        let mut sim = CurveSim::new();
        for &l in &lines {
            sim.access(l);
        }
        for size in [256 << 10, 1 << 20, 2 << 20] {
            let (h, _e) = sim.hit_rate(size).unwrap();
            let r = reference_hit_rate(&lines, size);
            assert!((h - r).abs() < 0.02, "size {size}: {h} vs {r}");
        }
    }

    #[test]
    fn contiguous_block_that_fits_hits_in_a_set_associative_cache() {
        // 4 KiB swept repeatedly fits an 8-way 4 KiB cache exactly.
        let mut sim = CurveSim::new();
        for _ in 0..100 {
            for l in 0..64u64 {
                sim.access(l);
            }
        }
        let (h, _) = sim.hit_rate(4096).unwrap();
        assert!(h > 0.98, "{h}");
        let (h, _) = sim.hit_rate(2048).unwrap();
        assert!(h < 0.01, "{h}");
    }

    #[test]
    fn each_accessor_gets_its_own_curve_in_the_shared_cache() {
        // Accessor 0 loops over 16 lines (1 KiB); accessor 1 streams through new lines, one after
        // each of accessor 0's. Between two touches of one of accessor 0's lines come 16 of its own
        // and 16 streamed lines: its accesses hit a shared 4 KiB cache, not a 1 KiB one (which they
        // would alone). The streamed lines never come back and miss everywhere.
        let mut sim = CurveSim::new();
        for i in 0..20_000u64 {
            sim.set_accessor(0);
            sim.access(i % 16);
            sim.set_accessor(1);
            sim.access(1_000_000 + i);
        }
        let looped = sim.counts_of(0);
        let streamed = sim.counts_of(1);
        assert_eq!(looped.accesses(), 20_000);
        assert_eq!(streamed.accesses(), 20_000);
        assert!(looped.hit_rate(4096).unwrap().0 > 0.99);
        assert!(looped.hit_rate(1024).unwrap().0 < 0.01);
        assert!(streamed.hit_rate(1 << 20).unwrap().0 < 0.01);
        // Together: the mean of the two.
        let (all, _) = sim.hit_rate(4096).unwrap();
        assert!((all - 0.5).abs() < 0.01, "{all}");
        // An accessor that made no access has no curve.
        assert!(sim.counts_of(7).hit_rate(4096).is_none());
    }

    #[test]
    fn repeats_are_hits_and_reset_keeps_contents() {
        let mut sim = CurveSim::new();
        sim.access(1);
        sim.repeat(9);
        assert_eq!(sim.accesses(), 10);
        assert!((sim.hit_rate(64).unwrap().0 - 0.9).abs() < 1e-12);
        sim.reset_counts();
        sim.access(2);
        sim.access(1);
        // Line 1 is still cached in a 2-line cache after the reset.
        assert!((sim.hit_rate(128).unwrap().0 - 0.5).abs() < 1e-12);
    }
}
