//! The n-vector reductions of an iteration (sum(r), q^T r, r^T r at its start, r^T w and
//! w^T w in its line search), each summed in eight lanes, added pairwise at the end, then the
//! n mod 8 last terms in order. One running sum waits on each addition (n of them in a row);
//! eight independent ones do not, and the compiler keeps them in vector registers. The
//! order is fixed, so a seeded path is still the same run after run.

/// Lanes per sum.
const L: usize = 8;

/// The lanes' total, added pairwise.
#[inline]
fn total(a: [f64; L]) -> f64 {
    ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}

/// sum(r), q^T r and r^T r, in one pass.
// The lanes indexed together: the form the compiler keeps in vector registers.
#[allow(clippy::needless_range_loop)]
pub(super) fn sums(q: &[f64], r: &[f64]) -> (f64, f64, f64) {
    debug_assert_eq!(q.len(), r.len());
    let (mut s, mut qr, mut rr) = ([0.0; L], [0.0; L], [0.0; L]);
    let (qc, rc) = (q.chunks_exact(L), r.chunks_exact(L));
    let (qt, rt) = (qc.remainder(), rc.remainder());
    for (qs, rs) in qc.zip(rc) {
        for l in 0..L {
            s[l] += rs[l];
            qr[l] += qs[l] * rs[l];
            rr[l] += rs[l] * rs[l];
        }
    }
    let (mut s, mut qr, mut rr) = (total(s), total(qr), total(rr));
    for (a, b) in qt.iter().zip(rt) {
        s += b;
        qr += a * b;
        rr += b * b;
    }
    (s, qr, rr)
}

/// r^T w and w^T w, in one pass.
#[allow(clippy::needless_range_loop)]
pub(super) fn line(r: &[f64], w: &[f64]) -> (f64, f64) {
    debug_assert_eq!(r.len(), w.len());
    let (mut rw, mut ww) = ([0.0; L], [0.0; L]);
    let (rc, wc) = (r.chunks_exact(L), w.chunks_exact(L));
    let (rt, wt) = (rc.remainder(), wc.remainder());
    for (rs, ws) in rc.zip(wc) {
        for l in 0..L {
            rw[l] += rs[l] * ws[l];
            ww[l] += ws[l] * ws[l];
        }
    }
    let (mut rw, mut ww) = (total(rw), total(ww));
    for (a, b) in rt.iter().zip(wt) {
        rw += a * b;
        ww += b * b;
    }
    (rw, ww)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lanes_add_up_to_the_plain_sums() {
        for n in [0, 1, 7, 8, 9, 23, 64, 1001] {
            let q: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
            let r: Vec<f64> = (0..n).map(|i| (i as f64 * 1.3).cos() - 0.1).collect();
            let (s, qr, rr) = sums(&q, &r);
            let plain = |v: &mut dyn Iterator<Item = f64>| v.sum::<f64>();
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * (1.0 + b.abs());
            assert!(close(s, plain(&mut r.iter().copied())), "{n}");
            assert!(close(qr, plain(&mut q.iter().zip(&r).map(|(a, b)| a * b))));
            assert!(close(rr, plain(&mut r.iter().map(|b| b * b))));
            let (rw, ww) = line(&r, &q);
            assert!(close(rw, qr) && close(ww, plain(&mut q.iter().map(|a| a * a))));
        }
    }
}
