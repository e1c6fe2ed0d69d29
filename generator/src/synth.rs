//! Body synthesis: a `BodyPlan` becomes the assembly of one cluster's `ditto_body_<id>` and
//! `ditto_body_init_<id>` (GNU as, Intel syntax, SysV ABI).
//!
//! Shape of a body (see docs/generator.md for the reasoning):
//!
//! * **Blocks** (equation 2): one per instruction working-set size, `bytes` of straight-line code cut
//!   into `C` equal chunks (C a power of two) laid out as a ring. A call enters each block once, at the
//!   chunk where the previous call left it, and runs X chunks (X from the block's share of the dynamic
//!   instructions), so small blocks loop many times per call and large ones are swept across calls.
//!   X is aligned to the ring (a multiple of C, or a power of two dividing it; `aligned_runs`), so every
//!   call leaves the ring at fixed chunks and a branch predictor can learn where; in a body whose
//!   branches mispredict often anyway, a swept ring takes its exact count instead (`ring_runs`, fine
//!   windows: about one more misprediction a call, for a share within a chunk of its target).
//! * **Data accesses** (equation 1): each memory operand belongs to a working-set class, a region
//!   [lo, lo + size) of the private or shared buffer. Classes of one line use a fixed offset; larger
//!   ones a *window*: `t = (rP · a) & (size − 64)` computed once per chunk execution for the `a`
//!   accesses of that class in the chunk, which then touch lines t, t + 64, …; rP grows by 64 per chunk
//!   executed, so successive executions sweep the region line by line (regular, strided). Irregular
//!   windows use rQ instead, which grows by rP (triangular numbers, which visit every residue modulo a
//!   power of two) — no constant stride for a prefetcher to lock on.
//! * **Pointer chasing**: a share of loads is `mov r12, [r15 + r12 + CHASE]` over a chain that
//!   `ditto_body_init` builds as one cycle through every line of the chase region. No mask follows the
//!   load (a profiler counts a load as chasing only when the next address comes straight from it): the
//!   chain's nodes hold in-range offsets and no other instruction writes them, so r12 stays in range
//!   by induction; only the value restored from the header at entry is masked.
//! * **Branches**: each block keeps a counter of its chunk executions (in the private header, in rbx
//!   while the block runs). In a ring of C chunks, chunk j runs exactly when counter ≡ j (mod C), so bits
//!   log2(C) and up count *this chunk's* executions. Each pattern branch is `test ebx, MASK; jz/jnz`
//!   with M mask bits (minority rate 2^−M) whose lowest is bit log2(C) + N (runs of 2^N, transition rate
//!   2^(1−M−N)), so both the taken-rate and the transition-rate bin are realised; the other mask bits
//!   are drawn at random per branch from just above the lowest (so the pattern repeats within a run)
//!   and blocks start at different phases, so branches are not synchronised. The counter's low bits
//!   are also where the next call resumes the ring. *Data-dependent* pattern branches
//!   (`branches.data_dependent_scale`) compare a random dword of a pseudo-random word in the header
//!   with a threshold instead (rate at the middle of the bin), which their chunk steps first (`imul`
//!   by an odd constant): no period for a history predictor to learn, and independent of the chunk's
//!   other branches. A branch's transition bin comes with its taken bin from the comonotone coupling
//!   of the two histograms (the profile does not record which goes with which).
//! * **Registers**: reserved r15 (private base), r14 (shared base), r13 (loop count), r12 (chase), r11 (rP),
//!   r10 (rQ), rbx (branch counter); the other GPRs and xmm0–15 are assigned per operand by sampling the
//!   RAW/WAR/WAW distance histograms and taking the register whose current distances are closest.
//!
//! Memory safety is by construction and checked here: every memory operand is built from a base
//! register, an optional index whose range is known (masked just before), and a displacement, and
//! its whole byte range is proven inside its buffer before it is emitted (`MemProof`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::{bail, Context, Result};

use crate::branch_orient;
use crate::counter_field::{self, FieldCompare};
use crate::deficit::{comonotone_coupling, Deficit};
use crate::isa::{
    flag_use, fold, templates_for, Acc, Arg, Class, Opnd, Reg, Special, Template, FLAGS, NREGS,
    R10, R11, R12, R13, R14, R15, R8, R9, RAX, RBP, RBX, RCX, RDI, RDX, RSI, RSP, XMM0,
};
use crate::knobs::Knobs;
use crate::plan::{rep_kind, BodyPlan, DataClass, BINS, LINE};
use crate::rng::{stream_id, substream, Rng};
use ditto_profile::{Branches, IndirectBranches};

/// Indirect jumps one chunk may start with. A few keep a hot one-chunk loop near the profile's
/// count without turning it into a chain of dispatches.
const MAX_DISPATCHES_PER_CHUNK: usize = 4;
/// How far back (in conditional branches of its chunk) a pattern branch may repeat another's test:
/// cachegrind's conditional predictor indexes its counters by the last 7 outcomes, so a repeat 6
/// branches after its source still sees the source's outcome in that history.
const REPEAT_REACH: usize = 6;
/// The block-counter bit a not-taken "never" branch tests (`Composer::never_branch`); block counters
/// start with it and bit 29 clear (the init function).
const NEVER_BIT: u32 = 30;
/// The block-counter bit a taken "never" branch tests: counters start with it set, and it stays set
/// while bit 30 stays clear.
const ALWAYS_BIT: u32 = NEVER_BIT + 1;
/// GPRs free for the dependency synthesis (everything not reserved).
const GPR_POOL: [Reg; 8] = [RAX, RCX, RDX, RBP, RSI, RDI, R8, R9];
/// GPRs that may hold a window offset: none of them is an implicit operand of any template, so a
/// divide or a rep-string can never overwrite a live window.
const TEMPS: [Reg; 3] = [RBP, R8, R9];
/// Live windows per chunk (one temp each).
const MAX_WINDOWS: usize = TEMPS.len();
/// Largest number of accesses that share one window (lea scale factors go up to 9).
const MAX_GROUP: u32 = 9;
/// Regions of at most this many lines are addressed at fixed offsets, each access at the region's
/// next line in turn (`Composer::is_static_class`), instead of through a window. A window over such
/// a region touches all of its lines at every execution anyway, and the three windows per chunk went
/// to these classes: memcached's, nginx's and Pix's request bodies, whose classes from 128 B to 2 KiB
/// have 2–4-line regions, realised 64–67 % of their accesses in the 64-byte class (the only class
/// left when no window is free) against 36–43 %, and their classes past 4 KiB at about 70 % of
/// their shares, and those are the ones that miss.
const STATIC_REGION_LINES: u64 = 4;
/// Room after the class regions for window overflow: a window of a′ lines starting at the last line
/// of its region reaches (a′ − 1) lines plus one access width beyond it.
const SLACK: u64 = 10 * LINE;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Buffer {
    Priv,
    Shared,
    /// The `struct ditto_body_ctx` argument (read in the prologue only).
    Ctx,
    /// The body's own stack frame.
    Stack,
}

/// One memory operand's proven byte range [lo, hi) within its buffer.
#[derive(Debug, Clone, PartialEq)]
pub struct MemProof {
    pub buffer: Buffer,
    pub lo: u64,
    pub hi: u64,
}

/// What the generator knows about the body it produced, for the README, the tuner and tests.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub target_instructions: f64,
    pub dynamic_instructions: f64,
    pub static_instructions: u64,
    pub code_bytes_estimate: u64,
    pub mean_instruction_bytes_estimate: f64,
    pub blocks: Vec<BlockStats>,
    /// (class, operand) → (target share, realised share)
    pub mix: BTreeMap<(Class, Opnd), (f64, f64)>,
    /// (working-set bytes, target share, realised share, region bytes)
    pub data_classes: Vec<(u64, f64, f64, u64)>,
    pub shared_fraction: (f64, f64),
    pub regular_fraction: (f64, f64),
    pub chase_fraction: (f64, f64),
    /// Of the first-touch class's accesses, the share that are plain stores (`pick_data_class`);
    /// `None` without such a class or accesses to it.
    pub first_touch_store_share: Option<f64>,
    /// Of the accesses to the classes past `tail_from_bytes` (the first-touch stream and the
    /// reuses the second level misses), the share on the shared buffer, which each such class
    /// keeps on its own (`Composer::class_buffer`); `None` without accesses to such a class.
    pub shared_fraction_past_tail: Option<f64>,
    pub conditional_branches_per_call: f64,
    /// Of those, the executions per call of data-dependent branches (`BranchSource::Random`).
    pub data_dependent_branches_per_call: f64,
    pub static_conditional_branches: u64,
    /// Of the conditional branch executions per call, the share of pattern branches that repeat an
    /// earlier branch's test (`branches.independent_share`).
    pub repeated_branch_share: f64,
    /// Indirect jumps per call: (the profile's, the body's dispatches, the blocks' ring entries).
    pub indirect_jumps_per_call: (f64, f64, f64),
    /// Mean target-change rate of the indirect jumps: (the profile's, expected of the body's
    /// dispatches and ring entries, whose target changes every call).
    pub indirect_change_rate: (f64, f64),
    /// Rep-string repetitions per call: (the plan's, the body's; `settle_rep_counts`).
    pub rep_iterations_per_call: (f64, f64),
    pub taken_bins: (Vec<f64>, Vec<f64>),
    /// Share of conditional branch executions from majority-taken branches (target, generated),
    /// when the profile records it.
    pub majority_taken: Option<(f64, f64)>,
    pub transition_bins: (Vec<f64>, Vec<f64>),
    pub raw: (Vec<f64>, Vec<f64>),
    pub war: (Vec<f64>, Vec<f64>),
    pub waw: (Vec<f64>, Vec<f64>),
    pub chase_region_bytes: u64,
    /// The composition kept, of `synthesize`'s fitting rounds, and how many of its blocks still do
    /// not occupy their planned lines (`BlockFit::correction`).
    pub fit: (usize, usize),
    /// "Never" branches turned to agree with the branches on their predictor counters, and turned
    /// back to keep the never bin's majority-taken share (`branch_orient`), of how many.
    pub oriented_branches: (usize, usize, usize),
}

/// One data region of a body and its accesses per call (private copy per thread, shared copy per
/// call of any thread): the runtime's start-up warm pass (`struct ditto_warm_region`, warm.c).
#[derive(Debug, Clone, PartialEq)]
pub struct WarmRegion {
    pub offset: u64,
    pub bytes: u64,
    pub private_per_call: f64,
    pub shared_per_call: f64,
}

/// The generated code of one cluster.
#[derive(Debug, Clone)]
pub struct ClusterAsm {
    pub body_symbol: String,
    pub init_symbol: String,
    pub text: String,
    /// The body's indirect jumps' trampolines (`via_trampoline`): label and executions per
    /// call, which `render_clone` turns into per request (the cluster's calls per request) before
    /// the file's one table (`trampoline_table`) ranks every body's.
    pub trampolines: Vec<(String, f64)>,
    pub priv_bytes: u64,
    pub shared_bytes: u64,
    pub proofs: Vec<MemProof>,
    pub stats: Stats,
    /// The class regions the runtime warms at start-up (`warm_regions`).
    pub warm: Vec<WarmRegion>,
    /// The first-touch stream's region (the same offsets in the private and the shared buffer),
    /// which the runtime writes before the rest of the buffers so that it starts out of every
    /// cache (`first_touch_region`).
    pub first_touch: Option<std::ops::Range<u64>>,
}

// ---------------------------------------------------------------------------------------------
// Composition: what each chunk contains.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Buf {
    Priv,
    Shared,
}

#[derive(Debug, Clone)]
enum Mem {
    Static { buf: Buf, disp: u64 },
    Window { buf: Buf, group: usize, line: u32 },
}

/// A one-line memory location: (shared buffer?, displacement).
type LineKey = (u8, u64);

#[derive(Debug, Clone)]
struct Group {
    class: usize,
    irregular: bool,
    count: u32,
}

#[derive(Debug, Clone)]
enum Item {
    Tpl {
        t: &'static Template,
        mem: Option<Mem>,
        rep_count: u64,
        /// A rep-string instruction in two modes (`plan::RepSplit`): the chunk-counter bits whose
        /// all-clear executions take the long count. 0: one count.
        rep_long_mask: u32,
    },
    Chase,
    /// A conditional branch on a test of the chunk counter (`mask`: its bits, all clear in the
    /// minority) or a compare of a random dword (`mask`: the threshold, below in the minority); `jz`:
    /// the jump is taken in the minority.
    Pattern {
        mask: u32,
        jz: bool,
        source: BranchSource,
    },
    /// Advances the body's pseudo-random word (`HDR_RNG`) once per chunk execution, at the start of
    /// a chunk that has data-dependent pattern branches or a dispatch on random bits.
    RngStep,
    /// An indirect jump through code stubs, at the start of a chunk (after `RngStep`).
    Indirect(Dispatch, Link),
    /// `lea`/`mov` of a window's unmasked offset into a temp (a few instructions before its use).
    Window {
        group: usize,
    },
    /// `and` that bounds the window's temp, right before its first use.
    WindowMask {
        group: usize,
    },
    /// End of a chunk: advance rP (if the chunk has any window) and rQ (irregular windows),
    /// count the block counter rbx, count down r13 and loop or leave.
    LoopEnd {
        adv_p: bool,
        adv_q: bool,
        inc_b: bool,
    },
}

/// What a pattern branch tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BranchSource {
    /// Bits of the block's chunk counter (rbx): periodic, so a history predictor learns much of it.
    Counter,
    /// Bits of the dword at this byte of the body's pseudo-random word: a branch on data the
    /// predictor cannot learn, mispredicted about as often as its minority direction is taken.
    Random { byte: u8 },
    /// A field of the counter times `multiplier`, masked by the item's mask and compared below
    /// `below` (`counter_field`): periodic like `Counter`, with rates inside their bins. Hot sites
    /// only (`HOT_SITE_SHARE`).
    Field { multiplier: u8, below: u32 },
}

/// A counter pattern branch a later branch of its chunk may repeat (`Composer::repeat_recent`): its
/// test and the bins it realised.
#[derive(Debug, Clone, Copy)]
struct Repeatable {
    mask: u32,
    jz: bool,
    source: BranchSource,
    taken_bin: usize,
    transition_bin: usize,
}

/// How an indirect jump (`Item::Indirect`) picks its target, and so how often its target changes:
/// what a branch target buffer, which predicts a site's previous target, mispredicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dispatch {
    /// One target: never changes (a call through a pointer that stays put, or a PLT slot).
    Fixed,
    /// Two targets, the second when M random bits of the word at this byte are all clear
    /// (probability q = 2^−M): the target changes 2q(1 − q) of the time.
    Two { mask: u32, byte: u8 },
    /// `targets` (a power of two) targets, uniformly at random: changes 1 − 1/targets of the time.
    Uniform { targets: u32 },
}

/// Executed instructions of a dispatch that jumps, the landing stub's `jmp` included. One that
/// calls executes the same but for the fixed target's: its `ret` stub is one more than the jump
/// straight to the join.
const DISPATCH_FIXED_INSTRS: u64 = 4;
const DISPATCH_TWO_INSTRS: u64 = 8;
const DISPATCH_UNIFORM_INSTRS: u64 = 7;

impl Dispatch {
    /// The realisation of change-rate bin `bin` (`IndirectBranches::bin_rate`, nearest).
    fn for_bin(bin: usize) -> Dispatch {
        Dispatch::nearest(IndirectBranches::bin_rate(bin))
    }

    /// The realisation nearest a target-change rate.
    fn nearest(rate: f64) -> Dispatch {
        if rate <= 0.0 {
            return Dispatch::Fixed;
        }
        let mut best = (f64::INFINITY, Dispatch::Fixed);
        for m in 1..=8u32 {
            let d = Dispatch::Two {
                mask: (1 << m) - 1,
                byte: 4,
            };
            if (d.change_rate() - rate).abs() < best.0 {
                best = ((d.change_rate() - rate).abs(), d);
            }
        }
        for k in 2..=4u32 {
            let d = Dispatch::Uniform { targets: 1 << k };
            if (d.change_rate() - rate).abs() < best.0 {
                best = ((d.change_rate() - rate).abs(), d);
            }
        }
        best.1
    }

    /// Target-change bins (`IndirectBranches::target_change_rate`) moved to the bin their nearest
    /// dispatch realises (bin 7, 0.6–0.7, has none: 0.75 is nearest), so that every bin drawn is one
    /// a dispatch fills.
    fn realisable_bins(bins: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; bins.len()];
        for (b, share) in bins.iter().enumerate() {
            let rate = Dispatch::for_bin(b).change_rate();
            if let Some(o) = out.get_mut(IndirectBranches::bin(rate)) {
                *o += share;
            }
        }
        out
    }

    /// Share of executions whose target differs from the previous one.
    fn change_rate(&self) -> f64 {
        match *self {
            Dispatch::Fixed => 0.0,
            Dispatch::Two { mask, .. } => {
                let q = 0.5f64.powi(mask.count_ones() as i32);
                2.0 * q * (1.0 - q)
            }
            Dispatch::Uniform { targets } => 1.0 - 1.0 / f64::from(targets.max(1)),
        }
    }

    fn targets(&self) -> u32 {
        match *self {
            Dispatch::Fixed => 1,
            Dispatch::Two { .. } => 2,
            Dispatch::Uniform { targets } => targets,
        }
    }

    fn uses_random_word(&self) -> bool {
        !matches!(self, Dispatch::Fixed)
    }

    fn instrs(&self, link: Link) -> u64 {
        match (self, link) {
            (Dispatch::Fixed, Link::Jump) => DISPATCH_FIXED_INSTRS,
            (Dispatch::Fixed, Link::Call) => DISPATCH_FIXED_INSTRS + 1,
            (Dispatch::Two { .. }, _) => DISPATCH_TWO_INSTRS,
            (Dispatch::Uniform { .. }, _) => DISPATCH_UNIFORM_INSTRS,
        }
    }

    /// Code bytes in the chunk: the jump (or call) to the trampoline is 5 bytes (the trampolines
    /// are in their own section), and a jump's stubs (8 bytes each, 8-aligned) follow it; a call's
    /// stubs are in a section of their own (`Renderer::dispatch`).
    fn bytes(&self, link: Link) -> u64 {
        let stubs = match link {
            Link::Jump => 7 + 8 * u64::from(self.targets()),
            Link::Call => 0,
        };
        match self {
            Dispatch::Fixed => 7 + 8 + 5,
            Dispatch::Two { .. } => 2 + RANDOM_TEST_BYTES + 3 + 7 + 4 + 5 + stubs,
            Dispatch::Uniform { .. } => 7 + 3 + 7 + 4 + 5 + stubs,
        }
    }
}

/// How a dispatch reaches its target and comes back to the join point after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    /// `jmp` to the trampoline, and the stub `jmp`s to the join.
    Jump,
    /// `call` of the trampoline, and the stub is a `ret` to the join right after the call: the
    /// original's calls and returns (branch/store and branch/load of the mix), which a return
    /// stack predicts, realised where its indirect calls are (`BodyPlan::call_ratio`).
    Call,
}

#[derive(Debug, Clone)]
struct Chunk {
    items: Vec<Item>,
    groups: Vec<Group>,
    instrs: u64,
    bytes: u64,
    /// The chunk's own random stream (`Draws::for_chunk`), which the renderer's choices follow too.
    stream: u64,
}

/// One generated instruction block, for the clone's README.
#[derive(Debug, Clone)]
pub struct BlockStats {
    /// The instruction cache size its fetches are meant to hit in (equation 2).
    pub working_set: u64,
    pub bytes: u64,
    pub chunks: u64,
    pub runs_per_call: u64,
    pub target_share: f64,
    /// Dynamic instructions per call it executes (realised).
    pub instructions: f64,
    /// Bytes from its first chunk to its end as GNU as lays it out (`encoding::layout`).
    pub assembled_bytes: u64,
}

#[derive(Clone)]
struct Block {
    /// The cache size it is meant to hit in (`BlockPlan::target`).
    working_set: u64,
    bytes: u64,
    share: f64,
    planned_x: u64,
    x: u64,
    dyn_target: f64,
    /// Chunks in its ring (a power of two), fixed when the block is planned; `chunks` holds that
    /// many once composed.
    ring_chunks: u64,
    chunks: Vec<Chunk>,
    /// The single-chunk loop whose count takes the balance of the call's instructions
    /// (`align_windows`, then after the prologue is rendered).
    absorbs: bool,
    /// Its index before the blocks are shuffled into their rendering order: what `BlockFit` and the
    /// fitting rounds of `synthesize` know it by.
    origin: usize,
}

impl Block {
    fn ring(&self) -> u64 {
        self.ring_chunks
    }

    /// Whether the block keeps a chunk counter (rbx) across calls: rings, and loops whose pattern
    /// branches read it.
    fn uses_counter(&self) -> bool {
        self.ring() > 1
            || self.chunks.iter().any(|c| {
                c.items
                    .iter()
                    .any(|i| matches!(i, Item::LoopEnd { inc_b: true, .. }))
            })
    }

    /// Whether the block is entered through its stubs (`jmp rcx`) rather than at chunk 0.
    fn enters_indirectly(&self) -> bool {
        enters_mid_ring(self.ring(), self.x)
    }

    /// Instructions executed once per call to enter the block (see the block loop of `synthesize`).
    fn entry_instrs(&self) -> u64 {
        let counter = if self.uses_counter() { 3 } else { 0 };
        // mov, and, lea, lea, jmp to the trampoline, its `jmp rcx`, a stub's jmp.
        let dispatch = if self.enters_indirectly() { 6 + 1 } else { 1 };
        counter + 1 + dispatch
    }
}

/// Whether a ring of `ring` chunks run `x` chunk executions per call is entered mid-way, through
/// its stubs: each call's window then starts where the last one ended (a whole number of laps
/// starts at chunk 0 every call).
fn enters_mid_ring(ring: u64, x: u64) -> bool {
    ring > 1 && x % ring != 0
}

/// Executions per call of the items `is` selects: each chunk of a block runs x / ring times a call.
fn executions_per_call(blocks: &[Block], is: impl Fn(&Item) -> bool) -> f64 {
    weighted_per_call(blocks, |i| if is(i) { 1.0 } else { 0.0 })
}

/// Σ `weight(item)` over every item, each times its chunk's runs per call (x / ring).
fn weighted_per_call(blocks: &[Block], weight: impl Fn(&Item) -> f64) -> f64 {
    blocks
        .iter()
        .map(|b| {
            let sum: f64 = b.chunks.iter().flat_map(|c| &c.items).map(&weight).sum();
            sum * (b.x as f64 / b.ring() as f64)
        })
        .sum()
}

/// Instructions of the body's epilogue (see the end of `synthesize`).
fn epilogue_instrs(x87: bool, fp: bool, vex: bool) -> u64 {
    3 + 2 * u64::from(x87) + u64::from(fp) + u64::from(vex) + 1 + 6 + 1
}

fn item_instrs(it: &Item) -> u64 {
    match it {
        // A rep-string instruction counts once, as the architecture retires it and the body profiler
        // counts it (its repetitions are the profile's rep_counts), plus its set-up moves.
        Item::Tpl {
            t, rep_long_mask, ..
        } => match t.special {
            Special::Div => 3,
            Special::Rep => {
                let movs = u64::from(t.asm.contains("movs"));
                // The long count's `mov`, the counter `test` and the `cmovz` that picks it.
                let split = if *rep_long_mask != 0 { 3 } else { 0 };
                3 + movs + split
            }
            _ => 1,
        },
        Item::Chase => 1,
        Item::Pattern {
            source: BranchSource::Field { .. },
            ..
        } => 4,
        Item::Pattern { .. } => 2,
        Item::RngStep => RNG_STEP_INSTRS,
        Item::Indirect(d, link) => d.instrs(*link),
        Item::Window { .. } | Item::WindowMask { .. } => 1,
        Item::LoopEnd {
            adv_p,
            adv_q,
            inc_b,
        } => 2 + u64::from(*adv_p) + u64::from(*adv_q) + u64::from(*inc_b),
    }
}

/// Predictor entries of the indirect-jump table.
const PREDICTOR_ENTRIES: usize = 512;

/// Every body's trampolines (`via_trampoline`; label and executions per request) in one table
/// in their own section, each `jmp rcx` (2 bytes) at a chosen value of address bits 0–8, its
/// predictor entry (`trampoline_slots`): the hottest 512 jumps of the clone have an entry each, a
/// colder one shares the entry of the coldest of those. One table for the file, because bodies
/// numbered apart would give their hottest jumps the same entries (memcached's three bodies: 49
/// sites on 38 entries). The padding is `int3`, never executed.
pub fn trampoline_table(trampolines: &[(String, f64)]) -> String {
    let mut out = String::new();
    if trampolines.is_empty() {
        return out;
    }
    let mut t: Vec<&(String, f64)> = trampolines.iter().collect();
    t.sort_by(|a, b| b.1.total_cmp(&a.1));
    let _ = writeln!(out, "\n    .section .text.ditto_indirect,\"ax\",@progbits");
    for round in trampoline_slots(t.len()) {
        let _ = writeln!(out, "    .p2align 9, 0xcc");
        let mut at = 0;
        for (slot, site) in round {
            if slot > at {
                let _ = writeln!(out, "    .skip {}, 0xcc", slot - at);
            }
            let _ = writeln!(out, "{}:\n    jmp rcx", t[site].0);
            at = slot + 2;
        }
    }
    let _ = writeln!(out, "    .text");
    out
}

/// Where `n` trampolines go, hottest first: rounds of (entry, site) in increasing entry, each round
/// a 512-byte aligned block whose 2-byte trampolines do not overlap. Sites 0–255 take the even
/// entries, 256–511 the odd ones; site 512 + m shares the entry of site 511 − (m mod 512), the
/// coldest of the sites with an entry of their own.
fn trampoline_slots(n: usize) -> Vec<Vec<(usize, usize)>> {
    let half = PREDICTOR_ENTRIES / 2;
    let own = |i: usize| {
        if i < half {
            2 * i
        } else {
            2 * (i - half) + 1
        }
    };
    let mut rounds: Vec<Vec<(usize, usize)>> = Vec::new();
    for site in 0..n {
        let slot = if site < PREDICTOR_ENTRIES {
            own(site)
        } else {
            own(PREDICTOR_ENTRIES - 1 - (site - PREDICTOR_ENTRIES) % PREDICTOR_ENTRIES)
        };
        // Each run of 512 sites takes every slot once: its even slots in one round, its odd ones in
        // the next.
        let r = 2 * (site / PREDICTOR_ENTRIES) + slot % 2;
        if rounds.len() <= r {
            rounds.resize_with(r + 1, Vec::new);
        }
        rounds[r].push((slot, site));
    }
    for round in &mut rounds {
        round.sort_unstable();
    }
    rounds.retain(|r| !r.is_empty());
    rounds
}

fn disp_bytes(disp: u64) -> u64 {
    match disp {
        0 => 0,
        1..=127 => 1,
        _ => 4,
    }
}

/// The change-rate distribution left to the dispatches once ring entries, a share `entry_share` of
/// the indirect jumps changing target every time, have taken theirs from `bins` (realisable bins,
/// summing to 1): the entries' changes come out of the highest-rate bins first, and the weight that
/// removes beyond the entries' own goes to bin 0 (single-target dispatches). The mean over entries
/// and dispatches then stays the profile's while the dispatches' changes can pay for the entries'.
/// When they cannot (more entries than the profile has changes), every dispatch gets one target.
fn dispatch_bins(bins: &[f64], entry_share: f64) -> Vec<f64> {
    let mut left = bins.to_vec();
    let e = entry_share.clamp(0.0, 1.0);
    let mut changes = e;
    let mut removed = 0.0;
    for i in (1..left.len()).rev() {
        let rate = Dispatch::for_bin(i).change_rate();
        if changes <= 0.0 || rate <= 0.0 {
            continue;
        }
        let take = left[i].min(changes / rate);
        left[i] -= take;
        changes -= take * rate;
        removed += take;
    }
    if let Some(single) = left.first_mut() {
        // What the entries took beyond their own weight goes back to single-target dispatches
        // (or, when the changes ran out, comes out of them).
        *single = (*single + removed - e).max(0.0);
    }
    left
}

/// The chunk executions per call nearest `x`, on either side, that keep every call's window in a ring
/// of `ring` chunks (a power of two) aligned: multiples of the ring, or below it powers of two (which
/// divide it). From an aligned start, each call then enters the ring at a multiple of the count and
/// leaves it at fixed chunks, so each chunk's loop branch always or never exits: a window of any
/// other length ends at a different chunk every call, and cachegrind's predictor missed that exit and
/// the ring's entry jump once each per call (memcached's worker body: 10.8 of its 18.8 mispredictions
/// per call, in five rings). A multiple of the ring also enters at chunk 0 every call, so its entry
/// needs no indirect jump at all.
fn aligned_runs(x: u64, ring: u64) -> [u64; 2] {
    let x = x.max(1);
    if ring <= 1 {
        return [x, x];
    }
    if x >= ring {
        let lo = x / ring * ring;
        return if lo == x { [x, x] } else { [lo, lo + ring] };
    }
    let lo = 1u64 << (63 - x.leading_zeros());
    if lo == x {
        [x, x]
    } else {
        [lo, lo * 2]
    }
}

/// A ring's candidate counts: `aligned_runs`, or below the ring, with `fine` windows, `x` itself.
/// A fine window of x = k·2^m chunk executions (k odd) starts at a multiple of 2^m, since every
/// window before it was one too, so only the chunks just below those multiples ever end one, each at
/// 1/k of its runs (`loop_exit_rate`): one loop-exit misprediction a call or so, for a share within
/// one chunk of its target instead of within a factor of two.
fn ring_runs(x: u64, ring: u64, fine: bool) -> [u64; 2] {
    let x = x.max(1);
    if fine && ring > 1 && x < ring {
        return [x, x];
    }
    aligned_runs(x, ring)
}

/// Whether a body's swept rings may take fine windows (`ring_runs`): when one more misprediction a
/// call for each of them is at most `FINE_WINDOW_COST` of the mispredictions its branches'
/// transition rates predict (`expected_mispredictions`, on the profile's count and rates: a scheme
/// that flipped with the tuner's knobs would make them a cliff, `BodyPlan::profiled_instructions`).
/// Pix's request bodies predict about a thousand a call; memcached's worker body about ten, where
/// the aligned windows' saved mispredictions were 10.8 of its 18.8 a call (docs/generator.md,
/// "Aligned windows").
fn fine_windows(expected_mispredictions: f64, swept_rings: usize) -> bool {
    swept_rings > 0 && swept_rings as f64 <= FINE_WINDOW_COST * expected_mispredictions
}

/// Mispredictions per call a two-bit counter would make on a body's conditional branches, about one
/// per transition: instructions × branches per instruction × the transition histogram's mean rate
/// (each bin at its representative rate, `bin_exponent`).
fn expected_mispredictions(instructions: f64, cond_branch_ratio: f64, transitions: &[f64]) -> f64 {
    let rate: f64 = transitions
        .iter()
        .enumerate()
        .map(|(b, share)| share * 0.5f64.powi(bin_exponent(b) as i32))
        .sum();
    instructions * cond_branch_ratio * rate
}

/// The share of a body's expected mispredictions that its swept rings' fine windows may add.
const FINE_WINDOW_COST: f64 = 0.01;

/// How often chunk `j`'s loop branch exits, per execution of the chunk, for a block of `ring` chunks
/// run `x` chunk executions per call (0: it keeps one direction). Unaligned windows (`aligned` false)
/// end anywhere: each chunk exits about once per `x` executions.
fn loop_exit_rate(j: u64, x: u64, ring: u64, aligned: bool) -> f64 {
    if !aligned || ring == 1 {
        return if x <= 1 { 0.0 } else { 1.0 / x as f64 };
    }
    // Aligned: only the last chunk of a multiple-of-the-ring window loops (x / ring laps); a
    // power-of-two window below the ring always exits at its last chunk and never elsewhere; a fine
    // window of k·2^m (k odd, `ring_runs`) exits from the chunks below multiples of 2^m, at 1/k.
    if x < ring {
        let (g, k) = window_step(x);
        return if (j + 1) % g == 0 && k > 1 {
            1.0 / k as f64
        } else {
            0.0
        };
    }
    let laps = x / ring;
    if x >= ring && j == ring - 1 && laps > 1 {
        1.0 / laps as f64
    } else {
        0.0
    }
}

/// A window of `x` chunk executions as 2^m · k with k odd: (2^m, k). Every window starts at a
/// multiple of 2^m (the counter starts at a multiple of the ring).
fn window_step(x: u64) -> (u64, u64) {
    let x = x.max(1);
    let g = 1u64 << x.trailing_zeros();
    (g, x / g)
}

/// The share of chunk `j`'s loop-branch executions that are taken (`loop_exit_rate`'s block). The
/// last chunk's branch (`jnz` back to the first chunk) is taken when the window goes on; the others'
/// (`jz` to the block's end) when it ends there.
fn loop_taken_share(j: u64, x: u64, ring: u64, aligned: bool) -> f64 {
    let exits = if aligned && ring > 1 && x < ring {
        // A window of k·2^m below the ring ends at every 2^m-th chunk, at 1/k of its runs (always,
        // for a power of two).
        let (g, k) = window_step(x);
        if (j + 1) % g == 0 {
            1.0 / k as f64
        } else {
            0.0
        }
    } else if aligned && ring > 1 {
        // Whole laps: only the last chunk ends the window, once per x / ring of its executions.
        if j == ring - 1 {
            1.0 / (x / ring).max(1) as f64
        } else {
            0.0
        }
    } else {
        // Unaligned (or a single chunk): each chunk ends about one of x executions.
        1.0 / x.max(1) as f64
    };
    if j == ring - 1 {
        1.0 - exits
    } else {
        exits
    }
}

/// Most conditional branches per instruction in a chunk: a pattern branch is two instructions
/// (`test`, `jcc`), and the chunk keeps room for the mix.
const MAX_BRANCH_DENSITY: f64 = 0.4;

/// log2 of the alignment of a body function and of its largest blocks: 4 KiB, an L1i way (64 sets of
/// 64 bytes in a 32 KiB 8-way or a 48 KiB 12-way cache) and a page.
///
/// Why a fixed layout: a block's cache sets, and so which of the runtime's lines and of the other
/// blocks' it competes with, follow from its address modulo a way. Laid out in random order after
/// whatever came before it, every block moved when the seed changed and whenever an earlier function
/// or block came out a line longer or shorter, which a data-knob step does through its operands'
/// displacements. memcached's clone then read L1i miss rates 0.00030 / 0.00111 at data size ×1.0 /
/// ×1.1 and 0.00030 / 0.00041 / 0.00069 at seeds 1 / 2 / 3 (`validation/bench/regeneration-noise.sh
/// memcached`), so `ditto tune` saw a data step move the L1i by ×3.7. Functions start on a way, blocks
/// follow largest first (`code_order`), each on a multiple of its own size up to a way, so a block's
/// sets follow from the plan (docs/generator.md, "Code layout", for what still moves). The padding
/// between blocks is jumped over and never fetched.
const CODE_ALIGN_LOG2: u32 = 12;

/// The blocks' order in the code: largest first, then by their place in the plan, so that each
/// one, aligned to its size, sits where the plan alone puts it (`CODE_ALIGN_LOG2`).
fn code_order(blocks: &[Block]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..blocks.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(blocks[i].bytes), blocks[i].origin));
    order
}

/// The alignment (log2) of a block of `bytes`: its own size (a power of two), at least a line and
/// at most `CODE_ALIGN_LOG2`.
fn block_align_log2(bytes: u64) -> u32 {
    let pow = 63 - bytes.max(1).leading_zeros();
    pow.clamp(LINE.trailing_zeros(), CODE_ALIGN_LOG2)
}

/// Compositions at most per body: the first, then recompositions while the static branch count is
/// more than 10 % off (one correction: more steps do not converge where the loop branches' floor or
/// the cap binds, nginx's body without its skeleton stays at 1,365 against 1,080), the settled
/// dynamic count calls for another level (`branch_level`), or the dispatch length moves
/// (`dispatch_length`).
const COMPOSE_PASSES: usize = 3;

/// The bytes per instruction the next pass places dispatches by: `current`, corrected by how many
/// dispatch executions per call its pass made against those owed (`owed`, the profile's indirect
/// jumps less the ring entries), rounded to a sixteenth of the profile's mean length.
///
/// Why one rounded number: a chunk's dispatches are owed per planned instruction and run as often as
/// its instructions come out fewer than planned, so their count needs the composed length. Taken
/// as the running mean of the chunks composed so far, it made every chunk's dispatch count depend
/// on the data layout before it (memory operands' displacements, windows' set-up code): at nginx's
/// tuned knobs, data size ×1.1 gave 534 of its 869 chunks another number of dispatches, and a data
/// knob step moved the branch misprediction rate by up to 5.7 %. One rounded length is the same for
/// most data steps, and then every dispatch stays where it was. The first pass uses the profile's
/// mean; a longer length counts each dispatch as more executions, so fewer are placed.
fn dispatch_length(current: f64, realised: f64, owed: f64, plan_len: f64) -> f64 {
    let plan_len = plan_len.max(1.0);
    if realised <= 0.0 || owed <= 0.0 || !current.is_finite() {
        return current;
    }
    let steps = (16.0 * current * realised / owed / plan_len)
        .round()
        .max(1.0);
    steps * plan_len / 16.0
}

/// The dynamic level (`branch_densities`) the next pass composes at: `current` times the plan's
/// conditional branches per call (`owed`) over those the settled body runs (`realised`), rounded to
/// a 32nd, between 1/2 and 2.
///
/// The densities keep the count on the blocks' estimated shapes, but `settle_windows` hands what
/// the rings' aligned counts leave to the single-chunk loops, which carry the densest branches:
/// nginx's request body (static branches concentrated) ran 2,085 a call against 1,872, Pix
/// baseline's 16,877 against 14,843. One correction brings them to 1,814 and 15,060–15,400. Rounded,
/// as `dispatch_length` is, so that a small knob step finds the same level, not a threshold that
/// recomposes the body on one side of it.
fn branch_level(current: f64, realised: f64, owed: f64) -> f64 {
    if realised <= 0.0 || owed <= 0.0 {
        return current;
    }
    ((32.0 * current * owed / realised).round() / 32.0).clamp(0.5, 2.0)
}

/// What `branch_densities` needs of a block.
#[derive(Debug, Clone, Copy)]
struct BlockShape {
    /// Executions per call of each of its chunks.
    runs_per_chunk: f64,
    static_instrs: f64,
    chunks: u64,
}

/// Per block, the pattern-branch density relative to `ratio` (conditional branches per instruction),
/// so that the body keeps `ratio` dynamically while its static conditional branches (one loop branch
/// per chunk plus the pattern branches) approach the profile's `static_target`.
///
/// Spread evenly over the code, as the paper does, the branches of nginx's clone were 7,233 static
/// ones for the 1,091 nginx ran, most in rings swept a few chunks per call. A branch run once in
/// several calls finds its predictor counters overwritten by the others in between (cachegrind's
/// 16k counters are indexed by 7 address bits and 7 history bits), so the clone mispredicted 0.089
/// to 0.113 of its branches against nginx's 0.071 whatever its transition rates. Densities
/// ∝ runs^α, capped at `MAX_BRANCH_DENSITY` and normalised to keep the dynamic count, put the branches
/// where the code runs often; α is bisected for the static target. Without a target, or when even
/// spread gives fewer static branches than the target, the density is uniform (1).
///
/// `level` scales the dynamic count kept (1: the plan's), so the composer can correct what the
/// estimated shapes got wrong without moving the static target's solution.
fn branch_densities(blocks: &[BlockShape], ratio: f64, static_target: u64, level: f64) -> Vec<f64> {
    let cap = (MAX_BRANCH_DENSITY / ratio.max(1e-12)).max(1.0);
    let uniform = vec![level.min(cap); blocks.len()];
    if static_target == 0 || ratio <= 0.0 || blocks.is_empty() {
        return uniform;
    }
    let loops: f64 = blocks.iter().map(|b| b.chunks as f64).sum();
    let patterns_wanted = (static_target as f64 - loops).max(0.0);
    let dynamic: Vec<f64> = blocks
        .iter()
        .map(|b| b.static_instrs * b.runs_per_chunk)
        .collect();
    let total: f64 = level * dynamic.iter().sum::<f64>();
    if total <= 0.0 {
        return uniform;
    }
    // Water-filling: scale the uncapped blocks until the dynamic count is kept.
    let densities = |alpha: f64| -> Vec<f64> {
        let raw: Vec<f64> = blocks
            .iter()
            .map(|b| b.runs_per_chunk.max(1e-9).powf(alpha))
            .collect();
        let mut g = vec![0.0; blocks.len()];
        let mut capped = vec![false; blocks.len()];
        for _ in 0..blocks.len() + 1 {
            let kept: f64 = (0..blocks.len())
                .filter(|&i| capped[i])
                .map(|i| dynamic[i] * cap)
                .sum();
            let free: f64 = (0..blocks.len())
                .filter(|&i| !capped[i])
                .map(|i| dynamic[i] * raw[i])
                .sum();
            if free <= 0.0 {
                break;
            }
            let scale = (total - kept).max(0.0) / free;
            let mut changed = false;
            for i in 0..blocks.len() {
                if !capped[i] && raw[i] * scale > cap {
                    capped[i] = true;
                    changed = true;
                }
            }
            for i in 0..blocks.len() {
                g[i] = if capped[i] { cap } else { raw[i] * scale };
            }
            if !changed {
                break;
            }
        }
        g
    };
    let patterns = |g: &[f64]| -> f64 {
        blocks
            .iter()
            .zip(g)
            .map(|(b, d)| b.static_instrs * ratio * d)
            .sum()
    };
    if patterns(&uniform) <= patterns_wanted {
        return uniform;
    }
    let (mut lo, mut hi) = (0.0f64, 8.0f64);
    for _ in 0..40 {
        let mid = 0.5 * (lo + hi);
        if patterns(&densities(mid)) > patterns_wanted {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    densities(hi)
}

/// What `balance_rings` needs of one ring: its block, the chunk executions per call it wants (not
/// yet aligned), its chunks and the instructions one execution runs.
#[derive(Debug, Clone, Copy)]
struct RingWant {
    block: usize,
    want: f64,
    ring: u64,
    per_run: f64,
}

/// Aligns every ring's chunk executions per call (`aligned_runs`) before the chunks are composed,
/// from the planned counts and the estimated instructions per chunk (`balance_rings`), and hands the
/// balance to the single-chunk blocks, whose loop counts can take it, in proportion to their
/// instructions. Returns the index of the one with the most instructions (the absorber, which
/// `synthesize` gives the call's fixed code), or `None` (nothing changed) when there is no such
/// block or they would lose more than half their instructions. `settle_windows` redoes the balance
/// once the chunks' real instruction counts are known.
///
/// Shared, the balance moves each loop's share by a fraction of what one loop would take: nginx's
/// swept 256-chunk ring, wanting 82 runs, runs 64, and the 850 instructions a call it leaves were
/// 75 % more than the largest loop's own, which then weighed so much in the body's branch
/// histograms that a few of its branches set their bins.
fn align_windows(blocks: &mut [Block], mean_len: f64, fine: bool) -> Option<usize> {
    let per_run = |b: &Block| (b.bytes / b.ring()) as f64 / mean_len;
    let absorber = blocks
        .iter()
        .enumerate()
        .filter(|(_, b)| b.ring() == 1)
        .max_by(|a, b| {
            (a.1.planned_x as f64 * per_run(a.1))
                .partial_cmp(&(b.1.planned_x as f64 * per_run(b.1)))
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(b.0.cmp(&a.0))
        })
        .map(|(i, _)| i)?;
    let rings: Vec<RingWant> = (0..blocks.len())
        .filter(|&i| blocks[i].ring() > 1)
        .map(|i| RingWant {
            block: i,
            want: blocks[i].planned_x as f64,
            ring: blocks[i].ring(),
            per_run: per_run(&blocks[i]),
        })
        .collect();
    let own: f64 = blocks
        .iter()
        .filter(|b| b.ring() == 1)
        .map(|b| b.planned_x as f64 * per_run(b))
        .sum();
    let (chosen, owed) = balance_rings(&rings, -0.5 * own, fine);
    if owed < -0.5 * own {
        return None;
    }
    for (i, x) in chosen {
        blocks[i].planned_x = x;
    }
    let scale = 1.0 + owed / own;
    for b in blocks.iter_mut().filter(|b| b.ring() == 1) {
        b.planned_x = ((b.planned_x as f64 * scale).round() as u64).max(1);
    }
    Some(absorber)
}

/// Once the chunks are composed: each ring's aligned count is chosen again from the count its real
/// instructions per chunk ask for (the estimate from bytes / mean length can be far off: a
/// dependency-chain program's chunks held 36 % fewer instructions than estimated, and its clone ran
/// 36 % too many), and the single-chunk blocks' loop counts take the balance, in proportion to
/// their instructions (`align_windows`). The absorber's count is provisional: `synthesize` sets it
/// again once the prologue is rendered and the call's fixed code is known.
fn settle_windows(blocks: &mut [Block], fine: bool) {
    let rings: Vec<RingWant> = (0..blocks.len())
        .filter(|&i| blocks[i].chunks.len() > 1)
        .map(|i| {
            let per_run = mean_chunk_instrs(&blocks[i]).max(1.0);
            RingWant {
                block: i,
                want: blocks[i].dyn_target / per_run,
                ring: blocks[i].ring(),
                per_run,
            }
        })
        .collect();
    let own: f64 = blocks
        .iter()
        .filter(|b| b.chunks.len() <= 1)
        .map(|b| b.dyn_target)
        .sum();
    // Rings go down before the loops give up more than half their instructions, as in
    // `align_windows`; past that each runs at least once.
    let (chosen, owed) = balance_rings(&rings, -0.5 * own, fine);
    for (i, x) in chosen {
        blocks[i].x = x.clamp(1, (1 << 31) - 1);
    }
    let scale = if own > 0.0 { 1.0 + owed / own } else { 1.0 };
    for b in blocks.iter_mut().filter(|b| b.chunks.len() <= 1) {
        let per_run = mean_chunk_instrs(b).max(1.0);
        b.x = ((b.dyn_target * scale / per_run).round() as u64).clamp(1, (1 << 31) - 1);
    }
}

/// Rounds each ring's wanted count to the nearer of its two aligned counts (up on a tie, so a swept
/// block keeps its reach) and returns the instructions that removes per call (negative when it
/// adds), which the single-chunk loops take. Only when the rings would add more than the loops can
/// give up (a balance below `floor`) are rings rounded down instead, the set that gives back enough
/// with the fewest misplaced instructions (`cheapest_cover`; the balance stays below `floor` when
/// even every ring at its lower count is not enough).
///
/// Each ring's share is its own nearest: a single-chunk loop is hot in every cache the tuner
/// measures, so what it takes or gives moves no cache's misses, while a ring rounded the far way
/// doubles or halves its share of the fetches at its reuse distance. The earlier rule rounded each ring
/// whichever way kept the balance nearest zero, so a ring's count followed the others' rounding:
/// nginx's 64 KiB ring (256 chunks), wanting 16.4 runs, ran 16 at one set of knobs and 32 at
/// another with the same code size (8.8 % and 17.4 % of the instructions against a target of
/// 9.0 %), and the clone's L1i error moved from 1.9 to 15.6 %.
fn balance_rings(rings: &[RingWant], floor: f64, fine: bool) -> (Vec<(usize, u64)>, f64) {
    let candidates: Vec<[u64; 2]> = rings
        .iter()
        .map(|r| ring_runs(r.want.round().max(1.0) as u64, r.ring, fine))
        .collect();
    let error = |k: usize, x: u64| (rings[k].want - x as f64) * rings[k].per_run;
    let mut chosen: Vec<u64> = (0..rings.len())
        .map(|k| {
            let [lo, hi] = candidates[k];
            if error(k, lo).abs() < error(k, hi).abs() {
                lo
            } else {
                hi
            }
        })
        .collect();
    let owed = |chosen: &[u64]| (0..rings.len()).map(|k| error(k, chosen[k])).sum::<f64>();
    let need = floor - owed(&chosen);
    if need > 0.0 {
        // Rings at their upper count that can go down, each with the misplaced instructions its
        // lower count adds and the instructions it gives back.
        let flips: Vec<Flip> = (0..rings.len())
            .filter(|&k| chosen[k] == candidates[k][1] && candidates[k][0] < candidates[k][1])
            .map(|k| {
                let [lo, hi] = candidates[k];
                Flip {
                    ring: k,
                    cost: error(k, lo).abs() - error(k, hi).abs(),
                    gain: error(k, lo) - error(k, hi),
                }
            })
            .collect();
        for k in cheapest_cover(&flips, need) {
            chosen[k] = candidates[k][0];
        }
    }
    let balance = owed(&chosen);
    (
        rings
            .iter()
            .zip(chosen)
            .map(|(r, x)| (r.block, x))
            .collect(),
        balance,
    )
}

/// A ring that can go from its upper aligned count to its lower one: the misplaced instructions a
/// call that adds (`cost`) and the instructions a call it gives back (`gain`).
#[derive(Debug, Clone, Copy)]
struct Flip {
    ring: usize,
    cost: f64,
    gain: f64,
}

/// Of `flips`, the rings whose gains add up to `need` at the least cost: every subset when there
/// are at most 16 (a body has a handful of rings), else the cheapest per gain first. All of them
/// when even all are not enough.
fn cheapest_cover(flips: &[Flip], need: f64) -> Vec<usize> {
    const EXACT: usize = 16;
    let total: f64 = flips.iter().map(|f| f.gain).sum();
    if total < need {
        return flips.iter().map(|f| f.ring).collect();
    }
    if flips.len() <= EXACT {
        let members = |set: u32| {
            flips
                .iter()
                .enumerate()
                .filter(move |(i, _)| set & (1 << i) != 0)
                .map(|(_, f)| f)
        };
        let mut best: Option<(f64, u32)> = None;
        for set in 1u32..(1 << flips.len()) {
            let (cost, gain) = members(set).fold((0.0, 0.0), |(c, g), f| (c + f.cost, g + f.gain));
            // Fewer rings moved on a tie in cost (the smaller set index is the earlier rings).
            if gain >= need && best.is_none_or(|(c, _)| cost < c - 1e-9) {
                best = Some((cost, set));
            }
        }
        return members(best.map_or(0, |(_, set)| set))
            .map(|f| f.ring)
            .collect();
    }
    let mut order: Vec<&Flip> = flips.iter().collect();
    order.sort_by(|a, b| {
        (a.cost / a.gain)
            .total_cmp(&(b.cost / b.gain))
            .then(a.ring.cmp(&b.ring))
    });
    let mut gained = 0.0;
    order
        .into_iter()
        .take_while(|f| {
            let more = gained < need;
            gained += f.gain;
            more
        })
        .map(|f| f.ring)
        .collect()
}

/// Rep-string repetitions per call the plan owes, of the kind `opnd` (`None`: all kinds): the
/// profile's rep executions per call (its mix share of rep instructions times the call's
/// instructions) at the kind's mean count.
fn planned_rep_iterations(plan: &BodyPlan, opnd: Option<Opnd>) -> f64 {
    plan.mix
        .iter()
        .filter(|((class, o), _)| *class == Class::Rep && opnd.is_none_or(|k| rep_kind(*o) == k))
        .map(|((_, o), share)| share * plan.instructions * plan.rep_modes(*o).mean)
        .sum()
}

/// Once every block's runs per call are final: scales the rep-string counts so that the body's
/// repetitions per call are the plan's (`planned_rep_iterations`).
///
/// A body has a handful of rep instructions (0.1 % of memcached's worker mix, 3 per call), and each
/// lands in a chunk run 0.5 or 1 times per call, so the executions per call the mix realises are
/// quantised by chunk weights: seeds of memcached's worker ran 1.5 or 2.5 against the profile's 2.9.
/// `Composer::rep_count` keeps the mean count per execution on the profile's, so the repetitions
/// per call were 103 or 171.5 against 199. Cachegrind counts each repetition as an instruction and
/// a conditional branch, so seeds differed by 20 % in branches per call at fixed knobs. Scaling the
/// counts trades the mean per execution for the per-call total, which is what the counters see.
///
/// Fills and copies are settled apart, each on its own planned total: they repeat differently
/// (memcached's workers fill 146 bytes and copy 1-7), and one scale for both moved repetitions
/// from one kind to the other.
fn settle_rep_counts(blocks: &mut [Block], plan: &BodyPlan, max_rep_count: u64) {
    let max = max_rep_count.max(1) as f64;
    for kind in [Opnd::Store, Opnd::Rmw] {
        let planned = planned_rep_iterations(plan, Some(kind));
        let realised = rep_iterations_per_call(blocks, Some(kind));
        if planned <= 0.0 || realised <= 0.0 {
            continue;
        }
        let scale = planned / realised;
        for item in blocks
            .iter_mut()
            .flat_map(|b| b.chunks.iter_mut())
            .flat_map(|c| c.items.iter_mut())
        {
            if let Item::Tpl { t, rep_count, .. } = item {
                if t.special == Special::Rep && rep_kind(t.opnd) == kind {
                    *rep_count = (*rep_count as f64 * scale).round().clamp(1.0, max) as u64;
                }
            }
        }
    }
}

/// The chunk-counter mask of a two-mode rep instruction in a chunk whose own execution count starts
/// at bit `shift`: k bits, all clear on one execution in 2^k, 2^−k the nearest power of two to the
/// long mode's share (k from 1 to 6). 0 when the long mode is most executions or the mask would not
/// fit an imm32.
fn rep_long_mask_for(split: crate::plan::RepSplit, shift: u32) -> u32 {
    if !(split.long_share > 0.0 && split.long_share < 0.75) {
        return 0;
    }
    let k = (1.0 / split.long_share).log2().round().clamp(1.0, 6.0) as u32;
    if shift + k > 30 {
        return 0;
    }
    ((1u32 << k) - 1) << shift
}

/// Rep-string repetitions per call of the body, of the kind `opnd` (`None`: all kinds): each rep
/// instruction's count times its chunk's runs per call.
fn rep_iterations_per_call(blocks: &[Block], opnd: Option<Opnd>) -> f64 {
    weighted_per_call(blocks, |item| match item {
        Item::Tpl { t, rep_count, .. }
            if t.special == Special::Rep && opnd.is_none_or(|k| rep_kind(t.opnd) == k) =>
        {
            *rep_count as f64
        }
        _ => 0.0,
    })
}

fn mean_chunk_instrs(b: &Block) -> f64 {
    b.chunks.iter().map(|c| c.instrs).sum::<u64>() as f64 / b.chunks.len().max(1) as f64
}

/// A distance's bin as the body profiler counts it (`dep_bin` in profiler/body/src/analysis.rs):
/// 1, 2, 3–4, …, 513–1024; none for 0 (the same instruction) or beyond the last bin.
fn dep_bin(d: i64) -> Option<usize> {
    if d <= 0 {
        return None;
    }
    let b = 64 - ((d - 1) as u64).leading_zeros() as usize; // ceil(log2 d)
    (b < BINS).then_some(b)
}

/// How much a dependency at distance `dist` would fill its bin of `deficit` (`Deficit::deficit`,
/// for an operand of weight `w`); a distance beyond the last bin is not counted and fills nothing.
fn bin_gain(deficit: &Deficit, dist: i64, w: f64) -> f64 {
    dep_bin(dist).map_or(0.0, |b| deficit.deficit(b, w))
}

/// Exponent e such that a bin's representative rate is 2^−e (bin 10, "below 2^−10", is taken as 2^−12).
fn bin_exponent(bin: usize) -> u32 {
    if bin >= BINS - 1 {
        12
    } else {
        bin as u32 + 1
    }
}

/// The threshold of a data-dependent branch of taken-rate bin `t` (`Composer::data_dependent_branch`):
/// 2^(30.5 − t), so that a uniform dword is below it 2^−(t + 1.5) of the time, the geometric middle
/// of the bin's (2^−(t + 2), 2^−(t + 1)]. Below 2^31 for every bin, so a positive imm32.
fn random_threshold(t: usize) -> u32 {
    let t = t.min(BINS - 2) as i32;
    (2f64.powf(30.5 - f64::from(t))).round() as u32
}

/// The lea-expressible window scales: t = src · a′.
fn window_scale(count: u32) -> u32 {
    [1, 2, 3, 4, 5, 8, 9]
        .into_iter()
        .find(|&a| a >= count)
        .unwrap_or(9)
}

/// The composer's random choices, one stream per concern, each re-seeded at every chunk from the
/// chunk's place in the body (`Draws::for_chunk`). The tuner regenerates a clone with one knob group
/// changed and reads the other groups' metrics as if they had stayed put; from one shared stream, a
/// data knob that changed one access's class shifted every later draw, so every later branch, mask
/// and instruction was redrawn and the code moved (nginx's tuned clone: its branch misprediction rate
/// moved 17.7 % with the data size at ±10 %, more than with another seed,
/// `validation/bench/regeneration-noise.sh`). Per concern and per chunk, a change stays in the chunk
/// it happens in and in the concern it belongs to, as far as the deficits it leaves allow.
#[derive(Clone)]
struct Draws {
    /// Instruction classes and templates.
    mix: Rng,
    /// Data classes, buffers, windows and pointer chasing.
    data: Rng,
    /// Pattern and data-dependent branches, their masks and directions, and indirect dispatches.
    branches: Rng,
    /// The order of the chunk's instructions.
    order: Rng,
}

impl Draws {
    /// The stream of chunk `chunk` of block `block` (its index before the blocks are shuffled).
    fn chunk_stream(body_stream: u64, block: usize, chunk: u64) -> u64 {
        substream(substream(body_stream, block as u64), chunk)
    }

    fn for_chunk(seed: u64, chunk_stream: u64) -> Draws {
        let concern = |part: u64| Rng::new(seed, substream(chunk_stream, part));
        Draws {
            mix: concern(1),
            data: concern(2),
            branches: concern(3),
            order: concern(4),
        }
    }
}

#[derive(Clone)]
struct Composer<'a> {
    plan: &'a BodyPlan,
    knobs: &'a Knobs,
    seed: u64,
    /// The body's stream (`stream_id` of its name), from which every chunk's is derived.
    body_stream: u64,
    draws: Draws,
    mix: Deficit,
    mix_keys: Vec<(Class, Opnd)>,
    data: Deficit,
    /// The body's accesses' split between the private and the shared buffer.
    buffer: Deficit,
    /// The same split kept within each data class past `tail_from_bytes` (the first-touch stream
    /// and the reuses the second level misses, which make the last level's misses), `None` for the
    /// others. Split by the body's deficit alone, such a class of a few heavy sites went wherever
    /// the whole body was short when they were drawn: the Pix optimized clone's first-touch stream
    /// (about 12 accesses a request) went private / shared 9.0 / 3.4, 5.7 / 6.8 and 10.3 / 2.1
    /// with seeds 1–3, and the last level misses 0.59 of the private stream's accesses and 0.93 of
    /// the shared one's (`validation/bench/miss-attribution.sh`). Their picks count in `buffer`
    /// too, so the smaller classes make up the body's total; kept for every class, the split missed
    /// it (nginx 15.0 % shared against 21.3 %: the header's and the chains' private accesses
    /// could only be made up within their own class).
    class_buffer: Vec<Option<Deficit>>,
    regular: Deficit,
    chase: Deficit,
    /// Weight of the first-touch class's accesses so far: [other operands, plain stores].
    first_touch_by_store: [f64; 2],
    taken: Deficit,
    /// Per taken-rate bin: conditional branch executions so far, and those of majority-taken
    /// branches (`majority_taken`).
    majority: Vec<[f64; 2]>,
    transition: Deficit,
    /// (taken bin, transition bin) pairs, row-major: the comonotone coupling of the two histograms
    /// (`pattern`).
    pairs: Deficit,
    /// Target-change-rate bins of indirect jumps (`plan.indirect_change_bins`).
    indirect: Deficit,
    /// Indirect jump executions per call owed: grows by `plan.indirect_ratio` per planned
    /// instruction execution composed, falls by each dispatch's runs per call.
    indirect_acc: f64,
    /// The bytes per instruction dispatches are placed by (`chunk`): one number for the whole body,
    /// corrected between passes (`dispatch_length`).
    dispatch_len: f64,
    /// Executions per call of the dispatches so far, and of those that changed target (expected).
    indirect_execs: f64,
    indirect_changes: f64,
    /// Executions (per call) of the rep-string instructions so far, and their repetitions: fills,
    /// then copies.
    rep_execs: [f64; 2],
    rep_iterations: [f64; 2],
    realised_mix: BTreeMap<(Class, Opnd), f64>,
    cond_acc: f64,
    /// Pattern-branch density of the block being composed, relative to the plan's ratio
    /// (`branch_densities`).
    density: f64,
    chase_class: usize,
    /// The data class the header's accesses count in (`header_access`): the smallest, when it is
    /// one line.
    header_class: Option<usize>,
    cond_weight: f64,
    /// Of `cond_weight`, the repeats' (`repeat_recent`).
    repeated_weight: f64,
    static_cond: u64,
    /// Per data class, the static accesses so far (`next_static_line`).
    static_cursor: Vec<u64>,
    /// Offsets fixed before layout is known are relative to these region starts (filled later).
    used_shared: bool,
}

impl Composer<'_> {
    /// Ring entries (one `jmp rcx` per call into each ring entered mid-way, `Block::enters_indirectly`)
    /// are indirect jumps of the body as much as dispatches are, and their target changes every
    /// call (a window of x chunks advances by x in a ring of a larger power of two). They take
    /// their place in the profile's count and change-rate distribution before any dispatch is
    /// drawn (`dispatch_bins`), so that the dispatches realise what is left. Left out, memcached's
    /// worker made 4 entries per call, mispredicted 2.41 times, on top of dispatches that already
    /// met the profile's change rate, and its round trip measured a mean change rate of 0.214
    /// against the original's 0.122.
    fn charge_ring_entries(&mut self, entries: f64) {
        let per_call = self.plan.indirect_ratio * self.plan.instructions;
        if entries <= 0.0 || per_call <= 0.0 || self.indirect.is_empty() {
            return;
        }
        let bins = Dispatch::realisable_bins(&self.plan.indirect_change_bins);
        self.indirect = Deficit::new(&dispatch_bins(&bins, entries / per_call));
        self.indirect_acc -= entries;
    }

    fn account(&mut self, pair: (Class, Opnd), w: f64) {
        *self.realised_mix.entry(pair).or_insert(0.0) += w;
        // The mix's targets are folded (`isa::fold`): a call counts where the profile's calls went.
        let folded = fold(pair.0, pair.1);
        if let Some(i) = self.mix_keys.iter().position(|k| *k == folded) {
            self.mix.add(i, w);
        }
    }

    fn is_static_class(&self, k: usize) -> bool {
        is_static(&self.plan.data_classes[k])
    }

    /// The fixed offset of the next access to static class `k`: its region's lines in turn, so that
    /// between two accesses to a line the class's other lines come once each, as in a sweep.
    fn next_static_line(&mut self, k: usize) -> u64 {
        let class = &self.plan.data_classes[k];
        let lines = (class.size / LINE).max(1);
        let Some(cursor) = self.static_cursor.get_mut(k) else {
            return class.lo;
        };
        let line = *cursor % lines;
        *cursor += 1;
        class.lo + line * LINE
    }

    /// Counts `w` executions per call of a branch in taken-rate bin `bin`, majority-taken or not.
    fn count_majority(&mut self, bin: usize, w: f64, majority_taken: bool) {
        if let Some(m) = self.majority.get_mut(bin) {
            m[0] += w;
            if majority_taken {
                m[1] += w;
            }
        }
    }

    /// Whether a branch of taken-rate bin `bin`, run `w` times per call, is taken more often than
    /// not: drawn with the probability that brings the bin's realised share to the plan's
    /// (`majority_taken_bins`), and counted. `None` when the plan has no majority shares.
    fn majority_taken(&mut self, bin: usize, w: f64) -> Option<bool> {
        let target = *self.plan.majority_taken_bins.as_ref()?.get(bin)?;
        let [all, taken] = self.majority.get(bin).copied().unwrap_or_default();
        let p = if w > 0.0 {
            ((target * (all + w) - taken) / w).clamp(0.0, 1.0)
        } else {
            target
        };
        let majority_taken = self.draws.branches.f64() < p;
        self.count_majority(bin, w, majority_taken);
        Some(majority_taken)
    }

    /// Composes one chunk of `target_bytes` executed `w` times per call, in a block of `ring` chunks,
    /// whose loop branch exits at `loop_rate` of its executions (`loop_exit_rate`) and is taken more
    /// often than not when `loop_majority_taken` (`loop_taken_share`), drawing from `stream`
    /// (`Draws::chunk_stream`).
    fn chunk(
        &mut self,
        target_bytes: u64,
        w: f64,
        loop_rate: f64,
        loop_majority_taken: bool,
        ring: u64,
        stream: u64,
    ) -> Chunk {
        self.draws = Draws::for_chunk(self.seed, stream);
        let mut c = Chunk {
            items: Vec::new(),
            groups: Vec::new(),
            instrs: 0,
            bytes: 0,
            stream,
        };
        // Loop control: dec r13; jz/jnz (the rP/rQ/rbx updates are added once the chunk is known).
        self.account((Class::Alu, Opnd::Reg), w);
        self.account((Class::Branch, Opnd::Reg), w);
        // Minority rate `loop_rate`, two direction changes per exit; a rate of 0 is a branch that
        // keeps one direction, bin "never".
        self.record_bins(
            Branches::bin(loop_rate),
            Branches::bin((2.0 * loop_rate).min(0.5)),
            w,
        );
        self.count_majority(Branches::bin(loop_rate), w, loop_majority_taken);
        self.cond_weight += w;
        self.static_cond += 1;
        let mut bytes = 5u64;
        let mut instrs = 2u64;
        // Conditional branches: the loop branch, then pattern branches whenever the running count of
        // conditional branches falls a whole branch behind ratio × instructions emitted.
        let ratio = self.branch_ratio();
        self.cond_acc += 2.0 * ratio - 1.0;
        let mut patterns = Vec::new();
        // Per pattern branch of `patterns`, what a later one may repeat.
        let mut repeatable: Vec<Option<Repeatable>> = Vec::new();
        let mut steps_rng = false;
        let shift = ring.trailing_zeros();
        // Whether a rep-string instruction picks its count by the chunk counter.
        let mut splits_rep = false;

        // Indirect jumps where the executions owed so far, with what this chunk will owe, come
        // nearest the profile's per instruction, counted over executions (a chunk run w times a
        // call adds w jumps each): at the chunk's start, where every register is dead, back to
        // back, up to `MAX_DISPATCHES_PER_CHUNK`. They take their bytes from the chunk's budget:
        // added on top, they grew the chunk, and the ring's loop count, set from the chunk's
        // instructions once composed, fell with it. That loop count makes the block run its
        // planned instructions a call, so a chunk of `target_bytes` owes jumps for its planned
        // share of them, and a dispatch in it runs as often as the chunk's instructions come out
        // fewer than planned (bytes per instruction exceed the profile's mean: memcached's worker
        // chunks held 55 instructions for 67 planned). One per chunk, on top and weighed at the
        // planned runs, left that body at 23 jumps a call against 32.5. The length is the body's
        // one corrected figure (`dispatch_length`), not this chunk's, so that where dispatches go
        // does not depend on the data layout of the chunks before it.
        let plan_len = self.plan.mean_instruction_bytes.max(1.0);
        let est_len = self.dispatch_len.max(1.0);
        let owed_here = target_bytes as f64 / plan_len * w * self.plan.indirect_ratio;
        let w_run = w * est_len / plan_len;
        let mut dispatches = Vec::new();
        while self.indirect_acc + owed_here >= 0.5 * w_run
            && !self.indirect.is_empty()
            && dispatches.len() < MAX_DISPATCHES_PER_CHUNK
        {
            let (d, link) = self.dispatch(w);
            instrs += d.instrs(link);
            bytes += d.bytes(link);
            if d.uses_random_word() {
                let (i, b) = self.step_rng_once(&mut steps_rng, w);
                instrs += i;
                bytes += b;
            }
            self.indirect_acc -= w_run;
            dispatches.push((d, link));
        }
        self.cond_acc += (instrs - 2) as f64 * ratio;

        // The rest from the mix.
        let mut body: Vec<Item> = Vec::new();
        while bytes < target_bytes || body.is_empty() {
            if self.cond_acc >= 1.0 {
                let (p, r) = match self.repeat_recent(&repeatable, w) {
                    Some((p, r)) => (p, Some(r)),
                    None => self.pattern(w, shift),
                };
                repeatable.push(r);
                match p {
                    Item::Pattern {
                        source: BranchSource::Field { .. },
                        ..
                    } => {
                        // `lea` and `and` before the compare (`count_counter_branch`). They do not
                        // add to the branches owed: a block of more than one branch in four
                        // instructions (memcached's hottest runs 0.4) would then owe a branch
                        // after every compare, and with only hot sites in it never reach its other
                        // instructions (a random profile's body grew without end). The block's
                        // branch density falls by their share instead.
                        bytes += FIELD_TEST_BYTES - COUNTER_TEST_BYTES;
                    }
                    Item::Pattern {
                        source: BranchSource::Random { .. },
                        ..
                    } => {
                        bytes += RANDOM_TEST_BYTES - COUNTER_TEST_BYTES;
                        let (i, b) = self.step_rng_once(&mut steps_rng, w);
                        instrs += i;
                        bytes += b;
                        self.cond_acc += i as f64 * ratio;
                    }
                    _ => {}
                }
                // A counter test and its jcc: 5 bytes with a byte mask, 8 with a dword one (a
                // field compare's `lea` and `and` come on top).
                bytes += 6;
                instrs += item_instrs(&p);
                patterns.push(p);
                self.cond_acc += 2.0 * ratio - 1.0;
                continue;
            }
            let before = instrs;
            let Some(i) = self.mix.pick(&mut self.draws.mix, w, |_| true) else {
                break;
            };
            let (class, opnd) = self.mix_keys[i];
            let tpls = templates_for(class, opnd);
            if tpls.is_empty() {
                // Unreachable after folding; account it so the loop cannot spin.
                self.account((class, opnd), w);
                continue;
            }
            let t = tpls[self.draws.mix.below(tpls.len() as u64) as usize];
            let mut mem = None;
            let mut rep_count = 0;
            let mut rep_long_mask = 0;
            let mut extra_bytes = 0;
            if t.special == Special::Rep {
                // The repeat count follows the profile's rep_counts; the instruction counts once.
                rep_count = self.rep_count(w, t.opnd);
                let movs = t.asm.contains("movs");
                self.account((Class::Alu, Opnd::Reg), w);
                if movs {
                    self.account((Class::Alu, Opnd::Reg), w);
                }
                self.account((Class::Mov, Opnd::Reg), w);
                extra_bytes += if movs { 21 } else { 13 };
                if let Some(split) = self.plan.rep_modes(t.opnd).split {
                    rep_long_mask = rep_long_mask_for(split, shift);
                    if rep_long_mask != 0 {
                        // mov esi, L; test ebx, mask; cmovz ecx, esi
                        self.account((Class::Mov, Opnd::Reg), w);
                        self.account((Class::Alu, Opnd::Reg), w);
                        self.account((Class::Other, Opnd::Reg), w);
                        extra_bytes += 14;
                        splits_rep = true;
                    }
                }
            } else if opnd.touches_memory() {
                // Pointer chasing replaces a plain 64-bit load, while the chain's class has room, or
                // when the load's class drawn as any other's is the chain's (a one-line class): the
                // chain and the header's accesses both land there, and past its share they turn the
                // profile's reuse histogram into hits (nginx's body, 52 % of its loads chasing,
                // realised 53 % of its accesses in the 64-byte class against 36 %, and every other
                // class at about 72 % of its share). The histogram is what the caches see; the chase
                // only sets how many of those loads wait on each other.
                let chaseable = class == Class::Mov && opnd == Opnd::Load;
                let want_chase = self.chase.pick(&mut self.draws.data, w, |_| true) == Some(1);
                let want_chase = chaseable && want_chase;
                let drawn = (want_chase && self.data.deficit(self.chase_class, w) < 0.0)
                    .then(|| self.pick_data_class(&c, w, Opnd::Load));
                let chase_now = want_chase
                    && drawn.is_none_or(|k| {
                        k == self.chase_class && self.plan.data_classes[k].size <= LINE
                    });
                if chase_now {
                    self.chase.add(1, w);
                    self.data.add(self.chase_class, w);
                    self.regular.add(1, w);
                    self.add_buffer(self.chase_class, Buf::Priv, w);
                    self.account((Class::Mov, Opnd::Load), w);
                    body.push(Item::Chase);
                    bytes += 8;
                    instrs += 1;
                    self.cond_acc += (instrs - before) as f64 * ratio;
                    continue;
                }
                if opnd == Opnd::Load || opnd == Opnd::Rmw {
                    self.chase.add(0, w);
                }
                let (m, window_bytes) = self.data_access(&mut c, class, opnd, w, drawn);
                mem = Some(m);
                extra_bytes += window_bytes;
                if window_bytes > 0 {
                    instrs += 2;
                }
            }
            if t.special == Special::Div {
                let prelude = if opnd == Opnd::Reg {
                    Opnd::Reg
                } else {
                    Opnd::Rmw
                };
                self.account((Class::Alu, prelude), w);
                self.account((Class::Alu, Opnd::Reg), w);
                extra_bytes += 6;
            }
            self.account((class, opnd), w);
            let disp = match &mem {
                Some(Mem::Static { disp, .. }) => *disp,
                Some(Mem::Window { group, line, .. }) => {
                    self.plan.data_classes[c.groups[*group].class].lo + u64::from(*line) * LINE
                }
                None => 0,
            };
            let mem_bytes = if mem.is_some() {
                1 + disp_bytes(disp)
            } else {
                0
            };
            let item = Item::Tpl {
                t,
                mem,
                rep_count,
                rep_long_mask,
            };
            instrs += item_instrs(&item);
            bytes += u64::from(t.len) + mem_bytes + extra_bytes;
            body.push(item);
            self.cond_acc += (instrs - before) as f64 * ratio;
        }
        self.indirect_acc += owed_here;
        let adv_q = c.groups.iter().any(|g| g.irregular);
        // rQ's step is rP, so a chunk that steps rQ steps rP too: in a body without regular
        // windows rP would otherwise stay at its initial 0 and every irregular window at the
        // start of its region (memcached's request workers hit the L2 with their 4 MiB region).
        let adv_p = adv_q || c.groups.iter().any(|g| !g.irregular);
        // The block counter identifies the chunk execution for ring blocks and drives patterns.
        let inc_b = ring > 1 || !patterns.is_empty() || splits_rep;
        for used in [adv_p, adv_q, inc_b] {
            if used {
                self.account((Class::Alu, Opnd::Reg), w);
                instrs += 1;
                bytes += 3;
            }
        }

        // Order: the sampled instructions shuffled; pattern branches spread evenly; each window a
        // few instructions before its first use; loop control last.
        self.draws.order.shuffle(&mut body);
        self.runs_of_same_line(&mut body);
        self.count_run_starts_where_they_hit(&body, w);
        let n = body.len();
        let mut ordered: Vec<Item> = Vec::with_capacity(n + patterns.len() + 8);
        let np = patterns.len();
        let mut pat = patterns.into_iter();
        let mut next_pattern = 0usize;
        for (i, it) in body.into_iter().enumerate() {
            while next_pattern < np && i * (np + 1) >= (next_pattern + 1) * n {
                if let Some(p) = pat.next() {
                    ordered.push(p);
                }
                next_pattern += 1;
            }
            ordered.push(it);
        }
        ordered.extend(pat);
        for g in 0..c.groups.len() {
            let first = ordered.iter().position(|it| {
                matches!(it, Item::Tpl { mem: Some(Mem::Window { group, .. }), .. } if *group == g)
            });
            if let Some(first) = first {
                // The mask right before the first use (the offset is never used unbounded); the
                // offset itself 1–3 instructions earlier, so the two are not back to back.
                ordered.insert(first, Item::WindowMask { group: g });
                let back = 1 + self.draws.order.below(3) as usize;
                ordered.insert(first.saturating_sub(back), Item::Window { group: g });
            }
        }
        for (d, link) in dispatches.into_iter().rev() {
            ordered.insert(0, Item::Indirect(d, link));
        }
        if steps_rng {
            // First: every register is dead at a chunk's start, so rax may be clobbered.
            ordered.insert(0, Item::RngStep);
        }
        ordered.push(Item::LoopEnd {
            adv_p,
            adv_q,
            inc_b,
        });
        c.items = ordered;
        c.instrs = instrs;
        c.bytes = bytes;
        c
    }

    /// The one-line location an access touches, and its class: a one-line class's fixed offset, or
    /// the chase chain where it overlays such a class. Only these: a larger static region's accesses
    /// take its lines in turn (`next_static_line`), and bunched by line they would hit where the
    /// class should miss.
    fn one_line_access(&self, it: &Item) -> Option<(LineKey, usize)> {
        match it {
            Item::Tpl {
                mem: Some(Mem::Static { buf, disp }),
                ..
            } => (self.plan.data_classes.iter())
                .position(|c| c.size <= LINE && c.lo == *disp)
                .map(|k| ((u8::from(*buf == Buf::Shared), *disp), k)),
            Item::Chase => chase_overlay(&self.plan.data_classes, self.chase_class)
                .map(|l| ((0, l), self.chase_class)),
            _ => None,
        }
    }

    /// Makes the accesses to each one-line location adjacent in access order, keeping which slots of
    /// the chunk touch memory. A 64-byte cache holds one line, so a one-line class's accesses hit
    /// there only when nothing comes between them, as in a real program's bursts on a stack frame or
    /// a structure; shuffled among the other classes' accesses they would almost all miss and the
    /// smallest sizes of the curve would come out far below the profile's.
    fn runs_of_same_line(&self, body: &mut [Item]) {
        let slots: Vec<usize> = body
            .iter()
            .enumerate()
            .filter(|(_, it)| touches_memory(it))
            .map(|(i, _)| i)
            .collect();
        // Buckets in order of first appearance: one per line, one per other access.
        let mut buckets: Vec<(Option<LineKey>, Vec<Item>)> = Vec::new();
        for &i in &slots {
            let it = body[i].clone();
            let key = self.one_line_access(&it).map(|(k, _)| k);
            match key.and_then(|k| buckets.iter_mut().find(|b| b.0 == Some(k))) {
                Some(b) => b.1.push(it),
                None => buckets.push((key, vec![it])),
            }
        }
        for (slot, it) in slots.into_iter().zip(buckets.into_iter().flat_map(|b| b.1)) {
            body[slot] = it;
        }
    }

    /// Records the first access of each run of one line (`runs_of_same_line`) in the class where it
    /// hits, for a chunk run `w` times per call. It comes after other lines' accesses (the chunk's
    /// other accesses, in this or the previous execution): it misses a one-line cache and hits one
    /// about half as large as the lines the chunk touches (a fixed offset's line once, each windowed
    /// access its own). Recorded as such, it leaves the one-line class short, and later chunks draw
    /// more of it (longer runs), so the body's hits at 64 bytes approach the profile's instead of
    /// its one-line class's share: memcached's request body hit 0.23 of its accesses at 64 bytes
    /// against a class share of 0.42.
    fn count_run_starts_where_they_hit(&mut self, body: &[Item], w: f64) {
        let chase_line = chase_overlay(&self.plan.data_classes, self.chase_class);
        let mut lines: Vec<(u8, u64)> = Vec::new();
        let mut windowed = 0u64;
        let mut starts = Vec::new();
        let mut prev: Option<LineKey> = None;
        for it in body.iter().filter(|it| touches_memory(it)) {
            match it {
                Item::Tpl {
                    mem: Some(Mem::Static { buf, disp }),
                    ..
                } => lines.push((u8::from(*buf == Buf::Shared), disp / LINE)),
                Item::Chase => lines.push((0, chase_line.unwrap_or(u64::MAX) / LINE)),
                _ => windowed += 1,
            }
            let access = self.one_line_access(it);
            if let Some((_, class)) = access.filter(|(k, _)| Some(*k) != prev) {
                starts.push(class);
            }
            prev = access.map(|(k, _)| k);
        }
        lines.sort_unstable();
        lines.dedup();
        let reuse = ((lines.len() as u64 + windowed).max(2) * LINE / 2).next_power_of_two();
        let to = (self.plan.data_classes.iter())
            .enumerate()
            .filter(|(_, c)| !c.first_touch && c.working_set() >= reuse)
            .min_by_key(|(_, c)| c.working_set())
            .map(|(k, _)| k);
        if let Some(to) = to {
            for k in starts {
                self.data.reassign(k, to, w);
            }
        }
    }

    /// Conditional branches per instruction of the block being composed: the plan's, times the
    /// block's density (`branch_densities`), within `MAX_BRANCH_DENSITY` unless the plan's own is
    /// higher.
    fn branch_ratio(&self) -> f64 {
        (self.plan.cond_branch_ratio * self.density)
            .min(MAX_BRANCH_DENSITY.max(self.plan.cond_branch_ratio))
    }

    /// Counts a `test` of a register and its `jcc`, run `w` times per call: a counter pattern
    /// branch, drawn, "never" or repeated.
    fn count_counter_test(&mut self, w: f64) {
        self.account((Class::Alu, Opnd::Reg), w);
        self.account((Class::Branch, Opnd::Reg), w);
        self.cond_weight += w;
        self.static_cond += 1;
    }

    /// Counts a counter branch of `source` run `w` times per call: a `test` and its `jcc`, or a
    /// field compare's `lea`, `and`, `cmp` and `jcc`.
    fn count_counter_branch(&mut self, source: BranchSource, w: f64) {
        if let BranchSource::Field { .. } = source {
            self.account((Class::Alu, Opnd::Reg), 2.0 * w);
        }
        self.count_counter_test(w);
    }

    /// With probability 1 − `branches.independent_share`, a pattern branch that repeats the test
    /// of one of the last `REPEAT_REACH` counter pattern branches of its chunk: the same outcome at
    /// every execution, which a predictor indexed by global history learns from the first one's
    /// outcome, as it does where a program tests one condition twice (an error check, then its
    /// handling). Only sources whose bins both histograms still owe are candidates, so the taken
    /// and transition histograms stay the profile's at any share. At share 1 (the default) nothing
    /// is drawn and a body is the same as without the knob.
    fn repeat_recent(
        &mut self,
        recent: &[Option<Repeatable>],
        w: f64,
    ) -> Option<(Item, Repeatable)> {
        let share = self.knobs.branches.independent_share;
        if share >= 1.0 || self.draws.branches.f64() < share {
            return None;
        }
        let candidates: Vec<Repeatable> = (recent.iter().rev().take(REPEAT_REACH).flatten())
            .filter(|r| {
                self.taken.deficit(r.taken_bin, w) > 0.5 * w
                    && self.transition.deficit(r.transition_bin, w) > 0.5 * w
            })
            .copied()
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let r = candidates[self.draws.branches.below(candidates.len() as u64) as usize];
        self.record_bins(r.taken_bin, r.transition_bin, w);
        if self.plan.majority_taken_bins.is_some() {
            // `jz` is taken in the minority (`pattern`).
            self.count_majority(r.taken_bin, w, !r.jz);
        }
        self.count_counter_branch(r.source, w);
        self.repeated_weight += w;
        let item = Item::Pattern {
            mask: r.mask,
            jz: r.jz,
            source: r.source,
        };
        Some((item, r))
    }

    /// Records a conditional branch of weight `w` in both rate histograms and in their pairs.
    fn record_bins(&mut self, taken_bin: usize, transition_bin: usize, w: f64) {
        self.taken.add(taken_bin, w);
        self.transition.add(transition_bin, w);
        self.pairs.add(taken_bin * BINS + transition_bin, w);
    }

    /// One pattern branch: a taken-rate bin and a feasible transition-rate bin, realised as a mask;
    /// with what a later branch may repeat of it (a counter pattern that is not "never").
    fn pattern(&mut self, w: f64, shift: u32) -> (Item, Option<Repeatable>) {
        let t = self
            .taken
            .pick(&mut self.draws.branches, w, |_| true)
            .unwrap_or(0);
        // A transition rate above twice the minority rate is impossible (each minority run has two
        // edges): only those transition bins are allowed. The profile has the two histograms, not
        // which transition rate goes with which taken rate; the transition bin comes from the taken
        // bin's row of their comonotone coupling (`pairs`), so a rarely taken branch also changes
        // direction rarely and a branch taken often changes often. Drawn from the transition
        // histogram alone, most of memcached's branches taken 1 time in 16 were paired with its
        // heaviest transition bin, "never", whose runs of 512 executions outlast a profile's window:
        // profiled back, such a branch read 0, or one whole run (bin 2 instead of 3).
        let r = self
            .pairs
            .pick_short(&mut self.draws.branches, w, |i| {
                i / BINS == t && i % BINS + 1 >= t
            })
            .map(|i| i % BINS)
            .or_else(|| {
                self.transition
                    .pick(&mut self.draws.branches, w, |r| r + 1 >= t)
            })
            .unwrap_or(t.saturating_sub(1));
        if t == BINS - 1 {
            return (self.never_branch(w), None);
        }
        if self.draws_data_dependent(t, r) {
            return (self.data_dependent_branch(w, t), None);
        }
        if let Some((item, repeatable)) = self.field_branch(w, t, r, shift) {
            return (item, Some(repeatable));
        }
        // The counter's bits below `shift` number the chunks of the ring: this chunk's own execution
        // count starts at bit `shift`. Masks must fit a sign-extended imm32 (bits 0–30), so the run
        // length (N) gives way first, then the rate (M), for very large rings.
        let m = bin_exponent(t).min(31 - shift.min(30)).max(1);
        let n = (bin_exponent(r) + 1)
            .saturating_sub(m)
            .min(31u32.saturating_sub(shift + m));
        let realised_r = (m + n).saturating_sub(2) as usize;
        // The taken-rate bin the mask realises: the drawn one, unless the rate gave way.
        let bin = if m == bin_exponent(t) {
            t
        } else {
            (m as usize).saturating_sub(1).min(BINS - 1)
        };
        self.record_bins(bin, realised_r.min(BINS - 1), w);
        let low = shift + n;
        let mut mask = 1u32 << low.min(30);
        // The other bits come from just above the lowest one: a bit far up the counter would not
        // change within any realistic run (bit 25 flips every 2^25 chunk executions), so the branch
        // would never leave its first direction and its bin would be "never" in every profile. Drawing
        // M − 1 of the M + 1 bits above keeps the period within 2^(low + M + 2) executions and still
        // gives branches of one rate different masks, so they are not synchronised.
        let top = (low + m + 1).min(30);
        let mut free: Vec<u32> = ((low + 1)..=top).collect();
        self.draws.branches.shuffle(&mut free);
        for bit in free.into_iter().take(m as usize - 1) {
            mask |= 1 << bit;
        }
        // `test` sets ZF, all mask bits clear, 2^−M of the time: `jz` is taken in the minority.
        let jz = match self.majority_taken(bin, w) {
            Some(majority_taken) => !majority_taken,
            None => self.draws.branches.below(2) == 0,
        };
        self.count_counter_test(w);
        let item = Item::Pattern {
            mask,
            jz,
            source: BranchSource::Counter,
        };
        let repeatable = Repeatable {
            mask,
            jz,
            source: BranchSource::Counter,
            taken_bin: bin,
            transition_bin: realised_r.min(BINS - 1),
        };
        (item, Some(repeatable))
    }

    /// At a hot site (run at least `HOT_SITE_SHARE` of the body's conditional branch executions), a
    /// pattern branch of taken bin `t` and transition bin `r` as a counter-field compare whose rates
    /// sit inside both bins (`counter_field`); `None` elsewhere, or when no field fits the pair or
    /// the counter above the ring's `shift` bits. A `test` of mask bits realises its bins' edges,
    /// and measured over a window about half of such sites read one bin up: over hundreds of sites
    /// that is a share of each bin, on the few hot sites that carry a bin it is the whole bin.
    fn field_branch(
        &mut self,
        w: f64,
        t: usize,
        r: usize,
        shift: u32,
    ) -> Option<(Item, Repeatable)> {
        let per_call = self.plan.instructions * self.plan.cond_branch_ratio;
        if w < HOT_SITE_SHARE * per_call {
            return None;
        }
        let fits: Vec<&FieldCompare> = counter_field::candidates(t, r)
            .iter()
            .filter(|c| c.top_bit(shift) < NEVER_BIT)
            .collect();
        if fits.is_empty() {
            return None;
        }
        let c = *fits[self.draws.branches.below(fits.len() as u64) as usize];
        let (mask, below) = c.at(shift);
        self.record_bins(t, r, w);
        // `jb` is taken in the minority, as `jz` of a mask.
        let jz = match self.majority_taken(t, w) {
            Some(majority_taken) => !majority_taken,
            None => self.draws.branches.below(2) == 0,
        };
        let source = BranchSource::Field {
            multiplier: c.multiplier as u8,
            below,
        };
        self.count_counter_branch(source, w);
        let item = Item::Pattern { mask, jz, source };
        let repeatable = Repeatable {
            mask,
            jz,
            source,
            taken_bin: t,
            transition_bin: r,
        };
        Some((item, repeatable))
    }

    /// Whether a pattern branch of taken-rate bin `t` and transition-rate bin `r` tests random bits
    /// (`branches.data_dependent_scale`). Its candidates are the branches whose profile rates are a
    /// coin toss's: a branch taken at minority rate p at random changes direction 2p(1 − p) of the
    /// time, which falls in the bin just above its taken bin (bin 0 for the two highest). The rates
    /// cannot tell such a branch from a periodic one, but a periodic one is what the counter gives and
    /// a history predictor learns it (pix-optimized's clone: 5–6 % mispredicted against 11.3 %
    /// whatever the transition rates), while a branch on fresh data it cannot.
    fn draws_data_dependent(&mut self, t: usize, r: usize) -> bool {
        let scale = self.knobs.branches.data_dependent_scale;
        let coin_like = r == t.saturating_sub(1);
        let p = if coin_like {
            scale.min(1.0)
        } else {
            (scale - 1.0).clamp(0.0, 1.0)
        };
        p > 0.0 && self.draws.branches.f64() < p
    }

    /// A data-dependent branch of taken-rate bin `t` (not "never"): `cmp` of a random dword of the
    /// body's pseudo-random word (which the chunk advances once per execution, `Item::RngStep`)
    /// with a threshold, its minority direction at rate q = c / 2^32, with c at the bin's geometric
    /// middle, 2^−(t + 1.5). Its transition rate is a coin toss's, 2q(1 − q), the middle
    /// of the bin below. (A `test` of t + 1 random bits gave 2^−(t + 1), the bin's upper edge: profiled
    /// back over a window, half of such branches read a rate above it and landed a bin higher.)
    fn data_dependent_branch(&mut self, w: f64, t: usize) -> Item {
        let threshold = random_threshold(t);
        let q = f64::from(threshold) / 2f64.powi(32);
        self.record_bins(t, Branches::bin(2.0 * q * (1.0 - q)), w);
        // Always `jae`, taken at or above the threshold: c for a majority-taken branch, 2^32 − c
        // for a minority-taken one. Cachegrind reads a jump to the next instruction by its
        // condition's positive form inverted (`never_branch`), which for `jae` is the jump's own
        // direction; a `jb` taken in the minority it read as taken in the majority.
        let majority_taken = match self.majority_taken(t, w) {
            Some(majority_taken) => majority_taken,
            None => self.draws.branches.below(2) == 0,
        };
        let threshold = if majority_taken {
            threshold
        } else {
            threshold.wrapping_neg()
        };
        // Bytes 3 and 4 of the word: their dwords hold bits 24–62 of the multiplicative generator,
        // whose low bits have short periods.
        let byte = 3 + self.draws.branches.below(2) as u8;
        self.account((Class::Alu, Opnd::Load), w);
        self.account((Class::Branch, Opnd::Reg), w);
        self.header_access(w, true);
        self.cond_weight += w;
        self.static_cond += 1;
        Item::Pattern {
            mask: threshold,
            jz: false,
            source: BranchSource::Random { byte },
        }
    }

    /// A mask of `m` bits drawn among bits 0–30 (a sign-extended imm32 of `test dword ptr`): all
    /// clear with probability 2^−m in the pseudo-random word.
    fn random_mask(&mut self, m: u32) -> u32 {
        let mut bits: Vec<u32> = (0..31).collect();
        self.draws.branches.shuffle(&mut bits);
        bits.into_iter()
            .take(m as usize)
            .fold(0u32, |acc, b| acc | 1 << b)
    }

    /// Counts one access per call-weight `w` to the body's header (the pseudo-random word) as a data
    /// access of the smallest class when that class is one line: the header line is as hot as such a
    /// class, and the profile's access histogram then keeps its total. A larger smallest class leaves
    /// the header's accesses uncounted (they add hits the profile does not have).
    fn header_access(&mut self, w: f64, load: bool) {
        let Some(k) = self.header_class else {
            return;
        };
        self.data.add(k, w);
        self.add_buffer(k, Buf::Priv, w);
        self.regular.add(0, w);
        if load {
            self.chase.add(0, w);
        }
    }

    /// One indirect jump run `w` times per call: a target-change bin drawn by deficit, realised by the
    /// nearest `Dispatch`, linked by a call while the body's calls are short of
    /// `plan.call_ratio` of its instructions, and accounted (its instructions in the mix, its header
    /// load and a call's stack accesses as data accesses).
    fn dispatch(&mut self, w: f64) -> (Dispatch, Link) {
        // A few hot chunks carry most executions: a bin may take this one only if it is at least half
        // its weight short, else the bin furthest short does (a proportional draw put two of
        // nginx's heaviest dispatches in bins of 5 % each, and the mean change rate came out 0.25
        // against 0.14).
        let deficit = |i: usize| self.indirect.deficit(i, w);
        let bin = self
            .indirect
            .pick(&mut self.draws.branches, w, |i| deficit(i) >= 0.5 * w)
            .or_else(|| (0..self.indirect.len()).max_by(|&a, &b| deficit(a).total_cmp(&deficit(b))))
            .unwrap_or(0);
        let mut d = Dispatch::for_bin(bin);
        if let Dispatch::Two { mask, .. } = d {
            // M random bits of bytes 3–6 of the word (bits 24–62), the dwords the data-dependent
            // branches compare.
            let mask = self.random_mask(mask.count_ones());
            let byte = 3 + self.draws.branches.below(2) as u8;
            d = Dispatch::Two { mask, byte };
        }
        let rate = d.change_rate();
        self.indirect.add(IndirectBranches::bin(rate), w);
        self.indirect_execs += w;
        self.indirect_changes += w * rate;
        // Only a called dispatch makes a branch/store: the body's calls so far.
        let calls = self
            .realised_mix
            .get(&(Class::Branch, Opnd::Store))
            .copied()
            .unwrap_or(0.0);
        let link = if self.plan.call_ratio * (self.mix.total() + w) - calls >= 0.5 * w {
            Link::Call
        } else {
            Link::Jump
        };
        // lea of the stubs (or the target), the jump to the trampoline, its jump, and a stub's jmp;
        // or the call of the trampoline, its jump, and a stub's (the fixed target's) ret.
        self.account((Class::Alu, Opnd::Reg), w);
        match link {
            Link::Jump => {
                let jumps = if d == Dispatch::Fixed { 2.0 } else { 3.0 };
                self.account((Class::Branch, Opnd::Reg), w * jumps);
            }
            Link::Call => {
                self.account((Class::Branch, Opnd::Store), w);
                self.account((Class::Branch, Opnd::Reg), w);
                self.account((Class::Branch, Opnd::Load), w);
                // The return address, on the thread's stack: a line as hot as the header's.
                self.header_access(w, false);
                self.header_access(w, true);
            }
        }
        match d {
            Dispatch::Fixed => {
                // The add of the zero word.
                self.account((Class::Alu, Opnd::Load), w);
                self.header_access(w, true);
            }
            Dispatch::Two { .. } => {
                // xor, test of the word, setz, lea of the stub.
                self.account((Class::Alu, Opnd::Reg), 3.0 * w);
                self.account((Class::Alu, Opnd::Load), w);
                self.header_access(w, true);
            }
            Dispatch::Uniform { .. } => {
                // mov of the word, and, lea of the stub.
                self.account((Class::Mov, Opnd::Load), w);
                self.account((Class::Alu, Opnd::Reg), 2.0 * w);
                self.header_access(w, true);
            }
        }
        (d, link)
    }

    /// The chunk's pseudo-random step (`Item::RngStep`: a load, a multiply and a store), the first
    /// time the chunk needs it (`steps`): accounted, and its (instructions, bytes); (0, 0) when the
    /// chunk already steps the word.
    fn step_rng_once(&mut self, steps: &mut bool, w: f64) -> (u64, u64) {
        if *steps {
            return (0, 0);
        }
        *steps = true;
        self.account((Class::Mov, Opnd::Load), w);
        self.account((Class::Mul, Opnd::Reg), w);
        self.account((Class::Mov, Opnd::Store), w);
        self.header_access(w, true);
        self.header_access(w, false);
        (RNG_STEP_INSTRS, RNG_STEP_BYTES)
    }

    /// A branch of the "never" bin (minority rate below 2^−11): its only mask bit is bit 30 or 31 of
    /// the counter, which flip once per 2^30 executions of the chunk, so within any profiled run the
    /// branch keeps one direction. (Several mask bits spread up to bit 30 do not do this: the
    /// counter's bits above about 2^18 stay 0 in a run, and the remaining low bits make the branch
    /// flip every few hundred executions, bins 5–7 instead of 10.)
    ///
    /// The direction is the bit's, not the jump's: a `jnz` on bit 31 (always set) is always taken,
    /// on bit 30 (always clear) never. Cachegrind reads a conditional jump to the next instruction,
    /// as pattern branches are, by its condition's positive form inverted (VEX writes it as a side
    /// exit on `jz` whether it is a `jz` or a `jnz`), so with `jz` for taken it saw every "never"
    /// branch not taken; `jnz` is taken exactly where that reading says, so profiler, hardware and
    /// cachegrind agree (`branch_orient` turns them by the bit).
    fn never_branch(&mut self, w: f64) -> Item {
        self.record_bins(BINS - 1, BINS - 1, w);
        let taken = match self.majority_taken(BINS - 1, w) {
            Some(majority_taken) => majority_taken,
            None => self.draws.branches.below(2) == 0,
        };
        self.count_counter_test(w);
        Item::Pattern {
            mask: never_mask(taken),
            jz: false,
            source: BranchSource::Counter,
        }
    }

    /// The repeat count of a rep-string instruction run `w` times per call: the one that keeps the
    /// body's executions-weighted mean count of its kind (`opnd`) on the profile's mean for that
    /// kind (`BodyPlan::rep_modes`).
    ///
    /// Cachegrind counts every repetition as an instruction (and every byte moved as a data access),
    /// while the profile counts the instruction once; a body has only a handful of rep instructions,
    /// so counts drawn at random per instruction made regenerations with almost the same knobs differ
    /// by hundreds of instructions per call under cachegrind (memcached: a count of 2 in one, 180 in
    /// the next, 2,715 against 3,335 instructions per call). Tracking the running mean keeps the
    /// counts' mean on the profile's whatever the draw; `settle_rep_counts` then scales them to the
    /// repetitions per call the plan owes once the chunks' runs per call are known.
    fn rep_count(&mut self, w: f64, opnd: Opnd) -> u64 {
        let max = self.knobs.limits.max_rep_count.max(1);
        let k = usize::from(rep_kind(opnd) == Opnd::Rmw);
        let mean = self.plan.rep_modes(opnd).mean;
        let owed = mean * (self.rep_execs[k] + w) - self.rep_iterations[k];
        let v = (owed / w.max(1e-9)).round().clamp(1.0, max as f64) as u64;
        self.rep_execs[k] += w;
        self.rep_iterations[k] += w * v as f64;
        v
    }

    /// Records an access of weight `w` of data class `k` to buffer `buf`: in the body's split and,
    /// where the class keeps its own (`class_buffer`), in that one.
    fn add_buffer(&mut self, k: usize, buf: Buf, w: f64) {
        let i = usize::from(buf == Buf::Shared);
        self.buffer.add(i, w);
        if let Some(Some(own)) = self.class_buffer.get_mut(k) {
            own.add(i, w);
        }
    }

    /// The data class of the next access of weight `w` in chunk `c`: a static class, or one that can
    /// still get a window there. Not recorded.
    ///
    /// Only a plain store (`opnd`) takes the first-touch class: a service's first touches are the
    /// writes that fill memory it has just allocated (every LLC miss of memcached's and Pix
    /// baseline's originals is a write under cachegrind), and a real core drains a store miss
    /// through its store buffer where a load miss stalls it.
    fn pick_data_class(&mut self, c: &Chunk, w: f64, opnd: Opnd) -> usize {
        let classes = &self.plan.data_classes;
        let can_open = c.groups.len() < MAX_WINDOWS;
        let has_room = |k: usize| {
            c.groups
                .iter()
                .any(|g| g.class == k && g.count < MAX_GROUP.min((classes[k].size / LINE) as u32))
        };
        let store = opnd == Opnd::Store;
        self.data
            .pick_least_overshoot(&mut self.draws.data, w, |k| {
                (store || !classes[k].first_touch)
                    && (is_static(&classes[k]) || can_open || has_room(k))
            })
            .unwrap_or(0)
    }

    /// Chooses buffer, class (unless `drawn` by `pick_data_class`) and window for one memory
    /// operand; returns it and the bytes of a window it opened (0 when it joined one or used a fixed
    /// offset).
    fn data_access(
        &mut self,
        c: &mut Chunk,
        class: Class,
        opnd: Opnd,
        w: f64,
        drawn: Option<usize>,
    ) -> (Mem, u64) {
        let k = match drawn {
            Some(k) => k,
            None => self.pick_data_class(c, w, opnd),
        };
        // A class's own split takes an access only where it brings the class nearer its share
        // (`pick_least_overshoot`): its sites are few and heavy, and a draw in proportion to the
        // deficits still sent memcached's first site past 1 MiB to the shared buffer one time in
        // six, and with it 29 % of the class's accesses (seed 2) against the plan's 17 %.
        let pick = match self.class_buffer.get(k) {
            Some(Some(own)) => own.pick_least_overshoot(&mut self.draws.data, w, |_| true),
            _ => self.buffer.pick(&mut self.draws.data, w, |_| true),
        };
        let shared = class != Class::Lock // locked operations stay on the private buffer
            && pick == Some(1);
        let buf = if shared { Buf::Shared } else { Buf::Priv };
        self.add_buffer(k, buf, w);
        if buf == Buf::Shared {
            self.used_shared = true;
        }
        self.data.add(k, w);
        if self.plan.data_classes[k].first_touch {
            self.first_touch_by_store[usize::from(opnd == Opnd::Store)] += w;
        }
        if self.is_static_class(k) {
            // A one-line class's fixed offset counts as a strided access, as a profiler sees it. The
            // 2–4-line regions' do not: counted too, they took the whole strided share, and every
            // windowed access of a larger class went irregular, whose walk comes back to lines
            // sooner than a sweep (Pix baseline's clone: L1d 0.07 % against 1.80 %).
            if self.plan.data_classes[k].size <= LINE {
                self.regular.add(0, w);
            }
            let disp = self.next_static_line(k);
            return (Mem::Static { buf, disp }, 0);
        }
        let can_open = c.groups.len() < MAX_WINDOWS;
        let classes = &self.plan.data_classes;
        let cap = MAX_GROUP.min((classes[k].size / LINE) as u32);
        let open_ok = |irregular: bool, c: &Chunk| {
            c.groups
                .iter()
                .any(|g| g.class == k && g.irregular == irregular && g.count < cap)
                || can_open
        };
        let r = self
            .regular
            .pick(&mut self.draws.data, w, |r| open_ok(r == 1, c))
            .unwrap_or(0);
        let irregular = r == 1;
        let feasible = open_ok(irregular, c);
        let irregular = if feasible { irregular } else { !irregular };
        self.regular.add(usize::from(irregular), w);
        if let Some((gi, g)) = c
            .groups
            .iter_mut()
            .enumerate()
            .find(|(_, g)| g.class == k && g.irregular == irregular && g.count < cap)
        {
            let line = g.count;
            g.count += 1;
            return (
                Mem::Window {
                    buf,
                    group: gi,
                    line,
                },
                0,
            );
        }
        c.groups.push(Group {
            class: k,
            irregular,
            count: 1,
        });
        self.account((Class::Alu, Opnd::Reg), w);
        self.account((Class::Alu, Opnd::Reg), w);
        (
            Mem::Window {
                buf,
                group: c.groups.len() - 1,
                line: 0,
            },
            15,
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Layout of the private buffer.

#[derive(Debug, Clone)]
struct Layout {
    class_top: u64,
    /// The chain's first node; node i is at chase_lo + 64·i.
    chase_lo: u64,
    /// Largest offset r12 takes (0 for a one-node chain).
    chase_mask: u64,
    rep_lo: u64,
    rep_half: u64,
    hdr_lo: u64,
    /// Per block, its chunk counter (u64): chunk executions so far; its low bits are the ring
    /// position to resume at.
    counter_lo: u64,
    priv_bytes: u64,
    shared_bytes: u64,
}

/// Where `ditto_body_init` reads `ctx->stream` (config.c asserts it against the runtime's header).
pub const CTX_STREAM_OFFSET: u64 = 88;
/// Spreads small integers (block indices, thread streams) over 64-bit phases (2^64 / φ, odd).
const PHASE_MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

const HDR_RP: u64 = 0;
const HDR_RQ: u64 = 8;
const HDR_CHASE: u64 = 16;
/// The body's pseudo-random word (u64, odd): data-dependent branches test its bits.
const HDR_RNG: u64 = 24;
/// A word that stays 0 (init writes it): a single-target dispatch adds it to its target, so that the
/// jump's target comes from memory. `lea rcx, [rip + L]; jmp rcx` alone is an indirect jump to the
/// assembler but not to Valgrind, whose IR optimiser folds it into a direct one (cachegrind then
/// counted 105 of a clone's 507 dispatches per call as indirect: the 78 % with one target were gone).
const HDR_ZERO: u64 = 32;
const HDR_COUNTERS: u64 = 40;

/// Multiplier of the pseudo-random word's step, x ← a·x mod 2^64 (a ≡ 5 mod 8: period 2^62 from an
/// odd seed). An imm32, so one `imul`; the tested bits are the upper ones, which are the random ones.
const RNG_MULTIPLIER: u32 = 0x5851_F42D;
/// `mov rax, [r15 + d32]`, `imul rax, rax, imm32`, `mov [r15 + d32], rax`.
const RNG_STEP_INSTRS: u64 = 3;
const RNG_STEP_BYTES: u64 = 21;
/// `test ebx, imm32` and `cmp dword ptr [r15 + d32], imm32` (the jcc adds 2 to each).
const COUNTER_TEST_BYTES: u64 = 6;
/// `lea r32, [rbx + rbx*k]`, `and r32, imm32`, `cmp r32, imm32` (r8d/r9d one more each).
const FIELD_TEST_BYTES: u64 = 15;
/// A pattern branch run at least this share of its body's conditional branch executions is a
/// counter-field compare (`Composer::field_branch`). memcached's worker body (244 a call) has one
/// such block, run 14 times a call, whose sites carried its taken bins 1–4.
const HOT_SITE_SHARE: f64 = 0.02;
const RANDOM_TEST_BYTES: u64 = 11;

/// Whether a data class is addressed at fixed offsets (`STATIC_REGION_LINES`).
fn is_static(class: &DataClass) -> bool {
    class.size <= STATIC_REGION_LINES * LINE
}

/// The line a one-node chase chain shares with its class, when it can: the chase class is a one-line
/// class (a separate line would add a line the profile does not have) and the first region of the
/// buffer, so no window's overflow reaches it. The node is the line's last 8 bytes, which the class's
/// own accesses never touch (they address the line's first bytes, at most 32 wide:
/// `MAX_ACCESS_BYTES`), so nothing but init writes it. `None`: the chain gets a region of its own
/// above every class region and its slack, where no ordinary store reaches.
fn chase_overlay(classes: &[DataClass], chase_class: usize) -> Option<u64> {
    let c = &classes[chase_class];
    (c.size <= LINE && c.lo == 0).then_some(c.lo)
}

/// Whether a composed item accesses data memory (an operand or a chase load).
fn touches_memory(it: &Item) -> bool {
    matches!(it, Item::Tpl { mem: Some(_), .. } | Item::Chase)
}

/// The widest memory operand of any template (bytes from the start of its line).
const MAX_ACCESS_BYTES: u64 = 32;

fn align(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

// ---------------------------------------------------------------------------------------------
// Rendering: registers, text, proofs.

struct Deps {
    raw: Deficit,
    war: Deficit,
    waw: Deficit,
    last_w: [i64; NREGS],
    last_r: [i64; NREGS],
    locked: [bool; NREGS],
    /// Per register, the loads (bits of a rotating id) its value derives from that nothing has made
    /// live yet. A load is dead when no register carries it any more before a side exit (a
    /// conditional branch, where the whole register state is observable) or a store uses it;
    /// Valgrind's IR optimiser drops dead loads, transitively, before any tool sees them, so
    /// cachegrind and the body profiler would not count accesses the CPU makes (measured on
    /// memcached's clone before this rule: 9.7 M data refs under cachegrind, 16.1 M with
    /// `--vex-iropt-level=0`). A pure write therefore avoids a register that is the last carrier of
    /// some load while another register will do.
    carriers: [u64; NREGS],
    next_load: u32,
    pos: i64,
}

impl Deps {
    /// Whether overwriting `r` would leave one of the loads it carries with no carrier.
    fn last_carrier(&self, r: Reg) -> bool {
        let own = self.carriers[usize::from(r)];
        if own == 0 {
            return false;
        }
        let others = self
            .carriers
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != usize::from(r))
            .fold(0u64, |acc, (_, c)| acc | c);
        own & !others != 0
    }

    /// The loads in `bits` are live: a store, an address or a side exit used them.
    fn confirm(&mut self, bits: u64) {
        for c in &mut self.carriers {
            *c &= !bits;
        }
    }
}

impl Deps {
    fn new(plan: &BodyPlan) -> Deps {
        Deps {
            raw: Deficit::new(&plan.raw),
            war: Deficit::new(&plan.war),
            waw: Deficit::new(&plan.waw),
            last_w: [i64::MIN / 2; NREGS],
            last_r: [i64::MIN / 2; NREGS],
            locked: [false; NREGS],
            carriers: [0; NREGS],
            next_load: 0,
            pos: 0,
        }
    }
}

/// What one instruction does with memory, for load liveness.
#[derive(Default)]
struct Access {
    loads: bool,
    stores: bool,
    /// Registers that form its address.
    address: Vec<Reg>,
}

struct Renderer<'a> {
    name: String,
    plan: &'a BodyPlan,
    layout: Layout,
    seed: u64,
    /// Re-seeded at every chunk (`Renderer::chunk`).
    rng: Rng,
    deps: Deps,
    out: String,
    proofs: Vec<MemProof>,
    vex: bool,
    w: f64,
    temps: Vec<Option<Reg>>,
    remaining: Vec<u32>,
    cur_groups: Vec<Group>,
    /// Whether each window's temp has been masked (only then may it address memory).
    masked: Vec<bool>,
    static_instrs: u64,
    /// (estimated bytes × weight, weight) for the dynamic mean length.
    len_acc: (f64, f64),
    /// Every indirect jump's trampoline (`Renderer::via_trampoline`): its label and executions
    /// per call.
    trampolines: Vec<(String, f64)>,
    /// Every conditional branch of the chunks: its label, the bytes from the branch to the label,
    /// and its site, placed once the body is laid out (`orient_branches`).
    branches: Vec<(String, u64, branch_orient::Site)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gpr,
    Vec,
}

impl Renderer<'_> {
    fn line(&mut self, s: &str) {
        self.out.push_str("    ");
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn label(&mut self, s: &str) {
        self.out.push_str(s);
        self.out.push_str(":\n");
    }

    /// Labels a conditional branch and records its site (`branch_orient`): the branch starts `back`
    /// bytes before the label (0: the branch is written next).
    fn branch_site(&mut self, taken: f64, free: bool, back: u64) {
        let label = format!(".L{}_j{}", self.name, self.branches.len());
        self.label(&label);
        let site = branch_orient::Site {
            offset: 0,
            runs: self.w,
            taken,
            free,
        };
        self.branches.push((label, back, site));
    }

    /// Records one instruction's register uses at the current position (realised distances feed the
    /// deficits), then advances. For instructions that neither read nor write the flags.
    fn commit(&mut self, reads: &[Reg], writes: &[Reg], bytes: u64) {
        self.commit_access(reads, writes, (false, false), bytes, &Access::default());
    }

    /// `commit` with the instruction's flag use (`isa::flag_use`) and what it does with memory, for
    /// load liveness (`Deps::carriers`): written registers carry the loads their inputs carried,
    /// plus the instruction's own load; a store makes what it stores live, an address makes its
    /// registers' loads live.
    fn commit_access(
        &mut self,
        reads: &[Reg],
        writes: &[Reg],
        (reads_flags, writes_flags): (bool, bool),
        bytes: u64,
        mem: &Access,
    ) {
        let w = self.w;
        let d = &mut self.deps;
        let mut addr_bits = 0u64;
        for &r in &mem.address {
            addr_bits |= d.carriers[usize::from(r)];
        }
        d.confirm(addr_bits);
        let mut inherited = 0u64;
        for &r in reads {
            inherited |= d.carriers[usize::from(r)];
        }
        if mem.stores {
            d.confirm(inherited);
            inherited = 0;
        }
        if mem.loads {
            let bit = 1u64 << (d.next_load % 64);
            d.next_load = d.next_load.wrapping_add(1);
            // A recycled id still carried by someone is taken as live (ids recycle every 64 loads,
            // and side exits come far more often).
            d.confirm(bit);
            inherited |= bit;
        }
        for &r in writes {
            d.carriers[usize::from(r)] = inherited;
        }
        // Distances are counted as the body profiler counts them (profiler/body/src/analysis.rs), so
        // that the deficits see what a profile of the clone will: every register, the reserved ones
        // (bases, counters) and the flags included, though only the pool's are steered; a write's
        // WAR only where the instruction does not read the register itself; nothing for a register
        // not yet written or beyond the last bin. Counting only the steered registers, the
        // ground-truth round trips missed their dependency bins by up to 98 points (their hot loops'
        // flags and counters made most of the profile's distances).
        let flags = [FLAGS];
        let reads_all = || reads.iter().chain(flags.iter().filter(|_| reads_flags));
        let writes_all = || writes.iter().chain(flags.iter().filter(|_| writes_flags));
        for &r in reads_all() {
            if let Some(b) = dep_bin(d.pos - d.last_w[usize::from(r)]) {
                d.raw.add(b, w);
            }
        }
        for &r in writes_all() {
            let i = usize::from(r);
            if let Some(b) = dep_bin(d.pos - d.last_w[i]) {
                d.waw.add(b, w);
            }
            if !reads_all().any(|&x| x == r) {
                if let Some(b) = dep_bin(d.pos - d.last_r[i]) {
                    d.war.add(b, w);
                }
            }
        }
        for &r in reads_all() {
            d.last_r[usize::from(r)] = d.pos;
        }
        for &r in writes_all() {
            d.last_w[usize::from(r)] = d.pos;
        }
        d.pos += 1;
        self.static_instrs += 1;
        self.len_acc.0 += bytes as f64 * w;
        self.len_acc.1 += w;
    }

    /// An instruction with fixed registers.
    fn fixed(&mut self, text: &str, reads: &[Reg], writes: &[Reg], bytes: u64) {
        self.line(text);
        self.commit_access(reads, writes, flag_use(text), bytes, &Access::default());
    }

    /// The register for one operand: among the pool's (less `forbid`, and locked ones for a write),
    /// the one whose distances would fill the RAW, WAR and WAW bins that are most short
    /// (`Deficit::deficit`, summed over the distances the operand realises; a distance beyond the last
    /// bin counts nothing). Drawing a target bin per distance and taking the register nearest it
    /// left memcached's request body 27 points (total variation) off its RAW histogram by the
    /// generator's own count: the draws ignore which distances are available at all.
    fn choose(&mut self, kind: Kind, acc: Acc, forbid: &[Reg]) -> Reg {
        let w = self.w;
        let d = &self.deps;
        let pool: Vec<Reg> = match kind {
            Kind::Gpr => GPR_POOL.to_vec(),
            Kind::Vec => (XMM0..XMM0 + 16).collect(),
        };
        let mut best: Vec<Reg> = Vec::new();
        let mut best_score = f64::NEG_INFINITY;
        // A pure write may not drop the last carrier of a load (`Deps::carriers`) while another
        // register will do.
        let pure_write = acc.writes() && !acc.reads();
        let spare = pool.iter().any(|&r| {
            let i = usize::from(r);
            !forbid.contains(&r) && !d.locked[i] && !d.last_carrier(r)
        });
        for r in pool {
            let i = usize::from(r);
            if forbid.contains(&r) || (acc.writes() && d.locked[i]) {
                continue;
            }
            if pure_write && spare && d.last_carrier(r) {
                continue;
            }
            let mut score = 0.0;
            if acc.reads() {
                score += bin_gain(&d.raw, d.pos - d.last_w[i], w);
            }
            if acc.writes() {
                // A register the instruction also reads has no WAR distance (the profiler's rule).
                if !acc.reads() {
                    score += bin_gain(&d.war, d.pos - d.last_r[i], w);
                }
                score += bin_gain(&d.waw, d.pos - d.last_w[i], w);
            }
            if score > best_score + 1e-12 {
                best_score = score;
                best.clear();
            }
            if (score - best_score).abs() <= 1e-12 {
                best.push(r);
            }
        }
        // The pool always has an unlocked, unforbidden register: at most 3 are locked and forbid
        // lists hold one register.
        let i = self.rng.below(best.len() as u64) as usize;
        best.get(i).copied().unwrap_or(RAX)
    }

    fn base(buf: Buf) -> (Reg, Buffer) {
        match buf {
            Buf::Priv => (R15, Buffer::Priv),
            Buf::Shared => (R14, Buffer::Shared),
        }
    }

    fn buffer_bytes(&self, b: Buffer) -> u64 {
        match b {
            Buffer::Priv => self.layout.priv_bytes,
            Buffer::Shared => self.layout.shared_bytes,
            Buffer::Ctx => 16,
            Buffer::Stack => 8,
        }
    }

    /// Proves [lo, hi) inside `buffer`; a failure is a generator bug, never emitted.
    fn prove(&mut self, buffer: Buffer, lo: u64, hi: u64) -> Result<()> {
        let size = self.buffer_bytes(buffer);
        if hi > size || lo >= hi {
            bail!(
                "internal error: body {} would access [{lo}, {hi}) of a {size}-byte {buffer:?} buffer",
                self.name
            );
        }
        self.proofs.push(MemProof { buffer, lo, hi });
        Ok(())
    }

    /// `prove` for an ordinary data operand, which must also stay off the chase chain's nodes: the
    /// chase loads are not masked, so one store there could send r12 anywhere.
    fn prove_data(&mut self, buffer: Buffer, lo: u64, hi: u64) -> Result<()> {
        let (c_lo, c_hi) = (
            self.layout.chase_lo,
            self.layout.chase_lo + self.layout.chase_mask + 8,
        );
        if buffer == Buffer::Priv && lo < c_hi && c_lo < hi {
            bail!(
                "internal error: body {} would access [{lo}, {hi}), which overlaps the chase chain \
                 [{c_lo}, {c_hi})",
                self.name
            );
        }
        self.prove(buffer, lo, hi)
    }

    /// Renders a memory operand of `width` bytes; returns (text, registers read).
    fn mem(&mut self, m: &Mem, width: u64) -> Result<(String, Vec<Reg>)> {
        if width > MAX_ACCESS_BYTES {
            bail!("internal error: a {width}-byte memory operand (at most {MAX_ACCESS_BYTES})");
        }
        match *m {
            Mem::Static { buf, disp } => {
                let (base, b) = Self::base(buf);
                self.prove_data(b, disp, disp + width)?;
                Ok((
                    format!("[{} + {disp}]", crate::isa::reg_name(base, 64)),
                    vec![base],
                ))
            }
            Mem::Window { buf, group, line } => {
                let (base, b) = Self::base(buf);
                let Some(t) = self.temps.get(group).copied().flatten() else {
                    bail!("internal error: window used before it was computed");
                };
                if !self.masked.get(group).copied().unwrap_or(false) {
                    bail!("internal error: window used before it was bounded");
                }
                let class = self.group_class(group);
                let dc = &self.plan.data_classes[class];
                let disp = dc.lo + u64::from(line) * LINE;
                let mask = dc.size - LINE;
                self.prove_data(b, disp, disp + mask + width)?;
                if let Some(r) = self.remaining.get_mut(group) {
                    *r = r.saturating_sub(1);
                    if *r == 0 {
                        self.deps.locked[usize::from(t)] = false;
                    }
                }
                Ok((
                    format!(
                        "[{} + {} + {disp}]",
                        crate::isa::reg_name(base, 64),
                        crate::isa::reg_name(t, 64)
                    ),
                    vec![base, t],
                ))
            }
        }
    }

    fn group_class(&self, group: usize) -> usize {
        self.cur_groups.get(group).map(|g| g.class).unwrap_or(0)
    }
}

impl Renderer<'_> {
    fn template(
        &mut self,
        t: &'static Template,
        mem: Option<&Mem>,
        rep_count: u64,
        rep_long_mask: u32,
    ) -> Result<()> {
        match t.special {
            Special::JmpNext => {
                self.line(t.asm);
                self.commit(&[], &[], u64::from(t.len));
                return Ok(());
            }
            Special::Rep => return self.rep(t, rep_count, rep_long_mask),
            _ => {}
        }
        let asm = if self.vex {
            t.vex.unwrap_or(t.asm)
        } else {
            t.asm
        };
        let mut reads: Vec<Reg> = Vec::new();
        let mut writes: Vec<Reg> = Vec::new();
        let mut rendered: Vec<String> = Vec::new();
        let mut mem_text = String::new();
        let mut mem_disp = 0u64;
        let mut bytes = u64::from(t.len);
        // `xor r, r` and kin do not read r (Valgrind, like the CPU, folds them to a constant): with
        // the same register twice they would be pure writes the load-liveness rule does not see, and
        // a dependency the profile does not count. Their operands get distinct registers.
        let mnemonic = asm.split_whitespace().next().unwrap_or("");
        let idiom = matches!(
            mnemonic,
            "xor" | "sub" | "sbb" | "pxor" | "vpxor" | "pcmpeqb" | "vpcmpeqb" | "xorps"
        );
        let mut chosen: Vec<Reg> = t.forbid.to_vec();
        let mut address: Vec<Reg> = Vec::new();
        for arg in t.args {
            match *arg {
                Arg::G(bits, acc) => {
                    let r = self.choose(Kind::Gpr, acc, if idiom { &chosen } else { t.forbid });
                    chosen.push(r);
                    if acc.reads() {
                        reads.push(r);
                    }
                    if acc.writes() {
                        writes.push(r);
                    }
                    rendered.push(crate::isa::reg_name(r, u16::from(bits)));
                }
                Arg::X(acc) | Arg::Y(acc) => {
                    let r = self.choose(Kind::Vec, acc, if idiom { &chosen } else { &[] });
                    chosen.push(r);
                    if acc.reads() {
                        reads.push(r);
                    }
                    if acc.writes() {
                        writes.push(r);
                    }
                    let bits = if matches!(arg, Arg::Y(_)) { 256 } else { 128 };
                    rendered.push(crate::isa::reg_name(r, bits));
                }
                Arg::M(width) => {
                    let Some(m) = mem else {
                        bail!(
                            "internal error: template `{}` without a memory operand",
                            t.asm
                        );
                    };
                    // A divide by memory first makes its divisor odd, at the same address.
                    let uses = if t.special == Special::Div { 2 } else { 1 };
                    let (text, regs) = self.mem_uses(m, u64::from(width), uses)?;
                    mem_disp = match m {
                        Mem::Static { disp, .. } => *disp,
                        Mem::Window { .. } => 512,
                    };
                    address.extend(regs.iter().copied());
                    reads.extend(regs);
                    mem_text = text.clone();
                    rendered.push(text);
                }
                Arg::I(lo, hi) => {
                    rendered.push(self.rng.range(u64::from(lo), u64::from(hi)).to_string());
                }
            }
        }
        if mem.is_some() {
            bytes += 1 + disp_bytes(mem_disp);
        }
        for &(r, acc) in t.implicit {
            if acc.reads() {
                reads.push(r);
            }
            if acc.writes() {
                writes.push(r);
            }
        }
        let mut text = asm.to_string();
        for (i, r) in rendered.iter().enumerate() {
            text = text.replace(&format!("{{{i}}}"), r);
        }
        if t.special == Special::Div {
            // Divisor odd (never zero), dividend high half zero (quotient fits): the divide cannot fault.
            match t.args.first() {
                Some(Arg::G(..)) => {
                    let d = rendered.first().cloned().unwrap_or_default();
                    let dr = writes.first().copied().unwrap_or(RCX);
                    self.fixed(&format!("or {d}, 1"), &[dr], &[dr], 3);
                }
                _ => {
                    let regs: Vec<Reg> = reads.clone();
                    self.fixed(&format!("or dword ptr {mem_text}, 1"), &regs, &[], 5);
                }
            }
            self.fixed("xor edx, edx", &[], &[RDX], 2);
        }
        self.line(&text);
        let access = Access {
            loads: mem.is_some() && matches!(t.opnd, Opnd::Load | Opnd::Rmw),
            stores: mem.is_some() && matches!(t.opnd, Opnd::Store | Opnd::Rmw),
            address,
        };
        self.commit_access(&reads, &writes, flag_use(&text), bytes, &access);
        Ok(())
    }

    /// A memory operand used by `uses` instructions (the window stays live until the last).
    fn mem_uses(&mut self, m: &Mem, width: u64, uses: u32) -> Result<(String, Vec<Reg>)> {
        if let (Mem::Window { group, .. }, true) = (m, uses > 1) {
            if let Some(r) = self.remaining.get_mut(*group) {
                *r += uses - 1;
            }
        }
        let first = self.mem(m, width)?;
        for _ in 1..uses {
            self.mem(m, width)?;
        }
        Ok(first)
    }

    fn rep(&mut self, t: &'static Template, count: u64, long_mask: u32) -> Result<()> {
        let l = self.layout.clone();
        let movs = t.asm.contains("movs");
        let dst = l.rep_lo;
        let src = l.rep_lo + l.rep_half;
        // Two modes: the short mean on most executions, and on one in 2^k (the counter bits of
        // `long_mask` all clear) the long count that keeps the mean per execution at `count`.
        let split = self.plan.rep_modes(t.opnd).split.filter(|_| long_mask != 0);
        let (short, long) = match split {
            Some(sp) => {
                let period = f64::from((long_mask >> long_mask.trailing_zeros()) + 1);
                let short = sp.short_count.min(count).max(1);
                let long = (period * count as f64 - (period - 1.0) * short as f64).round();
                (short, (long as u64).clamp(short, l.rep_half.max(1)))
            }
            None => (count, count),
        };
        self.prove_data(Buffer::Priv, dst, dst + long)?;
        if split.is_some() {
            self.fixed(&format!("mov esi, {long}"), &[], &[RSI], 5);
        }
        self.fixed(&format!("lea rdi, [r15 + {dst}]"), &[R15], &[RDI], 7);
        if split.is_some() {
            self.fixed(&format!("mov ecx, {short}"), &[], &[RCX], 5);
            self.fixed(&format!("test ebx, {long_mask}"), &[RBX], &[], 6);
            self.fixed("cmovz ecx, esi", &[RCX, RSI], &[RCX], 3);
        }
        if movs {
            self.prove_data(Buffer::Priv, src, src + long)?;
            self.fixed(&format!("lea rsi, [r15 + {src}]"), &[R15], &[RSI], 7);
        }
        if split.is_none() {
            self.fixed(&format!("mov ecx, {count}"), &[], &[RCX], 5);
        }
        let reads: Vec<Reg> = t
            .implicit
            .iter()
            .filter(|(_, a)| a.reads())
            .map(|(r, _)| *r)
            .collect();
        let writes: Vec<Reg> = t
            .implicit
            .iter()
            .filter(|(_, a)| a.writes())
            .map(|(r, _)| *r)
            .collect();
        self.fixed(t.asm, &reads, &writes, u64::from(t.len));
        Ok(())
    }

    fn window(&mut self, group: usize) -> Result<()> {
        let g = self.cur_groups[group].clone();
        let src = if g.irregular { R10 } else { R11 };
        let s = crate::isa::reg_name(src, 64);
        let a = window_scale(g.count);
        let t = self.choose_temp();
        let tn = crate::isa::reg_name(t, 64);
        let text = match a {
            1 => format!("mov {tn}, {s}"),
            4 | 8 => format!("lea {tn}, [{s}*{a}]"),
            _ => format!("lea {tn}, [{s} + {s}*{}]", a - 1),
        };
        self.fixed(&text, &[src], &[t], if a == 1 { 3 } else { 8 });
        self.deps.locked[usize::from(t)] = true;
        self.temps[group] = Some(t);
        Ok(())
    }

    fn window_mask(&mut self, group: usize) -> Result<()> {
        let g = &self.cur_groups[group];
        let mask = self.plan.data_classes[g.class].size - LINE;
        let Some(t) = self.temps.get(group).copied().flatten() else {
            bail!("internal error: window mask before its offset");
        };
        let tn = crate::isa::reg_name(t, 64);
        self.fixed(&format!("and {tn}, {mask}"), &[t], &[t], 7);
        self.masked[group] = true;
        Ok(())
    }

    fn choose_temp(&mut self) -> Reg {
        let mut free: Vec<Reg> = TEMPS
            .iter()
            .copied()
            .filter(|r| !self.deps.locked[usize::from(*r)])
            .collect();
        // Not over the last carrier of a load while another temp is free (`Deps::carriers`).
        if free.iter().any(|r| !self.deps.last_carrier(*r)) {
            free.retain(|r| !self.deps.last_carrier(*r));
        }
        // Among the free temps, the one whose write fills the most short WAW and WAR bins (`choose`).
        let (d, w) = (&self.deps, self.w);
        let score = |r: Reg| {
            let i = usize::from(r);
            bin_gain(&d.waw, d.pos - d.last_w[i], w) + bin_gain(&d.war, d.pos - d.last_r[i], w)
        };
        free.iter()
            .copied()
            .max_by(|&a, &b| score(a).total_cmp(&score(b)).then(b.cmp(&a)))
            .unwrap_or(TEMPS[0])
    }

    /// `jmp rcx` to stub rax of `stubs`, each an 8-byte `jmp` to its target: code, not a data
    /// table, so the body reads no memory outside its buffers. Counts the three instructions before
    /// the stubs; what the stubs execute is the caller's to count.
    fn jump_through_stubs(&mut self, stubs: &str, targets: &[String]) {
        self.through_stub_table(stubs, Link::Jump);
        // Alignment padding after each `jmp` is never executed.
        let _ = writeln!(self.out, "    .p2align 3\n{stubs}:");
        for t in targets {
            let _ = writeln!(self.out, "    .p2align 3\n    jmp {t}");
        }
    }

    /// `jmp rcx`, executed in a trampoline of the file's trampoline table (`trampoline_table`)
    /// reached by a direct jump: two instructions. A predictor of indirect targets indexed by the
    /// jump's low address bits (cachegrind's: 512 entries, bits 0–8) sees each of the file's
    /// hottest 512 jumps on its own entry, where jumps spread over the code shared entries at
    /// random: the tuned memcached clone's 106 sites sat on 90 entries, and 46,719 of its
    /// single-target dispatches' 46,776 mispredictions were on shared ones. `key` (the label the
    /// jump's rcx was loaded from) names the trampoline.
    ///
    /// A `call` instead of the `jmp` (`Link::Call`) pushes the return address: the stub it lands on
    /// returns to the instruction after the call.
    fn via_trampoline(&mut self, key: &str, link: Link) {
        let trampoline = format!("{key}_t");
        match link {
            Link::Jump => self.fixed(&format!("jmp {trampoline}"), &[], &[], 5),
            Link::Call => self.fixed(&format!("call {trampoline}"), &[RSP], &[RSP], 5),
        }
        self.commit(&[RCX], &[], 2);
        self.trampolines.push((trampoline, self.w));
    }

    /// rcx = stub rax of the 8-byte stubs at `stubs`, then `via_trampoline`: three instructions.
    fn through_stub_table(&mut self, stubs: &str, link: Link) {
        self.fixed(&format!("lea rcx, [rip + {stubs}]"), &[], &[RCX], 7);
        self.fixed("lea rcx, [rcx + rax*8]", &[RCX, RAX], &[RCX], 4);
        self.via_trampoline(stubs, link);
    }

    /// The `ret` stubs of a dispatch linked by a call, in a section of their own (a stub inline
    /// after the call would be where it returns to), 8 bytes apart as `jump_through_stubs`'s; and
    /// the join, right after the call. Counts the one `ret` that runs.
    fn return_stubs(&mut self, stubs: &str, join: &str, targets: u32) {
        self.label(join);
        let _ = writeln!(
            self.out,
            "    .pushsection .text.ditto_stubs,\"ax\",@progbits\n    .p2align 3, 0xcc\n{stubs}:"
        );
        for i in 0..targets {
            if i > 0 {
                let _ = writeln!(self.out, "    .p2align 3, 0xcc");
            }
            let _ = writeln!(self.out, "    ret");
        }
        let _ = writeln!(self.out, "    .popsection");
        self.commit(&[RSP], &[RSP], 1);
        self.static_instrs += u64::from(targets) - 1;
    }

    /// An indirect jump (`Item::Indirect`): the target index into rax, the stub's address into rcx,
    /// `jmp rcx`. The targets are stubs of `jmp` to the join point (or of `ret` to it, when the
    /// trampoline was called: `Link::Call`), code rather than a data table, so the body reads no
    /// memory outside its buffers and its own stack; rax and rcx are dead at a chunk's start.
    fn dispatch(&mut self, d: Dispatch, link: Link) -> Result<()> {
        let id = format!(".L{}_d{}", self.name, self.static_instrs);
        let (stubs, join) = (format!("{id}_s"), format!("{id}_j"));
        match d {
            Dispatch::Fixed => {
                // A call lands on its one `ret` stub, a jump on the join itself.
                let target = match link {
                    Link::Call => &stubs,
                    Link::Jump => &join,
                };
                let o = self.layout.hdr_lo + HDR_ZERO;
                self.prove(Buffer::Priv, o, o + 8)?;
                self.fixed(&format!("lea rcx, [rip + {target}]"), &[], &[RCX], 7);
                self.fixed(
                    &format!("add rcx, qword ptr [r15 + {o}]"),
                    &[RCX, R15],
                    &[RCX],
                    4 + disp_bytes(o),
                );
                self.via_trampoline(target, link);
                match link {
                    Link::Call => self.return_stubs(&stubs, &join, 1),
                    Link::Jump => self.label(&join),
                }
                self.deps.carriers = [0; NREGS];
                return Ok(());
            }
            Dispatch::Two { mask, byte } => {
                let o = self.layout.hdr_lo + HDR_RNG + u64::from(byte);
                self.prove(Buffer::Priv, o, o + 4)?;
                self.fixed("xor eax, eax", &[], &[RAX], 2);
                self.fixed(
                    &format!("test dword ptr [r15 + {o}], {mask}"),
                    &[R15],
                    &[],
                    RANDOM_TEST_BYTES,
                );
                self.fixed("setz al", &[RAX], &[RAX], 3);
            }
            Dispatch::Uniform { targets } => {
                // Bits 32 and up of the word: the multiplicative generator's low bits have short
                // periods.
                let o = self.layout.hdr_lo + HDR_RNG + 4;
                self.prove(Buffer::Priv, o, o + 4)?;
                self.fixed(
                    &format!("mov eax, dword ptr [r15 + {o}]"),
                    &[R15],
                    &[RAX],
                    4 + disp_bytes(o),
                );
                self.fixed(&format!("and eax, {}", targets - 1), &[RAX], &[RAX], 3);
            }
        }
        if link == Link::Call {
            self.through_stub_table(&stubs, Link::Call);
            self.return_stubs(&stubs, &join, d.targets());
        } else {
            let targets = vec![join.clone(); d.targets() as usize];
            self.jump_through_stubs(&stubs, &targets);
            // One stub runs per execution; the others are static instructions only.
            self.commit(&[], &[], 2);
            self.static_instrs += u64::from(d.targets()) - 1;
            self.label(&join);
        }
        // The jump's target depends on a load: every load so far is live.
        self.deps.carriers = [0; NREGS];
        Ok(())
    }

    fn chunk(&mut self, c: &Chunk, labels: &ChunkLabels) -> Result<()> {
        // The chunk's register and immediate choices follow its own stream, as its composition does
        // (`Draws`): a chunk composed the same renders the same wherever the body changed.
        self.rng = Rng::new(self.seed, substream(c.stream, 5));
        self.cur_groups = c.groups.clone();
        self.temps = vec![None; c.groups.len()];
        self.masked = vec![false; c.groups.len()];
        self.remaining = c.groups.iter().map(|g| g.count).collect();
        self.label(&labels.me);
        for it in &c.items {
            match it {
                Item::Tpl {
                    t,
                    mem,
                    rep_count,
                    rep_long_mask,
                } => self.template(t, mem.as_ref(), *rep_count, *rep_long_mask)?,
                Item::Chase => {
                    // r12 ∈ {0, 64, …, chase_mask}: every node holds such an offset (init) and
                    // nothing else writes the nodes (`chase_overlay`).
                    let l = self.layout.clone();
                    self.prove(Buffer::Priv, l.chase_lo, l.chase_lo + l.chase_mask + 8)?;
                    self.fixed(
                        &format!("mov r12, qword ptr [r15 + r12 + {}]", l.chase_lo),
                        &[R15, R12],
                        &[R12],
                        8,
                    );
                }
                Item::Pattern { mask, jz, source } => {
                    match source {
                        BranchSource::Counter if *mask < 256 => {
                            self.fixed(&format!("test bl, {mask}"), &[RBX], &[], 3);
                        }
                        BranchSource::Counter => {
                            self.fixed(
                                &format!("test ebx, {mask}"),
                                &[RBX],
                                &[],
                                COUNTER_TEST_BYTES,
                            );
                        }
                        BranchSource::Field { multiplier, below } => {
                            // Any data register a write may take: the field is dead after the
                            // compare, and a locked one (a live window offset) is never chosen.
                            let t = self.choose(Kind::Gpr, Acc::W, &[]);
                            let tn = crate::isa::reg_name(t, 32);
                            let k = multiplier - 1;
                            let ext = u64::from(t >= R8);
                            let imm = |v: u32| if v < 128 { 3 } else { 6 };
                            self.fixed(
                                &format!("lea {tn}, [rbx + rbx*{k}]"),
                                &[RBX],
                                &[t],
                                3 + ext,
                            );
                            self.fixed(&format!("and {tn}, {mask}"), &[t], &[t], imm(*mask) + ext);
                            self.fixed(&format!("cmp {tn}, {below}"), &[t], &[], imm(*below) + ext);
                        }
                        BranchSource::Random { byte } => {
                            let o = self.layout.hdr_lo + HDR_RNG + u64::from(*byte);
                            self.prove(Buffer::Priv, o, o + 4)?;
                            // `mask` is the threshold here (`data_dependent_branch`).
                            self.fixed(
                                &format!("cmp dword ptr [r15 + {o}], {mask:#x}"),
                                &[R15],
                                &[],
                                RANDOM_TEST_BYTES,
                            );
                        }
                    }
                    let j = match (source, *jz) {
                        (BranchSource::Random { .. } | BranchSource::Field { .. }, true) => "jb",
                        (BranchSource::Random { .. } | BranchSource::Field { .. }, false) => "jae",
                        (BranchSource::Counter, true) => "jz",
                        (BranchSource::Counter, false) => "jnz",
                    };
                    self.fixed(&format!("{j} 1f\n1:"), &[], &[], 2);
                    // Labelled after the jump, whose two bytes then start 2 bytes before the label,
                    // so that the test and its jump stay on adjacent lines.
                    let free = *source == BranchSource::Counter
                        && (*mask == never_mask(true) || *mask == never_mask(false));
                    self.branch_site(predicted_taken_share(*mask, *source), free, 2);
                    // A side exit: the register state is observable here, every load is live.
                    self.deps.carriers = [0; NREGS];
                }
                Item::RngStep => {
                    let o = self.layout.hdr_lo + HDR_RNG;
                    self.prove(Buffer::Priv, o, o + 8)?;
                    self.fixed(
                        &format!("mov rax, qword ptr [r15 + {o}]"),
                        &[R15],
                        &[RAX],
                        7,
                    );
                    self.fixed(
                        &format!("imul rax, rax, {RNG_MULTIPLIER:#x}"),
                        &[RAX],
                        &[RAX],
                        7,
                    );
                    self.prove(Buffer::Priv, o, o + 8)?;
                    self.fixed(
                        &format!("mov qword ptr [r15 + {o}], rax"),
                        &[R15, RAX],
                        &[],
                        7,
                    );
                }
                Item::Indirect(d, link) => self.dispatch(*d, *link)?,
                Item::Window { group } => self.window(*group)?,
                Item::WindowMask { group } => self.window_mask(*group)?,
                Item::LoopEnd {
                    adv_p,
                    adv_q,
                    inc_b,
                } => {
                    if *adv_p {
                        self.fixed("add r11, 64", &[R11], &[R11], 4);
                    }
                    if *adv_q {
                        self.fixed("add r10, r11", &[R10, R11], &[R10], 3);
                    }
                    if *inc_b {
                        self.fixed("inc rbx", &[RBX], &[RBX], 3);
                    }
                    self.fixed("dec r13", &[R13], &[R13], 3);
                    self.branch_site(labels.loop_taken, false, 0);
                    match &labels.back {
                        Some(first) => self.fixed(&format!("jnz {first}"), &[], &[], 2),
                        None => self.fixed(&format!("jz {}", labels.done), &[], &[], 6),
                    }
                    self.deps.carriers = [0; NREGS];
                }
            }
        }
        // Windows are dead at the chunk's end.
        for r in TEMPS {
            self.deps.locked[usize::from(r)] = false;
        }
        Ok(())
    }
}

/// A "never" branch's mask: the bit that is always set when `taken` (with `jnz`), else always clear.
fn never_mask(taken: bool) -> u32 {
    1 << if taken { ALWAYS_BIT } else { NEVER_BIT }
}

/// A pattern branch's taken share as cachegrind's predictor sees it, `jz` or not: its condition's
/// positive form (ZF, CF) inverted (`never_branch`). ZF is set with probability 2^−k for k counter
/// bits that turn over within a run (bits from 2^18 up keep their start values), CF is the
/// threshold's share of the range.
fn predicted_taken_share(mask: u32, source: BranchSource) -> f64 {
    let positive = match source {
        BranchSource::Counter if mask == never_mask(true) => 0.0,
        BranchSource::Counter => 0.5f64.powi((mask & ((1 << 18) - 1)).count_ones() as i32),
        BranchSource::Field { below, .. } => f64::from(below) / (f64::from(mask) + 1.0),
        BranchSource::Random { .. } => f64::from(mask) / 2f64.powi(32),
    };
    1.0 - positive
}

/// Places the body's conditional branches (`Renderer::branches`) with `assembled` and turns the
/// free ones as `branch_orient::orient` chooses: a free branch tests bit 30 or bit 31 with the same
/// `test ebx, imm32`, so the layout stands.
fn orient_branches(
    text: &mut String,
    branches: &mut [(String, u64, branch_orient::Site)],
    assembled: &crate::encoding::Layout,
) -> Result<branch_orient::Orientation> {
    for (label, back, site) in branches.iter_mut() {
        let at = assembled
            .labels
            .get(label.as_str())
            .ok_or_else(|| anyhow::anyhow!("internal error: branch {label} was not laid out"))?
            .offset;
        site.offset = at.checked_sub(*back).ok_or_else(|| {
            anyhow::anyhow!("internal error: branch {label} starts before its section")
        })?;
    }
    let sites: Vec<branch_orient::Site> = branches.iter().map(|b| b.2).collect();
    let orientation = branch_orient::orient(&sites);
    let turned: std::collections::HashSet<&str> = branches
        .iter()
        .zip(&orientation.taken)
        .filter(|((_, _, s), &t)| s.free && (s.taken > 0.5) != t)
        .map(|((l, _, _), _)| l.as_str())
        .collect();
    if turned.is_empty() {
        return Ok(orientation);
    }
    let (taken, not_taken) = (
        format!("    test ebx, {}\n", never_mask(true)),
        format!("    test ebx, {}\n", never_mask(false)),
    );
    // A free branch's label follows `test ebx, MASK`, `jnz 1f` and `1:`.
    let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
    for i in 0..lines.len() {
        let is_turned = lines[i]
            .strip_suffix(":\n")
            .is_some_and(|label| turned.contains(label));
        if !is_turned {
            continue;
        }
        let test = i
            .checked_sub(3)
            .map(|t| (t, lines[t]))
            .filter(|(_, l)| *l == taken || *l == not_taken);
        let Some((t, line)) = test else {
            bail!(
                "internal error: no never test before free branch {}",
                lines[i].trim()
            );
        };
        lines[t] = if line == taken { &not_taken } else { &taken };
    }
    *text = lines.concat();
    Ok(orientation)
}

struct ChunkLabels {
    me: String,
    /// Set on the last chunk of a ring: loop back here while the count lasts.
    back: Option<String>,
    done: String,
    /// The share of its loop branch's executions that are taken (`loop_taken_share`).
    loop_taken: f64,
}

/// Synthesises one cluster's body. `name` must be a C identifier fragment.
pub fn synthesize(name: &str, plan: &BodyPlan, knobs: &Knobs, seed: u64) -> Result<ClusterAsm> {
    // Bytes off (or onto) each chunk's budget, by block origin; grown until every block occupies
    // the lines it was planned for, as GNU as will lay it out.
    let mut trim: Vec<i64> = Vec::new();
    let mut best: Option<(usize, ClusterAsm)> = None;
    for round in 1..=FIT_ROUNDS {
        let (mut asm, fits) = synthesize_trimmed(name, plan, knobs, seed, &trim)?;
        let misfits = fits.iter().filter(|f| f.correction() != 0).count();
        let done = misfits == 0;
        asm.stats.fit = (round, misfits);
        if best.as_ref().is_none_or(|(m, _)| misfits < *m) {
            best = Some((misfits, asm));
        }
        if done {
            break;
        }
        for f in &fits {
            if trim.len() <= f.origin {
                trim.resize(f.origin + 1, 0);
            }
            trim[f.origin] += f.correction();
        }
    }
    let (_, asm) = best.ok_or_else(|| anyhow::anyhow!("internal error: no synthesis round ran"))?;
    Ok(asm)
}

/// Rounds of composition `synthesize` tries for every block to fit its lines.
const FIT_ROUNDS: usize = 8;

/// How far inside its limit an overflowing block's budget is aimed (`BlockFit::correction`).
const FIT_HEADROOM: i64 = 8;

/// The smallest budget a chunk is composed for: its loop control and a few instructions.
const MIN_CHUNK_BYTES: i64 = 16;

/// One block as assembled: its planned bytes, ring and the bytes from its first chunk to its end
/// (`encoding::layout`).
#[derive(Debug, Clone, Copy)]
struct BlockFit {
    origin: usize,
    bytes: u64,
    ring: u64,
    assembled: u64,
}

impl BlockFit {
    /// Bytes to take off each of its chunks' budgets (negative: to add) so that the block occupies
    /// its planned lines: more than bytes − 64 and at most bytes, or, for a ring of more than 64
    /// lines, within one line in 64 of them (a chunk's size moves by whole instructions, and a
    /// 1,024-line ring a few lines off its plan changes its footprint by a fraction of a percent).
    /// 0 when it does.
    fn correction(&self) -> i64 {
        let ring = self.ring.max(1) as i64;
        let (bytes, got) = (self.bytes as i64, self.assembled as i64);
        let slack = (bytes / 64).max(LINE as i64) - LINE as i64;
        if got > bytes + slack {
            // Aimed a few bytes inside the limit: a chunk's composition stops at the instruction
            // that crosses its budget, so a budget cut by the overflow alone often gives it back.
            (got - bytes + FIT_HEADROOM + ring - 1) / ring
        } else if got <= bytes - LINE as i64 - slack {
            -((bytes - LINE as i64 - got) / ring + 1)
        } else {
            0
        }
    }
}

/// One composition and rendering of a body, with each chunk's byte budget moved by `trim` (by
/// block origin), and how each block came out once assembled.
fn synthesize_trimmed(
    name: &str,
    plan: &BodyPlan,
    knobs: &Knobs,
    seed: u64,
    trim: &[i64],
) -> Result<(ClusterAsm, Vec<BlockFit>)> {
    let mut rng = Rng::new(seed, stream_id(name));
    let classes = &plan.data_classes;
    if classes.is_empty() {
        bail!("internal error: no data classes for {name}");
    }
    let mix_keys: Vec<(Class, Opnd)> = plan.mix.iter().map(|m| m.0).collect();
    let mix_shares: Vec<f64> = plan.mix.iter().map(|m| m.1).collect();
    let uses = |c: Class| plan.mix.iter().any(|m| m.0 .0 == c && m.1 > 0.0);
    let vex = uses(Class::Simd256);
    let x87 = uses(Class::X87);
    let fp = uses(Class::Fp) || uses(Class::Simd128) || uses(Class::Simd256);

    // Chase region: see `plan::chase_class`.
    let chase_class = crate::plan::chase_class(classes);

    // Blocks: sizes from equation 2, cut into power-of-two rings of chunks.
    let mean_len = plan.mean_instruction_bytes;
    let chunk_target = knobs.limits.chunk_instructions as f64 * mean_len;
    let overhead_fixed = 40.0;
    let mut blocks: Vec<Block> = Vec::new();
    let n_blocks_est = plan.blocks.len() as f64;
    let body_instrs = (plan.instructions - overhead_fixed - 12.0 * n_blocks_est).max(16.0);
    let mut carried = 0.0;
    for b in &plan.blocks {
        let mut ring = 1u64;
        while (b.bytes / (ring * 2)) as f64 >= chunk_target {
            ring *= 2;
        }
        let d = b.share * body_instrs;
        // A block that owes less than half a chunk a call is cut into smaller chunks (down to a
        // line) so that it still runs one a call. Its fetches are the far ones: memcached's request
        // body owed 1.2 % of its instructions (23 a call) to code reused at 32-64 KiB, less than
        // half its 48-instruction chunks, and handing them to the 64-byte loop left the clone
        // missing a 32 KiB L1i on a sixth of the original's fetches.
        while (b.bytes / ring) as f64 / mean_len > 2.0 * d && b.bytes / (ring * 2) >= LINE {
            ring *= 2;
        }
        let per_chunk = (b.bytes / ring) as f64 / mean_len;
        let x = (d / per_chunk).round() as u64;
        if x == 0 && b.bytes > LINE {
            carried += d; // too little for one chunk: executed by the 64-byte block instead
            continue;
        }
        blocks.push(Block {
            working_set: b.target,
            bytes: b.bytes,
            share: b.share,
            planned_x: x.max(1),
            x: 0,
            dyn_target: d,
            ring_chunks: ring,
            chunks: Vec::with_capacity(ring as usize),
            absorbs: false,
            origin: 0,
        });
    }
    if carried > 0.0 || blocks.is_empty() {
        match blocks.iter_mut().find(|b| b.working_set == LINE) {
            Some(b) => {
                b.dyn_target += carried;
                b.share += carried / body_instrs;
                b.planned_x = ((b.dyn_target / (LINE as f64 / mean_len)).round() as u64).max(1);
            }
            None => {
                let d = carried.max(16.0);
                blocks.insert(
                    0,
                    Block {
                        working_set: LINE,
                        bytes: LINE,
                        share: d / body_instrs,
                        planned_x: ((d / (LINE as f64 / mean_len)).round() as u64).max(1),
                        x: 0,
                        dyn_target: d,
                        ring_chunks: 1,
                        chunks: Vec::new(),
                        absorbs: false,
                        origin: 0,
                    },
                );
            }
        }
    }
    for (i, b) in blocks.iter_mut().enumerate() {
        b.origin = i;
    }
    let body_stream = stream_id(name) ^ 0x636f_6d70;
    let buffer_split = Deficit::new(&[1.0 - plan.shared_fraction, plan.shared_fraction]);
    let mut comp = Composer {
        plan,
        knobs,
        seed,
        body_stream,
        // Replaced at every chunk (`Composer::chunk`).
        draws: Draws::for_chunk(seed, body_stream),
        mix: Deficit::new(&mix_shares),
        mix_keys: mix_keys.clone(),
        data: Deficit::new(&classes.iter().map(|c| c.share).collect::<Vec<_>>()),
        buffer: buffer_split.clone(),
        class_buffer: classes
            .iter()
            .map(|c| {
                (c.first_touch || c.target > knobs.data_working_set.tail_from_bytes)
                    .then(|| buffer_split.clone())
            })
            .collect(),
        regular: Deficit::new(&[plan.regular_fraction, 1.0 - plan.regular_fraction]),
        chase: Deficit::new(&[1.0 - plan.chase_fraction, plan.chase_fraction]),
        first_touch_by_store: [0.0; 2],
        taken: Deficit::new(&plan.taken_bins),
        majority: vec![[0.0; 2]; plan.taken_bins.len()],
        transition: Deficit::new(&plan.transition_bins),
        pairs: Deficit::new(&comonotone_coupling(
            &plan.taken_bins,
            &plan.transition_bins,
        )),
        indirect: Deficit::new(&Dispatch::realisable_bins(&plan.indirect_change_bins)),
        indirect_acc: 0.0,
        dispatch_len: mean_len,
        indirect_execs: 0.0,
        indirect_changes: 0.0,
        rep_execs: [0.0; 2],
        rep_iterations: [0.0; 2],
        realised_mix: BTreeMap::new(),
        cond_acc: 0.0,
        density: 1.0,
        chase_class,
        header_class: (0..classes.len())
            .min_by_key(|&k| classes[k].size)
            .filter(|&k| classes[k].size <= LINE),
        cond_weight: 0.0,
        repeated_weight: 0.0,
        static_cond: 0,
        static_cursor: vec![0; classes.len()],
        used_shared: false,
    };
    let swept = blocks
        .iter()
        .filter(|b| b.ring() > 1 && b.planned_x < b.ring())
        .count();
    // On the profile's figures, not the knobs' (`BodyPlan::profiled_instructions`).
    let fine = fine_windows(
        expected_mispredictions(
            plan.profiled_instructions,
            plan.cond_branch_ratio,
            &plan.profiled_transition_bins,
        ),
        swept,
    );
    let absorber = align_windows(&mut blocks, mean_len, fine);
    let ring_entries = blocks
        .iter()
        .filter(|b| enters_mid_ring(b.ring(), b.planned_x))
        .count() as f64;
    comp.charge_ring_entries(ring_entries);
    // Heaviest chunks first: they get the proportional draws, light ones settle the remainder.
    let mut order: Vec<usize> = (0..blocks.len()).collect();
    order.sort_by(|&a, &b| {
        let wa = blocks[a].planned_x as f64 / blocks[a].ring() as f64;
        let wb = blocks[b].planned_x as f64 / blocks[b].ring() as f64;
        wb.partial_cmp(&wa)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.cmp(&b))
    });
    let shapes: Vec<BlockShape> = blocks
        .iter()
        .map(|b| {
            let ring = b.ring();
            let chunk_instrs = (b.bytes / ring) as f64 / mean_len;
            BlockShape {
                runs_per_chunk: b.planned_x as f64 / ring as f64,
                static_instrs: chunk_instrs * ring as f64,
                chunks: ring,
            }
        })
        .collect();
    // Chunks are cut by bytes at the profile's mean instruction length, and the clone's instructions
    // are longer (nginx: 5.3 bytes against 3.7), so the densities' static estimate is off (nginx:
    // 701 static branches against 1,091). The target is corrected by a ratio step, recomposing from
    // the same state, when the count is more than 10 % off; and when the previous pass's dispatch
    // executions call for another dispatch length (`dispatch_length`), at most `COMPOSE_PASSES` in all.
    let aligned = absorber.is_some();
    let (comp_start, blocks_start) = (comp.clone(), blocks.clone());
    let want = plan.static_branches as f64;
    let mut static_target = plan.static_branches;
    let mut dispatch_len = mean_len;
    let want_dynamic = plan.instructions * plan.cond_branch_ratio;
    let mut level = 1.0;
    for pass in 0..COMPOSE_PASSES {
        if pass > 0 {
            let got = comp.static_cond as f64;
            let density_ok = want == 0.0 || got == 0.0 || (got - want).abs() <= 0.1 * want;
            // Counted as the body will run: `settle_windows` hands what the rings' aligned counts
            // leave to the single-chunk loops, whose branches are the densest.
            let mut settled = blocks.clone();
            if absorber.is_some() {
                settle_windows(&mut settled, fine);
            }
            let dynamic = executions_per_call(&settled, |i| {
                matches!(i, Item::Pattern { .. } | Item::LoopEnd { .. })
            });
            let next_level = branch_level(level, dynamic, want_dynamic);
            let composed_len = dispatch_length(
                dispatch_len,
                executions_per_call(&settled, |i| matches!(i, Item::Indirect(..))),
                plan.indirect_ratio * plan.instructions - ring_entries,
                mean_len,
            );
            if density_ok && next_level == level && composed_len == dispatch_len {
                break;
            }
            if !density_ok {
                static_target = (static_target as f64 * want / got).round() as u64;
            }
            level = next_level;
            dispatch_len = composed_len;
            comp = comp_start.clone();
            blocks = blocks_start.clone();
        }
        comp.dispatch_len = dispatch_len;
        let densities = branch_densities(&shapes, plan.cond_branch_ratio, static_target, level);
        for &bi in &order {
            comp.density = densities[bi];
            let ring = blocks[bi].ring();
            let trimmed =
                (blocks[bi].bytes / ring) as i64 - trim.get(blocks[bi].origin).unwrap_or(&0);
            let chunk_bytes = trimmed.max(MIN_CHUNK_BYTES) as u64;
            let w = blocks[bi].planned_x as f64 / ring as f64;
            let x = blocks[bi].planned_x;
            let mut chunks = Vec::with_capacity(ring as usize);
            for j in 0..ring {
                let rate = loop_exit_rate(j, x, ring, aligned);
                let majority_taken = loop_taken_share(j, x, ring, aligned) > 0.5;
                let stream = Draws::chunk_stream(comp.body_stream, bi, j);
                chunks.push(comp.chunk(chunk_bytes, w, rate, majority_taken, ring, stream));
            }
            let b = &mut blocks[bi];
            b.chunks = chunks;
            // Rings and the absorber are settled below once every chunk is known.
            b.x = ((b.dyn_target / mean_chunk_instrs(b).max(1.0)).round() as u64)
                .clamp(1, (1 << 31) - 1);
        }
    }
    if let Some(k) = absorber {
        settle_windows(&mut blocks, fine);
        blocks[k].absorbs = true;
    }
    // The order the blocks are rendered in, which the register choice's running distances follow
    // (`Deps`); their order in the code is the plan's (`code_order`).
    rng.shuffle(&mut blocks);

    // Layout of the private buffer: class regions (+ slack), chase chain, rep scratch, header.
    let class_top = classes.iter().map(|c| c.lo + c.size).max().unwrap_or(LINE);
    let overlay = chase_overlay(classes, chase_class);
    let chase_size = if overlay.is_some() {
        LINE
    } else {
        plan.chase_bytes.max(LINE).next_power_of_two()
    };
    let chase_mask = chase_size - LINE;
    let after_classes = align(class_top + SLACK, LINE);
    let chase_lo = overlay.map(|line| line + LINE - 8).unwrap_or(after_classes);
    let rep_half = align(knobs.limits.max_rep_count, LINE);
    let rep_lo = after_classes + if overlay.is_some() { 0 } else { chase_size };
    let hdr_lo = rep_lo + 2 * rep_half;
    let counter_lo = hdr_lo + HDR_COUNTERS;
    let priv_bytes = align(counter_lo + 8 * blocks.len() as u64, LINE);
    let shared_bytes = if comp.used_shared {
        align(class_top + SLACK, LINE)
    } else {
        0
    };
    let layout = Layout {
        class_top,
        chase_lo,
        chase_mask,
        rep_lo,
        rep_half,
        hdr_lo,
        counter_lo,
        priv_bytes,
        shared_bytes,
    };

    let body_symbol = format!("ditto_body_{name}");
    let init_symbol = format!("ditto_body_init_{name}");
    let mut r = Renderer {
        name: name.to_string(),
        plan,
        layout: layout.clone(),
        seed,
        rng: Rng::new(seed, stream_id(name) ^ 0x7265_6e64),
        deps: Deps::new(plan),
        out: String::new(),
        proofs: Vec::new(),
        vex,
        w: 1.0,
        temps: Vec::new(),
        remaining: Vec::new(),
        cur_groups: Vec::new(),
        masked: Vec::new(),
        static_instrs: 0,
        len_acc: (0.0, 0.0),
        trampolines: Vec::new(),
        branches: Vec::new(),
    };

    // ---- body function
    let _ = writeln!(
        r.out,
        "\n// ---- cluster {name}: {:.0} instructions per call, {} blocks\n    .text\n    .globl {body_symbol}\n    .type {body_symbol}, @function\n    .p2align {CODE_ALIGN_LOG2}\n{body_symbol}:",
        plan.instructions,
        blocks.len()
    );
    let mut prologue_instrs = 0u64;
    {
        let before = r.static_instrs;
        for reg in [RBX, RBP, R12, R13, R14, R15] {
            let n = crate::isa::reg_name(reg, 64);
            r.fixed(&format!("push {n}"), &[reg], &[], 2);
        }
        // 8 (return address) + 6 pushes + 8 = 64: the frame stays 16-byte aligned.
        r.fixed("sub rsp, 8", &[], &[], 4);
        r.prove(Buffer::Ctx, 0, 8)?;
        r.fixed("mov r15, qword ptr [rdi]", &[RDI], &[R15], 3);
        r.prove(Buffer::Ctx, 8, 16)?;
        r.fixed("mov r14, qword ptr [rdi + 8]", &[RDI], &[R14], 4);
        if fp {
            // Denormals are flushed (FTZ|DAZ) while the body runs: arbitrary buffer bits must not
            // trigger microcode assists the original never had. The caller's MXCSR is restored.
            r.prove(Buffer::Stack, 0, 4)?;
            r.fixed("stmxcsr dword ptr [rsp]", &[], &[], 4);
            r.prove(Buffer::Stack, 0, 4)?;
            r.fixed("mov eax, dword ptr [rsp]", &[], &[RAX], 3);
            r.fixed("or eax, 0x8040", &[RAX], &[RAX], 5);
            r.prove(Buffer::Stack, 4, 8)?;
            r.fixed("mov dword ptr [rsp + 4], eax", &[RAX], &[], 4);
            r.prove(Buffer::Stack, 4, 8)?;
            r.fixed("ldmxcsr dword ptr [rsp + 4]", &[], &[], 5);
        }
        if x87 {
            r.fixed("fldz", &[], &[], 2);
            r.fixed("fldz", &[], &[], 2);
        }
        for (off, reg) in [(HDR_RP, R11), (HDR_RQ, R10), (HDR_CHASE, R12)] {
            let o = layout.hdr_lo + off;
            r.prove(Buffer::Priv, o, o + 8)?;
            let n = crate::isa::reg_name(reg, 64);
            r.fixed(
                &format!("mov {n}, qword ptr [r15 + {o}]"),
                &[R15],
                &[reg],
                7,
            );
        }
        r.fixed(
            &format!("and r12, {}", layout.chase_mask),
            &[R12],
            &[R12],
            7,
        );
        // Registers start defined: the body's behaviour never depends on what the caller left.
        for reg in GPR_POOL {
            let n = crate::isa::reg_name(reg, 32);
            r.fixed(&format!("xor {n}, {n}"), &[], &[reg], 2);
        }
        if vex {
            let all: Vec<Reg> = (XMM0..XMM0 + 16).collect();
            r.fixed("vzeroall", &[], &all, 3);
        } else if fp {
            for v in 0..16u8 {
                r.fixed(&format!("pxor xmm{v}, xmm{v}"), &[], &[XMM0 + v], 4);
            }
        }
        prologue_instrs += r.static_instrs - before;
    }
    // The absorber's loop count takes what the rest of the call leaves of its instructions: the
    // prologue (rendered), the epilogue, every block's entry and every other block's runs. Estimated
    // instead (40 + 12 per block, `body_instrs`), the fixed code came out 60 instructions lighter than
    // assumed and memcached's worker body ran 1,719 of its 1,797 instructions per call.
    if let Some(k) = blocks.iter().position(|b| b.absorbs) {
        let fixed = prologue_instrs + epilogue_instrs(x87, fp, vex);
        let entries: u64 = blocks.iter().map(Block::entry_instrs).sum();
        let others: f64 = blocks
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != k)
            .map(|(_, b)| b.x as f64 * mean_chunk_instrs(b))
            .sum();
        let per_run = mean_chunk_instrs(&blocks[k]).max(1.0);
        let left = plan.instructions - (fixed + entries) as f64 - others;
        blocks[k].x = ((left / per_run).round().max(1.0) as u64).min((1 << 31) - 1);
    }
    settle_rep_counts(&mut blocks, plan, knobs.limits.max_rep_count);

    let mut entry_instrs = 0f64;
    let mut block_stats = Vec::new();
    let mut dynamic = 0f64;
    let mut block_texts = Vec::with_capacity(blocks.len());
    for (bi, b) in blocks.iter().enumerate() {
        let text_start = r.out.len();
        let ring = b.ring();
        let w_chunk = b.x as f64 / ring as f64;
        let lbl = |s: &str| format!(".L{name}_b{bi}_{s}");
        let done = lbl("done");
        r.w = 1.0;
        let before = r.static_instrs;
        let _ = writeln!(
            r.out,
            "// block {bi}: {} bytes, {ring} chunk(s), {} chunk executions per call",
            b.bytes, b.x
        );
        if b.uses_counter() {
            // rbx counts this block's chunk executions across calls; its low bits are the ring
            // position, so the next call resumes where this one stops.
            let slot = layout.counter_lo + 8 * bi as u64;
            r.prove(Buffer::Priv, slot, slot + 8)?;
            r.fixed(
                &format!("mov rbx, qword ptr [r15 + {slot}]"),
                &[R15],
                &[RBX],
                7,
            );
            r.fixed(&format!("lea rcx, [rbx + {}]", b.x), &[RBX], &[RCX], 7);
            r.prove(Buffer::Priv, slot, slot + 8)?;
            r.fixed(
                &format!("mov qword ptr [r15 + {slot}], rcx"),
                &[R15, RCX],
                &[],
                7,
            );
        }
        r.fixed(&format!("mov r13d, {}", b.x), &[], &[R13], 6);
        // The counter starts at a multiple of the ring (init), so a window of whole laps always
        // enters at chunk 0.
        let indirect = b.enters_indirectly();
        if indirect {
            r.fixed("mov eax, ebx", &[RBX], &[RAX], 2);
            r.fixed(&format!("and eax, {}", ring - 1), &[RAX], &[RAX], 3);
            let chunks: Vec<String> = (0..ring).map(|j| lbl(&format!("c{j}"))).collect();
            r.jump_through_stubs(&lbl("stubs"), &chunks);
        } else if block_align_log2(b.bytes) > 7 {
            // Padding of up to the block's alignment follows: a jump over more than 127 bytes
            // grows, and where growing moves the next boundary GNU as and `encoding::layout` can
            // settle on different sizes. A 32-bit displacement is the same for both.
            r.fixed(&format!("{{disp32}} jmp {}", lbl("c0")), &[], &[], 5);
        } else {
            r.fixed(&format!("jmp {}", lbl("c0")), &[], &[], 2);
        }
        let entered = r.static_instrs - before + u64::from(indirect);
        debug_assert_eq!(entered, b.entry_instrs(), "block {bi}'s entry");
        entry_instrs += entered as f64;
        // At a multiple of its size (`CODE_ALIGN_LOG2`); the padding follows a jump.
        let _ = writeln!(r.out, "    .p2align {}", block_align_log2(b.bytes));
        let before_chunks = r.static_instrs;
        r.w = w_chunk;
        for (j, c) in b.chunks.iter().enumerate() {
            let labels = ChunkLabels {
                me: lbl(&format!("c{j}")),
                back: (j as u64 == ring - 1).then(|| lbl("c0")),
                done: done.clone(),
                loop_taken: loop_taken_share(j as u64, b.x, ring, aligned),
            };
            r.chunk(c, &labels)?;
            dynamic += c.instrs as f64 * w_chunk;
        }
        let _ = before_chunks;
        r.label(&done);
        block_stats.push(BlockStats {
            working_set: b.working_set,
            bytes: b.bytes,
            chunks: ring,
            runs_per_call: b.x,
            target_share: b.share,
            instructions: b.chunks.iter().map(|c| c.instrs).sum::<u64>() as f64 * w_chunk,
            assembled_bytes: 0,
        });
        block_texts.push(r.out.split_off(text_start));
    }
    // Each block's text runs from its entry to its `_done` label and falls into the next one's,
    // so any order is a valid body; each call runs the blocks in code order.
    for bi in code_order(&blocks) {
        r.out.push_str(&block_texts[bi]);
    }
    // ---- epilogue
    r.w = 1.0;
    let before = r.static_instrs;
    for (off, reg) in [(HDR_RP, R11), (HDR_RQ, R10), (HDR_CHASE, R12)] {
        let o = layout.hdr_lo + off;
        r.prove(Buffer::Priv, o, o + 8)?;
        let n = crate::isa::reg_name(reg, 64);
        r.fixed(
            &format!("mov qword ptr [r15 + {o}], {n}"),
            &[R15, reg],
            &[],
            7,
        );
    }
    if x87 {
        r.fixed("fstp st(0)", &[], &[], 2);
        r.fixed("fstp st(0)", &[], &[], 2);
    }
    if fp {
        r.prove(Buffer::Stack, 0, 4)?;
        r.fixed("ldmxcsr dword ptr [rsp]", &[], &[], 4);
    }
    if vex {
        // The ABI wants clean upper halves on return; also avoids SSE/AVX transition stalls.
        r.fixed("vzeroupper", &[], &[], 3);
    }
    r.fixed("add rsp, 8", &[], &[], 4);
    for reg in [R15, R14, R13, R12, RBP, RBX] {
        let n = crate::isa::reg_name(reg, 64);
        r.fixed(&format!("pop {n}"), &[], &[reg], 2);
    }
    r.fixed("ret", &[], &[], 1);
    debug_assert_eq!(r.static_instrs - before, epilogue_instrs(x87, fp, vex));
    prologue_instrs += r.static_instrs - before;
    let _ = writeln!(r.out, "    .size {body_symbol}, .-{body_symbol}");
    dynamic += prologue_instrs as f64 + entry_instrs;

    // ---- init function: start the block counters at spread-out phases and build the chase chain (the
    // buffers arrive zeroed, `ditto_body_fn`'s contract; zeroing them here again would be one
    // `rep stosb` that a profiler counts as one store per byte, dwarfing a short run's body): node i holds the offset of node (5·i + c) mod n, a full-period LCG
    // (Hull–Dobell: multiplier ≡ 1 mod 4, c odd, n a power of two), so the chain is one cycle through
    // every line of the region.
    let lines = chase_size / LINE;
    let c_odd = 2 * rng.below(lines.max(1)) + 1;
    let _ = write!(
        r.out,
        "\n    .globl {init_symbol}\n    .type {init_symbol}, @function\n    .p2align 4\n{init_symbol}:\n\
         \x20   mov r8, qword ptr [rdi]\n"
    );
    // rP (and with it rQ) starts at a line-aligned phase drawn from the thread's stream
    // (`ctx->stream`), so that the threads' walks over a shared region are apart. Started
    // together, the threads went over each line one after another and only the first missed:
    // memcached's clone missed its L2 on 0.25 of the accesses to its 8 MiB shared region (four
    // workers), and on 0.92 with the phases apart (validation/bench/miss-attribution.sh).
    let _ = write!(
        r.out,
        "    mov rax, qword ptr [rdi + {CTX_STREAM_OFFSET}]\n\
         \x20   movabs rcx, {PHASE_MULTIPLIER:#x}\n\
         \x20   imul rax, rcx\n\
         \x20   and rax, -64\n\
         \x20   mov qword ptr [r8 + {}], rax\n",
        hdr_lo + HDR_RP
    );
    // Block i's counter starts at i · 0x9E3779B97F4A7C15 (spread-out pattern phases) with its ring
    // bits cleared, so its windows start aligned (`aligned_runs`), bits 29 and 30 cleared and bit 31
    // set, so that bit 30 stays clear and bit 31 set, as the "never" branches test them
    // (`never_branch`), for at least 2^29 chunk executions. (With them left as they came, four of a
    // ws_data clone's five blocks started with bit 30 set, and their `jz` patterns, meant to be
    // always taken, never were: the round trip measured 25 % of its branch executions taken more
    // often than not against 99.8 %.)
    for (i, b) in blocks.iter().enumerate() {
        let phase = (i as u64).wrapping_mul(PHASE_MULTIPLIER)
            & !(b.ring().max(1) - 1)
            & !(0b11 << (NEVER_BIT - 1))
            | 1 << ALWAYS_BIT;
        let slot = counter_lo + 8 * i as u64;
        let _ = write!(
            r.out,
            "    movabs rax, {phase:#x}\n\
             \x20   mov qword ptr [r8 + {slot}], rax\n"
        );
    }
    // The pseudo-random word starts odd (a multiplicative generator's state must be); the zero word
    // is 0.
    let rng_seed = rng.next_u64() | 1;
    let _ = write!(
        r.out,
        "    movabs rax, {rng_seed:#x}\n\
         \x20   mov qword ptr [r8 + {}], rax\n\
         \x20   mov qword ptr [r8 + {}], 0\n",
        hdr_lo + HDR_RNG,
        hdr_lo + HDR_ZERO
    );
    let _ = write!(
        r.out,
        "    lea rdi, [r8 + {chase_lo}]\n\
         \x20   xor ecx, ecx\n\
         2:  imul rax, rcx, 5\n\
         \x20   add rax, {c_odd}\n\
         \x20   and rax, {}\n\
         \x20   shl rax, 6\n\
         \x20   mov rdx, rcx\n\
         \x20   shl rdx, 6\n\
         \x20   mov qword ptr [rdi + rdx], rax\n\
         \x20   inc rcx\n\
         \x20   cmp rcx, {lines}\n\
         \x20   jb 2b\n\
         \x20   ret\n\
         \x20   .size {init_symbol}, .-{init_symbol}\n",
        lines - 1
    );

    // ---- the free branches' directions, on the laid-out text
    let assembled = crate::encoding::layout(&r.out)
        .with_context(|| format!("laying out the body of cluster {name}"))?;
    let orientation = orient_branches(&mut r.out, &mut r.branches, &assembled)?;
    if let Some(m) = comp.majority.last_mut() {
        m[1] = (m[1] + orientation.taken_runs.1 - orientation.taken_runs.0).max(0.0);
    }

    // ---- statistics
    let mut mix_stats = BTreeMap::new();
    let total_mix: f64 = comp.realised_mix.values().sum();
    for (k, share) in &plan.mix {
        mix_stats.insert(*k, (*share, 0.0));
    }
    // The folded branch/reg target holds the calls and returns that dispatches make (`Link::Call`).
    if plan.call_ratio > 0.0 {
        if let Some(reg) = mix_stats.get_mut(&(Class::Branch, Opnd::Reg)) {
            let calls = plan.call_ratio.min(reg.0 / 2.0);
            reg.0 -= 2.0 * calls;
            mix_stats.insert((Class::Branch, Opnd::Store), (calls, 0.0));
            mix_stats.insert((Class::Branch, Opnd::Load), (calls, 0.0));
        }
    }
    for (k, v) in &comp.realised_mix {
        mix_stats.entry(*k).or_insert((0.0, 0.0)).1 = v / total_mix.max(1e-12);
    }
    let dreal = comp.data.realised();
    let data_stats = classes
        .iter()
        .enumerate()
        .map(|(k, c)| {
            (
                c.working_set(),
                c.share,
                dreal.get(k).copied().unwrap_or(0.0),
                c.size,
            )
        })
        .collect();
    let code_bytes: u64 = blocks
        .iter()
        .map(|b| b.chunks.iter().map(|c| c.bytes).sum::<u64>())
        .sum();
    let ring_entries = blocks.iter().filter(|b| b.enters_indirectly()).count() as f64;
    let mut stats = Stats {
        target_instructions: plan.instructions,
        dynamic_instructions: dynamic,
        static_instructions: r.static_instrs,
        code_bytes_estimate: code_bytes,
        mean_instruction_bytes_estimate: r.len_acc.0 / r.len_acc.1.max(1e-12),
        blocks: block_stats,
        mix: mix_stats,
        data_classes: data_stats,
        shared_fraction: (plan.shared_fraction, comp.buffer.realised()[1]),
        regular_fraction: (plan.regular_fraction, comp.regular.realised()[0]),
        chase_fraction: (plan.chase_fraction, comp.chase.realised()[1]),
        shared_fraction_past_tail: {
            let (shared, total) = comp
                .class_buffer
                .iter()
                .flatten()
                .fold((0.0, 0.0), |(s, t), d| {
                    (s + d.realised()[1] * d.total(), t + d.total())
                });
            (total > 0.0).then(|| shared / total)
        },
        first_touch_store_share: {
            let [other, stores] = comp.first_touch_by_store;
            (other + stores > 0.0).then(|| stores / (other + stores))
        },
        conditional_branches_per_call: executions_per_call(&blocks, |i| {
            matches!(i, Item::Pattern { .. } | Item::LoopEnd { .. })
        }),
        data_dependent_branches_per_call: executions_per_call(&blocks, |i| {
            matches!(
                i,
                Item::Pattern {
                    source: BranchSource::Random { .. },
                    ..
                }
            )
        }),
        static_conditional_branches: comp.static_cond,
        repeated_branch_share: if comp.cond_weight > 0.0 {
            comp.repeated_weight / comp.cond_weight
        } else {
            0.0
        },
        rep_iterations_per_call: (
            planned_rep_iterations(plan, None),
            rep_iterations_per_call(&blocks, None),
        ),
        indirect_jumps_per_call: (
            plan.indirect_ratio * plan.instructions,
            executions_per_call(&blocks, |i| matches!(i, Item::Indirect(..))),
            ring_entries,
        ),
        indirect_change_rate: (
            plan.indirect_mean_change,
            if comp.indirect_execs + ring_entries > 0.0 {
                (comp.indirect_changes + ring_entries) / (comp.indirect_execs + ring_entries)
            } else {
                0.0
            },
        ),
        taken_bins: (comp.taken.targets(), comp.taken.realised()),
        majority_taken: plan.majority_taken_bins.as_ref().map(|m| {
            let targets = comp.taken.targets();
            let total: f64 = targets.iter().sum();
            let target = targets.iter().zip(m).map(|(w, q)| w * q).sum::<f64>() / total.max(1e-12);
            let (all, taken) = comp
                .majority
                .iter()
                .fold((0.0, 0.0), |(a, t), m| (a + m[0], t + m[1]));
            (target, if all > 0.0 { taken / all } else { 0.0 })
        }),
        transition_bins: (comp.transition.targets(), comp.transition.realised()),
        raw: (r.deps.raw.targets(), r.deps.raw.realised()),
        war: (r.deps.war.targets(), r.deps.war.realised()),
        waw: (r.deps.waw.targets(), r.deps.waw.realised()),
        chase_region_bytes: chase_size,
        fit: (1, 0),
        oriented_branches: (
            orientation.agreed,
            orientation.restored,
            r.branches.iter().filter(|b| b.2.free).count(),
        ),
    };
    let _ = (layout.class_top, layout.hdr_lo);
    let warm = warm_regions(plan);
    let mut fits = Vec::with_capacity(blocks.len());
    for (bi, b) in blocks.iter().enumerate() {
        let (first, done) = (format!(".L{name}_b{bi}_c0"), format!(".L{name}_b{bi}_done"));
        let got = assembled
            .extent(&first, &done)
            .ok_or_else(|| anyhow::anyhow!("internal error: block {bi} of {name} has no extent"))?;
        fits.push(BlockFit {
            origin: b.origin,
            bytes: b.bytes,
            ring: b.ring(),
            assembled: got,
        });
    }
    for (st, f) in stats.blocks.iter_mut().zip(&fits) {
        st.assembled_bytes = f.assembled;
    }
    Ok((
        ClusterAsm {
            body_symbol,
            init_symbol,
            text: r.out,
            trampolines: r.trampolines,
            priv_bytes,
            shared_bytes,
            proofs: r.proofs,
            stats,
            warm,
            first_touch: first_touch_region(plan),
        },
        fits,
    ))
}

/// The regions a long run of the body would have warmed, for the runtime to warm at start-up: each
/// class region of two lines or more, with the accesses per call the plan gives it (its share of the
/// plan's data accesses, split between the private and the shared buffer: the unit `fit_data` sized
/// it in). The plan's shares, not the realised ones, so that config.c stays the same for every seed.
/// The first-touch stream is left out (its lines are never touched again), and so are one-line
/// classes (a fixed line, touched every call).
fn warm_regions(plan: &BodyPlan) -> Vec<WarmRegion> {
    let accesses = plan.instructions * crate::plan::memory_share(&plan.mix);
    let shared = plan.shared_fraction.clamp(0.0, 1.0);
    plan.data_classes
        .iter()
        .filter(|c| !c.first_touch && c.size >= 2 * LINE && c.share > 0.0)
        .map(|c| WarmRegion {
            offset: c.lo,
            bytes: c.size,
            private_per_call: c.share * accesses * (1.0 - shared),
            shared_per_call: c.share * accesses * shared,
        })
        .collect()
}

/// The first-touch stream's region, where the body has one with accesses. Its lines stand for the
/// original's first touches, which miss at every size (the class is 1 − H at the footprint); the
/// runtime's buffer set-up writes them before every other line, so a last level no larger than the
/// rest of the buffer holds none of them when the first request comes. Written in address order
/// with the rest, the upper half of the buffer was what the last level held: Pix optimized's
/// private stream hit the LLC on 37-45 % of its accesses, a share that moved with the other
/// classes' traffic (docs/generator.md, "The first-touch stream starts out of the caches").
fn first_touch_region(plan: &BodyPlan) -> Option<std::ops::Range<u64>> {
    plan.data_classes
        .iter()
        .find(|c| c.first_touch && c.share > 0.0)
        .map(|c| c.lo..c.lo + c.size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_that_overflows_or_leaves_a_line_empty_is_corrected_toward_its_lines() {
        let fit = |bytes, ring, assembled| BlockFit {
            origin: 0,
            bytes,
            ring,
            assembled,
        };
        // Within (bytes - 64, bytes]: no change.
        assert_eq!(fit(128, 1, 128).correction(), 0);
        assert_eq!(fit(128, 1, 65).correction(), 0);
        // 5 bytes over a one-chunk block: the overflow and the headroom off its one chunk.
        assert_eq!(fit(128, 1, 133).correction(), 5 + FIT_HEADROOM);
        // Spread over a ring, rounded up: every chunk gives at least a byte.
        assert_eq!(fit(1024, 4, 1043).correction(), (19 + FIT_HEADROOM + 3) / 4);
        // A line left empty: budget added back.
        assert!(fit(256, 1, 180).correction() < 0);
    }

    #[test]
    fn ring_entries_take_their_changes_from_the_highest_bins_and_keep_the_profiles_mean() {
        let rate = |i: usize| Dispatch::for_bin(i).change_rate();
        let mean = |bins: &[f64]| {
            bins.iter()
                .enumerate()
                .map(|(i, w)| w * rate(i))
                .sum::<f64>()
        };
        let mut bins = vec![0.0; IndirectBranches::BINS];
        bins[0] = 0.6;
        bins[3] = 0.2;
        bins[10] = 0.2;
        let bins = Dispatch::realisable_bins(&bins);
        for e in [0.05, 0.1, 0.2] {
            let left = dispatch_bins(&bins, e);
            let total: f64 = left.iter().sum();
            assert!(
                (total - (1.0 - e)).abs() < 1e-12,
                "{e}: dispatches' weight {total}"
            );
            assert!(
                (e + mean(&left) - mean(&bins)).abs() < 1e-12,
                "{e}: entries and dispatches {} against the profile's {}",
                e + mean(&left),
                mean(&bins)
            );
            assert!(left.iter().zip(&bins).skip(1).all(|(l, b)| l <= b));
        }
        // The top bin pays first: a small share leaves bin 3 whole.
        assert_eq!(dispatch_bins(&bins, 0.05)[3], bins[3]);
        // More entries than the profile has changes (its mean is 0.231): every dispatch has one
        // target.
        for e in [0.25, 0.5] {
            let left = dispatch_bins(&bins, e);
            assert!((left[0] - (1.0 - e)).abs() < 1e-12, "{e}: {left:?}");
            assert!(left[1..].iter().all(|w| *w == 0.0), "{e}: {left:?}");
        }
        assert_eq!(dispatch_bins(&bins, 0.0), bins);
    }

    #[test]
    fn trampolines_take_an_entry_each_up_to_512_and_colder_ones_share_the_coldest() {
        let rounds = trampoline_slots(700);
        let mut slot_of = vec![usize::MAX; 700];
        for round in &rounds {
            // Within a round (one 512-byte block) the 2-byte trampolines do not overlap.
            for w in round.windows(2) {
                assert!(w[1].0 >= w[0].0 + 2, "{:?} overlaps {:?}", w[0], w[1]);
            }
            for &(slot, site) in round {
                assert!(slot < PREDICTOR_ENTRIES);
                slot_of[site] = slot;
            }
        }
        assert!(
            slot_of.iter().all(|s| *s != usize::MAX),
            "every site placed"
        );
        let mut own: Vec<usize> = slot_of[..512].to_vec();
        own.sort_unstable();
        own.dedup();
        assert_eq!(own.len(), 512, "the hottest 512 have an entry each");
        assert_eq!(slot_of[512], slot_of[511]);
        assert_eq!(slot_of[699], slot_of[511 - 187]);
        assert_eq!(trampoline_slots(3), vec![vec![(0, 0), (2, 1), (4, 2)]]);
    }

    #[test]
    fn aligned_runs_offer_the_nearest_whole_laps_or_dividing_powers_of_two() {
        assert_eq!(aligned_runs(7, 1), [7, 7]);
        assert_eq!(aligned_runs(7, 8), [4, 8]);
        assert_eq!(aligned_runs(3, 4), [2, 4]);
        assert_eq!(aligned_runs(2, 4), [2, 2]);
        assert_eq!(aligned_runs(19, 4), [16, 20]);
        assert_eq!(aligned_runs(24, 2), [24, 24]);
        assert_eq!(aligned_runs(0, 8), [1, 1]);
    }

    #[test]
    fn a_fine_window_exits_from_the_chunks_below_its_power_of_two_steps_at_one_in_k() {
        // 96 = 3 · 32 in a 256-chunk ring: windows start at multiples of 32, and each of the eight
        // chunks just below one ends a third of the windows that reach it.
        assert_eq!(window_step(96), (32, 3));
        assert_eq!(window_step(64), (64, 1));
        assert_eq!(window_step(87), (1, 87));
        for j in [31, 63, 127, 223] {
            assert!((loop_exit_rate(j, 96, 256, true) - 1.0 / 3.0).abs() < 1e-12);
            assert!((loop_taken_share(j, 96, 256, true) - 1.0 / 3.0).abs() < 1e-12);
        }
        for j in [0, 30, 32, 100] {
            assert_eq!(loop_exit_rate(j, 96, 256, true), 0.0);
            assert_eq!(loop_taken_share(j, 96, 256, true), 0.0);
        }
        // The last chunk jumps back to the first unless it ends the window.
        assert!((loop_taken_share(255, 96, 256, true) - 2.0 / 3.0).abs() < 1e-12);
        // Power-of-two windows keep the aligned rule: every 64th chunk always exits.
        assert_eq!(loop_exit_rate(63, 64, 256, true), 0.0);
        assert_eq!(loop_taken_share(63, 64, 256, true), 1.0);
        assert_eq!(loop_taken_share(62, 64, 256, true), 0.0);
    }

    #[test]
    fn fine_windows_take_any_count_below_the_ring_and_only_where_mispredictions_are_many() {
        assert_eq!(ring_runs(87, 128, true), [87, 87]);
        assert_eq!(ring_runs(87, 128, false), [64, 128]);
        // At or past the ring, whole laps either way.
        assert_eq!(ring_runs(300, 128, true), [256, 384]);
        // 60,000 instructions a call, 15 % branches, every transition bin at 2^-3 (bin 2): 1,125
        // expected mispredictions a call, room for 11 fine rings at 1 % each.
        let mut bins = vec![0.0; BINS];
        bins[2] = 1.0;
        let expected = expected_mispredictions(60_000.0, 0.15, &bins);
        assert!((expected - 1125.0).abs() < 1e-9, "{expected}");
        assert!(fine_windows(expected, 5));
        assert!(fine_windows(expected, 11));
        assert!(!fine_windows(expected, 12));
        assert!(!fine_windows(expected, 0));
        // A small body (2,000 instructions a call): one fine ring would cost more than 1 %.
        assert!(!fine_windows(
            expected_mispredictions(2_000.0, 0.15, &bins),
            1
        ));
    }

    #[test]
    fn an_aligned_ring_exits_only_from_its_last_chunk_and_only_when_it_laps() {
        // Unaligned or single-chunk: about once per x executions everywhere.
        assert_eq!(loop_exit_rate(0, 4, 1, true), 0.25);
        assert_eq!(loop_exit_rate(3, 7, 8, false), 1.0 / 7.0);
        // Three whole laps of a 4-chunk ring: the last chunk exits on its third run.
        assert_eq!(loop_exit_rate(3, 12, 4, true), 1.0 / 3.0);
        assert_eq!(loop_exit_rate(2, 12, 4, true), 0.0);
        // One lap, or a power-of-two window: every branch keeps one direction.
        assert_eq!(loop_exit_rate(7, 8, 8, true), 0.0);
        assert_eq!(loop_exit_rate(1, 2, 8, true), 0.0);
    }

    #[test]
    fn a_loop_branch_is_taken_where_its_window_goes_on() {
        // The last chunk jumps back: taken on every lap but the last.
        assert!((loop_taken_share(3, 12, 4, true) - 2.0 / 3.0).abs() < 1e-12);
        assert!((loop_taken_share(0, 8, 1, true) - 7.0 / 8.0).abs() < 1e-12);
        // One lap: the last chunk always falls out, the others always fall through.
        assert_eq!(loop_taken_share(7, 8, 8, true), 0.0);
        assert_eq!(loop_taken_share(2, 8, 8, true), 0.0);
        // A window of 2 in a ring of 8 ends at every odd chunk, whose `jz` to the end is always taken.
        assert_eq!(loop_taken_share(1, 2, 8, true), 1.0);
        assert_eq!(loop_taken_share(2, 2, 8, true), 0.0);
        // Unaligned: every chunk but the last exits about once per x.
        assert!((loop_taken_share(3, 7, 8, false) - 1.0 / 7.0).abs() < 1e-12);
    }

    fn shape(runs_per_chunk: f64, static_instrs: f64, chunks: u64) -> BlockShape {
        BlockShape {
            runs_per_chunk,
            static_instrs,
            chunks,
        }
    }

    /// A hot loop, a warm ring and a swept ring, as in nginx's body.
    fn nginx_like_shapes() -> [BlockShape; 3] {
        [
            shape(16.0, 48.0, 1),
            shape(2.0, 400.0, 8),
            shape(0.05, 12_000.0, 256),
        ]
    }

    #[test]
    fn branch_densities_keep_the_dynamic_count_and_concentrate_to_the_static_target() {
        let blocks = nginx_like_shapes();
        let ratio = 0.16;
        let dynamic = |g: &[f64]| -> f64 {
            blocks
                .iter()
                .zip(g)
                .map(|(b, d)| b.static_instrs * b.runs_per_chunk * ratio * d)
                .sum()
        };
        let statics = |g: &[f64]| -> f64 {
            blocks
                .iter()
                .zip(g)
                .map(|(b, d)| b.chunks as f64 + b.static_instrs * ratio * d)
                .sum()
        };
        let uniform = [1.0; 3];
        // No target, or a target above what even spread gives: uniform.
        assert_eq!(branch_densities(&blocks, ratio, 0, 1.0), uniform);
        assert_eq!(branch_densities(&blocks, ratio, 1_000_000, 1.0), uniform);
        let g = branch_densities(&blocks, ratio, 500, 1.0);
        assert!((dynamic(&g) - dynamic(&uniform)).abs() < 1e-6 * dynamic(&uniform));
        assert!((statics(&g) - 500.0).abs() < 1.0, "{g:?}: {}", statics(&g));
        // Hot code gets the branches, up to the cap; the swept ring almost none.
        assert!(g[0] >= g[1] && g[1] > g[2], "{g:?}");
        assert!(
            g.iter().all(|d| d * ratio <= MAX_BRANCH_DENSITY + 1e-12),
            "{g:?}"
        );
    }

    #[test]
    fn branch_level_corrects_by_owed_over_realised_in_32nds_within_a_factor_of_two() {
        // nginx's concentrated body: 2,085 a call against 1,872.
        assert_eq!(branch_level(1.0, 2085.0, 1872.0), 29.0 / 32.0);
        // A small step keeps the level: no recomposition on one side of a threshold.
        assert_eq!(branch_level(1.0, 1880.0, 1872.0), 1.0);
        assert_eq!(branch_level(1.0, 1850.0, 1872.0), 1.0);
        assert_eq!(branch_level(29.0 / 32.0, 1872.0, 1872.0), 29.0 / 32.0);
        assert_eq!(branch_level(1.0, 10.0, 1872.0), 2.0);
        assert_eq!(branch_level(1.0, 0.0, 1872.0), 1.0);
    }

    #[test]
    fn branch_densities_at_a_level_scale_the_dynamic_count_and_keep_the_static_target() {
        let blocks = nginx_like_shapes();
        let ratio = 0.16;
        let weighted = |g: &[f64], per: fn(&BlockShape) -> f64| -> f64 {
            blocks.iter().zip(g).map(|(b, d)| per(b) * ratio * d).sum()
        };
        let dynamic = |g: &[f64]| weighted(g, |b| b.static_instrs * b.runs_per_chunk);
        let patterns = |g: &[f64]| weighted(g, |b| b.static_instrs);
        let at_one = branch_densities(&blocks, ratio, 500, 1.0);
        for level in [0.85, 1.1] {
            let g = branch_densities(&blocks, ratio, 500, level);
            let want = level * dynamic(&at_one);
            assert!((dynamic(&g) - want).abs() < 1e-6 * want, "{level}: {g:?}");
            assert!(
                (patterns(&g) - patterns(&at_one)).abs() < 1.0,
                "{level}: {g:?}"
            );
        }
        // Without a static target the level is the uniform density.
        assert_eq!(branch_densities(&blocks, ratio, 0, 0.9), [0.9; 3]);
    }

    /// A block of `bytes` in chunks of 64 bytes, `x` of them a call.
    fn block(bytes: u64, x: u64) -> Block {
        Block {
            working_set: bytes,
            bytes,
            share: 0.0,
            planned_x: x,
            x: 0,
            dyn_target: 0.0,
            ring_chunks: (bytes / 64).max(1),
            chunks: Vec::new(),
            absorbs: false,
            origin: 0,
        }
    }

    #[test]
    fn aligning_windows_rounds_each_ring_to_its_nearest_and_gives_the_balance_to_a_loop() {
        // Rings of 8 chunks (x 7 → 8) and 4 chunks (x 3, a tie, → 4), one single-chunk loop of 16
        // instructions a run that takes the 32 added. One chunk = 64 bytes here.
        let mut blocks = vec![block(64, 100), block(512, 7), block(256, 3)];
        let k = align_windows(&mut blocks, 4.0, false);
        assert_eq!(k, Some(0));
        assert_eq!(blocks[1].planned_x, 8);
        assert_eq!(blocks[2].planned_x, 4);
        assert_eq!(blocks[0].planned_x, 98);
        // Two loops share it by their instructions (1,600 and 800, 32 added).
        let mut blocks = vec![block(64, 100), block(64, 50), block(512, 7), block(256, 3)];
        assert_eq!(align_windows(&mut blocks, 4.0, false), Some(0));
        assert_eq!((blocks[0].planned_x, blocks[1].planned_x), (99, 49));
        // A loop too small to give up the chunk that rounding 7 up to 8 adds: the ring goes down
        // to 4 and the loop runs the 3 runs' instructions it gave back.
        let mut blocks = vec![block(64, 1), block(512, 7)];
        assert_eq!(align_windows(&mut blocks, 4.0, false), Some(0));
        assert_eq!(blocks[1].planned_x, 4);
        assert_eq!(blocks[0].planned_x, 4);
        // A ring that wants less than its smallest count adds more than the loop can give up:
        // nothing changes.
        let mut blocks = vec![block(64, 1), block(1024, 1)];
        blocks[1].bytes = 64 * 1024;
        blocks[1].ring_chunks = 1024;
        let planned: Vec<u64> = blocks.iter().map(|b| b.planned_x).collect();
        assert_eq!(align_windows(&mut blocks, 64.0, false), Some(0));
        assert_eq!(
            blocks.iter().map(|b| b.planned_x).collect::<Vec<_>>(),
            planned
        );
    }

    fn nginx_rings() -> Vec<RingWant> {
        // nginx's rings (runs wanted, chunks), 68 instructions per run.
        [
            (11.0, 2),
            (13.0, 4),
            (11.0, 8),
            (5.0, 8),
            (2.0, 2),
            (7.0, 8),
            (55.0, 64),
            (16.4, 256),
        ]
        .iter()
        .enumerate()
        .map(|(block, &(want, ring))| RingWant {
            block,
            want,
            ring,
            per_run: 68.0,
        })
        .collect()
    }

    #[test]
    fn each_ring_keeps_its_nearest_aligned_count_whatever_the_others_owe() {
        let rings = nginx_rings();
        let (chosen, owed) = balance_rings(&rings, f64::NEG_INFINITY, false);
        let x: Vec<u64> = chosen.iter().map(|c| c.1).collect();
        // 11 of 2 ties and goes up; the 256-chunk ring wanting 16.4 runs 16, not 32, though the
        // others have added 6 runs (the old rule rounded it to whichever evened the balance).
        assert_eq!(x, [12, 12, 8, 4, 2, 8, 64, 16]);
        assert!((owed - (-6.0 + 0.4) * 68.0).abs() < 1e-9, "{owed}");
        for (&v, r) in x.iter().zip(&rings) {
            assert!(
                v % r.ring == 0 || (v.is_power_of_two() && r.ring % v == 0),
                "{v} of {}",
                r.ring
            );
        }
        // Any other ring's want leaves this one's count alone.
        let mut moved = rings.clone();
        moved[6].want = 40.0;
        let (chosen, _) = balance_rings(&moved, f64::NEG_INFINITY, false);
        assert_eq!(chosen[7].1, 16);
        assert_eq!(chosen[6].1, 32);
    }

    #[test]
    fn a_ring_goes_down_only_when_the_loop_cannot_take_the_balance_and_the_cheapest_goes_first() {
        let rings = nginx_rings();
        // Owed -380.8 against a floor of -100: the tie (12 → 10 of 2 chunks) gives back 136 at no
        // cost and 8 → 4 of 8 chunks 272 for 136 misplaced, together enough; 64 → 32 alone would
        // misplace 952.
        let (chosen, owed) = balance_rings(&rings, -100.0, false);
        let x: Vec<u64> = chosen.iter().map(|c| c.1).collect();
        assert_eq!(x, [10, 12, 8, 4, 2, 4, 64, 16]);
        assert!(owed >= -100.0, "{owed}");
        // Past 16 rings the cheapest per instruction given back go first, until there is enough.
        let flips: Vec<Flip> = (0..20)
            .map(|k| Flip {
                ring: k,
                cost: if k < 10 { 2.0 } else { 1.0 },
                gain: 1.0,
            })
            .collect();
        assert_eq!(cheapest_cover(&flips, 3.5), [10, 11, 12, 13]);
        assert_eq!(cheapest_cover(&flips[..4], 2.0), [0, 1]);
        // A floor nothing reaches: every ring at its lower count, the balance still under it.
        let (chosen, owed) = balance_rings(&rings, 1e9, false);
        assert!(owed < 1e9);
        for (c, r) in chosen.iter().zip(&rings) {
            let [lo, _] = aligned_runs(r.want.round() as u64, r.ring);
            assert_eq!(c.1, lo);
        }
    }

    fn composed(x: u64, dyn_target: f64, instrs: &[u64]) -> Block {
        let mut b = block(64 * instrs.len() as u64, x);
        b.dyn_target = dyn_target;
        b.chunks = instrs
            .iter()
            .map(|&n| Chunk {
                items: Vec::new(),
                groups: Vec::new(),
                instrs: n,
                bytes: 0,
                stream: 0,
            })
            .collect();
        b
    }

    #[test]
    fn settled_windows_follow_the_chunks_real_instructions_and_the_loop_takes_the_balance() {
        // Planned at 3,776 runs from an estimate, the ring's chunks hold 10 instructions: 380 wanted
        // instructions are 38 runs, aligned to 40 (a tie between 36 and 40 goes up), and the loop
        // of 5-instruction runs gives up the 20 added.
        let mut blocks = vec![composed(20, 100.0, &[5]), composed(3776, 380.0, &[10; 4])];
        settle_windows(&mut blocks, false);
        assert_eq!(blocks[1].x, 40);
        assert_eq!(blocks[0].x, 16);
        // Two loops share the balance by their instructions: 100 and 300 wanted, the ring adds 20.
        let mut blocks = vec![
            composed(20, 100.0, &[5]),
            composed(20, 300.0, &[10]),
            composed(3776, 380.0, &[10; 4]),
        ];
        settle_windows(&mut blocks, false);
        assert_eq!(blocks[2].x, 40);
        assert_eq!(blocks[0].x, 19);
        assert_eq!(blocks[1].x, 29);
    }
}
