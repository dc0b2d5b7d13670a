//! Which cross-validation fold a stream's row belongs to (`cv.folds = K`, issue 17), and the
//! fold statistics as checkpoints and state records save them. The folds themselves and their
//! weighting are `ravel_core::stats::folds`'; this module only decides the assignment, which
//! must be a stable function of where the row is in Kafka so that a replay, a restart or
//! another replica puts every row in the same fold and the saved folds stay exact.
//!
//! The hash (reproduce it to check a CV answer offline; tests/stream_cv.rs does):
//!
//! - `fold_by = "coordinates"` (default): h = FNV-1a 64 of the bytes topic (UTF-8), one zero
//!   byte, the partition (i32, big-endian), the message offset (i64, big-endian) and the row's
//!   index in its message (u32, big-endian; 0 for a one-row message);
//! - `fold_by = "key"`: h = FNV-1a 64 of the message key's bytes (every row of every message
//!   with that key in one fold); a message without a key falls back to its coordinates;
//!
//! and the fold is splitmix64(h) mod K (`ravel_core::solve::select::splitmix64`, the
//! finalizer `ravel fit --folds` uses on row indices). FNV-1a 64: offset basis
//! 0xcbf29ce484222325, prime 0x100000001b3, per byte h = (h xor byte) * prime.

use crate::config::FoldBy;
use ravel_core::solve::select::splitmix64;

const FNV_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(FNV_PRIME);
    }
    h
}

/// Where a message is in Kafka.
pub struct Coordinates<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<&'a [u8]>,
}

/// Appends the folds (< `k`) of a message's `rows` rows to `ids` (module header).
pub fn assign(ids: &mut Vec<u8>, k: usize, by: FoldBy, at: &Coordinates<'_>, rows: usize) {
    let Coordinates {
        topic,
        partition,
        offset,
        key,
    } = *at;
    let k = k.max(1) as u64;
    if let (FoldBy::Key, Some(key)) = (by, key) {
        let f = (splitmix64(fnv1a(FNV_BASIS, key)) % k) as u8;
        ids.extend(std::iter::repeat_n(f, rows));
        return;
    }
    let mut h = fnv1a(FNV_BASIS, topic.as_bytes());
    h = fnv1a(h, &[0]);
    h = fnv1a(h, &partition.to_be_bytes());
    h = fnv1a(h, &offset.to_be_bytes());
    ids.extend((0..rows as u32).map(|r| (splitmix64(fnv1a(h, &r.to_be_bytes())) % k) as u8));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at<'a>(
        topic: &'a str,
        partition: i32,
        offset: i64,
        key: Option<&'a [u8]>,
    ) -> Coordinates<'a> {
        Coordinates {
            topic,
            partition,
            offset,
            key,
        }
    }

    #[test]
    fn fnv1a_matches_its_published_vectors() {
        // From the FNV reference test suite (Fowler, Noll, Vo).
        assert_eq!(fnv1a(FNV_BASIS, b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a(FNV_BASIS, b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a(FNV_BASIS, b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn folds_are_stable_spread_and_keyed_when_asked() {
        let mut a = Vec::new();
        for offset in 0..2000 {
            assign(&mut a, 5, FoldBy::Coordinates, &at("t", 1, offset, None), 3);
        }
        let mut b = Vec::new();
        for offset in 0..2000 {
            assign(
                &mut b,
                5,
                FoldBy::Coordinates,
                &at("t", 1, offset, Some(b"k")),
                3,
            );
        }
        assert_eq!(a, b, "the key is ignored unless fold_by = key");
        let mut counts = [0usize; 5];
        a.iter().for_each(|&f| counts[f as usize] += 1);
        assert!(
            counts.iter().all(|&c| (1000..1400).contains(&c)),
            "{counts:?}"
        );
        let mut c = Vec::new();
        assign(&mut c, 5, FoldBy::Coordinates, &at("t", 2, 0, None), 3);
        assert_ne!(&c[..], &a[..3], "the partition counts");
        let mut keyed = Vec::new();
        assign(
            &mut keyed,
            7,
            FoldBy::Key,
            &at("t", 1, 0, Some(b"user-1")),
            4,
        );
        assign(
            &mut keyed,
            7,
            FoldBy::Key,
            &at("u", 3, 99, Some(b"user-1")),
            2,
        );
        assert!(keyed.iter().all(|&f| f == keyed[0]));
    }
}
