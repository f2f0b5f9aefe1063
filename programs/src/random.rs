//! splitmix64 (Steele, Lea, Flood: "Fast splittable pseudorandom number
//! generators", OOPSLA 2014): the fixed-seed inputs and choices of the
//! examples, tests and benchmarks, the same on every run of a seed.

/// The generator; its state is the seed, then the last output's counter.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number from 0 to `n - 1` (`n` at least 1).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_outputs_of_seed_zero_are_splitmix64_s() {
        // The reference values of Vigna's splitmix64.c for seed 0.
        let mut r = SplitMix64(0);
        assert_eq!(r.next(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next(), 0x6E78_9E6A_A1B9_65F4);
        assert!(SplitMix64(7).below(10) < 10);
    }
}
