//! Hand-written protobuf wire format: an encoder for the few messages event files hold, and a
//! decoder of fields (used by the reader), checking every length against the bytes left.

/// Appends protobuf fields to a buffer.
#[derive(Default, Clone, Debug)]
pub struct Encoder {
    pub buf: Vec<u8>,
}

fn varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

impl Encoder {
    /// A new, empty message.
    pub fn new() -> Encoder {
        Encoder::default()
    }
    fn key(&mut self, field: u32, wire: u8) {
        varint(&mut self.buf, ((field as u64) << 3) | wire as u64);
    }
    /// A `double` field (wire type 1).
    pub fn double(&mut self, field: u32, v: f64) -> &mut Self {
        self.key(field, 1);
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// A `float` field (wire type 5).
    pub fn float(&mut self, field: u32, v: f32) -> &mut Self {
        self.key(field, 5);
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// An `int64`/`enum`/`bool` field (varint; negative numbers take ten bytes, as protobuf's).
    pub fn int(&mut self, field: u32, v: i64) -> &mut Self {
        self.key(field, 0);
        varint(&mut self.buf, v as u64);
        self
    }
    /// A `string`/`bytes`/sub-message field (length-delimited).
    pub fn bytes(&mut self, field: u32, v: &[u8]) -> &mut Self {
        self.key(field, 2);
        varint(&mut self.buf, v.len() as u64);
        self.buf.extend_from_slice(v);
        self
    }
    /// A packed `repeated double` field.
    pub fn packed_doubles(&mut self, field: u32, vs: &[f64]) -> &mut Self {
        let mut b = Vec::with_capacity(vs.len() * 8);
        for v in vs {
            b.extend_from_slice(&v.to_le_bytes());
        }
        self.bytes(field, &b)
    }
    /// The encoded message.
    pub fn finish(&self) -> Vec<u8> {
        self.buf.clone()
    }
}

/// One decoded field's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Field<'a> {
    Varint(u64),
    Fixed64([u8; 8]),
    Bytes(&'a [u8]),
    Fixed32([u8; 4]),
}

impl Field<'_> {
    /// The value of a `double` field.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Field::Fixed64(b) => Some(f64::from_le_bytes(*b)),
            _ => None,
        }
    }
}

/// Reads the fields of one message: `(field number, value)`, or an error naming what is malformed.
pub fn fields(mut b: &[u8]) -> Result<Vec<(u32, Field<'_>)>, String> {
    fn read_varint(b: &mut &[u8]) -> Result<u64, String> {
        let mut v = 0u64;
        for i in 0..10 {
            let (&x, rest) = b.split_first().ok_or("truncated varint")?;
            *b = rest;
            v |= ((x & 0x7F) as u64) << (7 * i);
            if x & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint longer than 10 bytes".into())
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = read_varint(&mut b)?;
        let (field, wire) = ((key >> 3) as u32, (key & 7) as u8);
        let f = match wire {
            0 => Field::Varint(read_varint(&mut b)?),
            1 => {
                let (h, rest) = b.split_at_checked(8).ok_or("truncated fixed64")?;
                b = rest;
                Field::Fixed64(h.try_into().map_err(|_| "fixed64")?)
            }
            2 => {
                let n = read_varint(&mut b)?;
                let n = usize::try_from(n).map_err(|_| "length overflows")?;
                let (h, rest) = b.split_at_checked(n).ok_or_else(|| format!("field {field} claims {n} bytes, {} left", b.len()))?;
                b = rest;
                Field::Bytes(h)
            }
            5 => {
                let (h, rest) = b.split_at_checked(4).ok_or("truncated fixed32")?;
                b = rest;
                Field::Fixed32(h.try_into().map_err(|_| "fixed32")?)
            }
            w => return Err(format!("unsupported wire type {w} (field {field})")),
        };
        out.push((field, f));
    }
    Ok(out)
}
