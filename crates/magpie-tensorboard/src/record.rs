//! TFRecord framing: each record is its length (u64, little-endian), the masked CRC-32C of those
//! 8 bytes, the data, and the masked CRC-32C of the data.

use crate::crc32c::masked_crc32c;

/// One framed record.
pub fn frame(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc32c(data).to_le_bytes());
    out
}

/// The records of a file's bytes, with both CRCs checked; the error names the record and what
/// is wrong (a truncated last record, as a writer killed mid-write leaves, is an error too).
pub fn records(mut b: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let i = out.len();
        if b.len() < 12 {
            return Err(format!("record {i}: truncated header ({} bytes)", b.len()));
        }
        let (len_bytes, rest) = b.split_at(8);
        let crc = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        if crc != masked_crc32c(len_bytes) {
            return Err(format!("record {i}: length CRC mismatch"));
        }
        let n = u64::from_le_bytes(len_bytes.try_into().map_err(|_| "length")?);
        let rest = &rest[4..];
        let n = usize::try_from(n).ok().filter(|&n| n.checked_add(4).is_some_and(|m| m <= rest.len())).ok_or_else(|| format!("record {i}: length {n} exceeds the {} bytes left", rest.len()))?;
        let (data, rest) = rest.split_at(n);
        let crc = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        if crc != masked_crc32c(data) {
            return Err(format!("record {i}: data CRC mismatch"));
        }
        out.push(data);
        b = &rest[4..];
    }
    Ok(out)
}
