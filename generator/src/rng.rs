//! The generator's own PRNG: xoshiro256** seeded through splitmix64. Written here (not taken from a
//! crate) so that a clone's bytes depend only on this file, never on a dependency's version.

/// splitmix64 step: used to expand one seed into the xoshiro state and to derive stream seeds.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a of a string: names a stream so that e.g. one cluster's random choices do not shift when
/// another cluster is added to the profile.
pub fn stream_id(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// The id of one part of stream `stream` (e.g. one chunk of a body, or one concern within it): a
/// part's draws then depend only on its own id, not on how many draws the parts before it took.
pub fn substream(stream: u64, part: u64) -> u64 {
    let mut s = stream;
    let mut t = splitmix64(&mut s) ^ part;
    splitmix64(&mut t)
}

#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator for `stream` under the user's `seed`.
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut sm = seed ^ stream.rotate_left(17);
        let mut s = [0u64; 4];
        for x in &mut s {
            *x = splitmix64(&mut sm);
        }
        if s == [0; 4] {
            s[0] = 1; // xoshiro's only forbidden state
        }
        Rng { s }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, n); 0 when n == 0. Multiply-shift: bias below 2^-32 for the n used here.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in [lo, hi] (inclusive).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// An index drawn with probability proportional to `weights` (non-negative); None if all are 0.
    pub fn weighted(&mut self, weights: &[f64]) -> Option<usize> {
        let total: f64 = weights.iter().filter(|w| **w > 0.0).sum();
        if total.is_nan() || total <= 0.0 {
            return None;
        }
        let mut x = self.f64() * total;
        let mut last = None;
        for (i, &w) in weights.iter().enumerate() {
            if w > 0.0 {
                last = Some(i);
                if x < w {
                    return Some(i);
                }
                x -= w;
            }
        }
        last
    }

    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = Rng::new(7, stream_id("c1"));
        let mut b = Rng::new(7, stream_id("c1"));
        let mut c = Rng::new(8, stream_id("c1"));
        let va: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let vc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
    }

    #[test]
    fn below_and_weighted_stay_in_range() {
        let mut r = Rng::new(1, 2);
        for n in 1..50u64 {
            assert!(r.below(n) < n);
        }
        assert_eq!(r.weighted(&[0.0, 0.0]), None);
        for _ in 0..100 {
            assert_eq!(r.weighted(&[0.0, 3.0, 0.0]), Some(1));
        }
    }
}
