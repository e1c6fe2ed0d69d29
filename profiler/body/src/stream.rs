//! The record format of docs/body-trace.md: constants and the superblock definition parser.

use anyhow::{bail, Result};

pub const MAGIC: u64 = 0x3154_4259_444f_4244;
pub const VERSION: u64 = 1;
pub const HEADER_WORDS: usize = 4;

pub const CONTROL: u64 = 1 << 63;
pub const SKIPPED: u64 = 0x4000_0000_0000_0000;
pub const PAYLOAD_MASK: u64 = (1 << 56) - 1;

pub const TAG_SB_ENTER: u64 = 1;
pub const TAG_EXIT: u64 = 2;
pub const TAG_THREAD: u64 = 3;
pub const TAG_SB_DEF: u64 = 4;
pub const TAG_END: u64 = 5;

pub const ITEM_INSTR: u64 = 1;
pub const ITEM_MEM: u64 = 2;
pub const ITEM_EXIT: u64 = 3;

#[inline]
pub fn tag(word: u64) -> u64 {
    (word >> 56) & 0x7f
}

/// Stream header: who is on the other end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub pid: u64,
    pub ppid: u64,
}

pub fn parse_header(words: &[u64]) -> Result<Header> {
    if words.len() < HEADER_WORDS {
        bail!("body trace: stream ended before its header");
    }
    if words[0] != MAGIC {
        bail!(
            "body trace: bad magic {:#x}; the tool and ditto are from different builds",
            words[0]
        );
    }
    if words[1] != VERSION {
        bail!(
            "body trace: version {} (this ditto reads {VERSION}); rebuild ditto so its tool matches",
            words[1]
        );
    }
    Ok(Header {
        pid: words[2],
        ppid: words[3],
    })
}

/// One guest instruction as the definition states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstrItem {
    pub addr: u64,
    pub bytes: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemItem {
    /// Index of the instruction in the superblock.
    pub instr: u16,
    pub store: bool,
    pub guarded: bool,
    pub size: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitItem {
    pub instr: u16,
    pub target: u64,
    /// A plain (conditional branch) side exit rather than a special one.
    pub boring: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SbDefinition {
    pub id: u64,
    pub start: u64,
    pub instrs: Vec<InstrItem>,
    pub mems: Vec<MemItem>,
    pub exits: Vec<ExitItem>,
}

/// Parses the words following an `SB_DEF` control word.
pub fn parse_sb_def(words: &[u64]) -> Result<SbDefinition> {
    if words.len() < 2 {
        bail!("body trace: superblock definition of {} words", words.len());
    }
    let mut def = SbDefinition {
        id: words[0],
        start: words[1],
        ..SbDefinition::default()
    };
    let mut i = 2;
    while i < words.len() {
        let w = words[i];
        i += 1;
        let kind = w >> 56;
        match kind {
            ITEM_INSTR => {
                let len = ((w >> 48) & 0xff) as usize;
                let n = len.div_ceil(8);
                if len == 0 || len > 16 || i + n > words.len() {
                    bail!("body trace: superblock {}: bad instruction item", def.id);
                }
                let mut bytes = Vec::with_capacity(len);
                for k in 0..len {
                    bytes.push((words[i + k / 8] >> (8 * (k % 8))) as u8);
                }
                i += n;
                def.instrs.push(InstrItem {
                    addr: w & ((1 << 48) - 1),
                    bytes,
                });
            }
            ITEM_MEM | ITEM_EXIT => {
                let Some(instr) = def.instrs.len().checked_sub(1) else {
                    bail!(
                        "body trace: superblock {}: item before any instruction",
                        def.id
                    );
                };
                let instr = instr as u16;
                if kind == ITEM_MEM {
                    def.mems.push(MemItem {
                        instr,
                        store: (w >> 48) & 0xff == 1,
                        guarded: (w >> 47) & 1 == 1,
                        size: w as u32,
                    });
                } else {
                    def.exits.push(ExitItem {
                        instr,
                        target: w & ((1 << 48) - 1),
                        boring: (w >> 48) & 0xff == 0,
                    });
                }
            }
            _ => bail!(
                "body trace: superblock {}: unknown item kind {kind}",
                def.id
            ),
        }
    }
    Ok(def)
}

/// Encoding helpers, used by tests and by recorded fixtures.
pub mod encode {
    use super::*;

    pub fn control(tag: u64, payload: u64) -> u64 {
        CONTROL | (tag << 56) | (payload & PAYLOAD_MASK)
    }

    pub fn header(pid: u64, ppid: u64) -> Vec<u64> {
        vec![MAGIC, VERSION, pid, ppid]
    }

    /// A full `SB_DEF` record (control word included).
    pub fn sb_def(def: &SbDefinition) -> Vec<u64> {
        let mut body = vec![def.id, def.start];
        let mut mems = def.mems.iter().peekable();
        let mut exits = def.exits.iter().peekable();
        for (k, ins) in def.instrs.iter().enumerate() {
            body.push(
                (ITEM_INSTR << 56)
                    | ((ins.bytes.len() as u64) << 48)
                    | (ins.addr & ((1 << 48) - 1)),
            );
            let mut words = vec![0u64; ins.bytes.len().div_ceil(8)];
            for (j, b) in ins.bytes.iter().enumerate() {
                words[j / 8] |= (*b as u64) << (8 * (j % 8));
            }
            body.extend(words);
            while let Some(m) = mems.next_if(|m| m.instr as usize == k) {
                body.push(
                    (ITEM_MEM << 56)
                        | ((m.store as u64) << 48)
                        | ((m.guarded as u64) << 47)
                        | m.size as u64,
                );
            }
            while let Some(e) = exits.next_if(|e| e.instr as usize == k) {
                body.push((ITEM_EXIT << 56) | ((!e.boring as u64) << 48) | e.target);
            }
        }
        let mut out = vec![control(TAG_SB_DEF, body.len() as u64)];
        out.extend(body);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_round_trip_through_the_encoding() {
        let def = SbDefinition {
            id: 7,
            start: 0x401000,
            instrs: vec![
                InstrItem {
                    addr: 0x401000,
                    bytes: vec![0x48, 0x8b, 0x07],
                },
                InstrItem {
                    addr: 0x401003,
                    bytes: (0..11).collect(),
                },
            ],
            mems: vec![MemItem {
                instr: 0,
                store: false,
                guarded: false,
                size: 8,
            }],
            exits: vec![ExitItem {
                instr: 1,
                target: 0x401000,
                boring: true,
            }],
        };
        let words = encode::sb_def(&def);
        assert_eq!(tag(words[0]), TAG_SB_DEF);
        assert_eq!((words[0] & PAYLOAD_MASK) as usize, words.len() - 1);
        assert_eq!(parse_sb_def(&words[1..]).unwrap(), def);
    }

    #[test]
    fn bad_headers_say_what_to_do() {
        let e = parse_header(&[1, 1, 2, 3]).unwrap_err().to_string();
        assert!(e.contains("magic"), "{e}");
        let e = parse_header(&[MAGIC, 9, 2, 3]).unwrap_err().to_string();
        assert!(e.contains("rebuild"), "{e}");
        assert_eq!(
            parse_header(&encode::header(5, 4)).unwrap(),
            Header { pid: 5, ppid: 4 }
        );
    }

    #[test]
    fn truncated_instruction_items_are_refused() {
        let e = parse_sb_def(&[1, 0, (ITEM_INSTR << 56) | (9 << 48) | 0x1000, 0])
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad instruction"), "{e}");
    }
}
