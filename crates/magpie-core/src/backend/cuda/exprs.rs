//! The CUDA C expressions of the elementwise ops, keyed by the `kernel` name of their
//! `UnarySpec` / `BinarySpec` (ops/unary, ops/binary): the spec says what the op is and how its
//! dtypes promote; this table says how a CUDA thread computes one element. An op missing here
//! runs on the CPU fallback. Expressions see `x` (and `y`) converted to the compute type, whose
//! C type is `C`; helpers are in kernels/preamble.cu (`m_*`) and kernels/scalar_ops.cu (`mp_*`).

/// How a unary op computes: in floating point (half types compute in float) and, for ops that
/// keep integer dtypes, in i64.
pub struct UnaryExpr {
    pub float: &'static str,
    pub int: Option<&'static str>,
}

/// The CUDA expression of the unary op with kernel name `kernel`.
pub fn unary(kernel: &str) -> Option<UnaryExpr> {
    let f = |float| Some(UnaryExpr { float, int: None });
    let fi = |float, int| Some(UnaryExpr { float, int: Some(int) });
    match kernel {
        "neg" => fi("-x", "(i64)(0ull - (u64)x)"),
        "exp" => f("m_exp(x)"),
        "exp2" => f("m_exp2(x)"),
        "expm1" => f("m_expm1(x)"),
        "log" => f("m_log(x)"),
        "log2" => f("m_log2(x)"),
        "log10" => f("m_log10(x)"),
        "log1p" => f("m_log1p(x)"),
        "sqrt" => f("m_sqrt(x)"),
        "rsqrt" => f("C(1) / m_sqrt(x)"),
        "reciprocal" => f("C(1) / x"),
        "square" => fi("x * x", "(i64)((u64)x * (u64)x)"),
        "sin" => f("m_sin(x)"),
        "cos" => f("m_cos(x)"),
        "tan" => f("m_tan(x)"),
        "asin" => f("m_asin(x)"),
        "acos" => f("m_acos(x)"),
        "atan" => f("m_atan(x)"),
        "sinh" => f("m_sinh(x)"),
        "cosh" => f("m_cosh(x)"),
        "tanh" => f("m_tanh(x)"),
        "asinh" => f("m_asinh(x)"),
        "acosh" => f("m_acosh(x)"),
        "atanh" => f("m_atanh(x)"),
        "sigmoid" => f("C(1) / (C(1) + m_exp(-x))"),
        "deg2rad" => f("x * C(0.017453292519943295)"),
        "rad2deg" => f("x * C(57.29577951308232)"),
        "sinc" => f("mp_sinc(x)"),
        "abs" => fi("m_fabs(x)", "x < 0 ? (i64)(0ull - (u64)x) : x"),
        "sign" | "sgn" => fi("mp_sign(x)", "(i64)((x > 0) - (x < 0))"),
        "ceil" => f("m_ceil(x)"),
        "floor" => f("m_floor(x)"),
        "round" => f("m_round(x)"),
        "trunc" => f("m_trunc(x)"),
        "frac" => f("x - m_trunc(x)"),
        "erf" => f("m_erf(x)"),
        "erfc" => f("m_erfc(x)"),
        "erfinv" => f("m_erfinv(x)"),
        "lgamma" => f("m_lgamma(x)"),
        _ => None,
    }
}

/// How a binary op computes: in floating point, in i64 for integer dtypes, on bools for bool
/// inputs (else bools compute as integers), or, for comparisons, as a predicate.
pub struct BinaryExpr {
    pub float: Option<&'static str>,
    pub int: Option<&'static str>,
    pub boolean: Option<&'static str>,
}

/// The CUDA expression of the binary op with kernel name `kernel`.
pub fn binary(kernel: &str) -> Option<BinaryExpr> {
    let e = |float: Option<&'static str>, int: Option<&'static str>, boolean: Option<&'static str>| Some(BinaryExpr { float, int, boolean });
    match kernel {
        "add" => e(Some("x + y"), Some("(i64)((u64)x + (u64)y)"), Some("x | y")),
        "sub" => e(Some("x - y"), Some("(i64)((u64)x - (u64)y)"), None),
        "mul" => e(Some("x * y"), Some("(i64)((u64)x * (u64)y)"), Some("x & y")),
        "div" => e(Some("x / y"), None, None),
        "div_trunc" => e(Some("m_trunc(x / y)"), Some("mp_div_trunc_int(x, y)"), None),
        "div_floor" => e(Some("mp_div_floor(x, y)"), Some("mp_div_floor_int(x, y)"), None),
        "remainder" => e(Some("mp_remainder(x, y)"), Some("mp_remainder_int(x, y)"), None),
        "fmod" => e(Some("m_fmod(x, y)"), Some("mp_rem_int(x, y)"), None),
        "pow" => e(Some("m_pow(x, y)"), Some("mp_powi(x, y)"), None),
        "eq" => e(Some("x == y"), Some("x == y"), None),
        "ne" => e(Some("x != y"), Some("x != y"), None),
        "lt" => e(Some("x < y"), Some("x < y"), None),
        "le" => e(Some("x <= y"), Some("x <= y"), None),
        "gt" => e(Some("x > y"), Some("x > y"), None),
        "ge" => e(Some("x >= y"), Some("x >= y"), None),
        "maximum" => e(Some("mp_nan_max(x, y)"), Some("mp_max(x, y)"), Some("x | y")),
        "minimum" => e(Some("mp_nan_min(x, y)"), Some("mp_min(x, y)"), Some("x & y")),
        "fmax" => e(Some("m_fmax(x, y)"), Some("mp_max(x, y)"), Some("x | y")),
        "fmin" => e(Some("m_fmin(x, y)"), Some("mp_min(x, y)"), Some("x & y")),
        "logical_and" => e(Some("x != C(0) && y != C(0)"), Some("x != 0 && y != 0"), None),
        "logical_or" => e(Some("x != C(0) || y != C(0)"), Some("x != 0 || y != 0"), None),
        "logical_xor" => e(Some("(x != C(0)) != (y != C(0))"), Some("(x != 0) != (y != 0)"), None),
        "bitwise_and" => e(None, Some("x & y"), Some("x & y")),
        "bitwise_or" => e(None, Some("x | y"), Some("x | y")),
        "bitwise_xor" => e(None, Some("x ^ y"), Some("x ^ y")),
        "lshift" => e(None, Some("mp_shl(x, y)"), None),
        "rshift" => e(None, Some("mp_shr(x, y)"), None),
        "gcd" => e(None, Some("mp_gcd(x, y)"), None),
        "atan2" => e(Some("m_atan2(x, y)"), None, None),
        "hypot" => e(Some("m_hypot(x, y)"), None, None),
        "copysign" => e(Some("m_copysign(x, y)"), None, None),
        "nextafter" => e(Some("m_nextafter(x, y)"), None, None),
        "logaddexp" => e(Some("mp_logaddexp(x, y)"), None, None),
        "logaddexp2" => e(Some("mp_logaddexp2(x, y)"), None, None),
        "xlogy" => e(Some("mp_xlogy(x, y)"), None, None),
        "xlog1py" => e(Some("mp_xlog1py(x, y)"), None, None),
        "heaviside" => e(Some("x == C(0) ? y : C(x > C(0))"), Some("x == 0 ? y : (i64)(x > 0)"), Some("x | y")),
        _ => None,
    }
}
