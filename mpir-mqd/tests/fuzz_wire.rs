//! The pipe protocol's fuzz harness (`mpir_mqd::fuzzing::wire`, also the cargo-fuzz target
//! `wire`) on bounded inputs in every test run: random bytes, and valid framed messages with
//! bytes flipped, cut, duplicated or inserted. No input may panic (the harness also checks
//! that whatever decodes re-encodes to the same message).

use mpir_mqd::fuzzing::{seed_stream, wire};

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn the_seed_stream_is_valid_and_decodes() {
    let seeds = seed_stream();
    assert!(
        seeds.len() > 200,
        "seeds of every kind: {} bytes",
        seeds.len()
    );
    wire(&seeds);
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..3000 {
        let len = rng.below(600);
        let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        wire(&data);
    }
}

#[test]
fn mutated_valid_messages_never_panic() {
    let seeds = seed_stream();
    let mut rng = Rng(42);
    for _ in 0..3000 {
        let mut data = seeds.clone();
        for _ in 0..1 + rng.below(8) {
            match rng.below(4) {
                0 => {
                    let i = rng.below(data.len());
                    data[i] ^= 1 << rng.below(8);
                }
                1 => {
                    let cut = rng.below(data.len());
                    data.truncate(cut.max(1));
                }
                2 => {
                    let i = rng.below(data.len());
                    data.insert(i, rng.next() as u8);
                }
                _ => {
                    // A length field blown up: 0xff in a random place.
                    let i = rng.below(data.len());
                    data[i] = 0xff;
                }
            }
        }
        wire(&data);
    }
}
