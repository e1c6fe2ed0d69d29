//! Exact x86-64 encoded lengths of the instructions the synthesis writes, and the layout of a body's
//! text: where each label lands once GNU as has assembled it.
//!
//! Why: equation 2 sizes instruction blocks in bytes, and a block of 2^j bytes realises its share
//! of the instruction hit curve only if it occupies 2^j / 64 lines. The composer counts bytes with
//! a per-template estimate (`isa::Template::len`), which leaves out REX and VEX3 prefixes, SIB
//! bytes and the imm8/imm32 choice, and its last instruction crosses the budget: in the clones of
//! e1c2338's generator, 24 of memcached's 33 blocks (and 5 of 11 of nginx's) took one line more
//! than planned, and the ground-truth program `stride`'s 128-byte loop assembled to 133 bytes over
//! three lines, so a two-line cache missed 10 % of its fetches against the original's 0.03 %.
//! `synth` measures each block with `layout` and recomposes the ones that do not fit.
//!
//! The model covers the Intel-syntax forms `synth` and `isa::TEMPLATES` emit, nothing more; anything
//! else is an error naming the line, never a guess. `generator/tests/encoding.rs` checks every label
//! of the committed clones' bodies, every fixed instruction and every template with varied operands
//! against GNU as.

use std::collections::HashMap;

use anyhow::{anyhow, bail, Context, Result};

/// A register operand: its encoding number (0–15), size in bytes (1, 2, 4, 8; 16 xmm, 32 ymm) and
/// whether an 8-bit form needs a REX prefix to exist (spl, bpl, sil, dil).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RegOp {
    num: u8,
    size: u8,
    rex8: bool,
}

impl RegOp {
    fn ext(self) -> bool {
        self.num >= 8
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Operand {
    Reg(RegOp),
    /// x87 stack register st(i).
    St,
    Mem {
        base: Option<RegOp>,
        index: Option<RegOp>,
        disp: i64,
        rip: bool,
    },
    Imm(i64),
    Label(String),
}

fn gpr(name: &str) -> Option<RegOp> {
    const Q: [&str; 16] = [
        "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12",
        "r13", "r14", "r15",
    ];
    const D: [&str; 8] = ["eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi"];
    const W: [&str; 8] = ["ax", "cx", "dx", "bx", "sp", "bp", "si", "di"];
    const B: [&str; 8] = ["al", "cl", "dl", "bl", "spl", "bpl", "sil", "dil"];
    if let Some(i) = Q.iter().position(|&r| r == name) {
        return Some(RegOp {
            num: i as u8,
            size: 8,
            rex8: false,
        });
    }
    if let Some(i) = D.iter().position(|&r| r == name) {
        return Some(RegOp {
            num: i as u8,
            size: 4,
            rex8: false,
        });
    }
    if let Some(i) = W.iter().position(|&r| r == name) {
        return Some(RegOp {
            num: i as u8,
            size: 2,
            rex8: false,
        });
    }
    if let Some(i) = B.iter().position(|&r| r == name) {
        return Some(RegOp {
            num: i as u8,
            size: 1,
            rex8: i >= 4,
        });
    }
    let rest = name.strip_prefix('r')?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let num: u8 = digits.parse().ok().filter(|n| (8..16).contains(n))?;
    let size = match &rest[digits.len()..] {
        "d" => 4,
        "w" => 2,
        "b" => 1,
        _ => return None,
    };
    Some(RegOp {
        num,
        size,
        rex8: false,
    })
}

fn vreg(name: &str) -> Option<RegOp> {
    let (size, rest) = if let Some(r) = name.strip_prefix("xmm") {
        (16, r)
    } else {
        (32, name.strip_prefix("ymm")?)
    };
    let num: u8 = rest.parse().ok().filter(|n| *n < 16)?;
    Some(RegOp {
        num,
        size,
        rex8: false,
    })
}

fn parse_imm(s: &str) -> Option<i64> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let v = if let Some(h) = body.strip_prefix("0x") {
        u64::from_str_radix(h, 16).ok()? as i64
    } else {
        body.parse::<u64>().ok()? as i64
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

fn parse_mem(inner: &str) -> Result<Operand> {
    let mut base = None;
    let mut index = None;
    let mut disp = 0i64;
    let mut rip = false;
    let mut sign = 1i64;
    for tok in inner.split_whitespace() {
        match tok {
            "+" => sign = 1,
            "-" => sign = -1,
            _ => {
                if tok == "rip" {
                    rip = true;
                } else if let Some((r, _scale)) = tok.split_once('*') {
                    index = Some(gpr(r).ok_or_else(|| anyhow!("index register '{r}'"))?);
                } else if let Some(r) = gpr(tok) {
                    if base.is_none() {
                        base = Some(r);
                    } else {
                        index = Some(r);
                    }
                } else if let Some(v) = parse_imm(tok) {
                    disp += sign * v;
                } else if rip {
                    // A label relative to rip: always a 32-bit displacement.
                    disp = i64::from(i32::MAX);
                } else {
                    bail!("memory operand term '{tok}'");
                }
            }
        }
    }
    Ok(Operand::Mem {
        base,
        index,
        disp,
        rip,
    })
}

fn parse_operand(s: &str) -> Result<Operand> {
    let s = s.trim();
    if let Some(open) = s.find('[') {
        let close = s
            .rfind(']')
            .ok_or_else(|| anyhow!("unclosed memory operand '{s}'"))?;
        return parse_mem(&s[open + 1..close]);
    }
    if let Some(r) = gpr(s).or_else(|| vreg(s)) {
        return Ok(Operand::Reg(r));
    }
    if s == "st" || s.starts_with("st(") {
        return Ok(Operand::St);
    }
    if let Some(v) = parse_imm(s) {
        return Ok(Operand::Imm(v));
    }
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && !s.is_empty()
    {
        return Ok(Operand::Label(s.to_string()));
    }
    bail!("operand '{s}'")
}

/// ModRM, SIB and displacement bytes of an r/m operand, with its REX.X and REX.B needs.
fn rm_bytes(op: &Operand) -> Result<(u32, bool, bool)> {
    match op {
        Operand::Reg(r) => Ok((1, false, r.ext())),
        Operand::St => Ok((1, false, false)),
        Operand::Mem { rip: true, .. } => Ok((5, false, false)),
        Operand::Mem {
            base, index, disp, ..
        } => {
            let Some(b) = base else {
                // No base: SIB with a 32-bit displacement.
                return Ok((6, index.is_some_and(|i| i.ext()), false));
            };
            let sib = index.is_some() || b.num & 7 == 4;
            let d = if *disp == 0 && b.num & 7 != 5 {
                0
            } else if (-128..=127).contains(disp) {
                1
            } else {
                4
            };
            Ok((
                1 + u32::from(sib) + d,
                index.is_some_and(|i| i.ext()),
                b.ext(),
            ))
        }
        _ => bail!("not a register or memory operand"),
    }
}

fn fits_i8(v: i64) -> bool {
    (-128..=127).contains(&v)
}

fn is_mem(op: &Operand) -> bool {
    matches!(op, Operand::Mem { .. })
}

/// The operand size of a GPR instruction: its register operands', else the memory operand's `ptr`.
fn op_size(ops: &[Operand], ptr: Option<u8>) -> u8 {
    ops.iter()
        .find_map(|o| match o {
            Operand::Reg(r) if r.size <= 8 => Some(r.size),
            _ => None,
        })
        .or(ptr)
        .unwrap_or(4)
}

/// A legacy-encoded instruction: `prefixes` (lock/rep/mandatory, 66 for a 16-bit operand added
/// here), `opcode` bytes, the r/m operand, the ModRM.reg operand if it is a register, REX.W, and the
/// immediate's bytes.
#[derive(Clone)]
struct Legacy {
    prefixes: u32,
    opcode: u32,
    rm: Option<Operand>,
    reg: Option<RegOp>,
    w: bool,
    imm: u32,
    size16: bool,
}

impl Legacy {
    fn len(&self, ops: &[Operand]) -> Result<u32> {
        let (rm_len, x, b) = match &self.rm {
            Some(op) => rm_bytes(op)?,
            None => (0, false, false),
        };
        let r = self.reg.is_some_and(|r| r.ext());
        let rex8 = ops
            .iter()
            .any(|o| matches!(o, Operand::Reg(r) if r.size == 1 && (r.rex8 || r.ext())));
        let rex = self.w || r || x || b || rex8;
        Ok(self.prefixes
            + u32::from(self.size16)
            + u32::from(rex)
            + self.opcode
            + rm_len
            + self.imm)
    }
}

/// A VEX-encoded instruction: `map` 1 = 0F, 2 = 0F38, 3 = 0F3A; the r/m operand, VEX.W and the
/// immediate's bytes. The two-byte form carries VEX.R (and vvvv) but not X, B, W or another map.
fn vex_len(map: u8, rm: &Operand, w: bool, imm: u32) -> Result<u32> {
    let (rm_len, x, b) = rm_bytes(rm)?;
    let three = map != 1 || w || x || b;
    Ok(if three { 3 } else { 2 } + 1 + rm_len + imm)
}

const ALU: [&str; 8] = ["add", "or", "adc", "sbb", "and", "sub", "xor", "cmp"];
const SHIFT: [&str; 7] = ["rol", "ror", "rcl", "rcr", "shl", "shr", "sar"];
const UNARY: [&str; 7] = ["inc", "dec", "not", "neg", "mul", "div", "idiv"];
const SSE_F2: [&str; 8] = [
    "addsd", "subsd", "mulsd", "divsd", "maxsd", "minsd", "sqrtsd", "movsd",
];
const SSE_66: [&str; 14] = [
    "pxor", "por", "pand", "pandn", "paddb", "paddw", "paddd", "paddq", "psubq", "psubd",
    "pcmpeqb", "pcmpeqd", "pmovmskb", "ucomisd",
];

/// The encoded length of one instruction that is not a direct jump or call (those depend on the
/// layout; see `layout`). `text` is one line as `synth` writes it, prefixes included.
pub fn instruction_len(text: &str) -> Result<u32> {
    instruction_len_inner(text.trim())
        .with_context(|| format!("cannot size instruction '{}'", text.trim()))
}

fn split_operands(rest: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in rest.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(rest[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !rest[start..].trim().is_empty() {
        out.push(rest[start..].trim());
    }
    out
}

fn ptr_size(text: &str) -> Option<u8> {
    [
        ("byte ptr", 1),
        ("dword ptr", 4),
        ("qword ptr", 8),
        ("xmmword ptr", 16),
        ("ymmword ptr", 32),
    ]
    .iter()
    .find(|(p, _)| text.contains(&format!(" {p}")) || text.starts_with(p))
    .map(|&(_, s)| s)
    .or_else(|| text.contains(" word ptr").then_some(2))
}

fn instruction_len_inner(text: &str) -> Result<u32> {
    let (mut mnem, mut rest) = text.split_once(' ').unwrap_or((text, ""));
    let mut prefixes = 0u32;
    while mnem == "lock" || mnem == "rep" {
        prefixes += 1;
        let (m, r) = rest.trim().split_once(' ').unwrap_or((rest.trim(), ""));
        mnem = m;
        rest = r;
    }
    let ptr = ptr_size(rest);
    let ops: Vec<Operand> = split_operands(rest)
        .into_iter()
        .map(parse_operand)
        .collect::<Result<_>>()?;
    let reg = |i: usize| match ops.get(i) {
        Some(Operand::Reg(r)) => Some(*r),
        _ => None,
    };
    let imm = |i: usize| match ops.get(i) {
        Some(Operand::Imm(v)) => Some(*v),
        _ => None,
    };
    let size = op_size(&ops, ptr);
    let w = size == 8;
    let size16 = size == 2;
    let base = Legacy {
        prefixes,
        opcode: 0,
        rm: None,
        reg: None,
        w: false,
        imm: 0,
        size16,
    };
    let leg = |opcode: u32, rm: Option<&Operand>, reg: Option<RegOp>, w: bool, imm: u32| Legacy {
        opcode,
        rm: rm.cloned(),
        reg,
        w,
        imm,
        ..base.clone()
    };
    // r/m and reg of a two-operand form: the memory operand (or the first register) is r/m.
    let rm_reg = || -> Result<(&Operand, Option<RegOp>)> {
        match (ops.first(), ops.get(1)) {
            (Some(a @ (Operand::Reg(_) | Operand::Mem { .. })), Some(Operand::Reg(b))) => {
                Ok((a, Some(*b)))
            }
            (Some(Operand::Reg(a)), Some(b @ Operand::Mem { .. })) => Ok((b, Some(*a))),
            _ => bail!("operand shape"),
        }
    };
    if let Some(m) = mnem.strip_prefix('v') {
        if mnem == "vzeroupper" || mnem == "vzeroall" {
            return Ok(3);
        }
        return vex_instruction(m, &ops);
    }
    let len = match mnem {
        "ret" | "nop" | "cdq" => 1,
        "cqo" => 2,
        "push" | "pop" => 1 + u32::from(reg(0).is_some_and(|r| r.ext())),
        "movsb" | "stosb" | "movsd" | "stosd" | "movsq" | "stosq" if ops.is_empty() => {
            prefixes + 1 + u32::from(mnem.ends_with('q'))
        }
        "mov" => match (ops.first(), ops.get(1)) {
            (Some(Operand::Reg(r)), Some(Operand::Imm(v))) => {
                if r.size == 8 {
                    if i32::try_from(*v).is_ok() {
                        leg(1, ops.first(), None, true, 4).len(&ops)?
                    } else {
                        10
                    }
                } else {
                    let immb = u32::from(r.size);
                    u32::from(size16) + u32::from(r.ext() || r.rex8) + 1 + immb
                }
            }
            (Some(m @ Operand::Mem { .. }), Some(Operand::Imm(_))) => {
                let immb = match size {
                    1 => 1,
                    2 => 2,
                    _ => 4,
                };
                leg(1, Some(m), None, w, immb).len(&ops)?
            }
            _ => {
                let (rm, r) = rm_reg()?;
                leg(1, Some(rm), r, w, 0).len(&ops)?
            }
        },
        "movabs" => 10,
        "movzx" | "movsx" => {
            let (rm, r) = rm_reg()?;
            leg(2, Some(rm), r, reg(0).is_some_and(|r| r.size == 8), 0).len(&ops)?
        }
        "movsxd" => {
            let (rm, r) = rm_reg()?;
            leg(1, Some(rm), r, true, 0).len(&ops)?
        }
        "lea" => {
            let (rm, r) = rm_reg()?;
            leg(1, Some(rm), r, w, 0).len(&ops)?
        }
        m if ALU.contains(&m) || m == "test" => {
            if let Some(v) = imm(1) {
                let dst = &ops[0];
                let acc = matches!(dst, Operand::Reg(r) if r.num == 0);
                let full = if size == 1 {
                    1
                } else if size == 2 {
                    2
                } else {
                    4
                };
                if m != "test" && size != 1 && fits_i8(v) {
                    leg(1, Some(dst), None, w, 1).len(&ops)?
                } else if acc {
                    // The accumulator's short form: no ModRM.
                    u32::from(w) + u32::from(size16) + 1 + full
                } else {
                    leg(1, Some(dst), None, w, full).len(&ops)?
                }
            } else {
                let (rm, r) = rm_reg()?;
                leg(1, Some(rm), r, w, 0).len(&ops)?
            }
        }
        m if SHIFT.contains(&m) => {
            let v = imm(1).ok_or_else(|| anyhow!("shift count"))?;
            leg(1, ops.first(), None, w, u32::from(v != 1)).len(&ops)?
        }
        m if UNARY.contains(&m) => leg(1, ops.first(), None, w, 0).len(&ops)?,
        "imul" => {
            let (rm, r) = rm_reg()?;
            match imm(2) {
                Some(v) => leg(1, Some(rm), r, w, if fits_i8(v) { 1 } else { 4 }).len(&ops)?,
                None => leg(2, Some(rm), r, w, 0).len(&ops)?,
            }
        }
        "xchg" => {
            let (rm, r) = rm_reg()?;
            let short = matches!((ops.first(), ops.get(1)), (Some(Operand::Reg(a)), Some(Operand::Reg(b)))
                if size >= 4 && (a.num == 0 || b.num == 0) && !(a.num == 0 && b.num == 0 && size == 4));
            let both_acc = reg(0).is_some_and(|a| a.num == 0) && reg(1).is_some_and(|b| b.num == 0);
            if both_acc {
                // `xchg rax, rax` is `nop` (90); `xchg eax, eax` must zero the upper half: 87 C0.
                if size == 8 {
                    1
                } else {
                    2 + u32::from(size16)
                }
            } else if short {
                let other = if reg(0).is_some_and(|a| a.num == 0) {
                    reg(1)
                } else {
                    reg(0)
                };
                u32::from(w || other.is_some_and(|o| o.ext())) + u32::from(size16) + 1
            } else {
                leg(1, Some(rm), r, w, 0).len(&ops)?
            }
        }
        "xadd" | "bt" | "btc" | "bts" | "btr" if imm(1).is_none() => {
            let (rm, r) = rm_reg()?;
            leg(2, Some(rm), r, w, 0).len(&ops)?
        }
        "bt" | "btc" | "bts" | "btr" => leg(2, ops.first(), None, w, 1).len(&ops)?,
        "bswap" => u32::from(w || reg(0).is_some_and(|r| r.ext())) + 2,
        m if m.starts_with("set") => leg(2, ops.first(), None, false, 0).len(&ops)?,
        m if m.starts_with("cmov") => {
            let (rm, r) = rm_reg()?;
            leg(2, Some(rm), r, w, 0).len(&ops)?
        }
        "popcnt" | "lzcnt" | "tzcnt" => {
            let (rm, r) = rm_reg()?;
            Legacy {
                prefixes: prefixes + 1,
                ..leg(2, Some(rm), r, w, 0)
            }
            .len(&ops)?
        }
        "crc32" => {
            let (rm, r) = rm_reg()?;
            let w = reg(0).is_some_and(|r| r.size == 8);
            // Operand size comes from the source; a 16-bit source would add 66 (not emitted).
            Legacy {
                prefixes: prefixes + 1,
                size16: false,
                ..leg(3, Some(rm), r, w, 0)
            }
            .len(&ops)?
        }
        "ldmxcsr" | "stmxcsr" => leg(2, ops.first(), None, false, 0).len(&ops)?,
        "jmp" | "call" if !matches!(ops.first(), Some(Operand::Label(_))) => {
            // Indirect through a register or memory: FF /4, /2; the operand size is 64 by default.
            leg(1, ops.first(), None, false, 0).len(&ops)?
        }
        "fldz" | "fld1" => 2,
        "fld" | "fst" | "fstp" | "fadd" | "fmul" | "fsub" | "fxch" => match ops.first() {
            Some(m @ Operand::Mem { .. }) => leg(1, Some(m), None, false, 0).len(&ops)?,
            _ => 2,
        },
        // SSE, legacy encoding: mandatory prefix, 0F opcode.
        "movdqu" | "movdqa" | "movq" | "movd" | "cvtsi2sd" | "cvttsd2si" | "pshufd" | "comisd"
        | "addpd" | "mulpd" | "movups" | "movaps" | "addps" | "mulps" | "pshufb" => {
            sse_len(mnem, &ops, prefixes)?
        }
        m if SSE_F2.contains(&m) || SSE_66.contains(&m) => sse_len(mnem, &ops, prefixes)?,
        _ => bail!("mnemonic '{mnem}' is not in the length model"),
    };
    Ok(len)
}

fn sse_len(mnem: &str, ops: &[Operand], prefixes: u32) -> Result<u32> {
    let no_prefix = matches!(mnem, "movups" | "movaps" | "addps" | "mulps");
    let opcode = if mnem == "pshufb" { 3 } else { 2 };
    let imm = u32::from(mnem == "pshufd");
    let first = ops.first().ok_or_else(|| anyhow!("no operands"))?;
    let second = ops.get(1).ok_or_else(|| anyhow!("one operand"))?;
    // A GPR operand of movq/cvtsi2sd sets REX.W when it is 64-bit.
    let gpr64 = ops
        .iter()
        .any(|o| matches!(o, Operand::Reg(r) if r.size == 8));
    let w = matches!(mnem, "movq" | "cvtsi2sd" | "cvttsd2si") && gpr64;
    let (rm, reg) = match (first, second) {
        (m @ Operand::Mem { .. }, Operand::Reg(r)) | (Operand::Reg(r), m @ Operand::Mem { .. }) => {
            (m, Some(*r))
        }
        // A GPR operand (movq, movd, cvtsi2sd, pmovmskb's destination) is r/m for the moves and
        // cvtsi2sd, ModRM.reg for pmovmskb; between two vector registers the second is r/m.
        (Operand::Reg(a), Operand::Reg(b)) => {
            if a.size <= 8 && mnem != "pmovmskb" {
                (first, Some(*b))
            } else {
                (second, Some(*a))
            }
        }
        _ => bail!("operand shape"),
    };
    let (rm_len, x, b) = rm_bytes(rm)?;
    let r = reg.is_some_and(|r| r.ext());
    let rex = w || r || x || b;
    Ok(prefixes + u32::from(!no_prefix) + u32::from(rex) + opcode + rm_len + imm)
}

fn reg_of(op: &Operand) -> Option<RegOp> {
    match op {
        Operand::Reg(r) => Some(*r),
        _ => None,
    }
}

fn vex_instruction(m: &str, ops: &[Operand]) -> Result<u32> {
    let last = ops.last().ok_or_else(|| anyhow!("no operands"))?;
    let imm = u32::from(matches!(last, Operand::Imm(_)));
    let regs: Vec<&Operand> = ops
        .iter()
        .filter(|o| !matches!(o, Operand::Imm(_)))
        .collect();
    let gpr64 = ops
        .iter()
        .any(|o| matches!(o, Operand::Reg(r) if r.size == 8));
    let (map, w) = match m {
        "pshufb" => (2, false),
        "permq" => (3, true),
        "movq" | "cvtsi2sd" => (1, gpr64),
        _ => (1, false),
    };
    // The r/m operand: the memory operand where there is one, else the last register (a store form
    // puts it first; movq/movd r64, xmm puts the GPR in r/m).
    let rm = if let Some(mem) = regs.iter().find(|o| is_mem(o)) {
        *mem
    } else if matches!(m, "movq" | "movd") {
        regs.iter()
            .find(|o| matches!(o, Operand::Reg(r) if r.size <= 8))
            .copied()
            .unwrap_or(regs[regs.len() - 1])
    } else if m == "movdqu" || m == "movdqa" {
        // reg, reg moves: GNU as picks the load or store form so that VEX2 suffices where it can.
        let (a, b) = (reg_of(regs[0]), reg_of(regs[1]));
        if b.is_some_and(|b| b.ext()) && !a.is_some_and(|a| a.ext()) {
            regs[0]
        } else {
            regs[1]
        }
    } else {
        regs[regs.len() - 1]
    };
    vex_len(map, rm, w, imm)
}

/// Where one label lands: its section and offset from the section's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub section: usize,
    pub offset: u64,
}

#[derive(Debug, Clone)]
enum Piece {
    Label(String),
    /// Fixed bytes.
    Bytes(u64),
    /// `.p2align n`: pad to 2^n.
    Align(u64),
    /// `.skip n`.
    Skip(u64),
    /// A direct jump or call to a label: (short form bytes or 0 if none, long form bytes, target).
    Branch(u32, u32, String),
}

/// The assembled layout of a body's text: every label's place, as GNU as lays it out (branches to a
/// label in the same section take the short form when it reaches, as `as` relaxes them).
#[derive(Debug, Default)]
pub struct Layout {
    pub labels: HashMap<String, Place>,
}

impl Layout {
    /// Bytes from label `from` to label `to`, both in one section.
    pub fn extent(&self, from: &str, to: &str) -> Option<u64> {
        let (a, b) = (self.labels.get(from)?, self.labels.get(to)?);
        (a.section == b.section && b.offset >= a.offset).then(|| b.offset - a.offset)
    }
}

/// Lays out `asm` (one or more clusters' `body.S` text). Errors name the line the model cannot size.
pub fn layout(asm: &str) -> Result<Layout> {
    let mut sections: Vec<String> = vec![".text".to_string()];
    let mut pieces: Vec<Vec<Piece>> = vec![Vec::new()];
    let mut stack: Vec<usize> = Vec::new();
    let mut cur = 0usize;
    let mut numeric = 0u64;
    // Numeric local labels (`1:`, `1f`, `1b`) get unique names in order of appearance.
    let mut last_numeric: HashMap<String, String> = HashMap::new();
    let mut pending_forward: HashMap<String, Vec<(usize, usize)>> = HashMap::new();
    let mut in_comment = false;
    for raw in asm.lines() {
        let mut line = raw.trim();
        if in_comment {
            match line.find("*/") {
                Some(i) => {
                    in_comment = false;
                    line = line[i + 2..].trim();
                }
                None => continue,
            }
        }
        if let Some(i) = line.find("/*") {
            if !line[i..].contains("*/") {
                in_comment = true;
            }
            line = line[..i].trim();
        }
        if let Some(i) = line.find("//") {
            line = line[..i].trim();
        }
        if line.is_empty() {
            continue;
        }
        let section_of = |name: &str, sections: &mut Vec<String>, pieces: &mut Vec<Vec<Piece>>| {
            sections.iter().position(|s| s == name).unwrap_or_else(|| {
                sections.push(name.to_string());
                pieces.push(Vec::new());
                sections.len() - 1
            })
        };
        if let Some(d) = line.strip_prefix('.') {
            let (dir, arg) = d.split_once(char::is_whitespace).unwrap_or((d, ""));
            let arg = arg.trim();
            match dir {
                "text" => cur = 0,
                "section" | "pushsection" => {
                    let name = arg.split(',').next().unwrap_or("").trim().to_string();
                    if dir == "pushsection" {
                        stack.push(cur);
                    }
                    cur = section_of(&name, &mut sections, &mut pieces);
                }
                "popsection" => {
                    cur = stack
                        .pop()
                        .ok_or_else(|| anyhow!("'.popsection' without a push"))?
                }
                "p2align" => {
                    let n: u64 = arg
                        .split(',')
                        .next()
                        .unwrap_or("")
                        .trim()
                        .parse()
                        .context("'.p2align'")?;
                    pieces[cur].push(Piece::Align(1 << n));
                }
                "skip" => {
                    let n = arg
                        .split(',')
                        .next()
                        .and_then(|s| parse_imm(s.trim()))
                        .ok_or_else(|| anyhow!("'.skip {arg}'"))?;
                    pieces[cur].push(Piece::Skip(n as u64));
                }
                "byte" => pieces[cur].push(Piece::Bytes(arg.split(',').count() as u64)),
                "quad" => pieces[cur].push(Piece::Bytes(8 * arg.split(',').count() as u64)),
                "long" => pieces[cur].push(Piece::Bytes(4 * arg.split(',').count() as u64)),
                "intel_syntax" | "globl" | "type" | "size" | "att_syntax" => {}
                _ if line.ends_with(':') => {
                    pieces[cur].push(Piece::Label(line.trim_end_matches(':').to_string()));
                }
                _ => bail!("directive '{line}' is not in the layout model"),
            }
            continue;
        }
        // Labels, possibly followed by an instruction on the same line (`1:  imul ...`).
        let mut rest = line;
        while let Some((head, tail)) = rest.split_once(':') {
            if head.contains(' ') || head.contains('[') || head.is_empty() {
                break;
            }
            let name = if head.chars().all(|c| c.is_ascii_digit()) {
                numeric += 1;
                let unique = format!("{head}@{numeric}");
                last_numeric.insert(head.to_string(), unique.clone());
                for (s, i) in pending_forward.remove(head).unwrap_or_default() {
                    if let Piece::Branch(_, _, t) = &mut pieces[s][i] {
                        *t = unique.clone();
                    }
                }
                unique
            } else {
                head.to_string()
            };
            pieces[cur].push(Piece::Label(name));
            rest = tail.trim();
        }
        if rest.is_empty() {
            continue;
        }
        // `{disp32} jmp LABEL`: a jump GNU as encodes with a 32-bit displacement whatever the
        // distance (synth uses it where alignment padding follows the jump, whose relaxation the
        // model and as could otherwise settle differently).
        if let Some(jump) = rest.strip_prefix("{disp32} jmp ") {
            let target = jump.trim();
            if target.is_empty() || target.contains(' ') || target.contains('[') {
                bail!("'{rest}' is not in the layout model");
            }
            pieces[cur].push(Piece::Branch(5, 5, target.to_string()));
            continue;
        }
        let (mnem, arg) = rest.split_once(' ').unwrap_or((rest, ""));
        let arg = arg.trim();
        let direct = !arg.is_empty()
            && !arg.contains(' ')
            && !arg.contains('[')
            && gpr(arg).is_none()
            && (mnem == "jmp" || mnem == "call" || (mnem.starts_with('j') && mnem.len() <= 4));
        if direct {
            let (short, long) = match mnem {
                "jmp" => (2, 5),
                "call" => (0, 5),
                _ => (2, 6),
            };
            let target = if let Some(n) = arg
                .strip_suffix('f')
                .filter(|n| n.chars().all(|c| c.is_ascii_digit()))
            {
                pending_forward
                    .entry(n.to_string())
                    .or_default()
                    .push((cur, pieces[cur].len()));
                String::new()
            } else if let Some(n) = arg
                .strip_suffix('b')
                .filter(|n| n.chars().all(|c| c.is_ascii_digit()))
            {
                last_numeric
                    .get(n)
                    .cloned()
                    .ok_or_else(|| anyhow!("'{rest}': no label {n} before it"))?
            } else {
                arg.to_string()
            };
            pieces[cur].push(Piece::Branch(short, long, target));
            continue;
        }
        pieces[cur].push(Piece::Bytes(u64::from(instruction_len(rest)?)));
    }
    // Relaxation, as GNU as does it: every branch starts short; one that does not reach grows, and
    // the layout is redone until nothing grows.
    let mut long: Vec<Vec<bool>> = pieces
        .iter()
        .map(|p| {
            p.iter()
                .map(|x| matches!(x, Piece::Branch(0, _, _)))
                .collect()
        })
        .collect();
    loop {
        let mut labels = HashMap::new();
        let mut ends: Vec<Vec<u64>> = Vec::new();
        for (s, ps) in pieces.iter().enumerate() {
            let mut at = 0u64;
            let mut e = Vec::with_capacity(ps.len());
            for (i, p) in ps.iter().enumerate() {
                match p {
                    Piece::Label(n) => {
                        labels.insert(
                            n.clone(),
                            Place {
                                section: s,
                                offset: at,
                            },
                        );
                    }
                    Piece::Bytes(n) | Piece::Skip(n) => at += n,
                    Piece::Align(a) => at = at.div_ceil(*a) * a,
                    Piece::Branch(short, l, _) => {
                        at += u64::from(if long[s][i] { *l } else { *short })
                    }
                }
                e.push(at);
            }
            ends.push(e);
        }
        let mut grew = false;
        for (s, ps) in pieces.iter().enumerate() {
            for (i, p) in ps.iter().enumerate() {
                let Piece::Branch(_, _, target) = p else {
                    continue;
                };
                if long[s][i] {
                    continue;
                }
                let reaches = labels.get(target).is_some_and(|t: &Place| {
                    t.section == s && {
                        let rel = t.offset as i64 - ends[s][i] as i64;
                        fits_i8(rel)
                    }
                });
                if !reaches {
                    long[s][i] = true;
                    grew = true;
                }
            }
        }
        if !grew {
            return Ok(Layout { labels });
        }
    }
}
