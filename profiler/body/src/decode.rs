//! Static facts about one guest instruction, decoded once from its bytes with iced-x86.
//!
//! Everything the per-execution loop needs is precomputed here into small arrays, so the hot path does
//! no decoding and no allocation.

use std::collections::HashMap;

use iced_x86::{
    ConditionCode, Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory,
    Mnemonic, OpAccess, OpKind, Register,
};

use crate::classes::{class_id, ClassId, ClassTable, TableClass};

/// Register slots: iced's full register number, plus one slot for the flags.
pub const REG_SLOTS: usize = 256;
pub const FLAGS_SLOT: u8 = 255;
const MAX_REGS: usize = 8;

/// Operand kind indices (see [`crate::classes::OPERANDS`]).
pub const OP_REG: u8 = 0;
pub const OP_LOAD: u8 = 1;
pub const OP_STORE: u8 = 2;
pub const OP_RMW: u8 = 3;

#[derive(Debug, Clone, Default)]
pub struct StaticInstr {
    pub addr: u64,
    pub len: u8,
    pub class: ClassId,
    pub operand: u8,
    pub is_cond_branch: bool,
    /// A conditional jump on a condition as encoded without negation (jo, jb, je, jbe, js, jp, jl,
    /// jle: an even condition code). Valgrind's IR exits on the branch's target for these and on
    /// the fall-through for the negated ones, which tells the direction of a jump whose target is
    /// the next instruction (`analysis.rs`, the superblock's branch exits).
    pub positive_condition: bool,
    /// A direct branch's target (0 for other instructions).
    pub branch_target: u64,
    /// An indirect jump or call (`jmp rax`, `call [rax + 8]`); returns are not.
    pub is_indirect: bool,
    pub is_rep_string: bool,
    /// Loads whose address is computed from a register (candidates for pointer chasing).
    pub is_load: bool,
    pub reads: [u8; MAX_REGS],
    pub n_reads: u8,
    pub writes: [u8; MAX_REGS],
    pub n_writes: u8,
    /// Registers forming the load address (base, index).
    pub addr_regs: [u8; 2],
    pub n_addr_regs: u8,
}

/// Decodes instructions and classifies them with the class table.
pub struct InstrDecoder {
    factory: InstructionInfoFactory,
    classes: HashMap<Mnemonic, TableClass>,
    simd: [ClassId; 3],
    lock: ClassId,
    rep: ClassId,
    other: ClassId,
}

impl InstrDecoder {
    pub fn new(table: &ClassTable) -> InstrDecoder {
        let id = |n: &str| class_id(n).unwrap_or(0);
        InstrDecoder {
            factory: InstructionInfoFactory::new(),
            classes: table.by_mnemonic(),
            simd: [id("simd128"), id("simd256"), id("simd512")],
            lock: id("lock"),
            rep: id("rep"),
            other: id("other"),
        }
    }

    /// Decodes the instruction at `addr` from its bytes. Undecodable bytes give an `other` instruction of
    /// the given length, so a decoder gap never breaks the stream's accounting.
    pub fn decode(&mut self, addr: u64, bytes: &[u8]) -> StaticInstr {
        let mut decoder = Decoder::with_ip(64, bytes, addr, DecoderOptions::NONE);
        let instr = decoder.decode();
        let mut s = StaticInstr {
            addr,
            len: bytes.len() as u8,
            class: self.other,
            ..StaticInstr::default()
        };
        if instr.is_invalid() {
            return s;
        }
        let string_op = (0..instr.op_count()).any(|i| {
            matches!(
                instr.op_kind(i),
                OpKind::MemorySegSI
                    | OpKind::MemorySegESI
                    | OpKind::MemorySegRSI
                    | OpKind::MemoryESDI
                    | OpKind::MemoryESEDI
                    | OpKind::MemoryESRDI
            )
        });
        let info = self.factory.info(&instr);
        let (mut reads_mem, mut writes_mem) = (false, false);
        for m in info.used_memory() {
            match m.access() {
                OpAccess::Read | OpAccess::CondRead => reads_mem = true,
                OpAccess::Write | OpAccess::CondWrite => writes_mem = true,
                OpAccess::ReadWrite | OpAccess::ReadCondWrite => {
                    reads_mem = true;
                    writes_mem = true
                }
                _ => {}
            }
            if matches!(m.access(), OpAccess::Read | OpAccess::ReadWrite) && !string_op {
                for r in [m.base(), m.index()] {
                    if r != Register::None && r != Register::RIP && s.n_addr_regs < 2 {
                        s.addr_regs[s.n_addr_regs as usize] = slot(r);
                        s.n_addr_regs += 1;
                    }
                }
            }
        }
        s.operand = match (reads_mem, writes_mem) {
            (false, false) => OP_REG,
            (true, false) => OP_LOAD,
            (false, true) => OP_STORE,
            (true, true) => OP_RMW,
        };
        s.is_load = reads_mem;
        for r in info.used_registers() {
            let reg = r.register();
            // The instruction pointer and segment bases are not data dependencies.
            if reg == Register::RIP || reg.is_segment_register() {
                continue;
            }
            let id = slot(reg);
            let (read, write) = match r.access() {
                OpAccess::Read | OpAccess::CondRead => (true, false),
                OpAccess::Write | OpAccess::CondWrite => (false, true),
                OpAccess::ReadWrite | OpAccess::ReadCondWrite => (true, true),
                _ => (false, false),
            };
            if read {
                push(&mut s.reads, &mut s.n_reads, id);
            }
            if write {
                push(&mut s.writes, &mut s.n_writes, id);
            }
        }
        if instr.rflags_read() != 0 {
            push(&mut s.reads, &mut s.n_reads, FLAGS_SLOT);
        }
        if instr.rflags_modified() != 0 {
            push(&mut s.writes, &mut s.n_writes, FLAGS_SLOT);
        }
        s.is_cond_branch = instr.flow_control() == FlowControl::ConditionalBranch;
        s.branch_target = if s.is_cond_branch {
            instr.near_branch_target()
        } else {
            0
        };
        s.positive_condition = s.is_cond_branch
            && matches!(
                instr.condition_code(),
                ConditionCode::o
                    | ConditionCode::b
                    | ConditionCode::e
                    | ConditionCode::be
                    | ConditionCode::s
                    | ConditionCode::p
                    | ConditionCode::l
                    | ConditionCode::le
            );
        s.is_indirect = matches!(
            instr.flow_control(),
            FlowControl::IndirectBranch | FlowControl::IndirectCall
        );
        s.is_rep_string = string_op && (instr.has_rep_prefix() || instr.has_repne_prefix());
        let implicit_lock = instr.mnemonic() == Mnemonic::Xchg && writes_mem;
        s.class = if instr.has_lock_prefix() || implicit_lock {
            self.lock
        } else if s.is_rep_string {
            self.rep
        } else {
            match self.classes.get(&instr.mnemonic()) {
                Some(TableClass::Fixed(c)) => *c,
                Some(TableClass::Simd) => self.simd[simd_width(&instr)],
                None => self.other,
            }
        };
        s
    }
}

fn push(arr: &mut [u8; MAX_REGS], n: &mut u8, id: u8) {
    if (*n as usize) < MAX_REGS && !arr[..*n as usize].contains(&id) {
        arr[*n as usize] = id;
        *n += 1;
    }
}

/// The full register (rax for al, zmm0 for xmm0), as a slot number.
fn slot(r: Register) -> u8 {
    let full = r.full_register();
    (full as u32).min(FLAGS_SLOT as u32 - 1) as u8
}

/// 0 for 128-bit, 1 for 256-bit, 2 for 512-bit vectors (by the widest register operand).
fn simd_width(instr: &Instruction) -> usize {
    let mut w = 0;
    for i in 0..instr.op_count() {
        if instr.op_kind(i) == OpKind::Register {
            let r = instr.op_register(i);
            if r.is_zmm() {
                w = w.max(2);
            } else if r.is_ymm() {
                w = w.max(1);
            }
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classes::CLASSES;

    fn dec(bytes: &[u8]) -> StaticInstr {
        let mut d = InstrDecoder::new(&ClassTable::bundled());
        d.decode(0x1000, bytes)
    }

    fn class(s: &StaticInstr) -> &'static str {
        CLASSES[s.class as usize]
    }

    #[test]
    fn classes_and_operands_of_common_instructions() {
        // add rax, [rbx]
        let s = dec(&[0x48, 0x03, 0x03]);
        assert_eq!((class(&s), s.operand), ("alu", OP_LOAD));
        assert_eq!(s.addr_regs[..s.n_addr_regs as usize], [slot(Register::RBX)]);
        // mov [rdi], eax
        let s = dec(&[0x89, 0x07]);
        assert_eq!((class(&s), s.operand), ("mov", OP_STORE));
        // add [rdi], eax
        let s = dec(&[0x01, 0x07]);
        assert_eq!((class(&s), s.operand), ("alu", OP_RMW));
        // lock xadd [rdi], eax
        let s = dec(&[0xf0, 0x0f, 0xc1, 0x07]);
        assert_eq!(class(&s), "lock");
        // rep movsb
        let s = dec(&[0xf3, 0xa4]);
        assert_eq!(class(&s), "rep");
        assert!(s.is_rep_string);
        // div rcx
        assert_eq!(class(&dec(&[0x48, 0xf7, 0xf1])), "div");
        // jne +0
        let s = dec(&[0x75, 0x00]);
        assert_eq!(class(&s), "branch");
        assert!(s.is_cond_branch);
        assert!(s.reads[..s.n_reads as usize].contains(&FLAGS_SLOT));
        assert!(!s.is_indirect);
        // jmp rax, call [rax + 8]: indirect; ret, call rel32: not.
        for (bytes, indirect) in [
            (&[0xff, 0xe0][..], true),
            (&[0xff, 0x50, 0x08][..], true),
            (&[0xc3][..], false),
            (&[0xe8, 0, 0, 0, 0][..], false),
        ] {
            let s = dec(bytes);
            assert_eq!(s.is_indirect, indirect, "{bytes:02x?}");
            assert!(!s.is_cond_branch);
        }
        // vaddpd ymm0, ymm1, ymm2
        assert_eq!(class(&dec(&[0xc5, 0xf5, 0x58, 0xc2])), "simd256");
        // addpd xmm0, xmm1
        assert_eq!(class(&dec(&[0x66, 0x0f, 0x58, 0xc1])), "simd128");
        // crc32 eax, ecx
        assert_eq!(class(&dec(&[0xf2, 0x0f, 0x38, 0xf1, 0xc1])), "crc32");
    }

    #[test]
    fn register_sets_use_full_registers_and_flags() {
        // add eax, ecx: reads eax and ecx, writes eax and flags.
        let s = dec(&[0x01, 0xc8]);
        let reads = &s.reads[..s.n_reads as usize];
        let writes = &s.writes[..s.n_writes as usize];
        assert!(reads.contains(&slot(Register::RAX)) && reads.contains(&slot(Register::RCX)));
        assert!(writes.contains(&slot(Register::RAX)) && writes.contains(&FLAGS_SLOT));
        assert!(!writes.contains(&slot(Register::RCX)));
    }

    #[test]
    fn undecodable_bytes_become_other_of_the_given_length() {
        let s = dec(&[0x0f, 0xff, 0xff]);
        assert_eq!(class(&s), "other");
        assert_eq!(s.len, 3);
    }
}
