//! Lesson 04's library: the RAII guards for CUDA's virtual memory calls
//! ([`vmm`]), the channel that passes file descriptors between ranks
//! ([`fd_channel`]), and the test pattern the lesson writes and checks.
//!
//! It is a library so that the lesson (`04_vmm_raw`) and the GPU-free channel
//! check (`04_fd_channel_check`) share it, and so that its tests run without a
//! GPU. The lesson itself, every step of it, is in `src/main.rs`.

pub mod fd_channel;
pub mod vmm;

use std::ops::Range;

use anyhow::{ensure, Context, Result};
use common::RankContext;

/// Collective: every rank's `mine`, in rank order, on every rank.
pub fn all_gather(ctx: &RankContext, mine: Vec<u8>) -> Result<Vec<Vec<u8>>> {
    let packed = match ctx.gather(mine)? {
        Some(all) => pack(&all),
        None => Vec::new(),
    };
    let packed = ctx.broadcast_vec(packed)?;
    unpack(&packed, ctx.size())
}

/// Length-prefixed concatenation: `[len u64 LE][bytes]...`.
fn pack(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut packed = Vec::new();
    for part in parts {
        packed.extend_from_slice(&(part.len() as u64).to_le_bytes());
        packed.extend_from_slice(part);
    }
    packed
}

fn unpack(mut packed: &[u8], count: usize) -> Result<Vec<Vec<u8>>> {
    let mut parts = Vec::with_capacity(count);
    for _ in 0..count {
        let (len, rest) = packed
            .split_first_chunk::<8>()
            .context("all_gather: message cut short")?;
        let len = usize::try_from(u64::from_le_bytes(*len))?;
        ensure!(rest.len() >= len, "all_gather: message cut short");
        parts.push(rest[..len].to_vec());
        packed = &rest[len..];
    }
    ensure!(packed.is_empty(), "all_gather: trailing bytes");
    Ok(parts)
}

/// Parses `--size-bytes`: a whole number of bytes, at least 1.
pub fn parse_size_bytes(text: &str) -> Result<usize, String> {
    let bytes: usize = text.trim().replace('_', "").parse().map_err(|_| {
        format!(
            "'{text}' is not a whole number of bytes that fits in 64 bits, e.g. 2097152 for 2 MiB"
        )
    })?;
    if bytes == 0 {
        return Err(
            "the buffer must be at least 1 byte (it is rounded up to the allocation granularity)"
                .into(),
        );
    }
    Ok(bytes)
}

/// The most ranks the test pattern can tell apart: it packs the writer's and
/// the owner's rank into 4 bits each.
pub const MAX_RANKS: usize = 16;

/// The 32-bit word `writer` puts at `index` of `owner`'s buffer:
/// `0xWOiiiiii`, writer in the top hex digit, owner in the next, then the
/// index (modulo 2^24). A word in the wrong buffer, from the wrong writer or
/// at the wrong place is caught.
pub fn word(writer: usize, owner: usize, index: usize) -> u32 {
    ((writer as u32 & 0xF) << 28) | ((owner as u32 & 0xF) << 24) | (index as u32 & 0x00FF_FFFF)
}

/// Where things go in every rank's buffer of `words` 32-bit words, for `ranks`
/// ranks: the first half is the owner's own data, which the peers read (Step
/// 6); the second half is one slot per rank, which that rank writes into
/// every peer's buffer (Step 7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub words: usize,
    pub ranks: usize,
}

impl Layout {
    /// The owner's half: `0..words/2`.
    pub fn own(&self) -> Range<usize> {
        0..self.words / 2
    }

    /// Words per slot of the second half.
    pub fn slot_len(&self) -> usize {
        (self.words - self.words / 2) / self.ranks.max(1)
    }

    /// Rank `writer`'s slot in every buffer.
    pub fn slot(&self, writer: usize) -> Range<usize> {
        let start = self.words / 2 + writer * self.slot_len();
        start..start + self.slot_len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_round_trips_including_empty_parts() {
        let parts = vec![b"host-a 0".to_vec(), vec![], vec![1, 2, 3]];
        assert_eq!(unpack(&pack(&parts), 3).unwrap(), parts);
        assert!(unpack(&pack(&parts), 2).is_err());
        assert!(unpack(&pack(&parts)[..10], 3).is_err());
    }

    #[test]
    fn sizes_are_whole_positive_numbers() {
        assert_eq!(parse_size_bytes("2097152"), Ok(2 << 20));
        assert_eq!(parse_size_bytes("2_097_152"), Ok(2 << 20));
        assert_eq!(parse_size_bytes("18446744073709551615"), Ok(usize::MAX));
        assert!(parse_size_bytes("0")
            .unwrap_err()
            .contains("at least 1 byte"));
        for bad in ["", "-1", "2MiB", "1.5", "18446744073709551616"] {
            assert!(
                parse_size_bytes(bad)
                    .unwrap_err()
                    .contains("not a whole number"),
                "{bad}"
            );
        }
    }

    #[test]
    fn words_name_writer_owner_and_index() {
        assert_eq!(word(0, 0, 0), 0x0000_0000);
        assert_eq!(word(1, 1, 0x3ffff), 0x1103_ffff);
        assert_eq!(word(1, 0, 5), 0x1000_0005);
        assert_eq!(word(0, 1, 5), 0x0100_0005);
        assert_eq!(word(15, 14, 1 << 24), 0xfe00_0000);
        // Every (writer, owner) pair of 16 ranks gives different words.
        let mut seen = std::collections::HashSet::new();
        for w in 0..MAX_RANKS {
            for o in 0..MAX_RANKS {
                assert!(seen.insert(word(w, o, 7)));
            }
        }
    }

    #[test]
    fn the_layout_splits_the_buffer_into_own_half_and_slots() {
        let two = Layout {
            words: 524_288,
            ranks: 2,
        };
        assert_eq!(two.own(), 0..262_144);
        assert_eq!(two.slot_len(), 131_072);
        assert_eq!(two.slot(0), 262_144..393_216);
        assert_eq!(two.slot(1), 393_216..524_288);
        let three = Layout {
            words: 524_288,
            ranks: 3,
        };
        assert_eq!(three.slot_len(), 87_381);
        assert!(three.slot(2).end <= three.words);
        // Slots never overlap the own half or each other.
        for ranks in 1..=MAX_RANKS {
            let layout = Layout {
                words: 524_288,
                ranks,
            };
            let mut end = layout.own().end;
            for w in 0..ranks {
                assert_eq!(layout.slot(w).start, end);
                end = layout.slot(w).end;
            }
            assert!(end <= layout.words);
        }
    }
}
