//! The symmetric rank-B update behind `RunningStats::update_batch` (the ingest hot path), as a
//! dedicated AVX2 + FMA kernel. This module owns all the `unsafe` of the statistics: the
//! `std::arch` intrinsics and the inline assembly of the micro-kernel (run only after
//! `is_x86_feature_detected!`), and the raw pointers through which the threads write their
//! disjoint parts of the output. Each `unsafe` block says why it holds.
//!
//! What it computes, for a batch of B rows x_k (row-major B x p, or any strides: `Rows`, so
//! that a memory-mapped file in C or Fortran order is packed where it lies) with targets y_k, row
//! weights w_k and a shift (s, t): the lower triangle of the augmented (p + 2) x (p + 2)
//! matrix sum_k w_k a_k a_k^T with a_k = (x_k - s, 1, y_k - t). The shift is subtracted while
//! a block is packed (one vector subtraction per 4 values, on data already in registers), so
//! the moments are accumulated around it at no extra pass over the batch (stats/mod.rs says
//! why). Its first p rows are the update of E[x x^T]
//! (written into `sxx` as `sxx = decay * sxx + update`), and its last two rows are, in one go,
//! the updates of E[x], sum w, E[x y], E[y] and E[y^2] (added into `extra`): the means cost two
//! more rows of the product instead of another pass over the batch.
//!
//! How: the batch is cut into blocks of at most KC rows; each block is packed once (scaled by
//! sqrt(w_k), or unscaled when all weights are equal and the common weight multiplies the
//! result) into 12-feature row panels, which also serve as the column side (4 features of a
//! panel at a time). A 12 x 4 register-blocked micro-kernel (12 accumulators of 4 doubles, all
//! 16 ymm registers: written in `asm!` because the compiler spilled) computes each tile on or
//! below the diagonal; tiles on the diagonal or the last rows use 8- or 4-row kernels where they
//! can, are computed whole and written element by element, lower part only, so the upper
//! triangle of `sxx` is never touched. On CPUs with AVX-512F, two column panels whose tiles are
//! whole and below the diagonal go together through a 12 x 8 kernel in 512-bit registers
//! (`tile12x8`, the tile transposed: each element the same fused multiply-adds in the same
//! order, so the same bits; on the 2-core Xeon of docs/benchmarks.md 9% more rows/s at
//! p = 100 and 16% at p = 1000, one thread). Work goes to the rayon threads by rows of the
//! batch for small p (each thread checks and folds its share into its own buffer; the buffers
//! are summed at the end) and by columns of the triangle for large p (chunks weighted by their
//! tiles, taken dynamically; the threads share each packed block).
//!
//! Why not faer's triangular `matmul`: it ran at about 0.7x numpy's OpenBLAS on this workload.
//! Other CPUs (no AVX2/FMA, or not x86-64) keep that path: `fold` answers `Unavailable`.

// Elsewhere only the entry points are compiled in use (they answer `Unavailable`).
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_variables))]

use super::StridedRows;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Rows of a micro-tile (three vectors of 4 doubles), columns of a micro-tile.
const MR: usize = 12;
const NR: usize = 4;
/// Rows of the batch per packed block (at most; blocks are evened out). The micro-kernel streams
/// its 12 x KC row panel (15 KB) and reads the column panel's 4 values per row from KC cache
/// lines (10 KB): both fit in the 32 KB L1 together. Measured on the development machine
/// (Zen 3), p = 1000: KC = 160 gives 45 GFlop/s per core, 256 gives 43.5 (the two streams
/// evict each other), 96 gives 43.7 (more tile overhead).
const KC: usize = 160;
/// Rows per packed block for a batch of `rows`: at most KC, as even as possible.
fn block_rows(rows: usize) -> usize {
    rows.div_ceil(rows.div_ceil(KC).max(1))
}

/// Row panels per L2 block (MC = 12 * MC_PANELS rows of the triangle).
const MC_PANELS: usize = 12;

/// How the rows are weighted.
#[derive(Clone, Copy)]
pub(super) enum Weights<'a> {
    /// Every row has this weight: the product is scaled instead of the rows.
    Equal(f64),
    /// Row k has weight w[k] (rows are packed scaled by sqrt(w[k])).
    Rows(&'a [f64]),
}

/// How the work is shared between threads (chosen by `fold`, forced by the tests).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Split {
    /// One thread.
    Seq,
    /// The batch rows are cut into n parts; each is folded into its own buffer.
    Rows(usize),
    /// The triangle's columns are cut into 8 n chunks weighted by their tiles, taken by the
    /// threads as they go; packed blocks are shared.
    Cols(usize),
}

/// Whether the kernel can run on this CPU.
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the CPU has AVX-512F, for `tile12x8` (the tests can turn it off to compare).
fn wide_available() -> bool {
    #[cfg(test)]
    if tests::NARROW_ONLY.load(std::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The split `fold` uses for p features and B rows on `threads` threads.
pub(super) fn choose(p: usize, rows: usize, threads: usize) -> Split {
    let big = p + 2;
    let work = (big * big / 2) as f64 * rows as f64;
    if threads <= 1 || work < 4e5 {
        Split::Seq
    } else if big <= 384 {
        Split::Rows(threads.min(rows.div_ceil(64)).max(1))
    } else {
        Split::Cols(threads)
    }
}

/// What `fold` did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Folded {
    Done,
    /// `checked` was false and a value of the batch is NaN, infinite or beyond
    /// `MAX_ABS_VALUE`: nothing was touched.
    NotFinite,
    /// The kernel cannot run on this CPU: nothing was touched, nothing was checked.
    Unavailable,
}

/// `sxx = decay * sxx + sum_k w_k x_k x_k^T` on the lower triangle of the column-major p x p
/// `sxx`, and `extra[r * (p + 2) + j] += sum_k w_k a_k[p + r] a_k[j]` for the last two rows of
/// the augmented product (see the module header). Unless `checked`, the batch is first checked
/// for NaN and infinities (by each thread on its own rows under `Split::Rows`, where that costs
/// no extra pass), and nothing is touched if one is found.
#[allow(clippy::too_many_arguments)]
pub(super) fn fold(
    sxx: &mut [f64],
    extra: &mut [f64],
    p: usize,
    data: StridedRows,
    weights: Weights,
    shift: (&[f64], f64),
    decay: f64,
    checked: bool,
    split: Option<Split>,
) -> Folded {
    if !available() {
        return Folded::Unavailable;
    }
    let rows = data.rows;
    let big = p + 2;
    assert!(sxx.len() == p * p && extra.len() == 2 * big && data.holds(p));
    assert_eq!(shift.0.len(), p);
    if let Weights::Rows(w) = weights {
        assert_eq!(w.len(), rows);
    }
    let split = split.unwrap_or_else(|| choose(p, rows, rayon::current_num_threads()));
    #[cfg(target_arch = "x86_64")]
    {
        let batch = Batch {
            p,
            data,
            weights,
            shift_x: shift.0,
            shift_y: shift.1,
            wide: wide_available(),
        };
        if !checked && !matches!(split, Split::Rows(_)) && !data.finite(p, 0..rows) {
            return Folded::NotFinite;
        }
        match split {
            Split::Seq => {
                let dst = Dst::new(sxx, extra, p);
                // SAFETY: `dst` points into `sxx` and `extra`, borrowed mutably here and
                // written by this thread only; AVX2 and FMA were detected above.
                unsafe { fold_rows(dst, &batch, 0..rows, decay) };
            }
            Split::Rows(n) => {
                if !fold_split_rows(sxx, extra, &batch, decay, n.max(1), checked) {
                    return Folded::NotFinite;
                }
            }
            Split::Cols(n) => fold_split_cols(sxx, extra, &batch, decay, n.max(1)),
        }
    }
    Folded::Done
}

/// Whether every value of a batch is finite and within `MAX_ABS_VALUE`; large batches are
/// scanned on all threads (the scan is bound by memory bandwidth).
pub(super) fn batch_finite(x: &[f64], y: &[f64]) -> bool {
    const CHUNK: usize = 1 << 17;
    let finite_x = if x.len() > 2 * CHUNK {
        use rayon::prelude::*;
        x.par_chunks(CHUNK).all(all_finite)
    } else {
        all_finite(x)
    };
    finite_x && all_finite(y)
}

/// Whether every value is finite and |v| <= `MAX_ABS_VALUE` (no NaN, no infinity, nothing
/// whose square could overflow a sum), for the batch check before a fold: branch-free so that
/// it vectorizes (with AVX2 where the CPU has it).
pub(super) fn all_finite(v: &[f64]) -> bool {
    #[inline(always)]
    fn scan(v: &[f64]) -> bool {
        // Without the sign bit, the bits of a double order like its magnitude, and NaN and
        // the infinities sort above every finite value: one comparison covers all three.
        const LIMIT: u64 = super::MAX_ABS_VALUE.to_bits();
        let mut bad = 0u64;
        for x in v {
            bad |= ((x.to_bits() & !(1u64 << 63)) > LIMIT) as u64;
        }
        bad == 0
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn scan_avx2(v: &[f64]) -> bool {
        scan(v)
    }
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 detected just above.
        return unsafe { scan_avx2(v) };
    }
    scan(v)
}

/// Appends the little-endian doubles of `src` (whole 8-byte words; a trailing part is
/// ignored) to `dst`; whether every one is finite and within `MAX_ABS_VALUE`, the predicate of
/// `all_finite`, computed in the same pass as the copy (the service's binary rows: the copy is
/// bound by reading the message, and the check then costs no second pass).
pub(super) fn extend_within_limit(dst: &mut Vec<f64>, src: &[u8]) -> bool {
    #[inline(always)]
    fn copy(dst: &mut Vec<f64>, src: &[u8]) -> bool {
        const LIMIT: u64 = super::MAX_ABS_VALUE.to_bits();
        let n = src.len() / 8;
        dst.reserve(n);
        let mut bad = 0u64;
        for (d, c) in dst.spare_capacity_mut()[..n]
            .iter_mut()
            .zip(src.chunks_exact(8))
        {
            let b = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            bad |= ((b & !(1u64 << 63)) > LIMIT) as u64;
            d.write(f64::from_bits(b));
        }
        // SAFETY: the n slots after the length were written just above (`reserve` made them).
        unsafe { dst.set_len(dst.len() + n) };
        bad == 0
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn copy_avx2(dst: &mut Vec<f64>, src: &[u8]) -> bool {
        copy(dst, src)
    }
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 detected just above.
        return unsafe { copy_avx2(dst, src) };
    }
    copy(dst, src)
}

/// The batch and its weights.
struct Batch<'a> {
    p: usize,
    data: StridedRows<'a>,
    weights: Weights<'a>,
    /// Subtracted from every row (x) and target (y) as it is packed.
    shift_x: &'a [f64],
    shift_y: f64,
    /// Whether full tiles of 8 columns take the 512-bit kernel (`tile12x8`).
    wide: bool,
}

impl Batch<'_> {
    /// (alpha, per-row scale): the product is `alpha * sum_k (s_k a_k)(s_k a_k)^T`.
    fn alpha(&self) -> f64 {
        match self.weights {
            Weights::Equal(a) => a,
            Weights::Rows(_) => 1.0,
        }
    }
    fn scale(&self, k: usize) -> f64 {
        match self.weights {
            Weights::Equal(_) => 1.0,
            Weights::Rows(w) => w[k].sqrt(),
        }
    }
}

/// Number of MR-wide row panels (and 3x as many NR-wide column panels) of the augmented matrix.
fn row_panels(big: usize) -> usize {
    big.div_ceil(MR)
}

/// Row panels packed together, row by row of the batch: 8 panels are 96 features, whole cache
/// lines of each row, while the 8 output streams stay within L1.
const PACK_GROUP: usize = 8;

/// Packs rows `k0 .. k0 + kc` of the batch, augmented features of the row panels
/// `q0 .. q0 + a.len() / (MR * kc)`, into `a` (panel q, row k, feature r at
/// `(q - q0) * MR * kc + k * MR + r`). The column side reads the same panels: column panel s
/// is the 4 features at offset `4 (s % 3)` of row panel `s / 3`.
///
/// # Safety
/// AVX2 and FMA available (the function itself only uses safe slices).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn pack(batch: &Batch, k0: usize, kc: usize, q0: usize, a: &mut [f64]) {
    let p = batch.p;
    let nq = a.len() / (MR * kc);
    debug_assert!(a.len() == nq * MR * kc);
    let StridedRows {
        x,
        row_stride: rs,
        col_stride: cs,
        y,
        y_stride: ys,
        ..
    } = batch.data;
    if rs == 1 && cs != 1 {
        pack_columns(batch, k0, kc, q0, a);
        return;
    }
    for g in (0..nq).step_by(PACK_GROUP) {
        let g_end = (g + PACK_GROUP).min(nq);
        for k in 0..kc {
            let row = k0 + k;
            let s = batch.scale(row);
            // Row-major rows: the row's p features as a slice; otherwise read one at a time.
            let xr = if cs == 1 {
                &x[row * rs..][..p]
            } else {
                &[][..]
            };
            let xf = |f: usize| if cs == 1 { xr[f] } else { x[row * rs + f * cs] };
            let vs = _mm256_set1_pd(s);
            for dq in g..g_end {
                let f0 = (q0 + dq) * MR;
                let ad = &mut a[(dq * kc + k) * MR..][..MR];
                let v = if f0 + MR <= p && cs == 1 {
                    let src = &xr[f0..f0 + MR];
                    let sh = &batch.shift_x[f0..f0 + MR];
                    let at = |i: usize| {
                        // SAFETY: `src` and `sh` hold 12 doubles, i <= 8.
                        unsafe {
                            _mm256_mul_pd(
                                _mm256_sub_pd(
                                    _mm256_loadu_pd(src.as_ptr().add(i)),
                                    _mm256_loadu_pd(sh.as_ptr().add(i)),
                                ),
                                vs,
                            )
                        }
                    };
                    [at(0), at(4), at(8)]
                } else {
                    let mut v = [0.0f64; MR];
                    for (r, d) in v.iter_mut().enumerate() {
                        let f = f0 + r;
                        *d = if f < p {
                            (xf(f) - batch.shift_x[f]) * s
                        } else if f == p {
                            s
                        } else if f == p + 1 {
                            (y[row * ys] - batch.shift_y) * s
                        } else {
                            0.0
                        };
                    }
                    // SAFETY: `v` holds 12 doubles.
                    unsafe {
                        [
                            _mm256_loadu_pd(v.as_ptr()),
                            _mm256_loadu_pd(v.as_ptr().add(4)),
                            _mm256_loadu_pd(v.as_ptr().add(8)),
                        ]
                    }
                };
                // SAFETY: each destination slice holds the 4 or 12 doubles stored.
                unsafe {
                    _mm256_storeu_pd(ad.as_mut_ptr(), v[0]);
                    _mm256_storeu_pd(ad.as_mut_ptr().add(4), v[1]);
                    _mm256_storeu_pd(ad.as_mut_ptr().add(8), v[2]);
                }
            }
        }
    }
}

/// How many features ahead `pack_columns` prefetches a run.
const PREFETCH_FEATURES: usize = 8;

/// `pack` for column-major rows (`rs` = 1): each feature's run of the block is read in order
/// and spread across the panel (the packed block, 15 KB a panel, stays in L1), instead of a
/// row at a time across the columns.
fn pack_columns(batch: &Batch, k0: usize, kc: usize, q0: usize, a: &mut [f64]) {
    let p = batch.p;
    let nq = a.len() / (MR * kc);
    let StridedRows {
        x,
        col_stride: cs,
        y,
        y_stride: ys,
        ..
    } = batch.data;
    let scales: Vec<f64> = (k0..k0 + kc).map(|k| batch.scale(k)).collect();
    for dq in 0..nq {
        let panel = &mut a[dq * kc * MR..][..kc * MR];
        for r in 0..MR {
            let f = (q0 + dq) * MR + r;
            let dst = panel.iter_mut().skip(r).step_by(MR);
            if f < p {
                let (col, sh) = (&x[f * cs + k0..][..kc], batch.shift_x[f]);
                // Each run is a few cache lines, too short for the hardware to see a stream:
                // ask for the run of a feature a few ahead while this one is packed.
                #[cfg(target_arch = "x86_64")]
                if f + PREFETCH_FEATURES < p {
                    let ahead = x[(f + PREFETCH_FEATURES) * cs + k0..][..kc].as_ptr();
                    for line in (0..kc).step_by(8) {
                        // SAFETY: SSE is part of x86-64; the address is inside `x`.
                        unsafe { _mm_prefetch::<_MM_HINT_T0>(ahead.add(line).cast()) };
                    }
                }
                for ((d, v), s) in dst.zip(col).zip(&scales) {
                    *d = (v - sh) * s;
                }
            } else if f == p {
                for (d, s) in dst.zip(&scales) {
                    *d = *s;
                }
            } else if f == p + 1 {
                for (k, (d, s)) in dst.zip(&scales).enumerate() {
                    *d = (y[(k0 + k) * ys] - batch.shift_y) * s;
                }
            } else {
                for d in dst {
                    *d = 0.0;
                }
            }
        }
    }
}

/// A 32-byte aligned scratch buffer of `len` doubles, reused per thread (a few per thread: the
/// packed blocks and the buffers of `Split::Rows`).
struct Scratch {
    buf: Vec<f64>,
    off: usize,
    len: usize,
}

thread_local! {
    static SCRATCH: std::cell::Cell<Vec<Vec<f64>>> = const { std::cell::Cell::new(Vec::new()) };
}

impl Scratch {
    fn take(len: usize) -> Scratch {
        let mut buf = SCRATCH.with(|c| {
            let mut pool = c.take();
            let buf = pool.pop().unwrap_or_default();
            c.set(pool);
            buf
        });
        // Every element handed out is written before it is read (packing, beta = 0, or an
        // explicit fill): no need to clear.
        if buf.len() < len + 4 {
            buf.resize(len + 4, 0.0);
        }
        let off = (buf.as_ptr() as usize / 8).wrapping_neg() % 4;
        Scratch { buf, off, len }
    }
    fn get(&mut self) -> &mut [f64] {
        &mut self.buf[self.off..self.off + self.len]
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        SCRATCH.with(|c| {
            let mut pool = c.take();
            if pool.len() < 4 {
                pool.push(buf);
            }
            c.set(pool);
        });
    }
}

/// Where a tile's elements go: rows below p into the column-major `c`, the two augmented rows
/// into `extra`.
#[derive(Clone, Copy)]
struct Dst {
    c: *mut f64,
    ldc: usize,
    p: usize,
    extra: *mut f64,
}

// SAFETY: a `Dst` is only shared between threads that write disjoint columns of it (see
// `fold_split_cols`), while the buffers it points to are mutably borrowed by `fold`.
unsafe impl Send for Dst {}
// SAFETY: as for `Send` just above: the threads sharing a `Dst` write disjoint columns.
unsafe impl Sync for Dst {}

impl Dst {
    fn new(c: &mut [f64], extra: &mut [f64], p: usize) -> Dst {
        debug_assert!(c.len() == p * p && extra.len() == 2 * (p + 2));
        Dst {
            c: c.as_mut_ptr(),
            ldc: p,
            p,
            extra: extra.as_mut_ptr(),
        }
    }
}

/// Folds batch rows `range` into `dst`, one thread; `decay` scales the old `sxx` once.
///
/// # Safety
/// AVX2 and FMA must be available; `dst` must be valid for p x p and 2 x (p + 2) writes that
/// no other thread makes meanwhile.
#[cfg(target_arch = "x86_64")]
unsafe fn fold_rows(dst: Dst, batch: &Batch, range: std::ops::Range<usize>, decay: f64) {
    let big = batch.p + 2;
    let nq = row_panels(big);
    let ns = big.div_ceil(NR);
    let kc_max = block_rows(range.len()).max(1);
    let mut scratch = Scratch::take(nq * MR * kc_max);
    let a = scratch.get();
    let mut beta = decay;
    let mut k0 = range.start;
    if range.is_empty() {
        // No rows: still apply the decay.
        // SAFETY: as for the caller; a zero-row block only scales.
        unsafe { scale_lower(dst, decay) };
        return;
    }
    while k0 < range.end {
        let kc = kc_max.min(range.end - k0);
        let a = &mut a[..nq * MR * kc];
        // SAFETY: AVX2 and FMA available (the caller's promise).
        unsafe { pack(batch, k0, kc, 0, a) };
        // SAFETY: forwarded from the caller.
        unsafe { compute(dst, a, kc, big, 0..ns, batch.alpha(), beta, batch.wide) };
        beta = 1.0;
        k0 += kc;
    }
}

/// `Split::Rows(n)`: each part folds its rows into its own buffer (overwritten, beta = 0), after
/// checking them unless `checked`; the buffers are summed into `sxx` and `extra` at the end, so
/// that nothing is touched when a part finds a non-finite value (returns false then).
#[cfg(target_arch = "x86_64")]
fn fold_split_rows(
    sxx: &mut [f64],
    extra: &mut [f64],
    batch: &Batch,
    decay: f64,
    n: usize,
    checked: bool,
) -> bool {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (p, rows) = (batch.p, batch.data.rows);
    let big = p + 2;
    let part = |t: usize| rows * t / n..rows * (t + 1) / n;
    // The augmented rows are accumulated: cleared.
    let mut scratch = Scratch::take(n * (p * p + 2 * big));
    let mut bufs: Vec<(&mut [f64], &mut [f64])> = scratch
        .get()
        .chunks_exact_mut(p * p + 2 * big)
        .map(|b| {
            let (c, e) = b.split_at_mut(p * p);
            e.fill(0.0);
            (c, e)
        })
        .collect();
    let bad = AtomicBool::new(false);
    // All parts run on the pool (with a part on this thread as well, a third thread would share
    // the cores with the pool's idle, spinning workers).
    {
        use rayon::prelude::*;
        bufs.par_iter_mut().enumerate().for_each(|(t, (c, e))| {
            let r = part(t);
            if !checked && !batch.data.finite(p, r.clone()) {
                bad.store(true, Ordering::Relaxed);
                return;
            }
            // SAFETY: part t writes only its own buffers, mutably borrowed by this closure;
            // AVX2 and FMA were detected by `fold`.
            unsafe { fold_rows(Dst::new(c, e, p), batch, r, 0.0) };
        });
    }
    if bad.load(Ordering::Relaxed) {
        return false;
    }
    for j in 0..p {
        let col = j * p + j..(j + 1) * p;
        let s = &mut sxx[col.clone()];
        s.iter_mut().for_each(|v| *v *= decay);
        for (c, _) in &bufs {
            for (v, t) in s.iter_mut().zip(&c[col.clone()]) {
                *v += t;
            }
        }
    }
    for (_, e) in &bufs {
        for (s, v) in extra.iter_mut().zip(e.iter()) {
            *s += v;
        }
    }
    true
}

/// `Split::Cols(n)`: per block of KC batch rows, the threads pack a share of the panels each,
/// then compute columns of the triangle with equal flops each.
#[cfg(target_arch = "x86_64")]
fn fold_split_cols(sxx: &mut [f64], extra: &mut [f64], batch: &Batch, decay: f64, n: usize) {
    use rayon::prelude::*;
    let (p, rows) = (batch.p, batch.data.rows);
    let big = p + 2;
    let nq = row_panels(big);
    let ns = big.div_ceil(NR);
    // Column panel s has (nq - s * NR / MR) tiles, the first on the diagonal and smaller
    // (4, 8 or 12 rows; a 4-row tile runs at about 2/3 the speed of a 12-row one): cut the
    // cumulative work into CHUNKS_PER_THREAD * n chunks, taken by the threads as they go, so
    // that a thread that falls behind (a shared machine) is helped by the other.
    const CHUNKS_PER_THREAD: usize = 8;
    let work = |s: usize| (nq - s * NR / MR) as f64 - [0.0, 0.4, 0.6][s % 3];
    let chunks = (CHUNKS_PER_THREAD * n).min(ns);
    let total: f64 = (0..ns).map(work).sum();
    let mut cuts = vec![0usize];
    let mut acc = 0.0;
    for s in 0..ns {
        acc += work(s);
        if acc >= total * cuts.len() as f64 / chunks as f64 && cuts.len() < chunks {
            cuts.push(s + 1);
        }
    }
    while cuts.len() <= chunks {
        cuts.push(ns);
    }
    if rows == 0 {
        // SAFETY: `sxx` and `extra` are mutably borrowed here; AVX2 was detected by `fold`.
        unsafe { scale_lower(Dst::new(sxx, extra, p), decay) };
        return;
    }
    let kc_max = block_rows(rows);
    let mut scratch = Scratch::take(nq * MR * kc_max);
    let a = scratch.get();
    let dst = Dst::new(sxx, extra, p);
    let per = nq.div_ceil(n);
    let alpha = batch.alpha();
    // The block loop runs on a pool thread, so that its two parallel steps per block are
    // cheap joins rather than injections from outside the pool.
    rayon::scope(|_| {
        let mut beta = decay;
        let mut k0 = 0;
        while k0 < rows {
            let kc = kc_max.min(rows - k0);
            let a = &mut a[..nq * MR * kc];
            a.par_chunks_mut(per * MR * kc)
                .enumerate()
                // SAFETY: AVX2 and FMA were detected by `fold`.
                .for_each(|(t, a)| unsafe { pack(batch, k0, kc, t * per, a) });
            let a = &*a;
            (0..chunks).into_par_iter().with_max_len(1).for_each(|t| {
                let cols = cuts[t]..cuts[t + 1];
                // SAFETY: chunk t writes only columns cuts[t] * NR .. cuts[t + 1] * NR of the
                // triangle (and of the two augmented rows), disjoint from the other chunks';
                // `sxx` and `extra` stay mutably borrowed by this function meanwhile.
                unsafe { compute(dst, a, kc, big, cols, alpha, beta, batch.wide) };
            });
            beta = 1.0;
            k0 += kc;
        }
    });
}

/// `sxx *= decay` on the lower triangle (a batch with no rows; decay = 0 clears).
///
/// # Safety
/// `dst` valid as for `fold_rows`.
unsafe fn scale_lower(dst: Dst, decay: f64) {
    for j in 0..dst.p {
        for i in j..dst.p {
            // SAFETY: i, j < p, within the p x p buffer.
            unsafe {
                let e = dst.c.add(i + j * dst.ldc);
                *e = if decay == 0.0 { 0.0 } else { *e * decay };
            }
        }
    }
}

/// One packed block of kc rows: every tile on or below the diagonal whose columns are in the
/// column panels `cols`. `c = beta * c + alpha * (A B^T)` for the rows below p (beta = 0
/// overwrites, whatever c held), `extra += alpha * (A B^T)` for the two augmented rows.
///
/// # Safety
/// AVX2 and FMA available; `dst` valid, its columns in `cols` written by this thread only.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn compute(
    dst: Dst,
    a: &[f64],
    kc: usize,
    big: usize,
    cols: std::ops::Range<usize>,
    alpha: f64,
    beta: f64,
    wide: bool,
) {
    let nq = row_panels(big);
    if cols.is_empty() {
        return;
    }
    let q_first = cols.start * NR / MR;
    let mut ic = q_first;
    while ic < nq {
        let ic_end = (ic + MC_PANELS).min(nq);
        let mut s = cols.start;
        while s < cols.end {
            let j0 = s * NR;
            if j0 >= ic_end * MR {
                break;
            }
            // With AVX-512, column panels s and s + 1 go together through `tile12x8` wherever
            // both tiles are whole and below the diagonal; their other tiles one panel at a
            // time, as without it.
            let pair = wide && s + 1 < cols.end;
            let (first, last) = (ic.max(j0 / MR), ic_end);
            for q in first..last {
                let i0 = q * MR;
                if pair && i0 >= j0 + 2 * NR - 1 && i0 + MR <= dst.p {
                    // SAFETY: rows i0 .. i0 + 12 < p and columns j0 .. j0 + 8 <= i0 < p are
                    // inside the p x p buffer and in this thread's columns (s and s + 1); the
                    // panels hold the reads (column panels s and s + 1 < ns, in row panels
                    // below nq); AVX-512F detected (`wide`).
                    unsafe {
                        let c = dst.c.add(i0 + j0 * dst.ldc);
                        for jj in 0..2 * NR {
                            let e = c.add(jj * dst.ldc) as *const i8;
                            _mm_prefetch::<_MM_HINT_T0>(e);
                            _mm_prefetch::<_MM_HINT_T0>(e.add(MR * 8 - 1));
                        }
                        let col = |s: usize| a.as_ptr().add(s / 3 * kc * MR + s % 3 * NR);
                        let acc = tile12x8(kc, a.as_ptr().add(q * MR * kc), col(s), col(s + 1));
                        store_full_t(c, dst.ldc, &acc, alpha, beta);
                    }
                    continue;
                }
                // SAFETY: forwarded from the caller.
                unsafe { tile_at(dst, a, kc, big, s, q, alpha, beta) };
                if pair && q >= ((s + 1) * NR) / MR {
                    // SAFETY: forwarded from the caller (s + 1 is in `cols`).
                    unsafe { tile_at(dst, a, kc, big, s + 1, q, alpha, beta) };
                }
            }
            s += if pair { 2 } else { 1 };
        }
        ic = ic_end;
    }
}

/// The tile of row panel q and column panel s (`compute`, one panel at a time).
///
/// # Safety
/// As for `compute`, with s among its columns.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_at(
    dst: Dst,
    a: &[f64],
    kc: usize,
    big: usize,
    s: usize,
    q: usize,
    alpha: f64,
    beta: f64,
) {
    let j0 = s * NR;
    let bp = &a[(s / 3 * kc * MR + s % 3 * NR)..][..(kc - 1) * MR + NR];
    let i0 = q * MR;
    // Rows i0 + lo .. i0 + hi of the panel: the tile starts at the diagonal's block of
    // 4 and stops at the last block of 4 holding a row of the augmented matrix.
    let lo = j0.saturating_sub(i0);
    let hi = MR.min((big - i0).next_multiple_of(4));
    let ap = &a[q * MR * kc + lo..][..(kc - 1) * MR + (hi - lo)];
    if lo == 0 && i0 >= j0 + NR - 1 && i0 + MR <= dst.p {
        // SAFETY: rows i0 .. i0 + 12 < p and columns j0 .. j0 + 4 <= i0 < p are
        // inside the p x p buffer and in this thread's columns; the panels hold
        // the reads.
        unsafe {
            let c = dst.c.add(i0 + j0 * dst.ldc);
            for jj in 0..NR {
                let e = c.add(jj * dst.ldc) as *const i8;
                _mm_prefetch::<_MM_HINT_T0>(e);
                _mm_prefetch::<_MM_HINT_T0>(e.add(MR * 8 - 1));
            }
            let acc = tile12(kc, ap.as_ptr(), bp.as_ptr());
            store_full(c, dst.ldc, &acc, alpha, beta);
        }
        return;
    }
    let mut t = [0.0f64; MR * NR];
    // SAFETY: the panels hold the reads (12 (kc - 1) + hi - lo from `ap`); `t`
    // holds 4 columns of 12.
    unsafe {
        let acc = match (hi - lo) / 4 {
            3 => tile12(kc, ap.as_ptr(), bp.as_ptr()),
            2 => tile_small::<2>(kc, ap.as_ptr(), bp.as_ptr()),
            _ => tile_small::<1>(kc, ap.as_ptr(), bp.as_ptr()),
        };
        for (jj, col) in acc.iter().enumerate() {
            for (v, reg) in col.iter().enumerate() {
                _mm256_storeu_pd(t.as_mut_ptr().add(jj * MR + 4 * v), *reg);
            }
        }
    }
    for jj in 0..NR {
        let j = j0 + jj;
        if j >= big {
            break;
        }
        for r in 0..hi - lo {
            let i = i0 + lo + r;
            if i >= big {
                break;
            }
            if i < j {
                continue;
            }
            let v = alpha * t[jj * MR + r];
            if i < dst.p {
                // SAFETY: j <= i < p: inside the p x p buffer, lower part.
                unsafe {
                    let e = dst.c.add(i + j * dst.ldc);
                    *e = if beta == 0.0 { v } else { beta * *e + v };
                }
            } else {
                // SAFETY: i - p < 2 and j < p + 2: inside `extra`.
                unsafe { *dst.extra.add((i - dst.p) * big + j) += v };
            }
        }
    }
}

/// The 12 x 4 micro-kernel: acc[c][v] = sum_k a[k * 12 + 4 v ..][..4] * b[k * 12 + c].
///
/// # Safety
/// AVX2 and FMA available; `a` valid for 12 * kc reads, `b` for 12 * (kc - 1) + 4.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn tile12(kc: usize, a: *const f64, b: *const f64) -> [[__m256d; 3]; 4] {
    let z = _mm256_setzero_pd();
    let (mut c00, mut c01, mut c02) = (z, z, z);
    let (mut c10, mut c11, mut c12) = (z, z, z);
    let (mut c20, mut c21, mut c22) = (z, z, z);
    let (mut c30, mut c31, mut c32) = (z, z, z);
    // The k loop in assembly, unrolled by 4: the 12 accumulators, 3 row vectors and the
    // broadcast column value need all 16 ymm registers, which the compiler's register
    // allocator did not manage (it spilled an accumulator and shuffled the others).
    // SAFETY: reads a[0 .. 12 kc] and b[0 .. 12 (kc - 1) + 4], valid by the caller's promise; no stack,
    // no writes to memory; AVX2 and FMA available.
    unsafe {
        std::arch::asm!(
            "test {k4}, {k4}",
            "jz 3f",
            "2:",
            "vmovupd ymm0, ymmword ptr [{a} + 0]",
            "vmovupd ymm1, ymmword ptr [{a} + 32]",
            "vmovupd ymm2, ymmword ptr [{a} + 64]",
            "vbroadcastsd ymm3, qword ptr [{b} + 0]",
            "vfmadd231pd ymm4, ymm0, ymm3",
            "vfmadd231pd ymm5, ymm1, ymm3",
            "vfmadd231pd ymm6, ymm2, ymm3",
            "vbroadcastsd ymm3, qword ptr [{b} + 8]",
            "vfmadd231pd ymm7, ymm0, ymm3",
            "vfmadd231pd ymm8, ymm1, ymm3",
            "vfmadd231pd ymm9, ymm2, ymm3",
            "vbroadcastsd ymm3, qword ptr [{b} + 16]",
            "vfmadd231pd ymm10, ymm0, ymm3",
            "vfmadd231pd ymm11, ymm1, ymm3",
            "vfmadd231pd ymm12, ymm2, ymm3",
            "vbroadcastsd ymm3, qword ptr [{b} + 24]",
            "vfmadd231pd ymm13, ymm0, ymm3",
            "vfmadd231pd ymm14, ymm1, ymm3",
            "vfmadd231pd ymm15, ymm2, ymm3",
            "vmovupd ymm0, ymmword ptr [{a} + 96]",
            "vmovupd ymm1, ymmword ptr [{a} + 128]",
            "vmovupd ymm2, ymmword ptr [{a} + 160]",
            "vbroadcastsd ymm3, qword ptr [{b} + 96]",
            "vfmadd231pd ymm4, ymm0, ymm3",
            "vfmadd231pd ymm5, ymm1, ymm3",
            "vfmadd231pd ymm6, ymm2, ymm3",
            "vbroadcastsd ymm3, qword ptr [{b} + 104]",
            "vfmadd231pd ymm7, ymm0, ymm3",
            "vfmadd231pd ymm8, ymm1, ymm3",
            "vfmadd231pd ymm9, ymm2, ymm3",
            "vbroadcastsd ymm3, qword ptr [{b} + 112]",
            "vfmadd231pd ymm10, ymm0, ymm3",
            "vfmadd231pd ymm11, ymm1, ymm3",
            "vfmadd231pd ymm12, ymm2, ymm3",
            "vbroadcastsd ymm3, qword ptr [{b} + 120]",
            "vfmadd231pd ymm13, ymm0, ymm3",
            "vfmadd231pd ymm14, ymm1, ymm3",
            "vfmadd231pd ymm15, ymm2, ymm3",
            "vmovupd ymm0, ymmword ptr [{a} + 192]",
            "vmovupd ymm1, ymmword ptr [{a} + 224]",
            "vmovupd ymm2, ymmword ptr [{a} + 256]",
            "vbroadcastsd ymm3, qword ptr [{b} + 192]",
            "vfmadd231pd ymm4, ymm0, ymm3",
            "vfmadd231pd ymm5, ymm1, ymm3",
            "vfmadd231pd ymm6, ymm2, ymm3",
            "vbroadcastsd ymm3, qword ptr [{b} + 200]",
            "vfmadd231pd ymm7, ymm0, ymm3",
            "vfmadd231pd ymm8, ymm1, ymm3",
            "vfmadd231pd ymm9, ymm2, ymm3",
            "vbroadcastsd ymm3, qword ptr [{b} + 208]",
            "vfmadd231pd ymm10, ymm0, ymm3",
            "vfmadd231pd ymm11, ymm1, ymm3",
            "vfmadd231pd ymm12, ymm2, ymm3",
            "vbroadcastsd ymm3, qword ptr [{b} + 216]",
            "vfmadd231pd ymm13, ymm0, ymm3",
            "vfmadd231pd ymm14, ymm1, ymm3",
            "vfmadd231pd ymm15, ymm2, ymm3",
            "vmovupd ymm0, ymmword ptr [{a} + 288]",
            "vmovupd ymm1, ymmword ptr [{a} + 320]",
            "vmovupd ymm2, ymmword ptr [{a} + 352]",
            "vbroadcastsd ymm3, qword ptr [{b} + 288]",
            "vfmadd231pd ymm4, ymm0, ymm3",
            "vfmadd231pd ymm5, ymm1, ymm3",
            "vfmadd231pd ymm6, ymm2, ymm3",
            "vbroadcastsd ymm3, qword ptr [{b} + 296]",
            "vfmadd231pd ymm7, ymm0, ymm3",
            "vfmadd231pd ymm8, ymm1, ymm3",
            "vfmadd231pd ymm9, ymm2, ymm3",
            "vbroadcastsd ymm3, qword ptr [{b} + 304]",
            "vfmadd231pd ymm10, ymm0, ymm3",
            "vfmadd231pd ymm11, ymm1, ymm3",
            "vfmadd231pd ymm12, ymm2, ymm3",
            "vbroadcastsd ymm3, qword ptr [{b} + 312]",
            "vfmadd231pd ymm13, ymm0, ymm3",
            "vfmadd231pd ymm14, ymm1, ymm3",
            "vfmadd231pd ymm15, ymm2, ymm3",
            "add {a}, 384",
            "add {b}, 384",
            "dec {k4}",
            "jnz 2b",
            "3:",
            "test {rem}, {rem}",
            "jz 5f",
            "4:",
            "vmovupd ymm0, ymmword ptr [{a} + 0]",
            "vmovupd ymm1, ymmword ptr [{a} + 32]",
            "vmovupd ymm2, ymmword ptr [{a} + 64]",
            "vbroadcastsd ymm3, qword ptr [{b} + 0]",
            "vfmadd231pd ymm4, ymm0, ymm3",
            "vfmadd231pd ymm5, ymm1, ymm3",
            "vfmadd231pd ymm6, ymm2, ymm3",
            "vbroadcastsd ymm3, qword ptr [{b} + 8]",
            "vfmadd231pd ymm7, ymm0, ymm3",
            "vfmadd231pd ymm8, ymm1, ymm3",
            "vfmadd231pd ymm9, ymm2, ymm3",
            "vbroadcastsd ymm3, qword ptr [{b} + 16]",
            "vfmadd231pd ymm10, ymm0, ymm3",
            "vfmadd231pd ymm11, ymm1, ymm3",
            "vfmadd231pd ymm12, ymm2, ymm3",
            "vbroadcastsd ymm3, qword ptr [{b} + 24]",
            "vfmadd231pd ymm13, ymm0, ymm3",
            "vfmadd231pd ymm14, ymm1, ymm3",
            "vfmadd231pd ymm15, ymm2, ymm3",
            "add {a}, 96",
            "add {b}, 96",
            "dec {rem}",
            "jnz 4b",
            "5:",
            a = inout(reg) a => _,
            b = inout(reg) b => _,
            k4 = inout(reg) kc / 4 => _,
            rem = inout(reg) kc % 4 => _,
            out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _,
            inout("ymm4") c00, inout("ymm5") c01, inout("ymm6") c02,
            inout("ymm7") c10, inout("ymm8") c11, inout("ymm9") c12,
            inout("ymm10") c20, inout("ymm11") c21, inout("ymm12") c22,
            inout("ymm13") c30, inout("ymm14") c31, inout("ymm15") c32,
            options(nostack, readonly),
        );
    }
    [
        [c00, c01, c02],
        [c10, c11, c12],
        [c20, c21, c22],
        [c30, c31, c32],
    ]
}

/// The 8 x 4 and 4 x 4 micro-kernels (NV vectors of rows; the panels' stride stays 12) for
/// tiles on the diagonal or the last rows; the unused accumulators are zero.
///
/// # Safety
/// AVX2 and FMA available; `a` valid for 12 * (kc - 1) + 4 NV reads, `b` for 12 * (kc - 1) + 4.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn tile_small<const NV: usize>(
    kc: usize,
    a: *const f64,
    b: *const f64,
) -> [[__m256d; 3]; 4] {
    let mut acc = [[_mm256_setzero_pd(); 3]; 4];
    for k in 0..kc {
        // SAFETY: k < kc, within the reads the caller vouches for.
        unsafe {
            let mut av = [_mm256_setzero_pd(); NV];
            for (v, r) in av.iter_mut().enumerate() {
                *r = _mm256_loadu_pd(a.add(k * MR + 4 * v));
            }
            for (c, col) in acc.iter_mut().enumerate() {
                let bb = _mm256_broadcast_sd(&*b.add(k * MR + c));
                for v in 0..NV {
                    col[v] = _mm256_fmadd_pd(av[v], bb, col[v]);
                }
            }
        }
    }
    acc
}

/// c[r + jj * ldc] = beta * c + alpha * acc for a whole 12 x 4 tile (beta = 0: overwrite).
///
/// # Safety
/// AVX2 and FMA available; `c` valid for the 12 x 4 tile with leading dimension `ldc`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn store_full(c: *mut f64, ldc: usize, acc: &[[__m256d; 3]; 4], alpha: f64, beta: f64) {
    let (va, vb) = (_mm256_set1_pd(alpha), _mm256_set1_pd(beta));
    for (jj, col) in acc.iter().enumerate() {
        for (v, reg) in col.iter().enumerate() {
            // SAFETY: inside the tile the caller vouches for.
            unsafe {
                let e = c.add(jj * ldc + 4 * v);
                let new = if beta == 0.0 {
                    _mm256_mul_pd(va, *reg)
                } else {
                    _mm256_fmadd_pd(va, *reg, _mm256_mul_pd(vb, _mm256_loadu_pd(e)))
                };
                _mm256_storeu_pd(e, new);
            }
        }
    }
}

/// The 12 x 8 micro-kernel in 512-bit registers, the tile transposed: `acc[r]` holds row r's
/// 8 columns, acc[r][c] = sum_k a[k * 12 + r] * (b0, b1)[k * 12 + c], the columns the two
/// column panels b0 and b1 (4 values of each packed row; one 8-value load when adjacent in
/// a row panel). Each element is the same fused multiply-adds as in `tile12`, in the same
/// order from zero, so the same bits; a 512-bit FMA does twice a 256-bit one's work, at the
/// same rate on CPUs with two 512-bit FMA units.
///
/// # Safety
/// AVX-512F available; `a` valid for 12 * kc reads, `b0` and `b1` for 12 * (kc - 1) + 4.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn tile12x8(kc: usize, a: *const f64, b0: *const f64, b1: *const f64) -> [__m512d; MR] {
    // One k: row k's 12 values of `a` against the 8 columns in `bv`.
    let step = |acc: &mut [__m512d; MR], ak: *const f64, bv: __m512d| {
        for (r, c) in acc.iter_mut().enumerate() {
            // SAFETY: r < 12, inside the row of `a` the caller reads; AVX-512F available.
            unsafe { *c = _mm512_fmadd_pd(_mm512_set1_pd(*ak.add(r)), bv, *c) };
        }
    };
    let mut acc = [_mm512_setzero_pd(); MR];
    if b1 == b0.wrapping_add(NR) {
        for k in 0..kc {
            // SAFETY: k < kc: the 8 values of b0 from 12 k are b0's 4 and b1's 4.
            let bv = unsafe { _mm512_loadu_pd(b0.add(k * MR)) };
            // SAFETY: 12 values of a from 12 k, inside the caller's reads.
            step(&mut acc, unsafe { a.add(k * MR) }, bv);
        }
    } else {
        for k in 0..kc {
            // SAFETY: k < kc: 4 values of each panel from 12 k.
            let bv = unsafe {
                let lo = _mm256_loadu_pd(b0.add(k * MR));
                let hi = _mm256_loadu_pd(b1.add(k * MR));
                _mm512_insertf64x4::<1>(_mm512_castpd256_pd512(lo), hi)
            };
            // SAFETY: 12 values of a from 12 k, inside the caller's reads.
            step(&mut acc, unsafe { a.add(k * MR) }, bv);
        }
    }
    acc
}

/// `store_full` for `tile12x8`'s transposed 12 x 8 tile: c[r + jj * ldc] = beta * c + alpha *
/// acc[r][jj], element by element the same arithmetic (one product, or one fused multiply-add
/// onto beta * c).
///
/// # Safety
/// AVX-512F available; `c` valid for the 12 x 8 tile with leading dimension `ldc`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn store_full_t(c: *mut f64, ldc: usize, acc: &[__m512d; MR], alpha: f64, beta: f64) {
    let mut t = [0.0f64; MR * 2 * NR];
    for (r, v) in acc.iter().enumerate() {
        // SAFETY: `t` holds 12 rows of 8.
        unsafe { _mm512_storeu_pd(t.as_mut_ptr().add(r * 2 * NR), *v) };
    }
    for jj in 0..2 * NR {
        for r in 0..MR {
            let v = t[r * 2 * NR + jj];
            // SAFETY: inside the tile the caller vouches for.
            unsafe {
                let e = c.add(jj * ldc + r);
                *e = if beta == 0.0 {
                    alpha * v
                } else {
                    alpha.mul_add(v, beta * *e)
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Turns the 512-bit kernel off: the two kernels are compared bit for bit.
    pub(super) static NARROW_ONLY: std::sync::atomic::AtomicBool =
        std::sync::atomic::AtomicBool::new(false);

    /// A batch laid out in memory otherwise than row-major: the table and the strides.
    struct Layout {
        x: Vec<f64>,
        rs: usize,
        cs: usize,
        y: Vec<f64>,
        y_at: usize,
        ys: usize,
    }

    impl Layout {
        fn rows(&self, rows: usize) -> StridedRows<'_> {
            StridedRows {
                x: &self.x,
                row_stride: self.rs,
                col_stride: self.cs,
                y: &self.y[self.y_at..],
                y_stride: self.ys,
                rows,
            }
        }
    }

    /// The row-major batch (x, y) as a column-major block, as rows of a wider table with the
    /// target the last column (a C-order file), as the columns of a table with the target the
    /// last column (a Fortran-order file), and with padding between rows and columns.
    fn layouts(p: usize, x: &[f64], y: &[f64]) -> Vec<(&'static str, Layout)> {
        let rows = y.len();
        let cm: Vec<f64> = (0..p)
            .flat_map(|j| (0..rows).map(move |i| x[i * p + j]))
            .collect();
        let mut c_table = vec![0.0; rows * (p + 1)];
        for i in 0..rows {
            c_table[i * (p + 1)..][..p].copy_from_slice(&x[i * p..][..p]);
            c_table[i * (p + 1) + p] = y[i];
        }
        let mut f_table = cm.clone();
        f_table.extend_from_slice(y);
        // Row i, feature j at 3 + 2 i + (2 rows + 1) j; the target at 1 + 3 i.
        let cs = 2 * rows + 1;
        let mut padded = vec![f64::NAN; 3 + 2 * rows + cs * p];
        for i in 0..rows {
            for j in 0..p {
                padded[3 + 2 * i + cs * j] = x[i * p + j];
            }
        }
        let mut padded_y = vec![f64::NAN; 3 * rows + 1];
        for i in 0..rows {
            padded_y[1 + 3 * i] = y[i];
        }
        vec![
            (
                "column-major",
                Layout {
                    x: cm,
                    rs: 1,
                    cs: rows,
                    y: y.to_vec(),
                    y_at: 0,
                    ys: 1,
                },
            ),
            (
                "C-order table",
                Layout {
                    x: c_table.clone(),
                    rs: p + 1,
                    cs: 1,
                    y: c_table,
                    y_at: p,
                    ys: p + 1,
                },
            ),
            (
                "Fortran-order table",
                Layout {
                    x: f_table.clone(),
                    rs: 1,
                    cs: rows,
                    y: f_table,
                    y_at: rows * p,
                    ys: 1,
                },
            ),
            (
                "padded",
                Layout {
                    x: padded[3..].to_vec(),
                    rs: 2,
                    cs,
                    y: padded_y,
                    y_at: 1,
                    ys: 3,
                },
            ),
        ]
    }

    /// Naive reference: (sxx, extra) after the fold, in plain loops.
    fn naive(
        sxx: &[f64],
        p: usize,
        x: &[f64],
        y: &[f64],
        w: &[f64],
        shift: (&[f64], f64),
        decay: f64,
    ) -> (Vec<f64>, Vec<f64>) {
        let big = p + 2;
        let mut c = sxx.to_vec();
        for j in 0..p {
            for i in j..p {
                c[i + j * p] *= decay;
            }
        }
        let mut extra = vec![0.0; 2 * big];
        for k in 0..y.len() {
            let a: Vec<f64> = (0..big)
                .map(|f| {
                    if f < p {
                        x[k * p + f] - shift.0[f]
                    } else if f == p {
                        1.0
                    } else {
                        y[k] - shift.1
                    }
                })
                .collect();
            for j in 0..big {
                for i in j..big {
                    let v = w[k] * a[i] * a[j];
                    if i < p {
                        c[i + j * p] += v;
                    } else {
                        extra[(i - p) * big + j] += v;
                    }
                }
            }
        }
        (c, extra)
    }

    #[test]
    fn kernel_matches_naive_and_keeps_the_upper_triangle() {
        if !available() {
            return;
        }
        let mut seed = 0x2545f4914f6cdd1du64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        };
        const SENTINEL: f64 = -12345.678;
        for p in [1usize, 3, 7, 13, 100, 257] {
            for rows in [1usize, 2, 5, 300] {
                let x: Vec<f64> = (0..rows * p).map(|_| rnd()).collect();
                let y: Vec<f64> = (0..rows).map(|_| rnd()).collect();
                let w: Vec<f64> = (0..rows).map(|_| 0.1 + rnd().abs()).collect();
                let mut sxx0 = vec![SENTINEL; p * p];
                for j in 0..p {
                    for i in j..p {
                        sxx0[i + j * p] = rnd();
                    }
                }
                let equal = vec![0.37; rows];
                // Rows at an offset, and a shift near it (or none).
                let offset: Vec<f64> = (0..p).map(|j| 1e3 * (j as f64 - 2.0)).collect();
                let x: Vec<f64> = x
                    .iter()
                    .enumerate()
                    .map(|(i, v)| v + offset[i % p])
                    .collect();
                let near: Vec<f64> = offset.iter().map(|o| o + 0.5 * rnd()).collect();
                let zeros = vec![0.0; p];
                let cases = [
                    (Weights::Equal(0.37), &equal, (&zeros[..], 0.0)),
                    (Weights::Rows(&w), &w, (&near[..], 0.25)),
                    (Weights::Equal(0.37), &equal, (&near[..], -0.5)),
                ];
                for (weights, wv, shift) in cases {
                    let (want, want_extra) = naive(&sxx0, p, &x, &y, wv, shift, 0.9);
                    for split in [
                        Split::Seq,
                        Split::Rows(2),
                        Split::Rows(3),
                        Split::Cols(2),
                        Split::Cols(3),
                    ] {
                        // The fold of the contiguous rows, with the 512-bit kernel where the
                        // CPU has it or (`narrow`) without.
                        let contiguous = |narrow: bool| {
                            NARROW_ONLY.store(narrow, std::sync::atomic::Ordering::Relaxed);
                            let mut out = sxx0.clone();
                            let mut out_extra = vec![0.0; 2 * (p + 2)];
                            let done = fold(
                                &mut out,
                                &mut out_extra,
                                p,
                                StridedRows::contiguous(p, &x, &y),
                                weights,
                                shift,
                                0.9,
                                false,
                                Some(split),
                            );
                            NARROW_ONLY.store(false, std::sync::atomic::Ordering::Relaxed);
                            assert_eq!(done, Folded::Done);
                            (out, out_extra)
                        };
                        let (got, extra) = contiguous(false);
                        let ctx = format!("p={p} B={rows} {split:?} shift {}", shift.1);
                        // Without the 512-bit kernel: the same bits.
                        let (narrow, narrow_extra) = contiguous(true);
                        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert!(
                            bits(&narrow) == bits(&got) && bits(&narrow_extra) == bits(&extra),
                            "{ctx}: 256-bit and 512-bit kernels differ"
                        );
                        // The same rows laid out otherwise fold to the same bits.
                        for (layout, t) in layouts(p, &x, &y) {
                            let mut other = sxx0.clone();
                            let mut other_extra = vec![0.0; 2 * (p + 2)];
                            let done = fold(
                                &mut other,
                                &mut other_extra,
                                p,
                                t.rows(rows),
                                weights,
                                shift,
                                0.9,
                                false,
                                Some(split),
                            );
                            assert_eq!(done, Folded::Done);
                            assert!(other == got && other_extra == extra, "{ctx}, {layout}");
                        }

                        for j in 0..p {
                            for i in 0..p {
                                let (g, e) = (got[i + j * p], want[i + j * p]);
                                if i < j {
                                    assert_eq!(g.to_bits(), SENTINEL.to_bits(), "{ctx} upper");
                                } else {
                                    let tol = 1e-12 * (1.0 + e.abs());
                                    assert!((g - e).abs() <= tol, "{ctx} ({i},{j}) {g} {e}");
                                }
                            }
                        }
                        let big = p + 2;
                        for r in 0..2 {
                            for j in 0..big {
                                let (g, e) = (extra[r * big + j], want_extra[r * big + j]);
                                let tol = 1e-12 * (1.0 + e.abs());
                                assert!((g - e).abs() <= tol, "{ctx} extra ({r},{j}) {g} {e}");
                            }
                        }
                    }
                }
            }
        }
    }

    /// The copy with its check: the same values as `from_le_bytes` one by one, the same answer
    /// as `all_finite` on them, appended after what `dst` held.
    #[test]
    fn extend_within_limit_copies_and_checks() {
        let limit = super::super::MAX_ABS_VALUE;
        let specials = [
            0.0,
            -0.0,
            1.5,
            -limit,
            limit,
            f64::from_bits(limit.to_bits() + 1),
            -f64::from_bits(limit.to_bits() + 1),
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE / 2.0,
        ];
        for len in [0, 1, 3, 4, 5, 17, 100] {
            for (i, &bad) in specials.iter().enumerate() {
                let mut values: Vec<f64> = (0..len).map(|k| k as f64 * 0.25 - 3.0).collect();
                if len > 0 {
                    values[(i * 7) % len] = bad;
                }
                let mut bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                // A trailing part word is not read.
                bytes.extend([1, 2, 3]);
                let mut dst = vec![7.0];
                let ok = extend_within_limit(&mut dst, &bytes);
                assert_eq!(ok, all_finite(&values), "len {len}, {bad}");
                assert_eq!(dst.len(), len + 1);
                assert_eq!(dst[0], 7.0);
                for (a, b) in dst[1..].iter().zip(&values) {
                    assert_eq!(a.to_bits(), b.to_bits());
                }
            }
        }
    }

    #[test]
    fn finiteness_check() {
        let mut v = vec![1.0; 1001];
        assert!(all_finite(&v) && all_finite(&[]));
        for bad in [f64::NAN, -f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            for at in [0, 3, 1000] {
                v[at] = bad;
                assert!(!all_finite(&v));
                v[at] = 1.0;
            }
        }
        for bad in [f64::MAX, f64::MIN, 1e200, -1.0000000000000002e150] {
            v[7] = bad;
            assert!(!all_finite(&v));
        }
        for ok in [1e150, -1e150, f64::MIN_POSITIVE, 0.0, -0.0, 5e-324, -5e-324] {
            v[7] = ok;
            assert!(all_finite(&v));
        }
    }

    #[test]
    fn a_non_finite_value_folds_nothing() {
        if !available() {
            return;
        }
        for p in [3usize, 40, 500] {
            let rows = 37;
            let x0: Vec<f64> = (0..rows * p).map(|i| (i % 11) as f64 - 5.0).collect();
            let y0: Vec<f64> = (0..rows).map(|i| i as f64).collect();
            for split in [Split::Seq, Split::Rows(2), Split::Cols(2)] {
                for (at_x, bad) in [(Some(5 * p + 1), f64::NAN), (None, f64::INFINITY)] {
                    let (mut x, mut y) = (x0.clone(), y0.clone());
                    match at_x {
                        Some(i) => x[i] = bad,
                        None => y[rows - 1] = bad,
                    }
                    let mut sxx = vec![1.5; p * p];
                    let mut extra = vec![2.5; 2 * (p + 2)];
                    let (w, zeros) = (Weights::Equal(0.1), vec![0.0; p]);
                    let shift = (&zeros[..], 0.0);
                    let done = fold(
                        &mut sxx,
                        &mut extra,
                        p,
                        StridedRows::contiguous(p, &x, &y),
                        w,
                        shift,
                        0.5,
                        false,
                        Some(split),
                    );
                    assert_eq!(done, Folded::NotFinite, "p={p} {split:?}");
                    assert!(sxx.iter().all(|&v| v == 1.5) && extra.iter().all(|&v| v == 2.5));
                    for (layout, t) in layouts(p, &x, &y) {
                        let done = fold(
                            &mut sxx,
                            &mut extra,
                            p,
                            t.rows(rows),
                            w,
                            shift,
                            0.5,
                            false,
                            Some(split),
                        );
                        assert_eq!(done, Folded::NotFinite, "p={p} {split:?} {layout}");
                        assert!(sxx.iter().all(|&v| v == 1.5) && extra.iter().all(|&v| v == 2.5));
                    }
                }
            }
        }
    }
}
