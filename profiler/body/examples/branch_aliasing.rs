//! Replays cachegrind's conditional branch predictor over a program's body trace and says, per branch,
//! how many of its mispredictions came from another branch having written its counter last (aliasing)
//! and which branches did it. A look at why a clone mispredicts more than its design says.
//!
//! Cachegrind 3.19's predictor, as in its `cg_branchpred.c`: 16k 2-bit counters indexed by 7 bits of
//! global history above the branch address's low 7 bits; a side exit whose target is the next
//! instruction counts as inverted. The trace's side exits are the ones cachegrind instruments (the
//! same VEX IR), so the replay sees the outcomes cachegrind sees.
//!
//! Usage: cargo run --release -p ditto-body --example branch_aliasing -- [--after SECS]
//! [--start-file PATH] [--out FILE] -- PROGRAM [ARGS]. Counting starts SECS (default 3) after the
//! program starts, or once PATH exists, so a server's start-up and warm-up are left out; drive its
//! load meanwhile; the report is written when the program exits (stop a server by sending SIGINT to
//! the program under Valgrind, this process's child). Addresses are guest addresses (a PIE under
//! Valgrind loads at 0x108000); the report also sums them by the file mapped there (read from the
//! process's `/proc/PID/maps` when counting starts), by (file, instruction kind) and by (victim
//! file, aggressor file), and gives the guest instructions run while counting.
//! `validation/bench/branch-aliasing.sh` drives it for an original and its clone.
use std::collections::{BTreeMap, HashMap};
use std::io::{BufReader, Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ditto_body::stream::{self, SbDefinition};

const HIST_BITS: u32 = 7;
const ADDR_BITS: u32 = 7;

#[derive(Default)]
struct Site {
    executed: u64,
    mispredicted: u64,
    /// Mispredictions whose counter another branch had written last.
    aliased: u64,
    /// Taken as cachegrind records it (after the inversion rule).
    recorded_taken: u64,
    aggressors: HashMap<u64, u64>,
    /// The global histories this branch was predicted under, one bit each: the counters it uses.
    histories_seen: u128,
}

struct Predictor {
    counters: Vec<u8>,
    last_writer: Vec<u64>,
    history: u64,
    sites: HashMap<u64, Site>,
    histories: Vec<u64>,
    counting: bool,
    /// Guest instructions executed while counting.
    instructions: u64,
}

impl Predictor {
    fn new() -> Predictor {
        let n = 1usize << (HIST_BITS + ADDR_BITS);
        Predictor {
            counters: vec![0; n],
            last_writer: vec![0; n],
            history: 0,
            sites: HashMap::new(),
            histories: vec![0; 1 << HIST_BITS],
            counting: false,
            instructions: 0,
        }
    }

    fn branch(&mut self, addr: u64, taken: bool) {
        let hist = self.history & ((1 << HIST_BITS) - 1);
        let idx = ((hist << ADDR_BITS) | (addr & ((1 << ADDR_BITS) - 1))) as usize;
        let predicted = self.counters[idx] >= 2;
        let miss = predicted != taken;
        if self.counting {
            let writer = self.last_writer[idx];
            let s = self.sites.entry(addr).or_default();
            s.executed += 1;
            s.recorded_taken += u64::from(taken);
            s.histories_seen |= 1u128 << hist;
            if miss {
                s.mispredicted += 1;
                if writer != addr && writer != 0 {
                    s.aliased += 1;
                    *s.aggressors.entry(writer).or_default() += 1;
                }
            }
            self.histories[hist as usize] += 1;
        }
        self.history = (self.history << 1) | u64::from(taken);
        let c = &mut self.counters[idx];
        if taken {
            *c = (*c + 1).min(3);
        } else {
            *c = c.saturating_sub(1);
        }
        self.last_writer[idx] = addr;
    }
}

/// What one superblock's execution needs: its side exits' instruction addresses, whether each is
/// a conditional branch, and whether cachegrind counts it inverted.
struct Exits {
    exits: Vec<(u64, bool, bool)>,
    /// Each exit's instruction index, and the superblock's instruction count: the guest
    /// instructions an execution ran, so that branches can be read per instruction as well.
    exit_instr: Vec<u16>,
    instrs: u64,
}

/// What kind of instruction a side exit belongs to: cachegrind counts every guarded exit of the IR as a
/// conditional branch, and not all of them are `jcc` (a rep-string iteration, a `cmpxchg` retry).
fn exit_kind(bytes: &[u8], addr: u64) -> String {
    let mut d = iced_x86::Decoder::with_ip(64, bytes, addr, iced_x86::DecoderOptions::NONE);
    let i = d.decode();
    if i.flow_control() == iced_x86::FlowControl::ConditionalBranch {
        "jcc".to_string()
    } else if i.has_rep_prefix() || i.has_repe_prefix() || i.has_repne_prefix() {
        format!("rep {:?}", i.mnemonic()).to_lowercase()
    } else {
        format!("{:?}", i.mnemonic()).to_lowercase()
    }
}

fn exits_of(def: &SbDefinition) -> Exits {
    Exits {
        exits: def
            .exits
            .iter()
            .map(|e| {
                let i = &def.instrs[e.instr as usize];
                let next = i.addr + i.bytes.len() as u64;
                (i.addr, e.boring, e.target == next)
            })
            .collect(),
        exit_instr: def.exits.iter().map(|e| e.instr).collect(),
        instrs: def.instrs.len() as u64,
    }
}

/// The process's file mappings (executable ones), as (start, end, file name).
fn read_maps(pid: u32) -> Vec<(u64, u64, String)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let range = it.next()?;
            let perms = it.next()?;
            let path = it.nth(3)?;
            if !perms.contains('x') || !path.starts_with('/') {
                return None;
            }
            let (lo, hi) = range.split_once('-')?;
            let name = path.rsplit('/').next().unwrap_or(path).to_string();
            Some((
                u64::from_str_radix(lo, 16).ok()?,
                u64::from_str_radix(hi, 16).ok()?,
                name,
            ))
        })
        .collect()
}

fn main() -> Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut after = 3.0f64;
    let mut out = String::from("branch-aliasing.tsv");
    let mut start_file: Option<std::path::PathBuf> = None;
    while let Some(a) = args.first().cloned() {
        match a.as_str() {
            "--after" => {
                after = args.get(1).context("--after needs seconds")?.parse()?;
                args.drain(..2);
            }
            "--start-file" => {
                start_file = Some(args.get(1).context("--start-file needs a path")?.into());
                args.drain(..2);
            }
            "--out" => {
                out = args.get(1).context("--out needs a file")?.clone();
                args.drain(..2);
            }
            "--" => {
                args.remove(0);
                break;
            }
            _ => break,
        }
    }
    if args.is_empty() {
        bail!(
            "usage: branch_aliasing [--after SECS] [--start-file PATH] [--out FILE] -- PROGRAM [ARGS]"
        );
    }
    let tool = ditto_body::tool::ensure_tool()?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let mut child = tool
        .command(addr, &[], &args)
        .spawn()
        .with_context(|| format!("starting {} under the ditto-body tool", args[0]))?;
    // Wait for the tool's connection, or for the program to die before it connects.
    listener.set_nonblocking(true)?;
    let sock = loop {
        match listener.accept() {
            Ok((sock, _)) => break sock,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if let Some(status) = child.try_wait()? {
                    bail!("{} exited ({status}) before its trace started", args[0]);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e).context("accepting the tool's connection"),
        }
    };
    sock.set_nonblocking(false)?;
    let start = Instant::now();
    let mut r = BufReader::with_capacity(1 << 20, sock);
    let mut word = || -> Option<u64> {
        let mut b = [0u8; 8];
        r.read_exact(&mut b).ok().map(|_| u64::from_le_bytes(b))
    };
    let mut header = Vec::new();
    for _ in 0..stream::HEADER_WORDS {
        header.push(word().context("stream ended in its header")?);
    }
    stream::parse_header(&header)?;
    let mut defs: HashMap<u64, Exits> = HashMap::new();
    let mut kinds: HashMap<u64, String> = HashMap::new();
    let mut p = Predictor::new();
    // The superblock running and whether a side exit already ended it.
    let mut current: Option<u64> = None;
    let mut maps: Vec<(u64, u64, String)> = Vec::new();
    let run_all = |p: &mut Predictor, defs: &HashMap<u64, Exits>, sb: u64, taken: Option<usize>| {
        let Some(e) = defs.get(&sb) else { return };
        let last = taken.unwrap_or(usize::MAX);
        if p.counting {
            p.instructions += match taken {
                Some(k) => e.exit_instr.get(k).map_or(e.instrs, |&i| u64::from(i) + 1),
                None => e.instrs,
            };
        }
        for (k, &(addr, boring, inverted)) in e.exits.iter().enumerate() {
            if k > last {
                break;
            }
            if boring {
                p.branch(addr, (k == last) ^ inverted);
            }
        }
    };
    while let Some(w) = word() {
        if w & stream::CONTROL == 0 || w == stream::SKIPPED {
            continue;
        }
        let payload = w & stream::PAYLOAD_MASK;
        match stream::tag(w) {
            stream::TAG_SB_ENTER => {
                if let Some(sb) = current.take() {
                    run_all(&mut p, &defs, sb, None);
                }
                current = Some(payload);
            }
            stream::TAG_EXIT => {
                if let Some(sb) = current.take() {
                    run_all(&mut p, &defs, sb, Some(payload as usize));
                }
            }
            stream::TAG_THREAD => {
                let due = match &start_file {
                    Some(path) => path.exists(),
                    None => start.elapsed() > Duration::from_secs_f64(after),
                };
                if !p.counting && due {
                    p.counting = true;
                    maps = read_maps(child.id());
                    eprintln!("branch_aliasing: counting from now");
                }
            }
            stream::TAG_SB_DEF => {
                let mut words = Vec::with_capacity(payload as usize);
                for _ in 0..payload {
                    words.push(word().context("stream ended in a definition")?);
                }
                let def = stream::parse_sb_def(&words)?;
                for e in def.exits.iter().filter(|e| e.boring) {
                    let i = &def.instrs[e.instr as usize];
                    kinds
                        .entry(i.addr)
                        .or_insert_with(|| exit_kind(&i.bytes, i.addr));
                }
                defs.insert(def.id, exits_of(&def));
            }
            stream::TAG_END => break,
            _ => {}
        }
    }
    let _ = child.wait();
    let mut f = std::fs::File::create(&out)?;
    let total: u64 = p.sites.values().map(|s| s.executed).sum();
    let miss: u64 = p.sites.values().map(|s| s.mispredicted).sum();
    let aliased: u64 = p.sites.values().map(|s| s.aliased).sum();
    writeln!(
        f,
        "# executed {total} mispredicted {miss} aliased {aliased} instructions {}\n# addr\texecuted\thistories\trecorded_taken\tmispredicted\taliased\ttop aggressors (addr:count)",
        p.instructions
    )?;
    let mut sites: Vec<_> = p.sites.iter().collect();
    sites.sort_by_key(|(_, s)| std::cmp::Reverse(s.mispredicted));
    for (addr, s) in sites {
        let mut ag: Vec<_> = s.aggressors.iter().collect();
        ag.sort_by_key(|(_, n)| std::cmp::Reverse(**n));
        let ag: Vec<String> = ag
            .iter()
            .take(4)
            .map(|(a, n)| format!("{a:#x}:{n}"))
            .collect();
        writeln!(
            f,
            "{addr:#x}\t{}\t{}\t{}\t{}\t{}\t{}",
            s.executed,
            s.histories_seen.count_ones(),
            s.recorded_taken,
            s.mispredicted,
            s.aliased,
            ag.join(" ")
        )?;
    }
    // By file: each site's and each aggressor's mapping.
    let file_of = |a: u64| -> String {
        maps.iter()
            .find(|(lo, hi, _)| (*lo..*hi).contains(&a))
            .map_or_else(|| "?".to_string(), |(_, _, f)| f.clone())
    };
    let mut by_file: BTreeMap<String, [u64; 3]> = BTreeMap::new();
    let mut pairs: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (addr, s) in &p.sites {
        let f = file_of(*addr);
        let e = by_file.entry(f.clone()).or_default();
        e[0] += s.executed;
        e[1] += s.mispredicted;
        e[2] += s.aliased;
        for (a, n) in &s.aggressors {
            *pairs.entry((f.clone(), file_of(*a))).or_default() += n;
        }
    }
    writeln!(f, "# by file: executed, mispredicted, aliased")?;
    for (file, [e, m, a]) in &by_file {
        writeln!(f, "# file {file}\t{e}\t{m}\t{a}")?;
    }
    let mut by_kind: BTreeMap<(String, String), [u64; 2]> = BTreeMap::new();
    for (addr, s) in &p.sites {
        let k = kinds.get(addr).cloned().unwrap_or_else(|| "?".to_string());
        let e = by_kind.entry((file_of(*addr), k)).or_default();
        e[0] += s.executed;
        e[1] += s.mispredicted;
    }
    writeln!(f, "# by file and instruction: executed, mispredicted")?;
    for ((file, k), [e, m]) in &by_kind {
        writeln!(f, "# kind {file}\t{k}\t{e}\t{m}")?;
    }
    writeln!(
        f,
        "# aliased mispredictions by victim file <- aggressor file"
    )?;
    for ((v, a), n) in &pairs {
        writeln!(f, "# pair {v} <- {a}\t{n}")?;
    }
    let mut h: Vec<_> = p.histories.iter().enumerate().collect();
    h.sort_by_key(|(_, n)| std::cmp::Reverse(**n));
    let top: Vec<String> = h
        .iter()
        .take(8)
        .map(|(k, n)| format!("{k:07b}:{n}"))
        .collect();
    eprintln!(
        "branch_aliasing: {total} conditional branches, {miss} mispredicted ({aliased} aliased); commonest histories {}; report in {out}",
        top.join(" ")
    );
    Ok(())
}
