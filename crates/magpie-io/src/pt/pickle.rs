//! A pickle interpreter for the opcodes of protocols 0-5 that checkpoints use. It never imports
//! or calls anything: globals are resolved against [`super::globals`]' allowlist and calls are
//! implemented in Rust. Objects live in an arena addressed by index, so shared references (the
//! memo) alias as in Python, cycles cannot recurse, and nothing is dropped recursively.

use std::collections::HashMap;
use std::rc::Rc;

use magpie_core::{DType, Error, Result};

use super::globals::{self, Global};

/// The longest int (in bytes) LONG1/LONG4 may carry.
const MAX_LONG_BYTES: usize = 4096;
/// The most dims a tensor or `torch.Size` may have.
const MAX_DIMS: usize = 64;

/// A value on the VM's stack or in its memo; containers are indices into the arena.
#[derive(Clone, Debug)]
pub(crate) enum V {
    None,
    Bool(bool),
    Int(i64),
    BigInt(Rc<str>),
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    /// An arena object.
    Obj(usize),
    /// A resolved global (a dtype, a storage class, or a callable).
    Global(Global),
    /// A persistent-id storage: its index in the storage table and the element range viewed.
    Storage { idx: usize, offset: usize, numel: usize },
}

/// How a tensor is laid out over a storage (`_rebuild_tensor_v2`'s arguments).
#[derive(Clone, Debug)]
pub(crate) struct TensorSpec {
    /// Index in the storage table.
    pub storage: usize,
    /// Element offset into the root storage.
    pub offset: usize,
    pub size: Vec<i64>,
    pub stride: Vec<i64>,
    pub requires_grad: bool,
    pub parameter: bool,
}

/// An arena object.
#[derive(Debug)]
pub(crate) enum Obj {
    List(Vec<V>),
    Tuple(Vec<V>),
    Dict(Vec<(V, V)>),
    ODict { items: Vec<(V, V)>, attrs: Vec<(V, V)> },
    Tensor(TensorSpec),
    Size(Vec<i64>),
    Complex(f64, f64),
}

/// A storage a persistent id asked for.
#[derive(Clone, Debug)]
pub(crate) struct StorageRef {
    pub key: String,
    pub dtype: DType,
    /// Elements.
    pub numel: usize,
}

/// The result of running one pickle.
pub(crate) struct Unpickled {
    pub objs: Vec<Obj>,
    pub root: V,
    pub storages: Vec<StorageRef>,
    /// Offset just past the STOP opcode.
    pub end: usize,
}

fn err(msg: impl Into<String>) -> Error {
    Error::io("pt", msg.into())
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len()).ok_or_else(|| {
            err(format!("pickle truncated: {what} at offset {} needs {n} bytes, {} left", self.pos, self.data.len() - self.pos))
        })?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn byte(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }
    fn arr<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }
    fn u32(&mut self, what: &str) -> Result<usize> {
        Ok(u32::from_le_bytes(self.arr(what)?) as usize)
    }
    fn u64(&mut self, what: &str) -> Result<usize> {
        let v = u64::from_le_bytes(self.arr(what)?);
        usize::try_from(v).map_err(|_| err(format!("{what}: length {v} too large")))
    }
    /// A text line (without its `\n`).
    fn line(&mut self, what: &str) -> Result<&'a str> {
        let rest = &self.data[self.pos..];
        let n = rest.iter().position(|&b| b == b'\n').ok_or_else(|| err(format!("pickle truncated: {what} has no end of line")))?;
        let s = std::str::from_utf8(&rest[..n]).map_err(|_| err(format!("{what} is not UTF-8")))?;
        self.pos += n + 1;
        Ok(s)
    }
    fn utf8(&mut self, n: usize, what: &str) -> Result<Rc<str>> {
        let b = self.take(n, what)?;
        std::str::from_utf8(b).map(Rc::from).map_err(|_| err(format!("{what} is not valid UTF-8")))
    }
}

/// Little-endian two's-complement bytes as an int value.
fn long_from_bytes(b: &[u8]) -> Result<V> {
    if b.is_empty() {
        return Ok(V::Int(0));
    }
    if b.len() > MAX_LONG_BYTES {
        return Err(err(format!("int of {} bytes is longer than the limit of {MAX_LONG_BYTES}", b.len())));
    }
    let neg = b[b.len() - 1] & 0x80 != 0;
    if b.len() <= 16 {
        let mut a = [if neg { 0xffu8 } else { 0 }; 16];
        a[..b.len()].copy_from_slice(b);
        let v = i128::from_le_bytes(a);
        return Ok(match i64::try_from(v) {
            Ok(i) => V::Int(i),
            Err(_) => V::BigInt(Rc::from(v.to_string())),
        });
    }
    // magnitude, little-endian base 256
    let mut mag: Vec<u8> = b.to_vec();
    if neg {
        let mut carry = 1u16;
        for x in mag.iter_mut() {
            let s = (!*x) as u16 + carry;
            *x = s as u8;
            carry = s >> 8;
        }
    }
    // repeated division by 10^9, most significant first
    let mut be: Vec<u32> = mag.iter().rev().map(|&x| x as u32).collect();
    let mut chunks = Vec::new();
    while be.iter().any(|&x| x != 0) {
        let mut rem = 0u64;
        for x in be.iter_mut() {
            let cur = (rem << 8) | *x as u64;
            *x = (cur / 1_000_000_000) as u32;
            rem = cur % 1_000_000_000;
        }
        chunks.push(rem as u32);
        let lead = be.iter().position(|&x| x != 0).unwrap_or(be.len());
        be.drain(..lead);
    }
    let mut s = String::from(if neg { "-" } else { "" });
    match chunks.split_last() {
        None => s.push('0'),
        Some((top, rest)) => {
            s.push_str(&top.to_string());
            for c in rest.iter().rev() {
                s.push_str(&format!("{c:09}"));
            }
        }
    }
    Ok(match s.parse::<i64>() {
        Ok(i) => V::Int(i),
        Err(_) => V::BigInt(Rc::from(s)),
    })
}

/// A decimal int literal (INT / LONG text opcodes).
fn int_from_text(s: &str) -> Result<V> {
    let t = s.trim();
    let t = t.strip_suffix('L').unwrap_or(t);
    if let Ok(i) = t.parse::<i64>() {
        return Ok(V::Int(i));
    }
    let digits = t.strip_prefix('-').unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) || digits.len() > MAX_LONG_BYTES {
        return Err(err(format!("invalid int literal {t:?}")));
    }
    Ok(V::BigInt(Rc::from(t)))
}

struct Vm<'a> {
    r: Reader<'a>,
    stack: Vec<V>,
    marks: Vec<usize>,
    memo: HashMap<usize, V>,
    objs: Vec<Obj>,
    storages: Vec<StorageRef>,
    storage_index: HashMap<String, usize>,
    /// Items the calls may still copy (bounded by the input size, against amplification).
    budget: usize,
}

/// Runs the pickle starting at `start` of `data` up to its STOP.
pub(crate) fn unpickle(data: &[u8], start: usize) -> Result<Unpickled> {
    if start > data.len() {
        return Err(err("pickle starts past the end of the data"));
    }
    let mut vm = Vm {
        r: Reader { data, pos: start },
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
        objs: Vec::new(),
        storages: Vec::new(),
        storage_index: HashMap::new(),
        budget: data.len().saturating_mul(16).saturating_add(1 << 20),
    };
    let root = vm.run()?;
    Ok(Unpickled { objs: vm.objs, root, storages: vm.storages, end: vm.r.pos })
}

impl Vm<'_> {
    /// Spends `n` items of the copy budget.
    fn charge(&mut self, n: usize) -> Result<()> {
        self.budget = self.budget.checked_sub(n).ok_or_else(|| err("pickle copies more data than its size allows"))?;
        Ok(())
    }
    fn pop(&mut self) -> Result<V> {
        self.stack.pop().ok_or_else(|| err(format!("pickle stack underflow at offset {}", self.r.pos)))
    }
    fn top(&self) -> Result<&V> {
        self.stack.last().ok_or_else(|| err(format!("pickle stack empty at offset {}", self.r.pos)))
    }
    fn pop_mark(&mut self) -> Result<Vec<V>> {
        let m = self.marks.pop().ok_or_else(|| err(format!("pickle has no MARK for the opcode at offset {}", self.r.pos)))?;
        if m > self.stack.len() {
            return Err(err("pickle MARK is above the stack top"));
        }
        Ok(self.stack.split_off(m))
    }
    fn new_obj(&mut self, o: Obj) -> V {
        self.objs.push(o);
        V::Obj(self.objs.len() - 1)
    }
    fn push_obj(&mut self, o: Obj) {
        let v = self.new_obj(o);
        self.stack.push(v);
    }
    fn obj_index(&self, v: &V, what: &str) -> Result<usize> {
        match v {
            V::Obj(i) if *i < self.objs.len() => Ok(*i),
            _ => Err(err(format!("{what}: expected a container, got {}", kind(v, &self.objs)))),
        }
    }
    fn memo_put(&mut self, idx: usize) -> Result<()> {
        let v = self.top()?.clone();
        self.memo.insert(idx, v);
        Ok(())
    }
    fn memo_get(&mut self, idx: usize) -> Result<()> {
        let v = self.memo.get(&idx).cloned().ok_or_else(|| err(format!("pickle memo has no entry {idx}")))?;
        self.stack.push(v);
        Ok(())
    }
    fn append(&mut self, items: Vec<V>) -> Result<()> {
        let i = self.obj_index(self.top()?, "APPEND")?;
        match &mut self.objs[i] {
            Obj::List(l) => {
                l.extend(items);
                Ok(())
            }
            o => Err(err(format!("APPEND to a {}", obj_kind(o)))),
        }
    }
    fn set_items(&mut self, items: Vec<V>) -> Result<()> {
        if !items.len().is_multiple_of(2) {
            return Err(err("SETITEMS with an odd number of items"));
        }
        let i = self.obj_index(self.top()?, "SETITEM")?;
        let mut it = items.into_iter();
        let target = match &mut self.objs[i] {
            Obj::Dict(d) => d,
            Obj::ODict { items, .. } => items,
            o => return Err(err(format!("SETITEM on a {}", obj_kind(o)))),
        };
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            target.push((k, v));
        }
        Ok(())
    }
    fn pairs(items: Vec<V>) -> Result<Vec<(V, V)>> {
        if !items.len().is_multiple_of(2) {
            return Err(err("DICT with an odd number of items"));
        }
        let mut out = Vec::with_capacity(items.len() / 2);
        let mut it = items.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            out.push((k, v));
        }
        Ok(out)
    }

    fn run(&mut self) -> Result<V> {
        loop {
            let at = self.r.pos;
            let op = self.r.byte("opcode")?;
            match op {
                0x80 => {
                    let p = self.r.byte("PROTO")?;
                    if p > 5 {
                        return Err(err(format!("unsupported pickle protocol {p}")));
                    }
                }
                0x95 => {
                    self.r.u64("FRAME")?;
                }
                b'.' => return self.pop(),
                b'(' => self.marks.push(self.stack.len()),
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let v = self.top()?.clone();
                    self.stack.push(v);
                }
                b'N' => self.stack.push(V::None),
                0x88 => self.stack.push(V::Bool(true)),
                0x89 => self.stack.push(V::Bool(false)),
                b'I' => {
                    let l = self.r.line("INT")?;
                    let v = match l {
                        "01" => V::Bool(true),
                        "00" => V::Bool(false),
                        _ => int_from_text(l)?,
                    };
                    self.stack.push(v);
                }
                b'L' => {
                    let l = self.r.line("LONG")?;
                    let v = int_from_text(l)?;
                    self.stack.push(v);
                }
                b'J' => {
                    let v = i32::from_le_bytes(self.r.arr("BININT")?);
                    self.stack.push(V::Int(v as i64));
                }
                b'K' => {
                    let v = self.r.byte("BININT1")?;
                    self.stack.push(V::Int(v as i64));
                }
                b'M' => {
                    let v = u16::from_le_bytes(self.r.arr("BININT2")?);
                    self.stack.push(V::Int(v as i64));
                }
                0x8a => {
                    let n = self.r.byte("LONG1")? as usize;
                    let b = self.r.take(n, "LONG1")?;
                    let v = long_from_bytes(b)?;
                    self.stack.push(v);
                }
                0x8b => {
                    let n = i32::from_le_bytes(self.r.arr("LONG4")?);
                    let n = usize::try_from(n).map_err(|_| err("LONG4 with a negative length"))?;
                    let b = self.r.take(n, "LONG4")?;
                    let v = long_from_bytes(b)?;
                    self.stack.push(v);
                }
                b'F' => {
                    let l = self.r.line("FLOAT")?;
                    let f = l.trim().parse::<f64>().map_err(|_| err(format!("invalid float literal {l:?}")))?;
                    self.stack.push(V::Float(f));
                }
                b'G' => {
                    let f = f64::from_be_bytes(self.r.arr("BINFLOAT")?);
                    self.stack.push(V::Float(f));
                }
                b'X' => {
                    let n = self.r.u32("BINUNICODE")?;
                    let s = self.r.utf8(n, "BINUNICODE")?;
                    self.stack.push(V::Str(s));
                }
                0x8c => {
                    let n = self.r.byte("SHORT_BINUNICODE")? as usize;
                    let s = self.r.utf8(n, "SHORT_BINUNICODE")?;
                    self.stack.push(V::Str(s));
                }
                0x8d => {
                    let n = self.r.u64("BINUNICODE8")?;
                    let s = self.r.utf8(n, "BINUNICODE8")?;
                    self.stack.push(V::Str(s));
                }
                b'T' | b'U' => {
                    let n = if op == b'T' {
                        let n = i32::from_le_bytes(self.r.arr("BINSTRING")?);
                        usize::try_from(n).map_err(|_| err("BINSTRING with a negative length"))?
                    } else {
                        self.r.byte("SHORT_BINSTRING")? as usize
                    };
                    // a Python 2 str: bytes taken as Latin-1
                    let b = self.r.take(n, "BINSTRING")?;
                    self.stack.push(V::Str(Rc::from(b.iter().map(|&c| c as char).collect::<String>())));
                }
                b'B' | b'C' | 0x8e | 0x96 => {
                    let n = match op {
                        b'B' => self.r.u32("BINBYTES")?,
                        b'C' => self.r.byte("SHORT_BINBYTES")? as usize,
                        _ => self.r.u64("BINBYTES8")?,
                    };
                    let b = self.r.take(n, "BINBYTES")?;
                    self.stack.push(V::Bytes(Rc::from(b)));
                }
                b']' => self.push_obj(Obj::List(Vec::new())),
                b'a' => {
                    let v = self.pop()?;
                    self.append(vec![v])?;
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    self.append(items)?;
                }
                b'l' => {
                    let items = self.pop_mark()?;
                    self.push_obj(Obj::List(items));
                }
                b')' => self.push_obj(Obj::Tuple(Vec::new())),
                b't' => {
                    let items = self.pop_mark()?;
                    self.push_obj(Obj::Tuple(items));
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    if self.stack.len() < n {
                        return Err(err(format!("TUPLE{n} with {} items on the stack", self.stack.len())));
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    self.push_obj(Obj::Tuple(items));
                }
                b'}' => self.push_obj(Obj::Dict(Vec::new())),
                b'd' => {
                    let items = self.pop_mark()?;
                    let p = Self::pairs(items)?;
                    self.push_obj(Obj::Dict(p));
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    self.set_items(vec![k, v])?;
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    self.set_items(items)?;
                }
                b'c' => {
                    let module = self.r.line("GLOBAL module")?;
                    let name = self.r.line("GLOBAL name")?;
                    let g = globals::resolve(module, name)?;
                    self.stack.push(V::Global(g));
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    match (&module, &name) {
                        (V::Str(m), V::Str(n)) => {
                            let g = globals::resolve(m, n)?;
                            self.stack.push(V::Global(g));
                        }
                        _ => return Err(err("STACK_GLOBAL needs two strs")),
                    }
                }
                b'R' | 0x81 => {
                    let args = self.pop()?;
                    let f = self.pop()?;
                    let args = match &args {
                        V::Obj(i) => match self.objs.get(*i) {
                            Some(Obj::Tuple(t)) if t.len() <= 8 => t.clone(),
                            Some(Obj::Tuple(t)) => return Err(err(format!("call with {} arguments", t.len()))),
                            _ => return Err(err("REDUCE arguments are not a tuple")),
                        },
                        _ => return Err(err("REDUCE arguments are not a tuple")),
                    };
                    let g = match f {
                        V::Global(g) => g,
                        other => return Err(err(format!("REDUCE on a {}, which is not callable", kind(&other, &self.objs)))),
                    };
                    if op == 0x81 && !matches!(g, Global::OrderedDict | Global::Size) {
                        return Err(err(format!("NEWOBJ of {g:?} is not supported")));
                    }
                    let v = self.call(&g, args)?;
                    self.stack.push(v);
                }
                b'b' => {
                    let state = self.pop()?;
                    self.build(state)?;
                }
                b'Q' => {
                    let pid = self.pop()?;
                    let v = self.persistent_load(&pid)?;
                    self.stack.push(v);
                }
                b'p' => {
                    let l = self.r.line("PUT")?;
                    let i = l.trim().parse::<usize>().map_err(|_| err(format!("invalid PUT index {l:?}")))?;
                    self.memo_put(i)?;
                }
                b'q' => {
                    let i = self.r.byte("BINPUT")? as usize;
                    self.memo_put(i)?;
                }
                b'r' => {
                    let i = self.r.u32("LONG_BINPUT")?;
                    self.memo_put(i)?;
                }
                0x94 => {
                    let i = self.memo.len();
                    self.memo_put(i)?;
                }
                b'g' => {
                    let l = self.r.line("GET")?;
                    let i = l.trim().parse::<usize>().map_err(|_| err(format!("invalid GET index {l:?}")))?;
                    self.memo_get(i)?;
                }
                b'h' => {
                    let i = self.r.byte("BINGET")? as usize;
                    self.memo_get(i)?;
                }
                b'j' => {
                    let i = self.r.u32("LONG_BINGET")?;
                    self.memo_get(i)?;
                }
                other => {
                    return Err(err(format!("unsupported pickle opcode 0x{other:02x} at offset {at}")));
                }
            }
        }
    }

    fn int_arg(&self, v: &V, what: &str) -> Result<i64> {
        match v {
            V::Int(i) => Ok(*i),
            V::Bool(b) => Ok(*b as i64),
            other => Err(err(format!("{what}: expected an int, got {}", kind(other, &self.objs)))),
        }
    }
    fn float_arg(&self, v: &V, what: &str) -> Result<f64> {
        match v {
            V::Float(f) => Ok(*f),
            V::Int(i) => Ok(*i as f64),
            V::Bool(b) => Ok(*b as i64 as f64),
            other => Err(err(format!("{what}: expected a float, got {}", kind(other, &self.objs)))),
        }
    }
    fn seq(&mut self, v: &V, what: &str) -> Result<Vec<V>> {
        let n = match v {
            V::Obj(i) => match self.objs.get(*i) {
                Some(Obj::Tuple(t)) | Some(Obj::List(t)) => t.len(),
                Some(Obj::Size(s)) => s.len(),
                _ => 0,
            },
            _ => 0,
        };
        self.charge(n)?;
        match v {
            V::Obj(i) => match self.objs.get(*i) {
                Some(Obj::Tuple(t)) | Some(Obj::List(t)) => Ok(t.clone()),
                Some(Obj::Size(s)) => Ok(s.iter().map(|&x| V::Int(x)).collect()),
                _ => Err(err(format!("{what}: expected a tuple, got {}", kind(v, &self.objs)))),
            },
            _ => Err(err(format!("{what}: expected a tuple, got {}", kind(v, &self.objs)))),
        }
    }
    fn ints(&mut self, v: &V, what: &str) -> Result<Vec<i64>> {
        let items = self.seq(v, what)?;
        if items.len() > MAX_DIMS {
            return Err(err(format!("{what}: {} dims, more than {MAX_DIMS}", items.len())));
        }
        items.iter().map(|x| self.int_arg(x, what)).collect()
    }
    /// True for None, an empty dict / OrderedDict.
    fn is_empty_state(&self, v: &V) -> bool {
        match v {
            V::None => true,
            V::Obj(i) => match self.objs.get(*i) {
                Some(Obj::Dict(d)) => d.is_empty(),
                Some(Obj::ODict { items, attrs }) => items.is_empty() && attrs.is_empty(),
                _ => false,
            },
            _ => false,
        }
    }

    /// Applies an allowlisted callable.
    fn call(&mut self, g: &Global, args: Vec<V>) -> Result<V> {
        let nargs = |lo: usize, hi: usize, name: &str| -> Result<()> {
            if args.len() < lo || args.len() > hi {
                return Err(err(format!("{name} called with {} arguments", args.len())));
            }
            Ok(())
        };
        match g {
            Global::OrderedDict => {
                nargs(0, 1, "OrderedDict")?;
                let mut items = Vec::new();
                if let Some(a) = args.first() {
                    for pair in self.seq(a, "OrderedDict")? {
                        let kv = self.seq(&pair, "OrderedDict item")?;
                        match <[V; 2]>::try_from(kv) {
                            Ok([k, v]) => items.push((k, v)),
                            Err(_) => return Err(err("OrderedDict item is not a pair")),
                        }
                    }
                }
                Ok(self.new_obj(Obj::ODict { items, attrs: Vec::new() }))
            }
            Global::RebuildTensorV2 => {
                nargs(6, 7, "_rebuild_tensor_v2")?;
                let (idx, base, numel) = match &args[0] {
                    V::Storage { idx, offset, numel } => (*idx, *offset, *numel),
                    other => return Err(err(format!("_rebuild_tensor_v2: expected a storage, got {}", kind(other, &self.objs)))),
                };
                let offset = self.int_arg(&args[1], "_rebuild_tensor_v2 storage_offset")?;
                let size = self.ints(&args[2], "_rebuild_tensor_v2 size")?;
                let stride = self.ints(&args[3], "_rebuild_tensor_v2 stride")?;
                let requires_grad = match &args[4] {
                    V::Bool(b) => *b,
                    other => return Err(err(format!("_rebuild_tensor_v2 requires_grad: expected a bool, got {}", kind(other, &self.objs)))),
                };
                if !self.is_empty_state(&args[5]) {
                    return Err(err("_rebuild_tensor_v2: backward hooks are not supported"));
                }
                let offset = check_layout(offset, &size, &stride, numel)?;
                Ok(self.new_obj(Obj::Tensor(TensorSpec {
                    storage: idx,
                    offset: base + offset,
                    size,
                    stride,
                    requires_grad,
                    parameter: false,
                })))
            }
            Global::RebuildParameter | Global::RebuildParameterWithState => {
                let with_state = *g == Global::RebuildParameterWithState;
                if with_state { nargs(4, 4, "_rebuild_parameter_with_state")? } else { nargs(3, 3, "_rebuild_parameter")? }
                let mut spec = match &args[0] {
                    V::Obj(i) => match self.objs.get(*i) {
                        Some(Obj::Tensor(t)) => t.clone(),
                        _ => return Err(err("_rebuild_parameter: data is not a tensor")),
                    },
                    _ => return Err(err("_rebuild_parameter: data is not a tensor")),
                };
                spec.requires_grad = match &args[1] {
                    V::Bool(b) => *b,
                    _ => return Err(err("_rebuild_parameter: requires_grad is not a bool")),
                };
                if !self.is_empty_state(&args[2]) {
                    return Err(err("_rebuild_parameter: backward hooks are not supported"));
                }
                if with_state && !self.is_empty_state(&args[3]) {
                    return Err(err("_rebuild_parameter_with_state: parameter attributes are not supported"));
                }
                spec.parameter = true;
                Ok(self.new_obj(Obj::Tensor(spec)))
            }
            Global::Size => {
                nargs(0, 1, "torch.Size")?;
                let dims = match args.first() {
                    Some(a) => self.ints(a, "torch.Size")?,
                    None => Vec::new(),
                };
                Ok(self.new_obj(Obj::Size(dims)))
            }
            Global::Complex => {
                nargs(0, 2, "complex")?;
                let re = match args.first() {
                    Some(a) => self.float_arg(a, "complex real part")?,
                    None => 0.0,
                };
                let im = match args.get(1) {
                    Some(a) => self.float_arg(a, "complex imaginary part")?,
                    None => 0.0,
                };
                Ok(self.new_obj(Obj::Complex(re, im)))
            }
            Global::CodecsEncode => {
                nargs(2, 2, "_codecs.encode")?;
                match (&args[0], &args[1]) {
                    (V::Str(s), V::Str(enc)) if matches!(&**enc, "latin1" | "latin-1" | "iso-8859-1") => {
                        let b: Option<Vec<u8>> = s.chars().map(|c| u8::try_from(c as u32).ok()).collect();
                        let b = b.ok_or_else(|| err("_codecs.encode: character outside Latin-1"))?;
                        Ok(V::Bytes(Rc::from(b)))
                    }
                    _ => Err(err("_codecs.encode is only supported as encode(str, 'latin1')")),
                }
            }
            Global::StorageType(_) | Global::DType(_) => Err(err(format!("{g:?} is not callable in a weights-only load"))),
        }
    }

    /// BUILD: sets state on the stack top.
    fn build(&mut self, state: V) -> Result<()> {
        let i = self.obj_index(self.top()?, "BUILD")?;
        // state may be a dict, or (dict or None, dict or None) with slot state
        let mut parts = Vec::new();
        match &state {
            V::Obj(s) => match self.objs.get(*s) {
                Some(Obj::Tuple(t)) if t.len() == 2 => parts.extend(t.iter().cloned()),
                _ => parts.push(state.clone()),
            },
            _ => parts.push(state.clone()),
        }
        let mut attrs = Vec::new();
        for p in &parts {
            match p {
                V::None => {}
                V::Obj(s) => match self.objs.get(*s) {
                    Some(Obj::Dict(d)) => {
                        self.budget = self.budget.checked_sub(d.len()).ok_or_else(|| err("pickle copies more data than its size allows"))?;
                        attrs.extend(d.iter().cloned())
                    }
                    _ => return Err(err("BUILD state is not a dict")),
                },
                _ => return Err(err("BUILD state is not a dict")),
            }
        }
        if let Some((k, _)) = attrs.iter().find(|(k, _)| !matches!(k, V::Str(_))) {
            return Err(err(format!("BUILD attribute name is a {}", kind(k, &self.objs))));
        }
        match &mut self.objs[i] {
            Obj::ODict { attrs: a, .. } => {
                a.extend(attrs);
                Ok(())
            }
            Obj::Tensor(_) if attrs.is_empty() => Ok(()),
            o => Err(err(format!("BUILD on a {} is not supported", obj_kind(o)))),
        }
    }

    /// BINPERSID: `('storage', storage_type, key, location, numel[, view_metadata])`.
    fn persistent_load(&mut self, pid: &V) -> Result<V> {
        let t = self.seq(pid, "persistent id")?;
        if t.len() != 5 && t.len() != 6 {
            return Err(err(format!("persistent id has {} fields, expected 5 or 6", t.len())));
        }
        if !matches!(&t[0], V::Str(s) if &**s == "storage") {
            return Err(err("persistent id is not a ('storage', ...) tuple"));
        }
        let dtype = match &t[1] {
            V::Global(Global::StorageType(d)) => *d,
            other => return Err(err(format!("persistent id storage type is a {}", kind(other, &self.objs)))),
        };
        let key = match &t[2] {
            V::Str(s) => s.to_string(),
            V::Int(i) => i.to_string(),
            other => return Err(err(format!("persistent id key is a {}", kind(other, &self.objs)))),
        };
        if !matches!(&t[3], V::Str(_)) {
            return Err(err("persistent id location is not a str"));
        }
        let numel = self.int_arg(&t[4], "persistent id numel")?;
        let numel = usize::try_from(numel).map_err(|_| err(format!("storage '{key}' has a negative size {numel}")))?;
        numel.checked_mul(dtype.size()).ok_or_else(|| err(format!("storage '{key}' of {numel} elements overflows")))?;
        let idx = match self.storage_index.get(&key) {
            Some(&i) => {
                let s = &self.storages[i];
                if s.dtype != dtype || s.numel != numel {
                    return Err(err(format!("storage '{key}' is declared twice with different dtype or size")));
                }
                i
            }
            None => {
                self.storages.push(StorageRef { key: key.clone(), dtype, numel });
                self.storage_index.insert(key.clone(), self.storages.len() - 1);
                self.storages.len() - 1
            }
        };
        let (offset, view) = match t.get(5) {
            None | Some(V::None) => (0, numel),
            Some(vm) => {
                let m = self.seq(vm, "storage view metadata")?;
                if m.len() != 3 {
                    return Err(err("storage view metadata is not (key, offset, size)"));
                }
                let off = self.int_arg(&m[1], "storage view offset")?;
                let len = self.int_arg(&m[2], "storage view size")?;
                let (off, len) = match (usize::try_from(off), usize::try_from(len)) {
                    (Ok(o), Ok(l)) if o.checked_add(l).is_some_and(|e| e <= numel) => (o, l),
                    _ => return Err(err(format!("storage view [{off}, {off}+{len}) is outside storage '{key}' of {numel} elements"))),
                };
                (off, len)
            }
        };
        Ok(V::Storage { idx, offset, numel: view })
    }
}

/// Checks that `size`/`stride` at `offset` stays within `numel` elements; returns the offset.
fn check_layout(offset: i64, size: &[i64], stride: &[i64], numel: usize) -> Result<usize> {
    let bad = |m: String| err(format!("tensor layout size {size:?} stride {stride:?} offset {offset}: {m}"));
    if size.len() != stride.len() {
        return Err(bad("size and stride differ in length".into()));
    }
    if offset < 0 || size.iter().chain(stride).any(|&v| v < 0) {
        return Err(bad("negative values are not supported".into()));
    }
    let mut count: i64 = 1;
    for &s in size {
        if s != 0 {
            count = count.checked_mul(s).ok_or_else(|| bad("element count overflows".into()))?;
        }
    }
    let off = offset as usize;
    if size.contains(&0) {
        if off > numel {
            return Err(bad(format!("offset past the storage of {numel} elements")));
        }
        return Ok(off);
    }
    let mut hi = off as u128 + 1;
    for (&s, &st) in size.iter().zip(stride) {
        hi = hi.saturating_add((s as u128 - 1).saturating_mul(st as u128));
    }
    if hi > numel as u128 {
        return Err(bad(format!("needs {hi} elements but the storage has {numel}")));
    }
    Ok(off)
}

fn obj_kind(o: &Obj) -> &'static str {
    match o {
        Obj::List(_) => "list",
        Obj::Tuple(_) => "tuple",
        Obj::Dict(_) => "dict",
        Obj::ODict { .. } => "OrderedDict",
        Obj::Tensor(_) => "tensor",
        Obj::Size(_) => "torch.Size",
        Obj::Complex(..) => "complex",
    }
}

/// A short name of a value's type, for messages.
pub(crate) fn kind(v: &V, objs: &[Obj]) -> &'static str {
    match v {
        V::None => "None",
        V::Bool(_) => "bool",
        V::Int(_) | V::BigInt(_) => "int",
        V::Float(_) => "float",
        V::Str(_) => "str",
        V::Bytes(_) => "bytes",
        V::Obj(i) => objs.get(*i).map(obj_kind).unwrap_or("invalid object"),
        V::Global(_) => "global",
        V::Storage { .. } => "storage",
    }
}
