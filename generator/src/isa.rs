//! Instruction knowledge as data: the instruction classes and operand kinds of the profile's mix, how
//! unknown or unrealisable combinations fold, the registers, and the table of instruction templates the
//! body is drawn from. Code elsewhere never names an opcode except the body's fixed control skeleton
//! (loop counters, windows, branch patterns) in `synth.rs`.

use std::fmt;

/// Instruction classes, by function (paper §4.4.2). Names are those the body profiler writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    Mov,
    Alu,
    Mul,
    Div,
    Fp,
    X87,
    Simd128,
    Simd256,
    Branch,
    Lock,
    Rep,
    Crc32,
    Nop,
    Other,
}

pub const CLASSES: [Class; 14] = [
    Class::Mov,
    Class::Alu,
    Class::Mul,
    Class::Div,
    Class::Fp,
    Class::X87,
    Class::Simd128,
    Class::Simd256,
    Class::Branch,
    Class::Lock,
    Class::Rep,
    Class::Crc32,
    Class::Nop,
    Class::Other,
];

/// Operand kinds: register only, memory read, memory write, memory read-modify-write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Opnd {
    Reg,
    Load,
    Store,
    Rmw,
}

pub const OPNDS: [Opnd; 4] = [Opnd::Reg, Opnd::Load, Opnd::Store, Opnd::Rmw];

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::Mov => "mov",
            Class::Alu => "alu",
            Class::Mul => "mul",
            Class::Div => "div",
            Class::Fp => "fp",
            Class::X87 => "x87",
            Class::Simd128 => "simd128",
            Class::Simd256 => "simd256",
            Class::Branch => "branch",
            Class::Lock => "lock",
            Class::Rep => "rep",
            Class::Crc32 => "crc32",
            Class::Nop => "nop",
            Class::Other => "other",
        }
    }

    pub fn index(self) -> usize {
        CLASSES.iter().position(|c| *c == self).unwrap_or(0)
    }

    /// Resolves a class name from a profile. Aliases cover the spellings other class tables use;
    /// `None` means unknown (the caller treats it as `other` and warns).
    pub fn parse(name: &str) -> Option<Class> {
        let n = name.trim().to_ascii_lowercase().replace(['-', ' '], "_");
        let c = match n.as_str() {
            "mov" | "move" | "data_move" | "datamov" | "movement" => Class::Mov,
            "alu" | "arith" | "arithmetic" | "logic" | "int" | "integer" | "lea" | "shift" => {
                Class::Alu
            }
            "mul" | "imul" | "multiply" => Class::Mul,
            "div" | "idiv" | "divide" => Class::Div,
            "fp" | "float" | "sse_scalar" | "scalar_fp" => Class::Fp,
            "x87" | "fpu" => Class::X87,
            "simd128" | "simd" | "sse" | "xmm" | "vec128" | "avx128" => Class::Simd128,
            // AVX-512 does not exist on the machines clones run on; 256-bit is the widest.
            "simd256" | "avx" | "avx2" | "ymm" | "vec256" | "simd512" | "avx512" | "zmm" => {
                Class::Simd256
            }
            "branch" | "control" | "jump" | "jcc" | "call" | "ret" | "cti" => Class::Branch,
            "lock" | "locked" | "atomic" => Class::Lock,
            "rep" | "rep_string" | "repstr" | "string" => Class::Rep,
            "crc32" | "crc" => Class::Crc32,
            "nop" | "nops" => Class::Nop,
            "other" | "misc" => Class::Other,
            _ => return None,
        };
        Some(c)
    }
}

impl Opnd {
    pub fn name(self) -> &'static str {
        match self {
            Opnd::Reg => "reg",
            Opnd::Load => "load",
            Opnd::Store => "store",
            Opnd::Rmw => "rmw",
        }
    }

    pub fn index(self) -> usize {
        OPNDS.iter().position(|o| *o == self).unwrap_or(0)
    }

    pub fn parse(name: &str) -> Option<Opnd> {
        let n = name.trim().to_ascii_lowercase().replace(['-', ' '], "_");
        Some(match n.as_str() {
            "reg" | "register" | "r" | "none" => Opnd::Reg,
            "load" | "read" | "mem_read" | "memory_read" | "m_r" => Opnd::Load,
            "store" | "write" | "mem_write" | "memory_write" | "m_w" => Opnd::Store,
            "rmw" | "read_modify_write" | "mem_rmw" | "m_rw" => Opnd::Rmw,
            _ => return None,
        })
    }

    pub fn touches_memory(self) -> bool {
        self != Opnd::Reg
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Combinations with no template are realised as the nearest combination that has one. Returned pairs
/// always have templates (checked by a test).
pub fn fold(class: Class, opnd: Opnd) -> (Class, Opnd) {
    use Class::*;
    use Opnd::*;
    match (class, opnd) {
        (Mov, Rmw) => (Alu, Rmw),
        (Alu, Store) => (Mov, Store),
        (Mul | Div | Crc32 | Fp | X87 | Simd128 | Simd256, Store | Rmw)
            if !has_template(class, opnd) =>
        {
            (class, Load)
        }
        (Branch, _) => (Branch, Reg),
        (Lock, _) => (Lock, Rmw),
        // `rep stos` only writes memory; `rep movs` reads one buffer and writes another. The
        // profiler's decoder tells them apart the same way (store and rmw).
        (Rep, Store) => (Rep, Store),
        (Rep, _) => (Rep, Rmw),
        (Nop, _) => (Nop, Reg),
        (c, o) => (c, o),
    }
}

fn has_template(class: Class, opnd: Opnd) -> bool {
    TEMPLATES.iter().any(|t| t.class == class && t.opnd == opnd)
}

/// How an instruction uses a register operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acc {
    R,
    W,
    RW,
}

impl Acc {
    pub fn reads(self) -> bool {
        matches!(self, Acc::R | Acc::RW)
    }
    pub fn writes(self) -> bool {
        matches!(self, Acc::W | Acc::RW)
    }
}

/// A template operand, in the order of the `{0}`, `{1}`, … placeholders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// General-purpose register of this many bits (64, 32, 8).
    G(u8, Acc),
    /// xmm register.
    X(Acc),
    /// ymm register.
    Y(Acc),
    /// Memory operand of this many bytes; read and/or written per the template's operand kind.
    M(u8),
    /// Immediate drawn uniformly from [lo, hi].
    I(u8, u8),
}

/// Templates that need more than one instruction or a special target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    None,
    /// `or DIVISOR, 1` and `xor edx, edx` first: a real divide that can never fault.
    Div,
    /// `lea rdi`/`lea rsi`/`mov ecx, COUNT` first, over the private rep scratch region.
    Rep,
    /// An unconditional jump to the next instruction.
    JmpNext,
}

#[derive(Debug)]
pub struct Template {
    pub class: Class,
    pub opnd: Opnd,
    /// Intel syntax with `{i}` placeholders.
    pub asm: &'static str,
    /// The VEX form, used when the body also uses 256-bit SIMD (avoids SSE/AVX transition stalls).
    pub vex: Option<&'static str>,
    pub args: &'static [Arg],
    /// Registers the instruction reads or writes without naming them.
    pub implicit: &'static [(Reg, Acc)],
    /// Registers that may not be chosen for its `G` operands.
    pub forbid: &'static [Reg],
    /// Estimated encoded bytes with register operands; a memory operand adds its displacement.
    pub len: u8,
    pub special: Special,
}

/// Register ids: 0–15 are the general-purpose registers in encoding order, 16–31 xmm/ymm 0–15.
pub type Reg = u8;

pub const RAX: Reg = 0;
pub const RCX: Reg = 1;
pub const RDX: Reg = 2;
pub const RBX: Reg = 3;
pub const RSP: Reg = 4;
pub const RBP: Reg = 5;
pub const RSI: Reg = 6;
pub const RDI: Reg = 7;
pub const R8: Reg = 8;
pub const R9: Reg = 9;
pub const R10: Reg = 10;
pub const R11: Reg = 11;
pub const R12: Reg = 12;
pub const R13: Reg = 13;
pub const R14: Reg = 14;
pub const R15: Reg = 15;
pub const XMM0: Reg = 16;
/// The flags register, as the body profiler counts it: one register, read by conditional jumps,
/// moves and sets and by string instructions (the direction flag), written by arithmetic, logic and
/// compares (iced's `rflags_read` / `rflags_modified`).
pub const FLAGS: Reg = 32;
pub const NREGS: usize = 33;

/// Mnemonics that read or write the flags, beside the families `flag_use` recognises by prefix
/// (`j*` but `jmp`, `cmov*`, `set*`, `rep`): (mnemonic, reads, writes). A mnemonic not here neither
/// reads nor writes them (mov, lea, not, bswap, xchg, SIMD moves and arithmetic).
/// Checked against the body profiler's decoder by `generator/tests/dependencies.rs`.
static FLAG_USE: &[(&str, bool, bool)] = &[
    ("adc", true, true),
    ("add", false, true),
    ("and", false, true),
    ("bsf", false, true),
    ("bsr", false, true),
    ("bt", false, true),
    ("btc", false, true),
    ("cmp", false, true),
    ("comisd", false, true),
    ("dec", false, true),
    ("div", false, true),
    // x87 instructions leave the integer flags undefined, which iced counts as written.
    ("fadd", false, true),
    ("fld", false, true),
    ("fldz", false, true),
    ("fmul", false, true),
    ("fst", false, true),
    ("fstp", false, true),
    ("fxch", false, true),
    ("idiv", false, true),
    ("imul", false, true),
    ("inc", false, true),
    ("lzcnt", false, true),
    ("mul", false, true),
    ("neg", false, true),
    ("or", false, true),
    ("popcnt", false, true),
    ("sar", false, true),
    ("sbb", true, true),
    ("shl", false, true),
    ("shr", false, true),
    ("sub", false, true),
    ("test", false, true),
    ("tzcnt", false, true),
    ("ucomisd", false, true),
    ("vcomisd", false, true),
    ("vucomisd", false, true),
    ("xadd", false, true),
    ("xor", false, true),
];

/// Whether the instruction `text` (Intel syntax, as rendered) reads and writes the flags.
pub fn flag_use(text: &str) -> (bool, bool) {
    let mut words = text.split_whitespace();
    let mut m = words.next().unwrap_or("");
    if m == "lock" {
        m = words.next().unwrap_or("");
    }
    if matches!(m, "rep" | "repe" | "repz" | "repne" | "repnz") {
        // The string instruction reads the direction flag; `repe`/`repne` forms would also write.
        return (true, m != "rep");
    }
    if (m.starts_with('j') && m != "jmp")
        || m.starts_with("cmov")
        || (m.starts_with("set") && m.len() > 3)
    {
        return (true, false);
    }
    FLAG_USE
        .iter()
        .find(|(n, _, _)| *n == m)
        .map_or((false, false), |&(_, r, w)| (r, w))
}

const G64: [&str; 16] = [
    "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15",
];
const G32: [&str; 16] = [
    "eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi", "r8d", "r9d", "r10d", "r11d", "r12d",
    "r13d", "r14d", "r15d",
];
const G8: [&str; 16] = [
    "al", "cl", "dl", "bl", "spl", "bpl", "sil", "dil", "r8b", "r9b", "r10b", "r11b", "r12b",
    "r13b", "r14b", "r15b",
];

/// Name of register `r` at `bits` (vector registers: 128 → xmm, 256 → ymm).
pub fn reg_name(r: Reg, bits: u16) -> String {
    if r >= XMM0 {
        let n = r - XMM0;
        return if bits == 256 {
            format!("ymm{n}")
        } else {
            format!("xmm{n}")
        };
    }
    let i = usize::from(r & 15);
    match bits {
        64 => G64[i].to_string(),
        32 => G32[i].to_string(),
        _ => G8[i].to_string(),
    }
}

use Acc::{R, RW, W};
use Arg::{G, I, M, X, Y};

macro_rules! t {
    ($class:ident, $opnd:ident, $asm:expr, $args:expr, $len:expr) => {
        Template {
            class: Class::$class,
            opnd: Opnd::$opnd,
            asm: $asm,
            vex: None,
            args: $args,
            implicit: &[],
            forbid: &[],
            len: $len,
            special: Special::None,
        }
    };
    ($class:ident, $opnd:ident, $asm:expr, vex $vex:expr, $args:expr, $len:expr) => {
        Template {
            class: Class::$class,
            opnd: Opnd::$opnd,
            asm: $asm,
            vex: Some($vex),
            args: $args,
            implicit: &[],
            forbid: &[],
            len: $len,
            special: Special::None,
        }
    };
}

/// The instruction templates, per class × operand kind. Memory operands address the first bytes of a
/// 64-byte line (the paper's "first data in a cache line"), so SSE alignment rules always hold.
/// Every load writes a register: a load that only sets flags (`cmp reg, [m]`, `bt [m], i`) is dead
/// as soon as the next flag write follows, and Valgrind drops dead loads before cachegrind or the
/// body profiler sees them, while the CPU still makes the access (synth.rs, `Deps::pending`).
pub static TEMPLATES: &[Template] = &[
    // mov
    t!(Mov, Reg, "mov {0}, {1}", &[G(64, W), G(64, R)], 3),
    t!(Mov, Reg, "mov {0}, {1}", &[G(32, W), G(32, R)], 2),
    t!(Mov, Reg, "movzx {0}, {1}", &[G(32, W), G(8, R)], 4),
    t!(Mov, Reg, "mov {0}, {1}", &[G(32, W), I(1, 255)], 5),
    t!(Mov, Load, "mov {0}, qword ptr {1}", &[G(64, W), M(8)], 3),
    t!(Mov, Load, "mov {0}, dword ptr {1}", &[G(32, W), M(4)], 3),
    t!(Mov, Load, "movzx {0}, byte ptr {1}", &[G(32, W), M(1)], 4),
    t!(Mov, Load, "movsxd {0}, dword ptr {1}", &[G(64, W), M(4)], 3),
    t!(Mov, Store, "mov qword ptr {0}, {1}", &[M(8), G(64, R)], 3),
    t!(Mov, Store, "mov dword ptr {0}, {1}", &[M(4), G(32, R)], 3),
    t!(Mov, Store, "mov byte ptr {0}, {1}", &[M(1), G(8, R)], 3),
    t!(Mov, Store, "mov dword ptr {0}, {1}", &[M(4), I(0, 255)], 7),
    // alu
    t!(Alu, Reg, "add {0}, {1}", &[G(64, RW), G(64, R)], 3),
    t!(Alu, Reg, "sub {0}, {1}", &[G(64, RW), G(64, R)], 3),
    t!(Alu, Reg, "xor {0}, {1}", &[G(32, RW), G(32, R)], 2),
    t!(Alu, Reg, "and {0}, {1}", &[G(64, RW), G(64, R)], 3),
    t!(Alu, Reg, "or {0}, {1}", &[G(32, RW), G(32, R)], 2),
    t!(Alu, Reg, "cmp {0}, {1}", &[G(64, R), G(64, R)], 3),
    t!(Alu, Reg, "test {0}, {1}", &[G(32, R), G(32, R)], 2),
    t!(Alu, Reg, "add {0}, {1}", &[G(64, RW), I(1, 127)], 4),
    t!(Alu, Reg, "shl {0}, {1}", &[G(64, RW), I(1, 31)], 4),
    t!(Alu, Reg, "shr {0}, {1}", &[G(32, RW), I(1, 31)], 3),
    t!(
        Alu,
        Reg,
        "lea {0}, [{1} + {2}*2 + {3}]",
        &[G(64, W), G(64, R), G(64, R), I(1, 127)],
        5
    ),
    t!(Alu, Reg, "inc {0}", &[G(32, RW)], 2),
    t!(Alu, Reg, "neg {0}", &[G(64, RW)], 3),
    t!(Alu, Load, "add {0}, qword ptr {1}", &[G(64, RW), M(8)], 3),
    t!(Alu, Load, "and {0}, dword ptr {1}", &[G(32, RW), M(4)], 3),
    t!(Alu, Rmw, "add qword ptr {0}, {1}", &[M(8), G(64, R)], 3),
    t!(Alu, Rmw, "xor dword ptr {0}, {1}", &[M(4), G(32, R)], 3),
    t!(Alu, Rmw, "inc dword ptr {0}", &[M(4)], 3),
    t!(Alu, Rmw, "or qword ptr {0}, {1}", &[M(8), I(1, 127)], 4),
    // mul
    t!(Mul, Reg, "imul {0}, {1}", &[G(64, RW), G(64, R)], 4),
    t!(
        Mul,
        Reg,
        "imul {0}, {1}, {2}",
        &[G(32, W), G(32, R), I(3, 127)],
        3
    ),
    t!(Mul, Load, "imul {0}, qword ptr {1}", &[G(64, RW), M(8)], 4),
    // div: 32-bit unsigned divide of edx:eax (edx zeroed) by a divisor forced odd, so never #DE.
    Template {
        class: Class::Div,
        opnd: Opnd::Reg,
        asm: "div {0}",
        vex: None,
        args: &[G(32, RW)],
        implicit: &[(RAX, RW), (RDX, RW)],
        forbid: &[RDX],
        len: 2,
        special: Special::Div,
    },
    Template {
        class: Class::Div,
        opnd: Opnd::Load,
        asm: "div dword ptr {0}",
        vex: None,
        args: &[M(4)],
        implicit: &[(RAX, RW), (RDX, RW)],
        forbid: &[],
        len: 3,
        special: Special::Div,
    },
    // scalar floating point (SSE2; VEX form when the body also uses AVX2)
    t!(Fp, Reg, "addsd {0}, {1}", vex "vaddsd {0}, {0}, {1}", &[X(RW), X(R)], 4),
    t!(Fp, Reg, "mulsd {0}, {1}", vex "vmulsd {0}, {0}, {1}", &[X(RW), X(R)], 4),
    t!(Fp, Reg, "subsd {0}, {1}", vex "vsubsd {0}, {0}, {1}", &[X(RW), X(R)], 4),
    t!(Fp, Reg, "maxsd {0}, {1}", vex "vmaxsd {0}, {0}, {1}", &[X(RW), X(R)], 4),
    t!(Fp, Reg, "cvtsi2sd {0}, {1}", vex "vcvtsi2sd {0}, {0}, {1}", &[X(RW), G(32, R)], 4),
    t!(Fp, Reg, "ucomisd {0}, {1}", vex "vucomisd {0}, {1}", &[X(R), X(R)], 4),
    t!(Fp, Load, "addsd {0}, qword ptr {1}", vex "vaddsd {0}, {0}, qword ptr {1}", &[X(RW), M(8)], 5),
    t!(Fp, Load, "movsd {0}, qword ptr {1}", vex "vmovsd {0}, qword ptr {1}", &[X(W), M(8)], 5),
    t!(Fp, Load, "mulsd {0}, qword ptr {1}", vex "vmulsd {0}, {0}, qword ptr {1}", &[X(RW), M(8)], 5),
    t!(Fp, Store, "movsd qword ptr {0}, {1}", vex "vmovsd qword ptr {0}, {1}", &[M(8), X(R)], 5),
    // x87 (two values are kept on the x87 stack for the whole body: see synth.rs)
    t!(X87, Reg, "fadd st(0), st(1)", &[], 2),
    t!(X87, Reg, "fmul st(0), st(1)", &[], 2),
    t!(X87, Reg, "fxch st(1)", &[], 2),
    t!(X87, Load, "fadd qword ptr {0}", &[M(8)], 3),
    t!(X87, Load, "fmul dword ptr {0}", &[M(4)], 3),
    t!(X87, Store, "fst qword ptr {0}", &[M(8)], 3),
    // 128-bit SIMD
    t!(Simd128, Reg, "paddd {0}, {1}", vex "vpaddd {0}, {0}, {1}", &[X(RW), X(R)], 4),
    t!(Simd128, Reg, "pxor {0}, {1}", vex "vpxor {0}, {0}, {1}", &[X(RW), X(R)], 4),
    t!(Simd128, Reg, "por {0}, {1}", vex "vpor {0}, {0}, {1}", &[X(RW), X(R)], 4),
    t!(Simd128, Reg, "pcmpeqb {0}, {1}", vex "vpcmpeqb {0}, {0}, {1}", &[X(RW), X(R)], 4),
    t!(Simd128, Reg, "pshufd {0}, {1}, {2}", vex "vpshufd {0}, {1}, {2}", &[X(W), X(R), I(0, 255)], 5),
    t!(Simd128, Reg, "movq {0}, {1}", vex "vmovq {0}, {1}", &[X(W), G(64, R)], 5),
    t!(Simd128, Reg, "pmovmskb {0}, {1}", vex "vpmovmskb {0}, {1}", &[G(32, W), X(R)], 4),
    t!(Simd128, Load, "movdqu {0}, xmmword ptr {1}", vex "vmovdqu {0}, xmmword ptr {1}", &[X(W), M(16)], 5),
    t!(Simd128, Load, "paddq {0}, xmmword ptr {1}", vex "vpaddq {0}, {0}, xmmword ptr {1}", &[X(RW), M(16)], 5),
    t!(Simd128, Load, "pcmpeqb {0}, xmmword ptr {1}", vex "vpcmpeqb {0}, {0}, xmmword ptr {1}", &[X(RW), M(16)], 5),
    t!(Simd128, Store, "movdqu xmmword ptr {0}, {1}", vex "vmovdqu xmmword ptr {0}, {1}", &[M(16), X(R)], 5),
    t!(Simd128, Store, "movq qword ptr {0}, {1}", vex "vmovq qword ptr {0}, {1}", &[M(8), X(R)], 5),
    // 256-bit SIMD (AVX2)
    t!(Simd256, Reg, "vpaddd {0}, {1}, {2}", &[Y(W), Y(R), Y(R)], 4),
    t!(Simd256, Reg, "vpxor {0}, {1}, {2}", &[Y(W), Y(R), Y(R)], 4),
    t!(
        Simd256,
        Reg,
        "vpermq {0}, {1}, {2}",
        &[Y(W), Y(R), I(0, 255)],
        6
    ),
    t!(
        Simd256,
        Reg,
        "vpshufb {0}, {1}, {2}",
        &[Y(W), Y(R), Y(R)],
        5
    ),
    t!(
        Simd256,
        Load,
        "vmovdqu {0}, ymmword ptr {1}",
        &[Y(W), M(32)],
        5
    ),
    t!(
        Simd256,
        Load,
        "vpaddd {0}, {1}, ymmword ptr {2}",
        &[Y(W), Y(R), M(32)],
        5
    ),
    t!(
        Simd256,
        Store,
        "vmovdqu ymmword ptr {0}, {1}",
        &[M(32), Y(R)],
        5
    ),
    // branch: unconditional; conditional branches come from the branch-pattern machinery in synth.rs
    Template {
        class: Class::Branch,
        opnd: Opnd::Reg,
        asm: "jmp 1f\n1:",
        vex: None,
        args: &[],
        implicit: &[],
        forbid: &[],
        len: 2,
        special: Special::JmpNext,
    },
    // lock-prefixed, on the private buffer only
    t!(
        Lock,
        Rmw,
        "lock add qword ptr {0}, {1}",
        &[M(8), G(64, R)],
        4
    ),
    t!(
        Lock,
        Rmw,
        "lock xadd qword ptr {0}, {1}",
        &[M(8), G(64, RW)],
        5
    ),
    t!(
        Lock,
        Rmw,
        "lock or dword ptr {0}, {1}",
        &[M(4), I(1, 127)],
        5
    ),
    t!(Lock, Rmw, "xchg qword ptr {0}, {1}", &[M(8), G(64, RW)], 3),
    // rep-string over the private rep scratch region, count bounded by the knob
    Template {
        class: Class::Rep,
        opnd: Opnd::Rmw,
        asm: "rep movsb",
        vex: None,
        args: &[],
        implicit: &[(RCX, RW), (RSI, RW), (RDI, RW)],
        forbid: &[],
        len: 2,
        special: Special::Rep,
    },
    Template {
        class: Class::Rep,
        opnd: Opnd::Store,
        asm: "rep stosb",
        vex: None,
        args: &[],
        implicit: &[(RCX, RW), (RDI, RW), (RAX, R)],
        forbid: &[],
        len: 2,
        special: Special::Rep,
    },
    // crc32 (SSE4.2)
    t!(Crc32, Reg, "crc32 {0}, {1}", &[G(64, RW), G(64, R)], 5),
    t!(Crc32, Reg, "crc32 {0}, {1}", &[G(32, RW), G(8, R)], 5),
    t!(
        Crc32,
        Load,
        "crc32 {0}, qword ptr {1}",
        &[G(64, RW), M(8)],
        5
    ),
    t!(
        Crc32,
        Load,
        "crc32 {0}, byte ptr {1}",
        &[G(32, RW), M(1)],
        5
    ),
    // nop (multi-byte forms as bytes: the assembler's own `nop` with an address operand would look like a
    // memory access to readers of the body)
    t!(Nop, Reg, "nop", &[], 1),
    t!(Nop, Reg, ".byte 0x66, 0x90", &[], 2),
    t!(Nop, Reg, ".byte 0x0f, 0x1f, 0x00", &[], 3),
    t!(Nop, Reg, ".byte 0x0f, 0x1f, 0x40, 0x00", &[], 4),
    // other
    t!(Other, Reg, "cmovne {0}, {1}", &[G(64, RW), G(64, R)], 4),
    t!(Other, Reg, "sete {0}", &[G(8, RW)], 4),
    t!(Other, Reg, "bswap {0}", &[G(64, RW)], 3),
    t!(Other, Reg, "bt {0}, {1}", &[G(64, R), G(64, R)], 4),
    t!(Other, Reg, "popcnt {0}, {1}", &[G(64, W), G(64, R)], 5),
    t!(Other, Reg, "xchg {0}, {1}", &[G(64, RW), G(64, RW)], 3),
    t!(
        Other,
        Load,
        "cmovne {0}, qword ptr {1}",
        &[G(64, RW), M(8)],
        4
    ),
    t!(Other, Store, "sete byte ptr {0}", &[M(1)], 4),
    t!(Other, Rmw, "btc dword ptr {0}, {1}", &[M(4), I(0, 31)], 5),
    t!(Other, Rmw, "not qword ptr {0}", &[M(8)], 3),
];

/// The templates of one (class, operand) pair after folding.
pub fn templates_for(class: Class, opnd: Opnd) -> Vec<&'static Template> {
    TEMPLATES
        .iter()
        .filter(|t| t.class == class && t.opnd == opnd)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_folded_pair_has_templates() {
        for c in CLASSES {
            for o in OPNDS {
                let (fc, fo) = fold(c, o);
                assert!(
                    !templates_for(fc, fo).is_empty(),
                    "{}/{} folds to {}/{} without templates",
                    c.name(),
                    o.name(),
                    fc.name(),
                    fo.name()
                );
            }
        }
    }

    #[test]
    fn templates_are_consistent() {
        for t in TEMPLATES {
            let mems = t.args.iter().filter(|a| matches!(a, Arg::M(_))).count();
            assert_eq!(
                mems > 0 || t.special == Special::Rep,
                t.opnd.touches_memory(),
                "{}",
                t.asm
            );
            assert!(mems <= 1, "{}", t.asm);
            for i in 0..t.args.len() {
                assert!(t.asm.contains(&format!("{{{i}}}")), "{}", t.asm);
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for c in CLASSES {
            assert_eq!(Class::parse(c.name()), Some(c));
        }
        for o in OPNDS {
            assert_eq!(Opnd::parse(o.name()), Some(o));
        }
        assert_eq!(Class::parse("avx512"), Some(Class::Simd256));
        assert_eq!(Class::parse("frobnicate"), None);
    }
}
