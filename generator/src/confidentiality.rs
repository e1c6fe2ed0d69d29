//! Confidentiality check: a clone's binary must contain nothing of the original executable — no run of
//! 16 or more bytes of its code, none of its strings, none of its own symbol names.
//!
//! The rule, precisely (also in docs/generator.md):
//!
//! * **Code**: every 16-byte window of the original's executable sections (`SHF_EXECINSTR`, e.g. `.text`)
//!   is put in a hash set (a window is a `u128`, so the set is exact, with no hash collisions to verify);
//!   every 16-byte window of the whole clone file is looked up. Windows are ignored when they are
//!   alignment padding (all bytes from the NOP/int3/zero encodings), lie in linker-generated sections
//!   (`.plt*`, `.init`, `.fini`, GOT, dynamic tables, unwind tables) or in the C start-up functions
//!   (`_start`, `frame_dummy`, …, located through either file's symbol table), or occur in a
//!   *baseline* binary — `int main(void){return 0;}` built by the same C compiler: the glue every gcc
//!   program links is in both binaries and is nobody's secret.
//!   Compiler idioms in a matching run do not count towards its 16 bytes: alignment padding, push and
//!   pop of registers, `ret`, `sub/add rsp, imm`, `endbr64`, spills of argument registers to the stack
//!   and the variadic prologue (`test al, al; je; movaps [rsp+d], xmm0…7`) — a standard epilogue, NOP
//!   padding and the next function's standard prologue are in every gcc binary, back to back.
//! * **Strings**: printable ASCII runs of at least 8 bytes in the original's `.rodata*` sections; each is
//!   searched in the clone file outside its debug information and symbol/string tables (index on the
//!   first 8 bytes, then a full compare). Strings that also occur in the baseline, or in ditto's own
//!   runtime sources (protocol keywords such as `Content-Length`, system call names: ditto's vocabulary,
//!   written without the original), are ignored.
//! * **Symbols**: names the original *defines* in `.symtab`/`.dynsym`. A clone symbol (either table)
//!   with the same name is a finding, unless the original only imports that name (a library API such as
//!   `memcpy` or `pthread_create`, which both may call) or the baseline has it (`main`, `_start`, and
//!   the C library's data objects such as `stderr` that a PIE defines through a copy relocation).
//!
//! Only 64-bit little-endian ELF files are read (x86-64 Linux, what clones are built for).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

const WINDOW: usize = 16;
const MIN_STRING: usize = 8;
const SHF_EXECINSTR: u64 = 0x4;
const SHT_SYMTAB: u32 = 2;
const SHT_NOBITS: u32 = 8;
const SHT_DYNSYM: u32 = 11;
/// Bytes of NOP encodings, int3 and zero fill: a window made only of these is alignment padding.
const PADDING_BYTES: [u8; 11] = [
    0x00, 0x0f, 0x1f, 0x2e, 0x40, 0x44, 0x66, 0x80, 0x84, 0x90, 0xcc,
];

/// A section header of an ELF64 file.
#[derive(Debug, Clone)]
pub struct Section {
    pub name: String,
    pub kind: u32,
    pub flags: u64,
    pub addr: u64,
    pub offset: u64,
    pub size: u64,
    pub link: u32,
}

/// A symbol: its name, section index (0: undefined, an import) and address range.
#[derive(Debug, Clone)]
pub struct Symbol {
    pub name: String,
    pub shndx: u16,
    pub value: u64,
    pub size: u64,
}

/// Functions the C start-up files (crt1.o, crti.o, crtbegin.o, …) put into every program: the same
/// bytes in any two gcc-built binaries, and nobody's code.
const CRT_FUNCTIONS: [&str; 10] = [
    "_start",
    "_init",
    "_fini",
    "deregister_tm_clones",
    "register_tm_clones",
    "__do_global_dtors_aux",
    "frame_dummy",
    "_dl_relocate_static_pie",
    "__libc_csu_init",
    "__libc_csu_fini",
];

/// Sections the linker or the start-up files generate (PLT stubs, GOT, dynamic-linking tables,
/// unwind tables, notes): identical in shape across binaries, never the original's own code or data.
fn linker_section(name: &str) -> bool {
    const PREFIXES: [&str; 14] = [
        ".plt",
        ".got",
        ".interp",
        ".note",
        ".gnu",
        ".dyn",
        ".rela",
        ".eh_frame",
        ".comment",
        ".symtab",
        ".strtab",
        ".shstrtab",
        ".debug",
        ".init_array",
    ];
    name == ".init"
        || name == ".fini"
        || name == ".fini_array"
        || PREFIXES.iter().any(|p| name.starts_with(p))
}

/// A parsed ELF64 little-endian file: its bytes and section headers.
pub struct Elf {
    pub data: Vec<u8>,
    pub sections: Vec<Section>,
}

fn u16_at(d: &[u8], o: usize) -> Option<u16> {
    d.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]))
}
fn u32_at(d: &[u8], o: usize) -> Option<u32> {
    d.get(o..o + 4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
}
fn u64_at(d: &[u8], o: usize) -> Option<u64> {
    d.get(o..o + 8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
}
fn cstr(d: &[u8], o: usize) -> String {
    let s = d.get(o..).unwrap_or_default();
    let end = s.iter().position(|b| *b == 0).unwrap_or(s.len());
    String::from_utf8_lossy(&s[..end]).into_owned()
}

impl Elf {
    pub fn read(path: &Path) -> Result<Elf> {
        let data =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        Elf::parse(data).with_context(|| format!("{}", path.display()))
    }

    pub fn parse(data: Vec<u8>) -> Result<Elf> {
        if data.get(0..4) != Some(b"\x7fELF") {
            bail!("not an ELF file");
        }
        if data.get(4) != Some(&2) || data.get(5) != Some(&1) {
            bail!("only 64-bit little-endian ELF files are supported");
        }
        let bad = || anyhow::anyhow!("truncated ELF header");
        let shoff = u64_at(&data, 0x28).ok_or_else(bad)? as usize;
        let shentsize = usize::from(u16_at(&data, 0x3a).ok_or_else(bad)?);
        let mut shnum = usize::from(u16_at(&data, 0x3c).ok_or_else(bad)?);
        let mut shstrndx = usize::from(u16_at(&data, 0x3e).ok_or_else(bad)?);
        if shoff == 0 {
            return Ok(Elf {
                data,
                sections: Vec::new(),
            });
        }
        if shentsize < 64 {
            bail!("section header entries of {shentsize} bytes (64 expected)");
        }
        // Extended numbering: the real counts live in section 0.
        if shnum == 0 {
            shnum = u64_at(&data, shoff + 32).ok_or_else(bad)? as usize;
        }
        if shstrndx == 0xffff {
            shstrndx = u32_at(&data, shoff + 40).ok_or_else(bad)? as usize;
        }
        if shnum > 65_536 * 16 {
            bail!("implausible section count {shnum}");
        }
        let mut raw = Vec::with_capacity(shnum);
        for i in 0..shnum {
            let o = shoff + i * shentsize;
            let trunc = || anyhow::anyhow!("section header {i} is outside the file");
            raw.push((
                u32_at(&data, o).ok_or_else(trunc)?,
                Section {
                    name: String::new(),
                    kind: u32_at(&data, o + 4).ok_or_else(trunc)?,
                    flags: u64_at(&data, o + 8).ok_or_else(trunc)?,
                    addr: u64_at(&data, o + 16).ok_or_else(trunc)?,
                    offset: u64_at(&data, o + 24).ok_or_else(trunc)?,
                    size: u64_at(&data, o + 32).ok_or_else(trunc)?,
                    link: u32_at(&data, o + 40).ok_or_else(trunc)?,
                },
            ));
        }
        let strtab = raw
            .get(shstrndx)
            .map(|(_, s)| (s.offset as usize, s.size as usize));
        let sections = raw
            .into_iter()
            .map(|(name_off, mut s)| {
                if let Some((o, n)) = strtab {
                    if (name_off as usize) < n {
                        s.name = cstr(&data, o + name_off as usize);
                    }
                }
                s
            })
            .collect();
        Ok(Elf { data, sections })
    }

    /// The bytes of a section in the file (empty for NOBITS or out-of-range sections).
    pub fn bytes(&self, s: &Section) -> &[u8] {
        if s.kind == SHT_NOBITS {
            return &[];
        }
        let (o, n) = (s.offset as usize, s.size as usize);
        self.data.get(o..o.saturating_add(n)).unwrap_or_default()
    }

    /// Symbol names: (name, defined here).
    pub fn symbols(&self) -> Vec<(String, bool)> {
        self.symbol_table()
            .into_iter()
            .map(|s| (s.name, s.shndx != 0))
            .collect()
    }

    /// Every named symbol of `.symtab` and `.dynsym` (not section or file symbols).
    pub fn symbol_table(&self) -> Vec<Symbol> {
        let mut out = Vec::new();
        for s in &self.sections {
            if s.kind != SHT_SYMTAB && s.kind != SHT_DYNSYM {
                continue;
            }
            let Some(strtab) = self.sections.get(s.link as usize) else {
                continue;
            };
            let names = self.bytes(strtab);
            let table = self.bytes(s);
            for e in table.chunks_exact(24) {
                let name_off = u32_at(e, 0).unwrap_or(0) as usize;
                let info = e[4];
                let shndx = u16_at(e, 6).unwrap_or(0);
                let kind = info & 0xf;
                if name_off == 0 || kind == 3 || kind == 4 {
                    continue; // unnamed, section or file symbols
                }
                let name = cstr(names, name_off);
                if !name.is_empty() {
                    out.push(Symbol {
                        name,
                        shndx,
                        value: u64_at(e, 8).unwrap_or(0),
                        size: u64_at(e, 16).unwrap_or(0),
                    });
                }
            }
        }
        out
    }
}

impl Elf {
    /// File byte ranges of linker-generated sections and start-up functions.
    pub fn glue_ranges(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for s in &self.sections {
            if s.kind != SHT_NOBITS && linker_section(&s.name) {
                out.push((s.offset as usize, (s.offset + s.size) as usize));
            }
        }
        let syms = self.symbol_table();
        for sym in syms
            .iter()
            .filter(|s| CRT_FUNCTIONS.contains(&s.name.as_str()))
        {
            let Some(sec) = self.sections.get(usize::from(sym.shndx)) else {
                continue;
            };
            if sym.shndx == 0 || sym.value < sec.addr || sym.value >= sec.addr + sec.size {
                continue;
            }
            // crtstuff symbols have no size: they end where the next symbol of the section starts.
            let end = if sym.size > 0 {
                sym.value + sym.size
            } else {
                syms.iter()
                    .filter(|o| o.shndx == sym.shndx && o.value > sym.value)
                    .map(|o| o.value)
                    .min()
                    .unwrap_or(sec.addr + sec.size)
            };
            let start = (sym.value - sec.addr + sec.offset) as usize;
            out.push((
                start,
                start + (end.min(sec.addr + sec.size) - sym.value) as usize,
            ));
        }
        out
    }
}

/// For each byte, whether it lies in one of `ranges`, as a prefix count so that "does [i, i+n)
/// touch a range" is O(1).
fn prefix_mask(len: usize, ranges: &[(usize, usize)]) -> Vec<u32> {
    let mut mark = vec![0u8; len];
    for &(a, b) in ranges {
        for m in mark.iter_mut().take(b.min(len)).skip(a) {
            *m = 1;
        }
    }
    let mut pre = vec![0u32; len + 1];
    for i in 0..len {
        pre[i + 1] = pre[i] + u32::from(mark[i]);
    }
    pre
}

/// Bytes of `run` that are not compiler idioms (see `check_clone_with`). Scans greedily from the start.
pub fn informative_len(run: &[u8]) -> usize {
    let mut i = 0;
    let mut n = 0;
    while i < run.len() {
        let rest = &run[i..];
        let spill8 = |r: &[u8]| r.len() >= 4 && r[2] == 0x24 && (r[1] & 0xc7) == 0x44;
        let spill32 = |r: &[u8]| r.len() >= 7 && r[2] == 0x24 && (r[1] & 0xc7) == 0x84;
        let idiom = if rest.starts_with(&[0xf3, 0x0f, 0x1e, 0xfa]) {
            4 // endbr64
        } else if rest.len() >= 2
            && ((matches!(rest[0], 0x48 | 0x4c) && rest[1] == 0x89)
                || (rest[0] == 0x0f && rest[1] == 0x29))
            && spill8(&rest[1..])
        {
            5 // mov [rsp + d8], reg (an argument spill) or movaps [rsp + d8], xmm (the variadic
              // prologue's register save area)
        } else if rest.len() >= 2 && rest[0] == 0x0f && rest[1] == 0x29 && spill32(&rest[1..]) {
            8 // movaps [rsp + d32], xmm
        } else if rest.len() >= 4 && rest[0] == 0x84 && rest[1] == 0xc0 && rest[2] == 0x74 {
            4 // test al, al; je: the variadic prologue's test for vector arguments
        } else if rest.len() >= 7
            && rest[0] == 0x48
            && rest[1] == 0x81
            && matches!(rest[2], 0xec | 0xc4)
        {
            7 // sub/add rsp, imm32
        } else if rest.len() >= 4
            && rest[0] == 0x48
            && rest[1] == 0x83
            && matches!(rest[2], 0xec | 0xc4)
        {
            4 // sub/add rsp, imm8
        } else if rest.len() >= 2 && rest[0] == 0x41 && (0x50..=0x5f).contains(&rest[1]) {
            2 // push/pop r8–r15
        } else if (0x50..=0x5f).contains(&rest[0])
            || rest[0] == 0xc3
            || PADDING_BYTES.contains(&rest[0])
        {
            1 // push/pop, ret, padding
        } else {
            n += 1;
            1
        };
        i += idiom;
    }
    n
}

fn window(d: &[u8], i: usize) -> u128 {
    let mut b = [0u8; WINDOW];
    b.copy_from_slice(&d[i..i + WINDOW]);
    u128::from_le_bytes(b)
}

fn is_padding(d: &[u8]) -> bool {
    d.iter().all(|b| PADDING_BYTES.contains(b))
}

fn printable_runs(d: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, &b) in d.iter().enumerate() {
        let p = (0x20..0x7f).contains(&b) || b == b'\t';
        match (p, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                if i - s >= MIN_STRING {
                    out.push(&d[s..i]);
                }
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        if d.len() - s >= MIN_STRING {
            out.push(&d[s..]);
        }
    }
    out
}

/// One run of the original's code found in the clone.
#[derive(Debug, Clone, PartialEq)]
pub struct CodeRun {
    /// Offset in the clone file.
    pub clone_offset: u64,
    /// File offset in the original of the first matching window.
    pub original_offset: u64,
    /// Length of the run, bytes (≥ 16).
    pub len: u64,
}

/// The result of a check.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub clone: PathBuf,
    pub original: PathBuf,
    pub code_runs: Vec<CodeRun>,
    pub strings: Vec<String>,
    pub symbols: Vec<String>,
    /// Original code bytes, strings and defined symbols that were checked.
    pub checked_code_bytes: u64,
    pub checked_strings: u64,
    pub checked_symbols: u64,
    /// Limits of this check (e.g. no baseline compiler).
    pub notes: Vec<String>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.code_runs.is_empty() && self.strings.is_empty() && self.symbols.is_empty()
    }

    /// A markdown summary for the clone's README.
    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        let name = self
            .original
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        s.push_str(&format!(
            "Checked the built `clone` against the original executable `{name}`: {} bytes of its code \
             (every 16-byte window), {} strings of 8 bytes or more from its read-only data, {} symbol \
             names it defines.\n\n",
            self.checked_code_bytes, self.checked_strings, self.checked_symbols
        ));
        if self.passed() {
            s.push_str("**Passed**: no 16-byte run of the original's code, none of its strings and none of its \
                        symbol names occur in the clone.\n");
        } else {
            s.push_str(&format!(
                "**Failed**: {} code run(s), {} string(s), {} symbol name(s) of the original occur in the clone.\n",
                self.code_runs.len(),
                self.strings.len(),
                self.symbols.len()
            ));
        }
        for n in &self.notes {
            s.push_str(&format!("\nNote: {n}\n"));
        }
        s
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "confidentiality: {} ({} code bytes, {} strings, {} symbols checked)",
            if self.passed() { "passed" } else { "FAILED" },
            self.checked_code_bytes,
            self.checked_strings,
            self.checked_symbols
        )?;
        for r in self.code_runs.iter().take(10) {
            writeln!(
                f,
                "  code: {} bytes at clone offset {:#x} = original offset {:#x}",
                r.len, r.clone_offset, r.original_offset
            )?;
        }
        for st in self.strings.iter().take(10) {
            writeln!(f, "  string: {st:?}")?;
        }
        for sy in self.symbols.iter().take(10) {
            writeln!(f, "  symbol: {sy}")?;
        }
        for n in &self.notes {
            writeln!(f, "  note: {n}")?;
        }
        Ok(())
    }
}

/// What a check compares against besides the two binaries.
#[derive(Debug, Clone, Default)]
pub struct Baseline {
    /// Bytes of the baseline program; `None` when none could be built.
    pub bytes: Option<Vec<u8>>,
    pub symbols: HashSet<String>,
    /// ditto's own public source text (the runtime every clone carries): a string that occurs in it
    /// is ditto's vocabulary (protocol keywords such as `Content-Length`, syscall names), written
    /// without the original, so finding it in a clone is no leak.
    pub public_text: Vec<u8>,
}

impl Baseline {
    /// Builds `int main(void){return 0;}` with `cc` (the compiler clones are built with). Returns an
    /// empty baseline (and the reason) when that is impossible.
    pub fn build() -> (Baseline, Option<String>) {
        let dir = std::env::temp_dir().join(format!("ditto-baseline-{}", std::process::id()));
        let result = (|| -> Result<Baseline> {
            std::fs::create_dir_all(&dir)?;
            let src = dir.join("baseline.c");
            let bin = dir.join("baseline");
            std::fs::write(&src, BASELINE_C)?;
            let out = std::process::Command::new("cc")
                .args(["-O2", "-pthread", "-o"])
                .arg(&bin)
                .arg(&src)
                .output()
                .context("cannot run cc")?;
            if !out.status.success() {
                bail!("cc failed: {}", String::from_utf8_lossy(&out.stderr).trim());
            }
            Baseline::from_file(&bin)
        })();
        let _ = std::fs::remove_dir_all(&dir);
        let public_text = crate::RUNTIME_FILES
            .iter()
            .flat_map(|(_, t)| t.bytes().chain(std::iter::once(0u8)))
            .collect();
        match result {
            Ok(b) => (Baseline { public_text, ..b }, None),
            Err(e) => (
                Baseline {
                    public_text,
                    ..Baseline::default()
                },
                Some(format!(
                    "no baseline program could be built ({e:#}); C start-up code shared by every gcc \
                     program may be reported"
                )),
            ),
        }
    }

    pub fn from_file(path: &Path) -> Result<Baseline> {
        let elf = Elf::read(path)?;
        let symbols = elf.symbols().into_iter().map(|(n, _)| n).collect();
        Ok(Baseline {
            bytes: Some(elf.data),
            symbols,
            public_text: Vec::new(),
        })
    }
}

/// The baseline program: nothing of its own, but it references the C library's data objects that
/// programs commonly use, because a PIE executable that uses `stderr` *defines* it (a copy
/// relocation): then both the original and the clone define `stderr`, and that is no leak.
const BASELINE_C: &str = "#include <stdio.h>\n#include <unistd.h>\n#include <getopt.h>\n#include <errno.h>\n\
extern char **environ;\n\
int main(int argc, char **argv) {\n\
    (void)argv;\n\
    if (argc > 99) { fputs(optarg, stderr); fputs(\"\", stdout); return getc(stdin) + optind + opterr + optopt + (environ != 0) + errno; }\n\
    return 0;\n}\n";

/// Checks `binary` (a built clone) against `original`, with a baseline built by `cc`.
pub fn check_clone(binary: &Path, original: &Path) -> Result<Report> {
    let (baseline, note) = Baseline::build();
    let mut r = check_clone_with(binary, original, &baseline)?;
    r.notes.extend(note);
    Ok(r)
}

/// Checks `binary` against `original`, ignoring what `baseline` also contains.
pub fn check_clone_with(binary: &Path, original: &Path, baseline: &Baseline) -> Result<Report> {
    let orig = Elf::read(original)?;
    let clone =
        std::fs::read(binary).with_context(|| format!("cannot read {}", binary.display()))?;
    let mut report = Report {
        clone: binary.to_path_buf(),
        original: original.to_path_buf(),
        ..Report::default()
    };
    if orig.sections.is_empty() {
        report
            .notes
            .push("the original has no section headers; only its whole file could be used".into());
    }

    let base_windows: HashSet<u128> = baseline
        .bytes
        .as_deref()
        .map(|b| {
            (0..b.len().saturating_sub(WINDOW - 1))
                .map(|i| window(b, i))
                .collect()
        })
        .unwrap_or_default();

    // Code: every 16-byte window of the executable sections → its first file offset.
    let mut code: HashMap<u128, u64> = HashMap::new();
    let orig_glue = prefix_mask(orig.data.len(), &orig.glue_ranges());
    for s in orig
        .sections
        .iter()
        .filter(|s| s.flags & SHF_EXECINSTR != 0 && !linker_section(&s.name))
    {
        let b = orig.bytes(s);
        report.checked_code_bytes += b.len() as u64;
        for i in 0..b.len().saturating_sub(WINDOW - 1) {
            let w = &b[i..i + WINDOW];
            let fo = s.offset as usize + i;
            if is_padding(w) || orig_glue[fo + WINDOW] != orig_glue[fo] {
                continue;
            }
            let key = window(b, i);
            if base_windows.contains(&key) {
                continue;
            }
            code.entry(key).or_insert(s.offset + i as u64);
        }
    }
    let clone_elf = Elf::parse(clone.clone());
    let clone_glue = prefix_mask(
        clone.len(),
        &clone_elf
            .as_ref()
            .map(|e| e.glue_ranges())
            .unwrap_or_default(),
    );
    let mut last_end: Option<u64> = None;
    for i in 0..clone.len().saturating_sub(WINDOW - 1) {
        if clone_glue[i + WINDOW] != clone_glue[i] {
            continue;
        }
        if let Some(&o) = code.get(&window(&clone, i)) {
            let i = i as u64;
            match (report.code_runs.last_mut(), last_end) {
                // Overlapping windows extend the same run.
                (Some(run), Some(end)) if i < end => {
                    run.len = i + WINDOW as u64 - run.clone_offset;
                }
                _ => report.code_runs.push(CodeRun {
                    clone_offset: i,
                    original_offset: o,
                    len: WINDOW as u64,
                }),
            }
            last_end = Some(i + WINDOW as u64);
        }
    }

    // Compiler idioms (alignment padding, pushes and pops of callee-saved registers, stack adjusts,
    // ret, endbr64) do not count towards a run's 16 bytes: every gcc binary has `pop rbx … ret`, NOP
    // padding and `push r15 … sub rsp, 0x48` next to each other, so such runs are no copy of anybody's
    // code.
    report.code_runs.retain(|r| {
        let a = r.clone_offset as usize;
        informative_len(&clone[a..a + r.len as usize]) >= WINDOW
    });

    // Strings of the read-only data.
    let base_bytes = baseline.bytes.as_deref().unwrap_or_default();
    let mut strings: Vec<Vec<u8>> = Vec::new();
    for s in orig
        .sections
        .iter()
        .filter(|s| s.name.starts_with(".rodata"))
    {
        for run in printable_runs(orig.bytes(s)) {
            strings.push(run.to_vec());
        }
    }
    strings.sort();
    strings.dedup();
    strings.retain(|s| !contains(base_bytes, s) && !contains(&baseline.public_text, s));
    report.checked_strings = strings.len() as u64;
    let mut by_prefix: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, s) in strings.iter().enumerate() {
        by_prefix.entry(prefix(s, 0)).or_default().push(i);
    }
    let mut found = vec![false; strings.len()];
    for i in 0..clone.len().saturating_sub(MIN_STRING - 1) {
        // Debug information, symbol and dynamic string tables are the clone's own metadata (symbol
        // names are compared below).
        if clone_glue[i + 1] != clone_glue[i] {
            continue;
        }
        if let Some(cands) = by_prefix.get(&prefix(&clone, i)) {
            for &c in cands {
                if !found[c] && clone[i..].starts_with(&strings[c]) {
                    found[c] = true;
                }
            }
        }
    }
    report.strings = strings
        .iter()
        .zip(&found)
        .filter(|(_, f)| **f)
        .map(|(s, _)| String::from_utf8_lossy(s).into_owned())
        .collect();

    // Symbols the original defines (and does not also import), found among the clone's.
    let osyms = orig.symbols();
    let imported: HashSet<&str> = osyms
        .iter()
        .filter(|(_, d)| !*d)
        .map(|(n, _)| n.as_str())
        .collect();
    let mut defined: Vec<&str> = osyms
        .iter()
        .filter(|(n, d)| *d && !imported.contains(n.as_str()) && !baseline.symbols.contains(n))
        .map(|(n, _)| n.as_str())
        .collect();
    defined.sort();
    defined.dedup();
    report.checked_symbols = defined.len() as u64;
    let csyms: HashSet<String> = match clone_elf {
        Ok(e) => e.symbols().into_iter().map(|(n, _)| n).collect(),
        Err(e) => {
            report.notes.push(format!(
                "the clone is not a readable ELF file ({e:#}); symbols not compared"
            ));
            HashSet::new()
        }
    };
    report.symbols = defined
        .into_iter()
        .filter(|n| csyms.contains(*n))
        .map(str::to_string)
        .collect();
    Ok(report)
}

fn prefix(d: &[u8], i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[i..i + 8]);
    u64::from_le_bytes(b)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_and_runs() {
        assert!(is_padding(&[
            0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0, 0x0f, 0x1f, 0x40, 0, 0x90, 0xcc
        ]));
        assert!(!is_padding(b"0123456789abcdef"));
        let runs = printable_runs(b"\0short\0long enough string\0abcdefgh");
        assert_eq!(runs, vec![&b"long enough string"[..], &b"abcdefgh"[..]]);
    }

    #[test]
    fn not_elf_is_an_error() {
        assert!(Elf::parse(b"hello".to_vec()).is_err());
    }
}
