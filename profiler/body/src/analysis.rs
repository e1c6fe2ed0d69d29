//! One process's body trace, analysed as it arrives.
//!
//! Per superblock execution the analyzer learns which instructions ran (up to the side exit taken, or
//! all of them) and the data addresses, in static order. Data addresses are handled on arrival;
//! instruction-side work happens when the superblock ends and the executed prefix is known.
//!
//! Scope choices: caches are simulated per process with all threads interleaved in the order Valgrind
//! ran them (as cachegrind and a time-shared core see them), and each access is counted for the thread
//! that made it; everything is counted per thread and grouped into clusters by thread name when the
//! result is taken.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use anyhow::{bail, Result};

use crate::cache::{CurveSim, LINE_SHIFT};
use crate::classes::{ClassTable, CLASSES, OPERANDS};
use crate::decode::{InstrDecoder, StaticInstr, REG_SLOTS};
use crate::stream::{self, Header, SbDefinition};

pub const MIX_SLOTS: usize = CLASSES.len() * OPERANDS.len();
pub const DEP_BINS: usize = 11;
pub const RATE_BINS: usize = ditto_profile::Branches::BINS;
/// A load chases a pointer when an address register came from a load at most this many instructions
/// earlier: about a reorder window, within which the dependency serialises the two misses. (A base
/// pointer loaded once long ago does not make every later access a chase.)
const CHASE_WINDOW: u64 = 128;
/// Stride trackers per static instruction (its first few memory accesses each get one).
const STRIDE_SLOTS: usize = 4;

/// Per static conditional branch, per thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct BranchStat {
    pub executions: u64,
    pub taken: u64,
    pub transitions: u64,
    last: u8, // 0 unknown, 1 not taken, 2 taken
}

/// Per static indirect jump or call, per thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct IndirectStat {
    pub executions: u64,
    /// Executions whose target differed from the site's previous target.
    pub changes: u64,
    last_target: u64, // 0 unknown
}

/// What one thread did in the current window.
#[derive(Debug, Clone)]
pub struct ThreadCounts {
    pub tid: u32,
    pub lwp: u32,
    pub instructions: u64,
    pub instruction_bytes: u64,
    pub mix: [u64; MIX_SLOTS],
    pub branches: Vec<BranchStat>,
    /// Indexed by the process's indirect site id.
    pub indirect: Vec<IndirectStat>,
    pub raw: [u64; DEP_BINS],
    pub war: [u64; DEP_BINS],
    pub waw: [u64; DEP_BINS],
    pub loads: u64,
    pub chased_loads: u64,
    pub data_accesses: u64,
    pub regular_accesses: u64,
    /// Repeat-count buckets of rep-prefixed string instructions, per operand kind (`OPERANDS`: a
    /// `stos` stores, a `movs` loads and stores). Kept apart since a service's copies and fills
    /// repeat differently: memcached's workers copy 1-7 bytes and fill 146.
    pub rep_counts: [Vec<u64>; OPERANDS.len()],
    /// Data accesses to lines another thread also touched in the window (filled at snapshot).
    pub shared_accesses: u64,
}

impl ThreadCounts {
    fn new(tid: u32, lwp: u32) -> ThreadCounts {
        ThreadCounts {
            tid,
            lwp,
            instructions: 0,
            instruction_bytes: 0,
            mix: [0; MIX_SLOTS],
            branches: Vec::new(),
            indirect: Vec::new(),
            raw: [0; DEP_BINS],
            war: [0; DEP_BINS],
            waw: [0; DEP_BINS],
            loads: 0,
            chased_loads: 0,
            data_accesses: 0,
            regular_accesses: 0,
            rep_counts: Default::default(),
            shared_accesses: 0,
        }
    }

    fn reset(&mut self) {
        let (tid, lwp) = (self.tid, self.lwp);
        let branches = std::mem::take(&mut self.branches);
        let indirect = std::mem::take(&mut self.indirect);
        *self = ThreadCounts::new(tid, lwp);
        // Likewise each indirect site's last target.
        self.indirect = indirect
            .into_iter()
            .map(|b| IndirectStat {
                last_target: b.last_target,
                ..IndirectStat::default()
            })
            .collect();
        // Keep each branch's last direction so the first transition of the window is counted right.
        self.branches = branches
            .into_iter()
            .map(|b| BranchStat {
                last: b.last,
                ..BranchStat::default()
            })
            .collect();
    }
}

/// Register history of one thread: dynamic instruction index of each register's last write and read.
struct DepState {
    last_write: Box<[u64; REG_SLOTS]>,
    last_read: Box<[u64; REG_SLOTS]>,
    writer_is_load: Box<[bool; REG_SLOTS]>,
    rep_addr: u64,
    rep_run: u64,
    /// The operand kind of the rep instruction in `rep_addr`.
    rep_operand: u8,
}

impl DepState {
    fn new() -> DepState {
        DepState {
            last_write: Box::new([0; REG_SLOTS]),
            last_read: Box::new([0; REG_SLOTS]),
            writer_is_load: Box::new([false; REG_SLOTS]),
            rep_addr: 0,
            rep_run: 0,
            rep_operand: 0,
        }
    }
}

struct Thread {
    counts: ThreadCounts,
    deps: DepState,
    /// Dynamic instruction index (never reset: distances span windows).
    clock: u64,
    /// The indirect site this thread's last superblock ended with: its target is where the thread's
    /// next superblock starts.
    pending_indirect: Option<u32>,
    /// The window's accesses per data line, for the shared/private split: every line, not a sample.
    /// Sampling one line in 16 made the split a draw on where a handful of hot lines fell: a
    /// memcached clone's runtime globals (its configuration, a mutex, read-only tables) held 17 % of
    /// its workers' accesses in one build and none in another of the same runtime.
    lines: LineMap<u64>,
}

/// A map keyed by cache line number, hashed with `line_hash` (the default SipHash would cost more
/// than the rest of a data access's accounting).
type LineMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<LineHasher>>;

#[derive(Default)]
struct LineHasher(u64);

impl std::hash::Hasher for LineHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = crate::cache::line_hash(self.0 ^ u64::from(b));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = crate::cache::line_hash(x);
    }
}

/// A superblock ready for execution accounting.
struct Superblock {
    /// Index into `ProcessAnalysis::statics` per instruction.
    instrs: Vec<u32>,
    mems: Vec<stream::MemItem>,
    /// Global stride-tracking slot of each memory item.
    mem_slot: Vec<u32>,
    /// Whether a store item completes a read-modify-write of the load just before it.
    mem_is_modify_store: Vec<bool>,
    exits: Vec<stream::ExitItem>,
    /// For each instruction: (exit index, branch taken when that exit is taken, static branch id).
    branch_exit: Vec<Option<(u16, bool, u32)>>,
    /// The indirect site id of the last instruction, when it is an indirect jump or call (it then
    /// ends the superblock, and runs when the superblock runs to its end).
    ends_indirect: Option<u32>,
}

#[derive(Clone, Copy, Default)]
struct StrideState {
    last: u64,
    stride: i64,
}

/// Incremental analysis of one process's stream.
pub struct ProcessAnalysis {
    pub header: Header,
    decoder: InstrDecoder,
    statics: Vec<StaticInstr>,
    static_index: HashMap<(u64, [u8; 16]), u32>,
    sbs: Vec<Option<Superblock>>,
    strides: Vec<StrideState>,
    branch_of_static: HashMap<u32, u32>,
    indirect_of_static: HashMap<u32, u32>,
    threads: Vec<Thread>,
    thread_index: HashMap<u32, usize>,
    cur_thread: usize,
    pub icache: CurveSim,
    pub dcache: CurveSim,
    pages: HashSet<u64>,
    last_page: u64,
    last_iline: u64,
    /// Data lines touched in the window: which threads touched them (bit per thread index, mod 64).
    line_threads: LineMap<u64>,
    // Execution in progress.
    cur_sb: Option<usize>,
    mem_cursor: usize,
    last_load_addr: u64,
    // A definition split across reads.
    def_buf: Vec<u64>,
    def_remaining: usize,
    header_buf: Vec<u64>,
    started: bool,
    pub ended: bool,
    /// Words consumed in total (for progress and tests).
    pub words: u64,
}

fn dep_bin(d: u64) -> Option<usize> {
    if d == 0 {
        return None;
    }
    let b = if d == 1 {
        0
    } else {
        64 - (d - 1).leading_zeros() as usize
    };
    (b < DEP_BINS).then_some(b)
}

impl ProcessAnalysis {
    pub fn new(table: &ClassTable) -> ProcessAnalysis {
        ProcessAnalysis {
            header: Header { pid: 0, ppid: 0 },
            decoder: InstrDecoder::new(table),
            statics: Vec::new(),
            static_index: HashMap::new(),
            sbs: Vec::new(),
            strides: Vec::new(),
            branch_of_static: HashMap::new(),
            indirect_of_static: HashMap::new(),
            threads: Vec::new(),
            thread_index: HashMap::new(),
            cur_thread: usize::MAX,
            icache: CurveSim::new(),
            dcache: CurveSim::new(),
            pages: HashSet::new(),
            last_page: u64::MAX,
            last_iline: u64::MAX,
            line_threads: LineMap::default(),
            cur_sb: None,
            mem_cursor: 0,
            last_load_addr: u64::MAX,
            def_buf: Vec::new(),
            def_remaining: 0,
            header_buf: Vec::new(),
            started: false,
            ended: false,
            words: 0,
        }
    }

    /// Consumes the next words of the stream.
    pub fn feed(&mut self, mut words: &[u64]) -> Result<()> {
        self.words += words.len() as u64;
        if !self.started {
            let need = stream::HEADER_WORDS - self.header_buf.len();
            let take = need.min(words.len());
            self.header_buf.extend_from_slice(&words[..take]);
            words = &words[take..];
            if self.header_buf.len() < stream::HEADER_WORDS {
                return Ok(());
            }
            self.header = stream::parse_header(&self.header_buf)?;
            self.started = true;
        }
        let mut i = 0;
        while i < words.len() {
            if self.def_remaining > 0 {
                let take = self.def_remaining.min(words.len() - i);
                self.def_buf.extend_from_slice(&words[i..i + take]);
                self.def_remaining -= take;
                i += take;
                if self.def_remaining == 0 {
                    let def = stream::parse_sb_def(&self.def_buf)?;
                    self.define(def)?;
                    self.def_buf.clear();
                }
                continue;
            }
            let w = words[i];
            i += 1;
            if w & stream::CONTROL == 0 {
                self.data(w)?;
                continue;
            }
            let payload = w & stream::PAYLOAD_MASK;
            match stream::tag(w) {
                stream::TAG_SB_ENTER => {
                    self.finish_sb(None);
                    let idx = payload as usize;
                    if self.sbs.get(idx).map(|s| s.is_none()).unwrap_or(true) {
                        bail!("body trace: superblock {idx} entered before its definition");
                    }
                    if self.cur_thread == usize::MAX {
                        self.switch_thread(0);
                    }
                    self.resolve_indirect(idx);
                    self.cur_sb = Some(idx);
                    self.mem_cursor = 0;
                }
                stream::TAG_EXIT => self.finish_sb(Some(payload as usize)),
                stream::TAG_THREAD => {
                    self.finish_sb(None);
                    self.switch_thread(payload);
                }
                stream::TAG_SB_DEF => {
                    self.finish_sb(None);
                    self.def_remaining = payload as usize;
                    self.def_buf.clear();
                }
                stream::TAG_END => {
                    self.finish_sb(None);
                    self.ended = true;
                }
                t => bail!("body trace: unknown control tag {t}"),
            }
        }
        Ok(())
    }

    fn switch_thread(&mut self, payload: u64) {
        let tid = (payload >> 32) as u32;
        let lwp = payload as u32;
        let idx = *self.thread_index.entry(tid).or_insert_with(|| {
            self.threads.push(Thread {
                counts: ThreadCounts::new(tid, lwp),
                deps: DepState::new(),
                clock: 0,
                pending_indirect: None,
                lines: LineMap::default(),
            });
            self.threads.len() - 1
        });
        if lwp != 0 {
            self.threads[idx].counts.lwp = lwp;
        }
        self.cur_thread = idx;
        // Each thread's accesses are counted apart in the caches all of them share.
        self.icache.set_accessor(idx);
        self.dcache.set_accessor(idx);
    }

    fn define(&mut self, def: SbDefinition) -> Result<()> {
        let id = def.id as usize;
        if id == 0 || id > 1 << 32 {
            bail!("body trace: superblock id {id} out of range");
        }
        let mut instrs = Vec::with_capacity(def.instrs.len());
        for ins in &def.instrs {
            let mut key = [0u8; 16];
            key[..ins.bytes.len()].copy_from_slice(&ins.bytes);
            let next = self.statics.len() as u32;
            let idx = *self.static_index.entry((ins.addr, key)).or_insert(next);
            if idx == next {
                self.statics.push(self.decoder.decode(ins.addr, &ins.bytes));
            }
            instrs.push(idx);
        }
        let mut branch_exit = vec![None; instrs.len()];
        for (k, e) in def.exits.iter().enumerate() {
            let Some(&si) = instrs.get(e.instr as usize) else {
                bail!("body trace: superblock {id}: exit of a missing instruction");
            };
            let s = &self.statics[si as usize];
            if e.boring && s.is_cond_branch && branch_exit[e.instr as usize].is_none() {
                let fall_through = s.addr + s.len as u64;
                // One id per static instruction: the same branch sits in every superblock that
                // contains it (entries at different points of a loop give several).
                let next = self.branch_of_static.len() as u32;
                let bid = *self.branch_of_static.entry(si).or_insert(next);
                // The exit goes to the target (taken) or to the fall-through (not taken). A jump to
                // the next instruction has both at one address: Valgrind's IR (`jcc_01`) then exits
                // when the branch is taken for a positive condition (jz) and when it is not for a
                // negated one (jnz). Read from the address alone, a clone's `jz` patterns counted
                // as never taken (ground truth `branches next`).
                let taken_if_exit = if s.branch_target == fall_through {
                    s.positive_condition
                } else {
                    e.target != fall_through
                };
                branch_exit[e.instr as usize] = Some((k as u16, taken_if_exit, bid));
            }
        }
        let ends_indirect = instrs.last().and_then(|&si| {
            self.statics[si as usize].is_indirect.then(|| {
                let next = self.indirect_of_static.len() as u32;
                *self.indirect_of_static.entry(si).or_insert(next)
            })
        });
        let mut mem_slot = Vec::with_capacity(def.mems.len());
        let mut mem_is_modify_store = Vec::with_capacity(def.mems.len());
        // Strides are tracked per static instruction and access ordinal, not per superblock: the same
        // instruction can sit in several translations (and a rep-string instruction re-enters its own).
        self.strides
            .resize(self.statics.len() * STRIDE_SLOTS, StrideState::default());
        let mut ordinal = 0;
        for (k, m) in def.mems.iter().enumerate() {
            let Some(&si) = instrs.get(m.instr as usize) else {
                bail!("body trace: superblock {id}: memory item of a missing instruction");
            };
            ordinal = if k > 0 && def.mems[k - 1].instr == m.instr {
                (ordinal + 1).min(STRIDE_SLOTS - 1)
            } else {
                0
            };
            mem_slot.push((si as usize * STRIDE_SLOTS + ordinal) as u32);
            let modify =
                m.store && k > 0 && def.mems[k - 1].instr == m.instr && !def.mems[k - 1].store;
            mem_is_modify_store.push(modify);
        }
        if self.sbs.len() <= id {
            self.sbs.resize_with(id + 1, || None);
        }
        self.sbs[id] = Some(Superblock {
            instrs,
            mems: def.mems,
            mem_slot,
            mem_is_modify_store,
            exits: def.exits,
            branch_exit,
            ends_indirect,
        });
        Ok(())
    }

    /// Counts the current thread's pending indirect jump or call, whose target is the start of
    /// superblock `idx`, the one the thread enters next.
    fn resolve_indirect(&mut self, idx: usize) {
        let Some(t) = self.threads.get_mut(self.cur_thread) else {
            return;
        };
        let Some(site) = t.pending_indirect.take() else {
            return;
        };
        let Some(&first) = self.sbs.get(idx).and_then(|s| s.as_ref()?.instrs.first()) else {
            return;
        };
        let target = self.statics[first as usize].addr;
        let c = &mut t.counts;
        let site = site as usize;
        if c.indirect.len() <= site {
            c.indirect.resize(site + 1, IndirectStat::default());
        }
        let st = &mut c.indirect[site];
        st.executions += 1;
        if st.last_target != 0 && st.last_target != target {
            st.changes += 1;
        }
        st.last_target = target;
    }

    #[inline]
    fn data(&mut self, addr: u64) -> Result<()> {
        let Some(sbi) = self.cur_sb else {
            bail!("body trace: data address outside any superblock");
        };
        let Some(sb) = self.sbs[sbi].as_ref() else {
            bail!("body trace: superblock {sbi} vanished");
        };
        let k = self.mem_cursor;
        self.mem_cursor += 1;
        let Some(m) = sb.mems.get(k) else {
            bail!("body trace: superblock {sbi}: more addresses than memory items");
        };
        if addr == stream::SKIPPED {
            return Ok(());
        }
        let modify = sb.mem_is_modify_store[k] && self.last_load_addr == addr;
        self.last_load_addr = if m.store { u64::MAX } else { addr };
        if modify {
            // One access, as a cache (and cachegrind) sees a read-modify-write.
            return Ok(());
        }
        let slot = sb.mem_slot[k] as usize;
        let t = &mut self.threads[self.cur_thread];
        t.counts.data_accesses += 1;
        let st = &mut self.strides[slot];
        let stride = addr.wrapping_sub(st.last) as i64;
        if st.last != 0 && stride == st.stride {
            t.counts.regular_accesses += 1;
        }
        st.stride = stride;
        st.last = addr;
        let line = addr >> LINE_SHIFT;
        self.dcache.access(line);
        match t.lines.entry(line) {
            Entry::Occupied(mut e) => *e.get_mut() += 1,
            Entry::Vacant(e) => {
                e.insert(1);
                *self.line_threads.entry(line).or_insert(0) |= 1u64 << (self.cur_thread % 64);
            }
        }
        Ok(())
    }

    /// Accounts the instructions of the superblock execution in progress. `exit`: the side exit taken.
    fn finish_sb(&mut self, exit: Option<usize>) {
        let Some(sbi) = self.cur_sb.take() else {
            return;
        };
        let Some(sb) = self.sbs[sbi].as_ref() else {
            return;
        };
        let last = match exit.and_then(|e| sb.exits.get(e)) {
            Some(e) => e.instr as usize,
            None => sb.instrs.len().saturating_sub(1),
        };
        if sb.instrs.is_empty() {
            return;
        }
        let t = &mut self.threads[self.cur_thread];
        if exit.is_none() {
            t.pending_indirect = sb.ends_indirect;
        }
        let c = &mut t.counts;
        let d = &mut t.deps;
        let mut last_page = self.last_page;
        let mut last_line = self.last_iline;
        let mut run = 0u64;
        for (pos, &si) in sb.instrs[..=last].iter().enumerate() {
            let s = &self.statics[si as usize];
            // Valgrind runs a rep-prefixed string instruction once per repetition (plus a final check);
            // the architecture retires it once. Count it once, with its repeat count.
            if s.is_rep_string && d.rep_run > 0 && d.rep_addr == s.addr {
                d.rep_run += 1;
                self.icache.repeat(1);
                continue;
            }
            t.clock += 1;
            let now = t.clock;
            c.instructions += 1;
            c.instruction_bytes += s.len as u64;
            c.mix[s.class as usize * OPERANDS.len() + s.operand as usize] += 1;
            // Consecutive fetches from one line are one access and repeats: batch them.
            let line = s.addr >> LINE_SHIFT;
            if line == last_line {
                run += 1;
            } else {
                if run > 0 {
                    self.icache.repeat(run);
                    run = 0;
                }
                self.icache.access(line);
                last_line = line;
                let page = s.addr >> 12;
                if page != last_page {
                    self.pages.insert(page);
                    last_page = page;
                }
            }
            if s.is_load {
                c.loads += 1;
                if s.addr_regs[..s.n_addr_regs as usize].iter().any(|&r| {
                    d.writer_is_load[r as usize] && now - d.last_write[r as usize] <= CHASE_WINDOW
                }) {
                    c.chased_loads += 1;
                }
            }
            for &r in &s.reads[..s.n_reads as usize] {
                let lw = d.last_write[r as usize];
                if lw != 0 {
                    if let Some(b) = dep_bin(now - lw) {
                        c.raw[b] += 1;
                    }
                }
                d.last_read[r as usize] = now;
            }
            for &r in &s.writes[..s.n_writes as usize] {
                let lw = d.last_write[r as usize];
                if lw != 0 {
                    if let Some(b) = dep_bin(now - lw) {
                        c.waw[b] += 1;
                    }
                }
                let lr = d.last_read[r as usize];
                if lr != 0 && lr != now {
                    if let Some(b) = dep_bin(now - lr) {
                        c.war[b] += 1;
                    }
                }
                d.last_write[r as usize] = now;
                d.writer_is_load[r as usize] = s.is_load;
            }
            if s.is_rep_string {
                if d.rep_addr == s.addr {
                    d.rep_run += 1;
                } else {
                    flush_rep(c, d);
                    d.rep_addr = s.addr;
                    d.rep_operand = s.operand;
                    d.rep_run = 1;
                }
            } else if d.rep_run > 0 {
                flush_rep(c, d);
            }
            if let Some((k, taken_if_exit, bid)) = sb.branch_exit[pos] {
                let exited_here = exit == Some(k as usize);
                let taken = if exited_here {
                    taken_if_exit
                } else {
                    !taken_if_exit
                };
                let bid = bid as usize;
                if c.branches.len() <= bid {
                    c.branches.resize(bid + 1, BranchStat::default());
                }
                let b = &mut c.branches[bid];
                let dir = if taken { 2 } else { 1 };
                b.executions += 1;
                b.taken += taken as u64;
                if b.last != 0 && b.last != dir {
                    b.transitions += 1;
                }
                b.last = dir;
            }
        }
        if run > 0 {
            self.icache.repeat(run);
        }
        self.last_page = last_page;
        self.last_iline = last_line;
    }

    /// Starts a measurement window: counts go to zero; caches, branch and register history stay warm.
    pub fn reset_counts(&mut self) {
        self.finish_sb(None);
        for t in &mut self.threads {
            t.counts.reset();
        }
        self.icache.reset_counts();
        self.dcache.reset_counts();
        self.pages.clear();
        self.last_page = u64::MAX;
        self.line_threads.clear();
        for t in &mut self.threads {
            t.lines.clear();
        }
    }

    /// The counts of the window so far.
    pub fn snapshot(&self) -> ProcessCounts {
        let mut threads: Vec<ThreadCounts> =
            self.threads.iter().map(|t| t.counts.clone()).collect();
        for (counts, thread) in threads.iter_mut().zip(&self.threads) {
            counts.shared_accesses = thread
                .lines
                .iter()
                .filter(|(line, _)| {
                    self.line_threads
                        .get(line)
                        .is_some_and(|mask| mask.count_ones() > 1)
                })
                .map(|(_, n)| n)
                .sum();
        }
        ProcessCounts {
            pid: self.header.pid,
            ppid: self.header.ppid,
            threads,
            icache: self.icache.clone(),
            dcache: self.dcache.clone(),
            instruction_pages: self.pages.len() as u64,
            static_instructions: self.statics.len() as u64,
        }
    }
}

fn flush_rep(c: &mut ThreadCounts, d: &mut DepState) {
    if d.rep_run > 0 {
        // `rep_run` executions = repeats + the final check that found the count exhausted.
        let repeats = d.rep_run - 1;
        let bin = if repeats == 0 {
            0
        } else {
            64 - repeats.leading_zeros() as usize
        };
        if let Some(counts) = c.rep_counts.get_mut(usize::from(d.rep_operand)) {
            if counts.len() <= bin {
                counts.resize(bin + 1, 0);
            }
            counts[bin] += 1;
        }
    }
    d.rep_run = 0;
    d.rep_addr = 0;
}

/// The window's counts of one process.
#[derive(Clone)]
pub struct ProcessCounts {
    pub pid: u64,
    pub ppid: u64,
    pub threads: Vec<ThreadCounts>,
    pub icache: CurveSim,
    pub dcache: CurveSim,
    pub instruction_pages: u64,
    pub static_instructions: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::encode::{self, control};
    use crate::stream::{ExitItem, InstrItem, MemItem, TAG_EXIT, TAG_SB_ENTER, TAG_THREAD};

    fn instr(addr: u64, bytes: &[u8]) -> InstrItem {
        InstrItem {
            addr,
            bytes: bytes.to_vec(),
        }
    }

    /// A loop body: mov rax,[rdi] ; add rdi,8 ; dec ecx ; jne back — as one superblock whose side exit
    /// is the inverted branch (to the fall-through), as VEX often makes it.
    fn loop_def(inverted: bool) -> SbDefinition {
        SbDefinition {
            id: 1,
            start: 0x1000,
            instrs: vec![
                instr(0x1000, &[0x48, 0x8b, 0x07]),
                instr(0x1003, &[0x48, 0x83, 0xc7, 0x08]),
                instr(0x1007, &[0xff, 0xc9]),
                instr(0x1009, &[0x75, 0xf5]),
            ],
            mems: vec![MemItem {
                instr: 0,
                store: false,
                guarded: false,
                size: 8,
            }],
            exits: vec![ExitItem {
                instr: 3,
                target: if inverted { 0x100b } else { 0x1000 },
                boring: true,
            }],
        }
    }

    fn run(words: &[u64]) -> ProcessCounts {
        let mut a = ProcessAnalysis::new(&ClassTable::bundled());
        a.feed(words).expect("feed");
        a.feed(&[control(crate::stream::TAG_END, 0)]).expect("end");
        a.snapshot()
    }

    #[test]
    fn loop_iterations_give_instructions_mix_strides_and_branch_rates() {
        for inverted in [true, false] {
            let mut w = encode::header(10, 0);
            w.push(control(TAG_THREAD, (1 << 32) | 10));
            w.extend(encode::sb_def(&loop_def(inverted)));
            let n = 100u64;
            for i in 0..n {
                w.push(control(TAG_SB_ENTER, 1));
                w.push(0x10_0000 + 8 * i);
                // The loop branch is taken except on the last iteration.
                let taken = i + 1 < n;
                let exit_taken = if inverted { !taken } else { taken };
                if exit_taken {
                    w.push(control(TAG_EXIT, 0));
                }
            }
            let c = run(&w);
            let t = &c.threads[0];
            assert_eq!(t.instructions, 4 * n);
            assert_eq!(t.data_accesses, n);
            assert_eq!(t.regular_accesses, n - 2);
            assert_eq!(t.branches.len(), 1);
            assert_eq!(t.branches[0].executions, n);
            assert_eq!(t.branches[0].taken, n - 1, "inverted={inverted}");
            assert_eq!(t.branches[0].transitions, 1);
            // rdi is written by `add` 3 instructions before the next `mov` reads it: RAW distance 3.
            assert!(t.raw[2] >= n - 1, "{:?}", t.raw);
            // mov [rdi] is a load whose address register was last written by an add: not chasing.
            assert_eq!(t.chased_loads, 0);
            // 800 bytes of data over 13 lines: everything but the first touch of each line hits at 4 KiB.
            let (h, _) = c.dcache.hit_rate(4096).unwrap();
            assert!((h - (n - 13) as f64 / n as f64).abs() < 1e-9, "{h}");
        }
    }

    #[test]
    fn each_thread_s_accesses_are_counted_apart_in_the_shared_data_cache() {
        // Two threads run the same loop, switching every iteration: thread 10 reads one line of
        // 8 (512 bytes, over and over), thread 11 a new line every time. Thread 10's reads come
        // back after 8 of its lines and 8 of the other's: they hit a shared 2 KiB cache, not a
        // 512-byte one. Thread 11's never hit.
        let mut w = encode::header(10, 0);
        w.extend(encode::sb_def(&loop_def(false)));
        let n = 4000u64;
        for i in 0..n {
            w.push(control(TAG_THREAD, (10 << 32) | 10));
            w.push(control(TAG_SB_ENTER, 1));
            w.push(0x10_0000 + 64 * (i % 8));
            w.push(control(TAG_EXIT, 0));
            w.push(control(TAG_THREAD, (11 << 32) | 11));
            w.push(control(TAG_SB_ENTER, 1));
            w.push(0x80_0000 + 64 * i);
            w.push(control(TAG_EXIT, 0));
        }
        let c = run(&w);
        let looped = c.dcache.counts_of(0);
        let streamed = c.dcache.counts_of(1);
        assert_eq!((looped.accesses(), streamed.accesses()), (n, n));
        assert!(looped.hit_rate(2048).unwrap().0 > 0.99);
        assert!(looped.hit_rate(512).unwrap().0 < 0.01);
        assert!(streamed.hit_rate(1 << 20).unwrap().0 < 0.01);
        // Both threads fetch the loop's one code line: each hits after its first fetch.
        assert!(c.icache.counts_of(1).hit_rate(64).unwrap().0 > 0.99);
    }

    #[test]
    fn every_access_to_a_line_two_threads_touch_counts_as_shared_whatever_the_line() {
        // Thread 10 reads line A (touched by thread 11 too) once every 4 iterations and its own
        // lines the other 3; thread 11 reads line A once and its own lines after. A split from a
        // sample of lines would find A in the sample or not, depending on A's hash (1 in 16):
        // shares of 1/4 and 1/n, or 0. Each of several addresses for A gives the exact shares.
        let n = 400u64;
        for a in [0x10_0000u64, 0x20_0040, 0x30_0080, 0x40_00c0, 0x55_5540] {
            let mut w = encode::header(10, 0);
            w.extend(encode::sb_def(&loop_def(false)));
            for i in 0..n {
                w.push(control(TAG_THREAD, (10 << 32) | 10));
                w.push(control(TAG_SB_ENTER, 1));
                w.push(if i % 4 == 0 {
                    a
                } else {
                    0x90_0000 + 64 * (i % 8)
                });
                w.push(control(TAG_EXIT, 0));
                w.push(control(TAG_THREAD, (11 << 32) | 11));
                w.push(control(TAG_SB_ENTER, 1));
                w.push(if i == 0 { a } else { 0xa0_0000 + 64 * i });
                w.push(control(TAG_EXIT, 0));
            }
            let c = run(&w);
            let shares: Vec<(u64, u64)> = c
                .threads
                .iter()
                .map(|t| (t.shared_accesses, t.data_accesses))
                .collect();
            assert_eq!(shares, vec![(n / 4, n), (1, n)], "line {a:#x}");
        }
    }

    fn one_instr_def(id: u64, addr: u64, bytes: &[u8]) -> SbDefinition {
        SbDefinition {
            id,
            start: addr,
            instrs: vec![instr(addr, bytes)],
            mems: vec![],
            exits: vec![],
        }
    }

    #[test]
    fn an_indirect_jump_counts_a_target_change_where_the_next_superblock_starts_elsewhere() {
        // jmp rax at 0x3000 (superblock 1), landing on 0x4000 (2) or 0x5000 (3), both `nop`; a
        // second thread runs in between without disturbing the first one's pending jump.
        let mut w = encode::header(10, 0);
        w.push(control(TAG_THREAD, (1 << 32) | 10));
        w.extend(encode::sb_def(&one_instr_def(1, 0x3000, &[0xff, 0xe0])));
        w.extend(encode::sb_def(&one_instr_def(2, 0x4000, &[0x90])));
        w.extend(encode::sb_def(&one_instr_def(3, 0x5000, &[0x90])));
        // Targets A A B A B B B: changes at executions 3, 4, 5 of 7.
        for (k, target) in [2u64, 2, 3, 2, 3, 3, 3].into_iter().enumerate() {
            w.push(control(TAG_SB_ENTER, 1));
            if k == 2 {
                w.push(control(TAG_THREAD, (2 << 32) | 11));
                w.push(control(TAG_SB_ENTER, 2));
                w.push(control(TAG_THREAD, (1 << 32) | 10));
            }
            w.push(control(TAG_SB_ENTER, target));
        }
        let c = run(&w);
        let t = &c.threads[0];
        assert_eq!(t.indirect.len(), 1);
        assert_eq!(t.indirect[0].executions, 7);
        assert_eq!(t.indirect[0].changes, 3);
        assert!(
            c.threads[1].indirect.is_empty(),
            "the other thread ran no jump"
        );
        assert!(
            t.branches.is_empty(),
            "an indirect jump is not a conditional branch"
        );
    }

    #[test]
    fn a_return_is_not_an_indirect_branch() {
        let mut w = encode::header(10, 0);
        w.push(control(TAG_THREAD, (1 << 32) | 10));
        w.extend(encode::sb_def(&one_instr_def(1, 0x3000, &[0xc3])));
        w.extend(encode::sb_def(&one_instr_def(2, 0x4000, &[0x90])));
        w.extend(encode::sb_def(&one_instr_def(3, 0x5000, &[0x90])));
        for target in [2u64, 3, 2] {
            w.push(control(TAG_SB_ENTER, 1));
            w.push(control(TAG_SB_ENTER, target));
        }
        assert!(run(&w).threads[0].indirect.is_empty());
    }

    #[test]
    fn pointer_chasing_is_a_load_whose_address_came_from_a_load() {
        // mov rdi,[rdi] in a loop.
        let def = SbDefinition {
            id: 1,
            start: 0x2000,
            instrs: vec![instr(0x2000, &[0x48, 0x8b, 0x3f])],
            mems: vec![MemItem {
                instr: 0,
                store: false,
                guarded: false,
                size: 8,
            }],
            exits: vec![],
        };
        let mut w = encode::header(1, 0);
        w.extend(encode::sb_def(&def));
        for i in 0..50u64 {
            w.push(control(TAG_SB_ENTER, 1));
            w.push(0x9000 + (i * 7919 % 50) * 64);
        }
        let c = run(&w);
        assert_eq!(c.threads[0].loads, 50);
        assert_eq!(c.threads[0].chased_loads, 49);
    }

    #[test]
    fn entering_an_undefined_superblock_is_an_error() {
        let mut a = ProcessAnalysis::new(&ClassTable::bundled());
        let mut w = encode::header(1, 0);
        w.push(control(TAG_SB_ENTER, 3));
        let e = a.feed(&w).unwrap_err().to_string();
        assert!(e.contains("before its definition"), "{e}");
    }

    #[test]
    fn words_may_arrive_split_anywhere() {
        let mut w = encode::header(10, 0);
        w.extend(encode::sb_def(&loop_def(true)));
        for i in 0..10u64 {
            w.push(control(TAG_SB_ENTER, 1));
            w.push(0x10_0000 + 8 * i);
        }
        let whole = run(&w).threads[0].instructions;
        for chunk in [1, 2, 3, 5] {
            let mut a = ProcessAnalysis::new(&ClassTable::bundled());
            for c in w.chunks(chunk) {
                a.feed(c).unwrap();
            }
            a.feed(&[control(crate::stream::TAG_END, 0)]).unwrap();
            assert_eq!(a.snapshot().threads[0].instructions, whole);
        }
    }

    #[test]
    fn dependency_bins_are_log2_up_to_1024() {
        assert_eq!(dep_bin(1), Some(0));
        assert_eq!(dep_bin(2), Some(1));
        assert_eq!(dep_bin(4), Some(2));
        assert_eq!(dep_bin(5), Some(3));
        assert_eq!(dep_bin(1024), Some(10));
        assert_eq!(dep_bin(1025), None);
    }
}
