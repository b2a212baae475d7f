//! `torch.einsum`: operands are contracted left to right; each pairwise contraction is a
//! permute + reshape + batched product (the same primitive as `matmul`), labels no longer needed
//! are summed out as early as possible.

use super::mm_prim;
use crate::tensor::Tensor;
use crate::{Error, Result};

const OP: &str = "einsum";

/// One subscript label: a letter, or the `i`-th dim covered by `...` (aligned from the right).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Label {
    Ell(usize),
    Char(char),
}

/// Parses one term (`"ij"`, `"...k"`) into labels; `ell` is the number of dims `...` stands for
/// in this operand and `max_ell` the most over all operands.
fn parse_term(term: &str, ell: usize, max_ell: usize) -> Result<Vec<Label>> {
    let mut out = Vec::new();
    let mut rest = term;
    let mut seen_ell = false;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("...") {
            if seen_ell {
                return Err(Error::value(OP, "einsum(): found more than one ellipsis ('...') in a subscript"));
            }
            seen_ell = true;
            out.extend((max_ell - ell..max_ell).map(Label::Ell));
            rest = r;
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        if !c.is_ascii_alphabetic() {
            return Err(Error::value(OP, format!("einsum(): invalid subscript given at index {}: '{c}'", term.len() - rest.len())));
        }
        out.push(Label::Char(c));
        rest = &rest[1..];
    }
    Ok(out)
}

fn letters(term: &str) -> usize {
    term.chars().filter(|c| c.is_ascii_alphabetic()).count()
}

/// `torch.einsum(equation, operands)`.
pub fn einsum(equation: &str, operands: &[Tensor]) -> Result<Tensor> {
    let _prof = crate::profiler::op_list("einsum", operands);
    if crate::amp::any_active() {
        let refs: Vec<&Tensor> = operands.iter().collect();
        if let Some(c) = crate::amp::tensors("einsum", &refs)? {
            return einsum(equation, &c.args);
        }
    }
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != operands.len() {
        return Err(Error::value(
            OP,
            format!("einsum(): {} operands were provided but the equation specifies {}", operands.len(), terms.len()),
        ));
    }
    // how many dims each `...` covers
    let mut ells = Vec::with_capacity(terms.len());
    for (i, (t, x)) in terms.iter().zip(operands).enumerate() {
        let nl = letters(t);
        let has_ell = t.contains("...");
        if (!has_ell && nl != x.ndim()) || (has_ell && nl > x.ndim()) {
            return Err(Error::value(
                OP,
                format!("einsum(): the number of subscripts in the equation ({nl}) does not match the number of dimensions ({}) for operand {i}{}", x.ndim(), if has_ell { "" } else { " and no ellipsis was given" }),
            ));
        }
        ells.push(if has_ell { x.ndim() - nl } else { 0 });
    }
    let max_ell = ells.iter().copied().max().unwrap_or(0);
    let mut ops: Vec<(Tensor, Vec<Label>)> = Vec::with_capacity(operands.len());
    for ((t, x), &e) in terms.iter().zip(operands).zip(&ells) {
        let labels = parse_term(t, e, max_ell)?;
        ops.push(take_diagonals(x.clone(), labels)?);
    }
    let out_labels: Vec<Label> = match &rhs {
        Some(r) => {
            let has_ell = r.contains("...");
            let l = parse_term(r, if has_ell { max_ell } else { 0 }, max_ell)?;
            for (i, lab) in l.iter().enumerate() {
                if l[..i].contains(lab) {
                    return Err(Error::value(OP, format!("einsum(): output subscript {lab:?} appears more than once in the output")));
                }
                if let Label::Char(c) = lab {
                    if !ops.iter().any(|(_, ls)| ls.contains(lab)) {
                        return Err(Error::value(OP, format!("einsum(): output subscript {c} does not appear in the equation for any input operand")));
                    }
                }
            }
            l
        }
        None => {
            let mut l: Vec<Label> = (0..max_ell).map(Label::Ell).collect();
            let mut once: Vec<char> = Vec::new();
            for c in terms.iter().flat_map(|t| t.chars()).filter(|c| c.is_ascii_alphabetic()) {
                let n = terms.iter().flat_map(|t| t.chars()).filter(|&d| d == c).count();
                if n == 1 && !once.contains(&c) {
                    once.push(c);
                }
            }
            once.sort();
            l.extend(once.into_iter().map(Label::Char));
            l
        }
    };
    let dtype = operands.first().map(|t| t.dtype()).ok_or_else(|| Error::value(OP, "einsum(): must provide at least one operand"))?;
    let mut it = ops.into_iter().enumerate();
    let (_, mut cur) = it.next().ok_or_else(|| Error::value(OP, "einsum(): must provide at least one operand"))?;
    let rest_labels: Vec<Vec<Label>> = terms.iter().zip(&ells).map(|(t, &e)| parse_term(t, e, max_ell)).collect::<Result<_>>()?;
    for (i, next) in it {
        let mut needed: Vec<Label> = out_labels.clone();
        for l in &rest_labels[i + 1..] {
            needed.extend(l.iter().copied());
        }
        cur = contract(cur, next, &needed)?;
    }
    // sum what the output does not keep, then order the dims as the output lists them
    let (t, labels) = sum_out(cur, &out_labels, &[])?;
    let mut t = t;
    let mut labels = labels;
    for l in &out_labels {
        if !labels.contains(l) {
            t = t.unsqueeze(-1)?;
            labels.push(*l);
        }
    }
    let perm: Vec<i64> = out_labels.iter().map(|l| labels.iter().position(|x| x == l).unwrap_or(0) as i64).collect();
    let out = if perm.is_empty() { t } else { t.permute(&perm)? };
    if out.dtype() != dtype {
        return out.to_dtype(dtype);
    }
    Ok(out)
}

/// Replaces repeated labels in one operand by the diagonal over them (`"ii->i"`).
fn take_diagonals(mut t: Tensor, mut labels: Vec<Label>) -> Result<(Tensor, Vec<Label>)> {
    loop {
        let dup = (0..labels.len()).find_map(|i| (i + 1..labels.len()).find(|&j| labels[j] == labels[i]).map(|j| (i, j)));
        let Some((i, j)) = dup else { return Ok((t, labels)) };
        if t.shape()[i] != t.shape()[j] {
            return Err(Error::shape(
                OP,
                format!("einsum(): subscript {:?} is repeated for operand but the sizes don't match, {} != {}", labels[i], t.shape()[i], t.shape()[j]),
            ));
        }
        t = t.diagonal(0, i as i64, j as i64)?;
        let l = labels[i];
        labels.remove(j);
        labels.remove(i);
        labels.push(l);
    }
}

/// Sums the dims whose labels are neither in `keep` nor in `other`.
fn sum_out((t, labels): (Tensor, Vec<Label>), keep: &[Label], other: &[Label]) -> Result<(Tensor, Vec<Label>)> {
    let dims: Vec<i64> =
        (0..labels.len()).filter(|&d| !keep.contains(&labels[d]) && !other.contains(&labels[d])).map(|d| d as i64).collect();
    if dims.is_empty() {
        return Ok((t, labels));
    }
    let s = t.sum_dims(Some(&dims), false, None)?;
    let s = if s.dtype() != t.dtype() { s.to_dtype(t.dtype())? } else { s };
    let labels = labels.into_iter().enumerate().filter(|(d, _)| !dims.contains(&(*d as i64))).map(|(_, l)| l).collect();
    Ok((s, labels))
}

/// Contracts two operands, keeping the labels in `needed` (or both-sided labels needed later).
fn contract(a: (Tensor, Vec<Label>), b: (Tensor, Vec<Label>), needed: &[Label]) -> Result<(Tensor, Vec<Label>)> {
    let (ta, la) = sum_out(a, needed, &b.1)?;
    let (tb, lb) = sum_out(b, needed, &la)?;
    let batch: Vec<Label> = la.iter().filter(|l| lb.contains(l) && needed.contains(l)).copied().collect();
    let sum: Vec<Label> = la.iter().filter(|l| lb.contains(l) && !needed.contains(l)).copied().collect();
    let lo: Vec<Label> = la.iter().filter(|l| !lb.contains(l)).copied().collect();
    let ro: Vec<Label> = lb.iter().filter(|l| !la.contains(l)).copied().collect();
    let size = |t: &Tensor, ls: &[Label], l: &Label| t.shape()[ls.iter().position(|x| x == l).unwrap_or(0)];
    let joint = |l: &Label| -> Result<usize> {
        let (x, y) = (size(&ta, &la, l), size(&tb, &lb, l));
        if x == y || y == 1 {
            Ok(x)
        } else if x == 1 {
            Ok(y)
        } else {
            Err(Error::shape(OP, format!("einsum(): operands do not broadcast with remapped shapes: subscript {l:?} has sizes {x} and {y}")))
        }
    };
    let bs: Vec<usize> = batch.iter().map(joint).collect::<Result<_>>()?;
    let ks: Vec<usize> = sum.iter().map(joint).collect::<Result<_>>()?;
    let los: Vec<usize> = lo.iter().map(|l| size(&ta, &la, l)).collect();
    let ros: Vec<usize> = ro.iter().map(|l| size(&tb, &lb, l)).collect();
    let pos = |ls: &[Label], l: &Label| ls.iter().position(|x| x == l).unwrap_or(0) as i64;
    let pa: Vec<i64> = batch.iter().chain(&lo).chain(&sum).map(|l| pos(&la, l)).collect();
    let pb: Vec<i64> = batch.iter().chain(&sum).chain(&ro).map(|l| pos(&lb, l)).collect();
    let mut sa: Vec<usize> = bs.clone();
    sa.extend(&los);
    sa.extend(&ks);
    let mut sb: Vec<usize> = bs.clone();
    sb.extend(&ks);
    sb.extend(&ros);
    let ea = if pa.is_empty() { ta.clone() } else { ta.permute(&pa)? }.broadcast_to(&sa)?;
    let eb = if pb.is_empty() { tb.clone() } else { tb.permute(&pb)? }.broadcast_to(&sb)?;
    let (nb, nl, nk, nr) = (prod(&bs), prod(&los), prod(&ks), prod(&ros));
    let ma = ea.reshape(&[nb, nl, nk])?;
    let mb = eb.reshape(&[nb, nk, nr])?;
    let p = mm_prim(&ma, &mb)?;
    let mut shape: Vec<i64> = bs.iter().chain(&los).chain(&ros).map(|&s| s as i64).collect();
    if shape.is_empty() {
        shape = vec![];
    }
    let labels: Vec<Label> = batch.into_iter().chain(lo).chain(ro).collect();
    Ok((p.reshape(&shape)?, labels))
}

fn prod(s: &[usize]) -> i64 {
    s.iter().product::<usize>() as i64
}
