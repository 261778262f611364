//! Prometheus' XOR chunk (Gorilla) decoded: timestamps as delta-of-delta, values XORed with the previous one
//! (the layout of `tsdb/chunkenc/xor.go`); a corrupt or truncated chunk is an error, never a panic.

/// The bits of Prometheus' stale marker, a NaN written when a series disappears (`value.StaleNaN`).
pub const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// Why a chunk cannot be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    #[error("chunk shorter than its 2-byte header")]
    NoHeader,
    #[error("chunk ends after {read} of its {total} samples")]
    Truncated { read: u16, total: u16 },
    #[error("chunk sample {index}: {what}")]
    Corrupt { index: u16, what: &'static str },
}

/// Reads bits most significant first, as `bstream` writes them.
struct Bits<'a> {
    data: &'a [u8],
    /// Position of the next bit.
    pos: usize,
}

impl<'a> Bits<'a> {
    fn new(data: &'a [u8]) -> Self {
        Self { data, pos: 0 }
    }

    fn bit(&mut self) -> Option<bool> {
        let byte = *self.data.get(self.pos / 8)?;
        let b = (byte >> (7 - self.pos % 8)) & 1 == 1;
        self.pos += 1;
        Some(b)
    }

    /// `n` (≤ 64) bits as the low bits of a u64.
    fn bits(&mut self, n: u8) -> Option<u64> {
        if self.pos + usize::from(n) > self.data.len() * 8 {
            return None;
        }
        let mut v = 0u64;
        let mut left = n;
        while left > 0 {
            let byte = self.data[self.pos / 8];
            let offset = (self.pos % 8) as u8;
            let take = (8 - offset).min(left);
            let chunk = (byte >> (8 - offset - take)) & ((1u16 << take) - 1) as u8;
            v = (v << take) | u64::from(chunk);
            self.pos += usize::from(take);
            left -= take;
        }
        Some(v)
    }

    fn byte(&mut self) -> Option<u8> {
        self.bits(8).map(|b| b as u8)
    }

    /// A Go `binary.Uvarint` read from the bit stream (it need not be byte-aligned).
    fn uvarint(&mut self) -> Option<u64> {
        let mut x = 0u64;
        for i in 0..10 {
            let b = self.byte()?;
            if i == 9 && b > 1 {
                return None; // overflows 64 bits
            }
            x |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Some(x);
            }
        }
        None
    }

    /// A Go `binary.Varint` (zig-zag).
    fn varint(&mut self) -> Option<i64> {
        let u = self.uvarint()?;
        Some(((u >> 1) as i64) ^ -((u & 1) as i64))
    }
}

/// The samples of one XOR chunk, in the order written, as (timestamp ms, value bits as f64): NaN, ±Inf and stale
/// markers come back as they were stored.
pub fn decode(chunk: &[u8]) -> Result<Vec<(i64, f64)>, ChunkError> {
    if chunk.len() < 2 {
        return Err(ChunkError::NoHeader);
    }
    let total = u16::from_be_bytes([chunk[0], chunk[1]]);
    let mut r = Bits::new(&chunk[2..]);
    let mut out = Vec::with_capacity(usize::from(total));
    let (mut t, mut v, mut delta) = (0i64, 0u64, 0i64);
    let (mut leading, mut trailing) = (0u8, 0u8);
    for i in 0..total {
        let truncated = ChunkError::Truncated { read: i, total };
        match i {
            0 => {
                t = r.varint().ok_or(truncated)?;
                v = r.bits(64).ok_or(truncated)?;
            }
            1 => {
                let d = r.uvarint().ok_or(truncated)?;
                delta = d as i64;
                t = t.checked_add(delta).ok_or(ChunkError::Corrupt { index: i, what: "timestamp overflows" })?;
                read_value(&mut r, &mut v, &mut leading, &mut trailing, i, total)?;
            }
            _ => {
                let mut prefix = 0u8;
                for _ in 0..4 {
                    let b = r.bit().ok_or(truncated)?;
                    prefix = (prefix << 1) | u8::from(b);
                    if !b {
                        break;
                    }
                }
                let dod: i64 = match prefix {
                    0b0 => 0,
                    0b10 => signed(r.bits(14).ok_or(truncated)?, 14),
                    0b110 => signed(r.bits(17).ok_or(truncated)?, 17),
                    0b1110 => signed(r.bits(20).ok_or(truncated)?, 20),
                    _ => r.bits(64).ok_or(truncated)? as i64,
                };
                let corrupt = ChunkError::Corrupt { index: i, what: "timestamp overflows" };
                delta = delta.checked_add(dod).ok_or(corrupt)?;
                t = t.checked_add(delta).ok_or(corrupt)?;
                read_value(&mut r, &mut v, &mut leading, &mut trailing, i, total)?;
            }
        }
        out.push((t, f64::from_bits(v)));
    }
    Ok(out)
}

/// `bits` of width `n` as written for a negative delta-of-delta (see `docs/bstream.md` in Prometheus).
fn signed(bits: u64, n: u8) -> i64 {
    if bits > (1 << (n - 1)) { bits as i64 - (1i64 << n) } else { bits as i64 }
}

fn read_value(
    r: &mut Bits<'_>,
    v: &mut u64,
    leading: &mut u8,
    trailing: &mut u8,
    index: u16,
    total: u16,
) -> Result<(), ChunkError> {
    let truncated = ChunkError::Truncated { read: index, total };
    if !r.bit().ok_or(truncated)? {
        return Ok(()); // the value repeats
    }
    let significant = if !r.bit().ok_or(truncated)? {
        // the previous leading/trailing zero counts are reused
        64 - *leading - *trailing
    } else {
        let l = r.bits(5).ok_or(truncated)? as u8;
        let mut m = r.bits(6).ok_or(truncated)? as u8;
        // 0 significant bits stands for 64 (a zero XOR is the single 0 bit above)
        if m == 0 {
            m = 64;
        }
        if u16::from(l) + u16::from(m) > 64 {
            return Err(ChunkError::Corrupt { index, what: "more than 64 leading and significant bits" });
        }
        *leading = l;
        *trailing = 64 - l - m;
        m
    };
    if significant == 0 {
        return Err(ChunkError::Corrupt { index, what: "a changed value with no significant bits" });
    }
    let bits = r.bits(significant).ok_or(truncated)?;
    *v ^= bits << *trailing;
    Ok(())
}

/// A test-only XOR chunk writer, the appender of `xor.go` line for line, for round-trip properties.
#[cfg(test)]
pub mod encode {
    struct Writer {
        bytes: Vec<u8>,
        /// Free bits in the last byte.
        free: u8,
    }

    impl Writer {
        fn bit(&mut self, b: bool) {
            if self.free == 0 {
                self.bytes.push(0);
                self.free = 8;
            }
            if b {
                *self.bytes.last_mut().unwrap() |= 1 << (self.free - 1);
            }
            self.free -= 1;
        }
        fn bits(&mut self, v: u64, n: u8) {
            for i in (0..n).rev() {
                self.bit((v >> i) & 1 == 1);
            }
        }
        fn uvarint(&mut self, mut x: u64) {
            while x >= 0x80 {
                self.bits((x as u8 | 0x80).into(), 8);
                x >>= 7;
            }
            self.bits(x, 8);
        }
    }

    fn in_range(x: i64, n: u8) -> bool {
        -((1i64 << (n - 1)) - 1) <= x && x <= 1i64 << (n - 1)
    }

    /// `samples` (value bits) as one XOR chunk.
    pub fn chunk(samples: &[(i64, u64)]) -> Vec<u8> {
        let mut w = Writer { bytes: (samples.len() as u16).to_be_bytes().to_vec(), free: 0 };
        let (mut t, mut v, mut delta) = (0i64, 0u64, 0i64);
        let (mut leading, mut trailing) = (0xffu8, 0u8);
        for (i, &(ts, bits)) in samples.iter().enumerate() {
            match i {
                0 => {
                    w.uvarint(((ts << 1) ^ (ts >> 63)) as u64);
                    w.bits(bits, 64);
                }
                _ => {
                    let d = ts - t;
                    if i == 1 {
                        w.uvarint(d as u64);
                    } else {
                        let dod = d - delta;
                        match dod {
                            0 => w.bit(false),
                            _ if in_range(dod, 14) => w.bits(0b10 << 14 | (dod as u64 & 0x3fff), 16),
                            _ if in_range(dod, 17) => w.bits(0b110 << 17 | (dod as u64 & 0x1ffff), 20),
                            _ if in_range(dod, 20) => w.bits(0b1110 << 20 | (dod as u64 & 0xfffff), 24),
                            _ => {
                                w.bits(0b1111, 4);
                                w.bits(dod as u64, 64);
                            }
                        }
                    }
                    delta = d;
                    let x = bits ^ v;
                    if x == 0 {
                        w.bit(false);
                    } else {
                        w.bit(true);
                        let l = (x.leading_zeros() as u8).min(31);
                        let tr = x.trailing_zeros() as u8;
                        if leading != 0xff && l >= leading && tr >= trailing {
                            w.bit(false);
                            w.bits(x >> trailing, 64 - leading - trailing);
                        } else {
                            leading = l;
                            trailing = tr;
                            w.bit(true);
                            w.bits(u64::from(l), 5);
                            let sig = 64 - l - tr;
                            w.bits(u64::from(sig) & 0x3f, 6);
                            w.bits(x >> tr, sig);
                        }
                    }
                }
            }
            t = ts;
            v = bits;
        }
        w.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bits_of(s: &[(i64, f64)]) -> Vec<(i64, u64)> {
        s.iter().map(|&(t, v)| (t, v.to_bits())).collect()
    }

    #[test]
    fn round_trips_nan_stale_markers_resets_and_irregular_intervals() {
        let samples = vec![
            (1_700_000_000_000, 5.0f64.to_bits()),
            (1_700_000_015_000, 6.0f64.to_bits()),
            (1_700_000_030_000, 6.0f64.to_bits()),
            (1_700_000_045_001, 0.0f64.to_bits()), // a counter reset, 1 ms late
            (1_700_000_060_000, f64::NAN.to_bits()),
            (1_700_000_075_000, STALE_NAN_BITS),
            (1_700_000_075_000 + 86_400_000 * 3, f64::INFINITY.to_bits()), // a 64-bit delta-of-delta
            (1_700_000_075_000 + 86_400_000 * 3 + 1, f64::NEG_INFINITY.to_bits()),
            (1_700_000_075_000 + 86_400_000 * 3 + 2, (-0.0f64).to_bits()),
        ];
        let decoded = decode(&encode::chunk(&samples)).unwrap();
        assert_eq!(bits_of(&decoded), samples);
        assert_eq!(decoded[5].1.to_bits(), STALE_NAN_BITS);
    }

    #[test]
    fn bad_chunks_are_errors() {
        assert_eq!(decode(&[0]), Err(ChunkError::NoHeader));
        assert_eq!(decode(&[0, 0]), Ok(vec![]));
        let good = encode::chunk(&[(1000, 1.5f64.to_bits()), (2000, 2.5f64.to_bits()), (3000, 7.0f64.to_bits())]);
        for cut in 2..good.len() {
            assert!(matches!(decode(&good[..cut]), Err(ChunkError::Truncated { .. })), "cut at {cut}");
        }
        // a header claiming more samples than written
        let mut more = good.clone();
        more[1] = 200;
        assert!(decode(&more).is_err());
    }

    proptest! {
        #[test]
        fn any_series_round_trips(
            start in -1_000_000_000_000i64..4_000_000_000_000,
            steps in proptest::collection::vec((0i64..200_000, any::<u64>(), 0u8..4), 0..300),
        ) {
            let mut t = start;
            let mut prev = 0u64;
            let samples: Vec<(i64, u64)> = steps
                .iter()
                .map(|&(dt, raw, kind)| {
                    t += dt;
                    // repeats, small changes and wild bit patterns (NaN payloads included)
                    prev = match kind { 0 => prev, 1 => (f64::from_bits(prev) + 1.0).to_bits(), 2 => STALE_NAN_BITS, _ => raw };
                    (t, prev)
                })
                .collect();
            let decoded = decode(&encode::chunk(&samples)).unwrap();
            prop_assert_eq!(bits_of(&decoded), samples);
        }

        #[test]
        fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&data);
        }
    }
}
