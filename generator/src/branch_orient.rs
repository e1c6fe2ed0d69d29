//! The direction of a body's direction-free branches, chosen against the predictor's counter tables.
//!
//! A "never" branch is a `jnz` on a counter bit that keeps its value for a whole run: bit 31 (set,
//! always taken) or bit 30 (clear, never). The composer draws which, so that the never bin's
//! majority-taken share meets the profile's. Predictors index their counters by the branch
//! address's low bits (cachegrind: 7 address bits under 7 bits of global history), and two branches
//! of opposite majorities on the same low bits, run under the same history, overwrite each other's
//! counter: both mispredict where neither would alone. In memcached's worker body a never branch run
//! once a call sat 256 bytes after a loop back-edge run 18 times a call (taken 94 %); the pair
//! mispredicted about 1.9 times a request between them, of the clone's 15.3 (memcached: 9.8).
//! Which branches meet this way is an accident of the layout and moved with the seed.
//!
//! Once the body is laid out, each free branch takes the majority direction of the other branches on
//! its residue (their runs per call, signed by their majorities), the most run first. Then the
//! flips that oppose the fewest runs per run they restore bring back the never bin's majority-taken
//! share (the profile's, which the round trip checks): on a free residue at no cost.
//!
//! The trade-off: residues only, not histories. Two branches on one residue meet only under the same
//! history, which the generator does not simulate; agreeing where they would not meet costs nothing
//! but the restoring flips. The residue is the address modulo 2^`ADDRESS_BITS`, the fewest bits a
//! predictor of the platforms here indexes by: branches that agree on them agree on any wider index.
//! Branches in other clusters, the runtime and libraries are not seen (their addresses are fixed only
//! at link time).

/// Low address bits the predictor's counters are indexed by (cachegrind's conditional predictor).
pub const ADDRESS_BITS: u32 = 7;

/// One conditional branch of a laid-out body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Site {
    /// The branch's offset from a boundary aligned to at least 2^`ADDRESS_BITS` bytes.
    pub offset: u64,
    /// Executions per call.
    pub runs: f64,
    /// Share of its executions the predictor sees taken (for a free branch: as drawn, 0 or 1).
    /// Cachegrind reads a conditional jump to the next instruction, as pattern branches are, by
    /// its condition's positive form inverted, `jz` like `jnz` (`synth::never_branch`).
    pub taken: f64,
    /// Whether either direction keeps its bins (a "never" branch).
    pub free: bool,
}

impl Site {
    fn residue(&self) -> usize {
        (self.offset & ((1 << ADDRESS_BITS) - 1)) as usize
    }

    /// Its pull on a counter: runs per call, positive when taken in the majority.
    fn pull(&self, taken: bool) -> f64 {
        if taken {
            self.runs
        } else {
            -self.runs
        }
    }
}

/// What `orient` did: the direction of every site (taken or not in the majority) and the counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Orientation {
    /// Per site: taken in the majority (a free site's chosen direction).
    pub taken: Vec<bool>,
    /// Free sites turned to agree with the others on their residue.
    pub agreed: usize,
    /// Free sites turned back to restore the majority-taken runs.
    pub restored: usize,
    /// Runs per call of the free sites that are taken: (as drawn, as oriented).
    pub taken_runs: (f64, f64),
}

/// Chooses the free sites' directions (module docs). Deterministic: ties go to the lower index.
pub fn orient(sites: &[Site]) -> Orientation {
    let residues = 1usize << ADDRESS_BITS;
    let mut taken: Vec<bool> = sites.iter().map(|s| s.taken > 0.5).collect();
    let mut pressure = vec![0.0f64; residues];
    for s in sites.iter().filter(|s| !s.free) {
        // A share near ½ pulls little either way.
        pressure[s.residue()] += s.runs * (2.0 * s.taken - 1.0);
    }
    let mut free: Vec<usize> = (0..sites.len()).filter(|&i| sites[i].free).collect();
    free.sort_by(|&a, &b| sites[b].runs.total_cmp(&sites[a].runs).then(a.cmp(&b)));
    let taken_runs = |taken: &[bool]| -> f64 {
        free.iter()
            .filter(|&&i| taken[i])
            .map(|&i| sites[i].runs)
            .sum()
    };
    let drawn = taken_runs(&taken);
    let mut agreed = 0;
    for &i in &free {
        let r = sites[i].residue();
        let p = pressure[r];
        if p != 0.0 && (p > 0.0) != taken[i] {
            taken[i] = p > 0.0;
            agreed += 1;
        }
        pressure[r] += sites[i].pull(taken[i]);
    }
    // Restore the drawn taken runs, cheapest first: a flip costs the runs it newly opposes on its
    // residue (a pair of opposite branches mispredicts about as often as the less run of them
    // runs), less what it stops opposing, per run it restores. Agreeing turned the free sites
    // wherever that gained; restoring takes back the cheapest of it when no residue is free.
    let mut now = taken_runs(&taken);
    let mut restored = 0;
    loop {
        let owed = drawn - now;
        let best = free
            .iter()
            .copied()
            .filter(|&i| taken[i] != (owed > 0.0) && sites[i].runs < 2.0 * owed.abs())
            .map(|i| {
                let s = &sites[i];
                let others = pressure[s.residue()] - s.pull(taken[i]);
                let opposed = |t: bool| {
                    if others * s.pull(t) < 0.0 {
                        s.runs.min(others.abs())
                    } else {
                        0.0
                    }
                };
                (
                    (opposed(!taken[i]) - opposed(taken[i])) / s.runs.max(1e-12),
                    i,
                )
            })
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let Some((_, i)) = best else { break };
        let r = sites[i].residue();
        pressure[r] -= sites[i].pull(taken[i]);
        taken[i] = !taken[i];
        pressure[r] += sites[i].pull(taken[i]);
        now += sites[i].pull(taken[i]);
        restored += 1;
    }
    Orientation {
        taken,
        agreed,
        restored,
        taken_runs: (drawn, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(offset: u64, runs: f64, taken: f64, free: bool) -> Site {
        Site {
            offset,
            runs,
            taken,
            free,
        }
    }

    #[test]
    fn a_free_branch_takes_the_direction_of_a_loop_branch_on_its_residue() {
        // The memcached pair: a back-edge run 18 times, a never branch 256 bytes on, not taken;
        // a lone not-taken never branch gives the taken run back.
        let sites = [
            site(0x72e7, 18.0, 0.944, false),
            site(0x73e7, 1.0, 0.0, true),
            site(0x7301, 1.0, 1.0, true),
        ];
        let o = orient(&sites);
        assert_eq!(o.taken, vec![true, true, false]);
        assert_eq!((o.agreed, o.restored), (1, 1));
    }

    #[test]
    fn with_no_free_residue_the_share_comes_back_where_it_opposes_least() {
        // Both never branches must stay one taken, one not: the one beside the light branch
        // opposes it rather than the one beside the heavy branch opposing that.
        let sites = [
            site(0x000, 18.0, 1.0, false),
            site(0x080, 1.0, 0.0, true),
            site(0x001, 0.2, 1.0, false),
            site(0x081, 1.0, 1.0, true),
        ];
        let o = orient(&sites);
        assert_eq!(o.taken, vec![true, true, true, false]);
        assert_eq!((o.agreed, o.restored), (1, 1));
        assert_eq!(o.taken_runs, (1.0, 1.0));
    }

    #[test]
    fn free_branches_on_one_residue_take_the_direction_of_the_most_run() {
        let sites = [
            site(0x4e6e, 0.5, 1.0, true),
            site(0x4fee, 0.4, 0.0, true),
            site(0x4f00, 0.4, 1.0, true),
        ];
        assert_eq!(orient(&sites).taken, vec![true, true, false]);
    }

    #[test]
    fn free_branches_alone_on_their_residues_restore_the_drawn_taken_runs() {
        // The never branch at 0x100 turns to agree with its loop branch: one run a call fewer
        // taken, which a lone not-taken never branch of the same runs gives back.
        let sites = [
            site(0x180, 8.0, 0.0, false),
            site(0x100, 1.0, 1.0, true),
            site(0x005, 1.0, 0.0, true),
            site(0x011, 3.0, 0.0, true),
        ];
        let o = orient(&sites);
        assert_eq!(o.taken, vec![false, false, true, false]);
        assert_eq!((o.agreed, o.restored), (1, 1));
        assert_eq!(o.taken_runs, (1.0, 1.0));
    }

    #[test]
    fn a_restoring_flip_goes_first_where_no_other_branch_opposes_it() {
        let sites = [
            site(0x000, 5.0, 1.0, false),
            site(0x080, 2.0, 0.0, true), // turns taken: 2 runs too many
            site(0x001, 2.0, 1.0, false),
            site(0x081, 2.0, 1.0, true), // would oppose the taken branch at 0x001
            site(0x002, 2.0, 1.0, true), // alone
        ];
        let o = orient(&sites);
        assert_eq!(o.taken, vec![true, true, true, true, false]);
        assert_eq!(o.taken_runs, (4.0, 4.0));
    }

    #[test]
    fn branches_that_are_not_free_keep_their_directions() {
        let sites = [site(0x0, 1.0, 0.9, false), site(0x80, 9.0, 0.1, false)];
        let o = orient(&sites);
        assert_eq!(o.taken, vec![true, false]);
        assert_eq!((o.agreed, o.restored), (0, 0));
    }
}
