//! `gemm-threads`: the `gemm` crate alone at the GPT step's linear shapes, fastest of 200
//! interleaved repetitions: forward on 1 thread, split over 2 (`Parallelism::Rayon(2)`), and split
//! by rows into two 1-thread products; backward (`dX = g W`, `dW = g^T X`) on 1 thread, each product
//! split over 2, and the two products side by side (`rayon::join`, what `linear`'s backward does).
//! Run with `RAYON_NUM_THREADS=2 target/release/gemm-threads` (benchmark/NOTES.md, "The training step at 2 threads", 2026-11-21).

use std::time::Instant;
fn mm(m: usize, n: usize, k: usize, a: &[f32], ars: isize, acs: isize, b: &[f32], brs: isize, bcs: isize, c: &mut [f32], par: gemm::Parallelism) {
    unsafe { gemm::gemm(m, n, k, c.as_mut_ptr(), 1, n as isize, false, a.as_ptr(), acs, ars, b.as_ptr(), bcs, brs, 0.0f32, 1.0f32, false, false, false, par) }
}
fn main() {
    let reps = 200;
    // (rows, in, out): linear y[rows,out] = x[rows,in] @ w^T ; w [out,in]
    for (rows, inf, outf) in [(1024usize, 128usize, 384usize), (1024, 128, 128), (1024, 128, 512), (1024, 512, 128)] {
        let x = vec![0.5f32; rows * inf];
        let w = vec![0.25f32; outf * inf];
        let g = vec![0.1f32; rows * outf];
        let mut y = vec![0f32; rows * outf];
        let mut gx = vec![0f32; rows * inf];
        let mut gw = vec![0f32; outf * inf];
        let mut best = [f64::MAX; 6];
        for r in 0..reps {
            let which = r % 6;
            let t = Instant::now();
            match which {
                0 => mm(rows, outf, inf, &x, inf as isize, 1, &w, 1, inf as isize, &mut y, gemm::Parallelism::None),
                1 => mm(rows, outf, inf, &x, inf as isize, 1, &w, 1, inf as isize, &mut y, gemm::Parallelism::Rayon(2)),
                2 => { // backward serial: gx = g @ w ; gw = g^T @ x
                    mm(rows, inf, outf, &g, outf as isize, 1, &w, inf as isize, 1, &mut gx, gemm::Parallelism::None);
                    mm(outf, inf, rows, &g, 1, outf as isize, &x, inf as isize, 1, &mut gw, gemm::Parallelism::None);
                }
                3 => {
                    mm(rows, inf, outf, &g, outf as isize, 1, &w, inf as isize, 1, &mut gx, gemm::Parallelism::Rayon(2));
                    mm(outf, inf, rows, &g, 1, outf as isize, &x, inf as isize, 1, &mut gw, gemm::Parallelism::Rayon(2));
                }
                5 => {
                    let h = rows / 2;
                    let (y0, y1) = y.split_at_mut(h * outf);
                    let (x0, x1) = x.split_at(h * inf);
                    rayon::join(
                        || mm(h, outf, inf, x0, inf as isize, 1, &w, 1, inf as isize, y0, gemm::Parallelism::None),
                        || mm(rows - h, outf, inf, x1, inf as isize, 1, &w, 1, inf as isize, y1, gemm::Parallelism::None));
                }
                _ => {
                    let (gxr, gwr) = (&mut gx, &mut gw);
                    rayon::join(
                        || mm(rows, inf, outf, &g, outf as isize, 1, &w, inf as isize, 1, gxr, gemm::Parallelism::None),
                        || mm(outf, inf, rows, &g, 1, outf as isize, &x, inf as isize, 1, gwr, gemm::Parallelism::None));
                }
            }
            let dt = t.elapsed().as_secs_f64() * 1e3;
            if r >= 10 && dt < best[which] { best[which] = dt; }
        }
        let fl = 2.0 * (rows * inf * outf) as f64 / 1e6;
        println!("{rows}x{inf}->{outf}: fwd 1t {:.3} ms ({:.0} GF/s)  2t {:.3} ({:.2}x) msplit {:.3} ({:.2}x) | bwd 1t {:.3}  2t {:.3} ({:.2}x)  join {:.3} ({:.2}x)",
            best[0], fl / best[0], best[1], best[0] / best[1], best[5], best[0] / best[5], best[2], best[3], best[2] / best[3], best[4], best[2] / best[4]);
    }
}
