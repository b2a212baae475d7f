//! Tests of the unary op family: values against independent references (scipy 1.17 values
//! written out below, closed forms, Rust's std), PyTorch's dtype rules, error cases, and
//! gradients against central finite differences in f64.

use magpie_core::autograd;
use magpie_core::registry::{call, Value};
use magpie_core::{DType, Result, Tensor};

fn t64(v: &[f64]) -> Tensor {
    Tensor::from_slice(v)
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

fn assert_close(got: &[f64], want: &[f64], rtol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= rtol * w.abs() + 1e-300;
        assert!(ok, "{what}[{i}]: got {g}, want {w}");
    }
}

fn reg(op: &str, args: Vec<Value>, kwargs: Vec<(&str, Value)>) -> Result<Tensor> {
    call(op, args, kwargs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())?.into_tensor()
}

/// Values computed with scipy.special 1.17 at x = 0.3, 1.7, 4.5.
#[test]
fn special_functions_match_scipy() {
    let x = t64(&[0.3, 1.7, 4.5]);
    let table: Vec<(&str, [f64; 3])> = vec![
        ("erf", [0.3286267594591274, 0.9837904585907745, 0.9999999998033839]),
        ("erfc", [0.6713732405408726, 0.01620954140922544, 1.9661604415428878e-10]),
        ("special.erfcx", [0.7345993345676554, 0.2916632970753434, 0.12248480427384142]),
        ("special.ndtr", [0.6179114221889526, 0.955434537241457, 0.9999966023268753]),
        ("special.log_ndtr", [-0.4814101615884813, -0.045589029170068934, -3.3976788968344594e-06]),
        ("lgamma", [1.0957979948180756, -0.09580769740706585, 2.4537365708424423]),
        ("digamma", [-3.502524222200133, 0.20854787487349394, 1.388870926359529]),
        ("i0", [1.0226268793515974, 1.8639649620738397, 17.481171855609276]),
        ("special.i0e", [0.7575806251825481, 0.3405156879824709, 0.1941982776283823]),
        ("special.i1", [0.15169384000359282, 1.1963465656344823, 15.389222753735924]),
        ("special.i1e", [0.11237756063983881, 0.2185528065984934, 0.17095882229749212]),
        ("special.modified_bessel_k0", [1.3724600605442983, 0.16549631805699652, 0.006399857243233976]),
        ("special.modified_bessel_k1", [3.055992033457325, 0.20936248820408254, 0.00707809490896809]),
        ("special.scaled_modified_bessel_k0", [1.8526273007720155, 0.9059181385685512, 0.5760967897687884]),
        ("special.scaled_modified_bessel_k1", [4.12515776224447, 1.1460392462302542, 0.6371497987781356]),
        ("special.bessel_j0", [0.9776262465382961, 0.39798485944610945, -0.3205425089851215]),
        ("special.bessel_j1", [0.148318816273104, 0.5777652315290233, -0.2310604319233706]),
        ("special.bessel_y0", [-0.8072735778045195, 0.45202700018163466, -0.1947050086295042]),
        ("special.bessel_y1", [-2.2931051383885293, -0.2847262450640684, 0.300997323069655]),
        ("special.airy_ai", [0.2788064819550049, 0.05432479273291946, 0.00033025032351430934]),
        ("special.entr", [0.3611918412977808, -0.9020680268056896, -6.768348285493234]),
        ("special.spherical_bessel_j0", [0.9850673555377986, 0.5833322414426286, -0.21722891503668823]),
    ];
    for (op, want) in table {
        let got = reg(op, vec![Value::Tensor(x.clone())], vec![]).unwrap();
        assert_eq!(got.dtype(), DType::F64, "{op}");
        assert_close(&vals(&got), &want, 1e-12, op);
    }
    let inv = |op: &str, v: &[f64], want: &[f64]| {
        let got = reg(op, vec![Value::Tensor(t64(v))], vec![]).unwrap();
        assert_close(&vals(&got), want, 1e-12, op);
    };
    inv("erfinv", &[-0.9, 0.1, 0.999], &[-1.1630871536766743, 0.08885599049425769, 2.326753765513524]);
    inv("special.ndtri", &[1e-10, 0.3, 0.9], &[-6.361340902404056, -0.5244005127080409, 1.2815515655446004]);
    inv("special.log_ndtr", &[-30.0], &[-454.32124395634327]);
    inv("special.airy_ai", &[-3.0, -12.0], &[-0.37881429367765806, -0.06655517505437264]);
    let pg = |n: i64, x: f64| vals(&t64(&[x]).polygamma(n).unwrap())[0];
    assert_close(&[pg(1, 0.3), pg(2, 1.7), pg(3, -2.5)], &[12.245364546107734, -0.6040890841034592, 194.74787621918756], 1e-11, "polygamma");
    assert_close(&vals(&t64(&[2.5]).mvlgamma(3).unwrap()), &[1.8809954616117743], 1e-13, "mvlgamma");
}

#[test]
fn orthogonal_polynomials() {
    let x = Value::Tensor(t64(&[0.3]));
    let cases: [(&str, f64, f64); 7] = [
        ("special.chebyshev_polynomial_t", 5.0, 0.99888),
        ("special.chebyshev_polynomial_u", 5.0, 1.01376),
        ("special.legendre_polynomial_p", 4.0, 0.07293749999999993),
        ("special.hermite_polynomial_h", 4.0, 7.8096),
        ("special.hermite_polynomial_he", 4.0, 2.4681),
        ("special.laguerre_polynomial_l", 4.0, 0.05233749999999998),
        ("special.shifted_chebyshev_polynomial_t", 3.0, 0.9440000000000001),
    ];
    for (op, n, want) in cases {
        let got = reg(op, vec![x.clone(), Value::Float(n)], vec![]).unwrap();
        assert_close(&vals(&got), &[want], 1e-12, op);
    }
    // integer inputs give the default float dtype; broadcasting of x and n
    let xi = Tensor::from_vec(vec![1i64, 2, 3], &[3, 1]).unwrap();
    let ni = Tensor::from_slice(&[0i64, 1, 2]);
    let out = reg("special.hermite_polynomial_h", vec![Value::Tensor(xi), Value::Tensor(ni)], vec![]).unwrap();
    assert_eq!(out.dtype(), DType::F32);
    assert_eq!(out.shape(), &[3, 3]);
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![1., 2., 2., 1., 4., 14., 1., 6., 34.]);
    // two numbers are rejected
    assert!(reg("special.legendre_polynomial_p", vec![Value::Int(2), Value::Int(3)], vec![]).is_err());
}

#[test]
fn elementary_values_and_dtypes() {
    let xs = [-2.5, -0.5, 0.0, 0.5, 1.5, 2.5];
    let x = t64(&xs);
    let std: Vec<(&str, fn(f64) -> f64)> = vec![
        ("sin", f64::sin), ("cos", f64::cos), ("tan", f64::tan), ("atan", f64::atan), ("sinh", f64::sinh),
        ("cosh", f64::cosh), ("tanh", f64::tanh), ("asinh", f64::asinh), ("exp", f64::exp), ("exp2", f64::exp2),
        ("expm1", f64::exp_m1), ("ceil", f64::ceil), ("floor", f64::floor), ("trunc", f64::trunc),
        ("round", f64::round_ties_even), ("square", |v| v * v), ("neg", |v| -v), ("abs", f64::abs),
        ("sigmoid", |v| 1.0 / (1.0 + (-v).exp())), ("frac", |v| v - v.trunc()),
        ("sign", |v| if v > 0.0 { 1.0 } else if v < 0.0 { -1.0 } else { 0.0 }),
    ];
    for (op, f) in std {
        let got = reg(op, vec![Value::Tensor(x.clone())], vec![]).unwrap();
        let want: Vec<f64> = xs.iter().map(|&v| f(v)).collect();
        assert_close(&vals(&got), &want, 1e-15, op);
    }
    // round half to even, with decimals
    let r = t64(&[0.5, 1.5, 2.5, 1.2345, 1234.5]);
    assert_eq!(vals(&r.round().unwrap()), vec![0., 2., 2., 1., 1234.]);
    assert_close(&vals(&r.round_decimals(2).unwrap()), &[0.5, 1.5, 2.5, 1.23, 1234.5], 1e-15, "round(2)");
    assert_close(&vals(&r.round_decimals(-2).unwrap()), &[0., 0., 0., 0., 1200.], 1e-15, "round(-2)");
    // integer inputs: abs/neg/sign/square/floor keep the dtype, float ops promote to float32
    let xi = Tensor::from_slice(&[-3i64, 0, 4]);
    for op in ["abs", "neg", "sign", "sgn", "square", "floor", "ceil", "round", "trunc", "positive", "nan_to_num"] {
        let out = reg(op, vec![Value::Tensor(xi.clone())], vec![]).unwrap();
        assert_eq!(out.dtype(), DType::I64, "{op}");
    }
    assert_eq!(xi.abs().unwrap().to_vec::<i64>().unwrap(), vec![3, 0, 4]);
    assert_eq!(xi.square().unwrap().to_vec::<i64>().unwrap(), vec![9, 0, 16]);
    for op in ["sin", "exp", "sqrt", "sigmoid", "erf", "lgamma", "angle", "special.i0e", "nn.functional.softsign"] {
        let out = reg(op, vec![Value::Tensor(xi.clone())], vec![]).unwrap();
        assert_eq!(out.dtype(), DType::F32, "{op}");
    }
    assert_eq!(xi.angle().unwrap().to_vec::<f64>().unwrap()[0], std::f32::consts::PI as f64);
    assert!(reg("frac", vec![Value::Tensor(xi.clone())], vec![]).is_err());
    assert_eq!(xi.bitwise_not().unwrap().to_vec::<i64>().unwrap(), vec![2, -1, -5]);
    assert!(t64(&[1.0]).bitwise_not().is_err());
    let b = Tensor::from_slice(&[true, false]);
    assert!(b.neg().is_err());
    assert_eq!(b.bitwise_not().unwrap().to_vec::<bool>().unwrap(), vec![false, true]);
    // u8 wraps like PyTorch
    let u = Tensor::from_slice(&[3u8]);
    assert_eq!(u.neg().unwrap().to_vec::<u8>().unwrap(), vec![253]);
}

#[test]
fn predicates_and_cleaning() {
    let x = t64(&[f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 2.0]);
    let b = |t: Tensor| t.to_vec::<bool>().unwrap();
    assert_eq!(b(x.isnan().unwrap()), vec![true, false, false, false, false]);
    assert_eq!(b(x.isinf().unwrap()), vec![false, true, true, false, false]);
    assert_eq!(b(x.isposinf().unwrap()), vec![false, true, false, false, false]);
    assert_eq!(b(x.isneginf().unwrap()), vec![false, false, true, false, false]);
    assert_eq!(b(x.isfinite().unwrap()), vec![false, false, false, true, true]);
    assert_eq!(b(x.signbit().unwrap()), vec![false, false, true, true, false]);
    assert_eq!(b(x.logical_not().unwrap()), vec![false, false, false, true, false]);
    assert_eq!(b(x.isreal().unwrap()), vec![true; 5]);
    let n = x.nan_to_num(None, None, Some(-7.0)).unwrap();
    assert_eq!(vals(&n), vec![0.0, f64::MAX, -7.0, -0.0, 2.0]);
    let n32 = x.to_dtype(DType::F32).unwrap().nan_to_num(Some(1.0), None, None).unwrap();
    assert_eq!(n32.to_vec::<f32>().unwrap(), vec![1.0, f32::MAX, f32::MIN, -0.0, 2.0]);
}

#[test]
fn activations_values() {
    let xs = [-3.5, -1.0, -0.25, 0.0, 0.25, 1.0, 3.5, 7.0];
    let x = t64(&xs);
    let check = |got: Tensor, f: &dyn Fn(f64) -> f64, what: &str| {
        let want: Vec<f64> = xs.iter().map(|&v| f(v)).collect();
        assert_close(&vals(&got), &want, 1e-14, what);
    };
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    check(x.relu().unwrap(), &|v| v.max(0.0), "relu");
    check(x.relu6().unwrap(), &|v| v.clamp(0.0, 6.0), "relu6");
    check(x.hardtanh(-0.5, 2.0).unwrap(), &|v| v.clamp(-0.5, 2.0), "hardtanh");
    check(x.elu(0.7).unwrap(), &|v| if v > 0.0 { v } else { 0.7 * (v.exp() - 1.0) }, "elu");
    check(x.celu(2.0).unwrap(), &|v| v.max(0.0) + (2.0 * ((v / 2.0).exp() - 1.0)).min(0.0), "celu");
    check(x.leaky_relu(0.1).unwrap(), &|v| if v > 0.0 { v } else { 0.1 * v }, "leaky_relu");
    check(x.hardswish().unwrap(), &|v| v * (v + 3.0).clamp(0.0, 6.0) / 6.0, "hardswish");
    check(x.hardsigmoid().unwrap(), &|v| (v + 3.0).clamp(0.0, 6.0) / 6.0, "hardsigmoid");
    check(x.hardshrink(0.5).unwrap(), &|v| if v.abs() <= 0.5 { 0.0 } else { v }, "hardshrink");
    check(x.softshrink(0.5).unwrap(), &|v| if v > 0.5 { v - 0.5 } else if v < -0.5 { v + 0.5 } else { 0.0 }, "softshrink");
    check(x.tanhshrink().unwrap(), &|v| v - v.tanh(), "tanhshrink");
    check(x.threshold(0.5, -9.0).unwrap(), &|v| if v <= 0.5 { -9.0 } else { v }, "threshold");
    check(x.softplus(2.0, 5.0).unwrap(), &|v| if 2.0 * v > 5.0 { v } else { (2.0 * v).exp().ln_1p() / 2.0 }, "softplus");
    check(x.softsign().unwrap(), &|v| v / (1.0 + v.abs()), "softsign");
    check(x.silu().unwrap(), &|v| v * sig(v), "silu");
    check(x.mish().unwrap(), &|v| v * (1.0 + v.exp()).ln().tanh(), "mish");
    check(x.logsigmoid().unwrap(), &|v| -(-v).exp().ln_1p(), "logsigmoid");
    check(x.gelu("tanh").unwrap(), &|v| 0.5 * v * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v)).tanh()), "gelu tanh");
    let phi = [0.00023262907903552504, 0.15865525393145707, 0.4012936743170763, 0.5, 0.5987063256829237, 0.8413447460685429, 0.9997673709209645, 0.9999999999987201];
    let want: Vec<f64> = xs.iter().zip(phi).map(|(v, p)| v * p).collect();
    assert_close(&vals(&x.gelu("none").unwrap()), &want, 1e-13, "gelu");
    assert!(x.gelu("fast").is_err());
    assert!(x.hardtanh(1.0, 0.0).is_err());
    assert!(x.softshrink(-1.0).is_err());
    // glu halves along a dim; prelu per channel
    let g = Tensor::from_vec(vec![1.0f64, 2.0, 0.0, -1.0], &[2, 2]).unwrap();
    let out = g.glu(0).unwrap();
    assert_close(&vals(&out), &[1.0 * sig(0.0), 2.0 * sig(-1.0)], 1e-15, "glu");
    assert!(Tensor::from_slice(&[1.0f64, 2.0, 3.0]).glu(0).is_err());
    let p = Tensor::from_vec(vec![-1.0f64, -1.0, 2.0, -2.0], &[1, 2, 2]).unwrap();
    let w = t64(&[0.5, 0.25]);
    assert_eq!(vals(&p.prelu(&w).unwrap()), vec![-0.5, -0.5, 2.0, -0.5]);
    assert!(p.prelu(&t64(&[1.0, 2.0, 3.0])).is_err());
    // rrelu in evaluation is leaky_relu with the mean slope; training slopes stay within the bounds
    assert_close(&vals(&x.rrelu(0.1, 0.3, false).unwrap()), &vals(&x.leaky_relu(0.2).unwrap()), 1e-15, "rrelu eval");
    let r = x.rrelu(0.1, 0.3, true).unwrap();
    for (&v, &o) in xs.iter().zip(&vals(&r)) {
        if v < 0.0 {
            assert!(o <= 0.1 * v && o >= 0.3 * v, "rrelu slope out of range");
        }
    }
    // integer relu/hardtanh keep the dtype
    let xi = Tensor::from_slice(&[-3i64, 2, 9]);
    assert_eq!(xi.relu().unwrap().to_vec::<i64>().unwrap(), vec![0, 2, 9]);
    assert_eq!(xi.relu6().unwrap().to_vec::<i64>().unwrap(), vec![0, 2, 6]);
}

#[test]
fn inplace_forms() {
    let x = t64(&[-1.0, 0.25, 4.0]);
    reg("relu_", vec![Value::Tensor(x.clone())], vec![]).unwrap();
    assert_eq!(vals(&x), vec![0.0, 0.25, 4.0]);
    reg("sqrt_", vec![Value::Tensor(x.clone())], vec![]).unwrap();
    assert_eq!(vals(&x), vec![0.0, 0.5, 2.0]);
    reg("nn.functional.leaky_relu", vec![Value::Tensor(x.clone())], vec![("negative_slope", Value::Float(0.5)), ("inplace", Value::Bool(true))])
        .unwrap();
    assert_eq!(vals(&x), vec![0.0, 0.5, 2.0]);
    // a float result cannot be written into an integer tensor
    let xi = Tensor::from_slice(&[1i64, 2]);
    assert!(reg("sin_", vec![Value::Tensor(xi.clone())], vec![]).is_err());
    reg("neg_", vec![Value::Tensor(xi.clone())], vec![]).unwrap();
    assert_eq!(xi.to_vec::<i64>().unwrap(), vec![-1, -2]);
}

#[test]
fn domain_errors() {
    assert!(t64(&[0.4, 3.0]).mvlgamma(2).is_err());
    assert!(t64(&[1.0]).mvlgamma(0).is_err());
    assert!(t64(&[1.0]).polygamma(-1).is_err());
    let d = vals(&t64(&[0.0, -0.0, -2.0]).digamma().unwrap());
    assert_eq!(d[0], f64::NEG_INFINITY);
    assert_eq!(d[1], f64::INFINITY);
    assert!(d[2].is_nan());
    let e = vals(&t64(&[-1.0, 1.0, 1.5]).erfinv().unwrap());
    assert_eq!(e[0], f64::NEG_INFINITY);
    assert_eq!(e[1], f64::INFINITY);
    assert!(e[2].is_nan());
}

/// Checks the gradient of `f` at `x` (f64) against central differences of `sum(f(x) * w)`.
fn gradcheck(name: &str, f: &dyn Fn(&Tensor) -> Result<Tensor>, xs: &[f64]) {
    let n = xs.len();
    let x = t64(xs).with_requires_grad().unwrap();
    let out = f(&x).unwrap();
    let w: Vec<f64> = (0..out.numel()).map(|i| 0.5 + 0.37 * i as f64).collect();
    let gw = Tensor::from_vec(w.clone(), out.shape()).unwrap();
    let g = autograd::grad(&[out], &[x.clone()], &[gw], false, false, false).unwrap();
    let analytic = vals(g[0].as_ref().unwrap());
    let objective = |v: &[f64]| -> f64 {
        let _ng = autograd::no_grad();
        vals(&f(&t64(v)).unwrap()).iter().zip(&w).map(|(a, b)| a * b).sum()
    };
    for i in 0..n {
        let h = 1e-6 * xs[i].abs().max(1.0);
        let (mut p, mut m) = (xs.to_vec(), xs.to_vec());
        p[i] += h;
        m[i] -= h;
        let numeric = (objective(&p) - objective(&m)) / (2.0 * h);
        let tol = 1e-6 * numeric.abs().max(1.0);
        assert!((analytic[i] - numeric).abs() <= tol, "{name}: d/dx[{i}] analytic {} numeric {numeric}", analytic[i]);
    }
}

#[test]
fn gradients_match_finite_differences() {
    let xs = [-1.7, -0.6, 0.35, 0.8, 2.3];
    let pos = [0.2, 0.7, 1.3, 2.9, 4.1];
    let unit = [-0.9, -0.45, 0.1, 0.55, 0.85];
    let prob = [0.05, 0.3, 0.5, 0.77, 0.95];
    type F = Box<dyn Fn(&Tensor) -> Result<Tensor>>;
    let on_reals: Vec<(&str, F)> = vec![
        ("sin", Box::new(|x| x.sin())), ("cos", Box::new(|x| x.cos())), ("tan", Box::new(|x| x.tan())),
        ("atan", Box::new(|x| x.atan())), ("sinh", Box::new(|x| x.sinh())), ("cosh", Box::new(|x| x.cosh())),
        ("tanh", Box::new(|x| x.tanh())), ("asinh", Box::new(|x| x.asinh())), ("exp", Box::new(|x| x.exp())),
        ("exp2", Box::new(|x| x.exp2())), ("expm1", Box::new(|x| x.expm1())), ("square", Box::new(|x| x.square())),
        ("sigmoid", Box::new(|x| x.sigmoid())), ("abs", Box::new(|x| x.abs())), ("sinc", Box::new(|x| x.sinc())),
        ("erf", Box::new(|x| x.erf())), ("erfc", Box::new(|x| x.erfc())), ("erfcx", Box::new(|x| x.special_erfcx())),
        ("ndtr", Box::new(|x| x.special_ndtr())), ("log_ndtr", Box::new(|x| x.special_log_ndtr())),
        ("i0", Box::new(|x| x.i0())), ("i0e", Box::new(|x| x.special_i0e())), ("i1", Box::new(|x| x.special_i1())),
        ("i1e", Box::new(|x| x.special_i1e())), ("j0", Box::new(|x| x.special_bessel_j0())),
        ("j1", Box::new(|x| x.special_bessel_j1())), ("sph_j0", Box::new(|x| x.special_spherical_bessel_j0())),
        ("deg2rad", Box::new(|x| x.deg2rad())), ("frac", Box::new(|x| x.frac())),
        ("elu", Box::new(|x| x.elu(0.7))), ("selu", Box::new(|x| x.selu())), ("celu", Box::new(|x| x.celu(1.5))),
        ("leaky_relu", Box::new(|x| x.leaky_relu(0.2))), ("hardswish", Box::new(|x| x.hardswish())),
        ("hardsigmoid", Box::new(|x| x.hardsigmoid())), ("softplus", Box::new(|x| x.softplus(1.5, 3.0))),
        ("silu", Box::new(|x| x.silu())), ("mish", Box::new(|x| x.mish())), ("gelu", Box::new(|x| x.gelu("none"))),
        ("gelu_tanh", Box::new(|x| x.gelu("tanh"))), ("logsigmoid", Box::new(|x| x.logsigmoid())),
        ("softsign", Box::new(|x| x.softsign())), ("tanhshrink", Box::new(|x| x.tanhshrink())),
        ("relu", Box::new(|x| x.relu())), ("hardtanh", Box::new(|x| x.hardtanh(-1.0, 1.0))),
        ("threshold", Box::new(|x| x.threshold(0.0, 2.0))), ("hardshrink", Box::new(|x| x.hardshrink(0.5))),
        ("softshrink", Box::new(|x| x.softshrink(0.5))), ("glu", Box::new(|x| x.narrow(0, 0, 4)?.glu(0))),
        ("digamma", Box::new(|x| x.digamma())), ("polygamma2", Box::new(|x| x.polygamma(2))),
    ];
    for (name, f) in &on_reals {
        gradcheck(name, f.as_ref(), &xs);
    }
    let on_pos: Vec<(&str, F)> = vec![
        ("log", Box::new(|x| x.log())), ("log2", Box::new(|x| x.log2())), ("log10", Box::new(|x| x.log10())),
        ("log1p", Box::new(|x| x.log1p())), ("sqrt", Box::new(|x| x.sqrt())), ("rsqrt", Box::new(|x| x.rsqrt())),
        ("reciprocal", Box::new(|x| x.reciprocal())), ("lgamma", Box::new(|x| x.lgamma())),
        ("mvlgamma", Box::new(|x| x.add_scalar(1.0)?.mvlgamma(3))), ("k0", Box::new(|x| x.special_modified_bessel_k0())),
        ("k1", Box::new(|x| x.special_modified_bessel_k1())), ("k0e", Box::new(|x| x.special_scaled_modified_bessel_k0())),
        ("k1e", Box::new(|x| x.special_scaled_modified_bessel_k1())), ("y0", Box::new(|x| x.special_bessel_y0())),
        ("y1", Box::new(|x| x.special_bessel_y1())), ("entr", Box::new(|x| x.special_entr())),
        ("acosh", Box::new(|x| x.add_scalar(1.0)?.acosh())),
    ];
    for (name, f) in &on_pos {
        gradcheck(name, f.as_ref(), &pos);
    }
    let on_unit: Vec<(&str, F)> = vec![
        ("asin", Box::new(|x| x.asin())), ("acos", Box::new(|x| x.acos())), ("atanh", Box::new(|x| x.atanh())),
        ("erfinv", Box::new(|x| x.erfinv())),
    ];
    for (name, f) in &on_unit {
        gradcheck(name, f.as_ref(), &unit);
    }
    gradcheck("logit", &|x| x.logit(None), &prob);
    gradcheck("logit_eps", &|x| x.logit(Some(0.1)), &prob);
    gradcheck("ndtri", &|x| x.special_ndtri(), &prob);
    let w = t64(&[0.3]);
    gradcheck("prelu", &|x| x.prelu(&w), &xs);
}
