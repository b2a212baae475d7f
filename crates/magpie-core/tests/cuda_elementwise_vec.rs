//! The vector walk of the CUDA elementwise kernel (16-byte accesses, several vectors per thread,
//! a scalar tail) against the CPU: sizes around the vector width (body + tail, tail only),
//! views starting at element 1 (must take the strided walk, not misaligned vector accesses),
//! mixed dtype widths, broadcast single elements, in-place ops, and large inputs under several
//! unroll / grid settings (many grid-stride iterations). Skips without CUDA unless
//! `MAGPIE_REQUIRE_CUDA=1`.

#[path = "cuda_util/mod.rs"]
mod util;

use magpie_core::backend::cuda::elementwise;
use magpie_core::{DType, Device, Result, Tensor};
use util::{assert_close, gpu, rand, tol, Rng};

// each dtype compiles ~15 kernels on first use (NVRTC): one per width class keeps the test short
const DTYPES: [DType; 6] = [DType::F32, DType::BF16, DType::F16, DType::F64, DType::U8, DType::Bool];
const SIZES: [usize; 16] = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1023, 4099];

fn check(what: &str, got: Result<Tensor>, want: Result<Tensor>, dev: Device) {
    match (got, want) {
        (Ok(g), Ok(w)) => {
            assert_eq!(g.device(), dev, "{what}: device");
            let (rt, at) = tol(w.dtype());
            assert_close(what, &g.to_device(Device::Cpu).unwrap(), &w, rt, at);
        }
        (Err(_), Err(_)) => {}
        (g, w) => panic!("{what}: gpu {:?} vs cpu {:?}", g.map(|_| ()), w.map(|_| ())),
    }
}

/// A CPU tensor and its GPU copy.
fn pair(rng: &mut Rng, shape: &[usize], d: DType, dev: Device) -> (Tensor, Tensor) {
    let c = rand(rng, shape, d, -3.0, 4.0);
    let g = c.to_device(dev).unwrap();
    (c, g)
}

#[test]
fn body_tail_and_misaligned_views_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(21);
    for d in DTYPES {
        for n in SIZES {
            let what = |s: &str| format!("{s} {d} n={n}");
            let (ac, ag) = pair(&mut rng, &[n], d, dev);
            let (bc, bg) = pair(&mut rng, &[n], d, dev);
            // contiguous, aligned: the vector walk
            check(&what("add"), ag.add(&bg), ac.add(&bc), dev);
            check(&what("mul"), ag.mul(&bg), ac.mul(&bc), dev);
            check(&what("neg"), ag.neg(), ac.neg(), dev);
            check(&what("abs"), ag.abs(), ac.abs(), dev);
            // views starting at element 1 (inputs and output misaligned)
            let (a1c, a1g) = pair(&mut rng, &[n + 1], d, dev);
            let (a1c, a1g) = (a1c.narrow(0, 1, n as i64).unwrap(), a1g.narrow(0, 1, n as i64).unwrap());
            check(&what("add misaligned lhs"), a1g.add(&bg), a1c.add(&bc), dev);
            check(&what("add misaligned both"), a1g.add(&a1g), a1c.add(&a1c), dev);
            check(&what("neg misaligned"), a1g.neg(), a1c.neg(), dev);
            let dc = Tensor::zeros_on(&[n + 1], d, Device::Cpu).unwrap();
            let dg = Tensor::zeros_on(&[n + 1], d, dev).unwrap();
            dc.narrow(0, 1, n as i64).unwrap().copy_(&ac).unwrap();
            dg.narrow(0, 1, n as i64).unwrap().copy_(&ag).unwrap();
            check(&what("copy_ into misaligned"), Ok(dg), Ok(dc), dev);
            // casts between widths (vector width follows the widest operand)
            for to in [DType::F32, DType::BF16] {
                check(&format!("{} to {to}", what("cast")), ag.to_dtype(to), ac.to_dtype(to), dev);
                check(&format!("{} to {to}", what("cast misaligned")), a1g.to_dtype(to), a1c.to_dtype(to), dev);
            }
            // one element broadcast to all (0-d tensor and scalar operands)
            let (sc, sg) = pair(&mut rng, &[], d, dev);
            check(&what("add 0-d"), ag.add(&sg), ac.add(&sc), dev);
            check(&what("mul 0-d lhs"), sg.mul(&ag), sc.mul(&ac), dev);
            check(&what("mul scalar"), ag.mul_scalar(2.5), ac.mul_scalar(2.5), dev);
            // mixed dtypes: promotion to f32 with a narrower input
            let (fc, fg) = pair(&mut rng, &[n], DType::F32, dev);
            check(&what("add f32"), ag.add(&fg), ac.add(&fc), dev);
            // in place, contiguous
            if d.is_float() {
                let (xc, xg) = (ac.copy().unwrap(), ag.copy().unwrap());
                xc.add_(&bc).unwrap();
                xg.add_(&bg).unwrap();
                check(&what("add_"), Ok(xg), Ok(xc), dev);
            }
        }
    }
}

#[test]
fn large_inputs_under_every_tuning_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(22);
    let n = 3 * (1 << 20) + 5;
    let default = elementwise::tuning();
    for d in [DType::F32, DType::BF16, DType::U8] {
        let (ac, ag) = pair(&mut rng, &[n], d, dev);
        let (bc, bg) = pair(&mut rng, &[n], d, dev);
        let (want_add, want_cast) = (ac.add(&bc), ac.to_dtype(DType::F32));
        for (unroll, bps) in [(1, 1), (3, 2), (4, 0), (0, 0)] {
            elementwise::set_tuning(unroll, bps);
            let what = format!("{d} unroll={unroll} blocks/SM={bps}");
            check(&format!("add {what}"), ag.add(&bg), want_add.clone(), dev);
            check(&format!("cast {what}"), ag.to_dtype(DType::F32), want_cast.clone(), dev);
        }
    }
    elementwise::set_tuning(default.0, default.1);
}

/// The generated vector kernels name their walk and use the vector helpers; with
/// `MAGPIE_EW_DUMP=dir` they are written there (to compile and read their PTX without a GPU).
#[test]
fn vector_sources_are_generated() {
    let cases: [(&str, DType, DType, Vec<(DType, DType)>, u8, u8); 5] = [
        ("add", DType::F32, DType::F32, vec![(DType::F32, DType::F32), (DType::F32, DType::F32)], 4, 0),
        ("add", DType::BF16, DType::F32, vec![(DType::BF16, DType::F32), (DType::BF16, DType::F32)], 8, 0),
        ("add", DType::F32, DType::F32, vec![(DType::BF16, DType::F32), (DType::F32, DType::F32)], 4, 2),
        ("cast", DType::F64, DType::F64, vec![(DType::U8, DType::F64)], 2, 0),
        ("add", DType::Bool, DType::Bool, vec![(DType::Bool, DType::Bool), (DType::Bool, DType::Bool)], 16, 1),
    ];
    let dump = std::env::var_os("MAGPIE_EW_DUMP");
    for (name, out, compute, ins, vec, bcast) in cases {
        let expr = if name == "cast" { "x" } else if out == DType::Bool { "x | y" } else { "x + y" };
        let (kname, src) = elementwise::vector_source(name, expr, compute, out, &ins, vec, 2, bcast).unwrap();
        assert!(kname.contains(&format!("_v{vec}u2b{bcast}")), "{kname}");
        assert!(src.contains("mp_ldv") && src.contains("mp_stv"), "{kname}");
        if let Some(d) = &dump {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(std::path::Path::new(d).join(format!("{kname}.cu")), &src).unwrap();
        }
    }
}

/// A contiguous row repeated over the leading dims (a bias added to an activation) takes the
/// vector walk with the row indexed modulo its length: rows of whole vectors (and ones that are
/// not, which take the strided walk), the row on either side, 2-d and 3-d activations, leading 1
/// dims on the row, mixed dtypes, and a row that is a view at element 1 (misaligned: strided).
#[test]
fn row_broadcast_matches_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(23);
    for d in [DType::BF16, DType::F32, DType::F16] {
        for (lead, row) in [(vec![3usize], 8usize), (vec![5], 16), (vec![2, 7], 24), (vec![4], 12), (vec![3], 7), (vec![1000], 2304), (vec![2, 3], 1)] {
            let mut shape = lead.clone();
            shape.push(row);
            let what = format!("{d} {shape:?} + [{row}]");
            let (xc, xg) = pair(&mut rng, &shape, d, dev);
            let (bc, bg) = pair(&mut rng, &[row], d, dev);
            check(&format!("{what} x + b"), xg.add(&bg), xc.add(&bc), dev);
            check(&format!("{what} b * x"), bg.mul(&xg), bc.mul(&xc), dev);
            let (b2c, b2g) = (bc.reshape(&[1, row as i64]).unwrap(), bg.reshape(&[1, row as i64]).unwrap());
            check(&format!("{what} x - b[1, row]"), xg.sub(&b2g), xc.sub(&b2c), dev);
            let (fc, fg) = pair(&mut rng, &[row], DType::F32, dev);
            check(&format!("{what} x + b f32"), xg.add(&fg), xc.add(&fc), dev);
            let (b1c, b1g) = pair(&mut rng, &[row + 1], d, dev);
            let (b1c, b1g) = (b1c.narrow(0, 1, row as i64).unwrap(), b1g.narrow(0, 1, row as i64).unwrap());
            check(&format!("{what} x + b misaligned"), xg.add(&b1g), xc.add(&b1c), dev);
        }
        // a repeated block of the two last dims
        let (xc, xg) = pair(&mut rng, &[3, 4, 16], d, dev);
        let (bc, bg) = pair(&mut rng, &[4, 16], d, dev);
        check(&format!("{d} [3, 4, 16] + [4, 16]"), xg.add(&bg), xc.add(&bc), dev);
    }
}
