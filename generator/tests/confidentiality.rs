//! The confidentiality check finds a planted 16-byte run of code, a planted string and a planted
//! symbol name, and passes on two unrelated programs (which share only the C start-up code).

mod common;

use std::path::Path;
use std::process::Command;

use ditto_generator::confidentiality::{check_clone_with, informative_len, Baseline, Elf};

const ORIGINAL: &str = r#"
#include <stdio.h>
#include <stdlib.h>
const char *banner = "Totally secret ledger v7: settlement engine";
__attribute__((noinline)) unsigned long secret_mix(unsigned long x) {
    x ^= x >> 31; x *= 0x7fb5d329728ea185UL; x ^= x >> 27; x *= 0x81dadef4bc2dd44dUL;
    return x ^ (x >> 33) ^ 0x1234567890abcdefUL;
}
int main(int argc, char **argv) {
    unsigned long v = secret_mix((unsigned long)argc * 77);
    printf("%s %lu\n", banner, v);
    return argv[0][0] == 'z';
}
"#;

const CLEAN: &str = r#"
#include <stdio.h>
int helper_add(int a, int b) { return a * 3 + b; }
int main(int argc, char **argv) {
    (void)argv;
    printf("clone says %d\n", helper_add(argc, 2));
    return 0;
}
"#;

const PLANTED_SYMBOL: &str = r#"
#include <stdio.h>
unsigned long secret_mix(unsigned long x) { return x + 1; }
int main(int argc, char **argv) { (void)argv; printf("%lu\n", secret_mix((unsigned long)argc)); return 0; }
"#;

fn build(dir: &Path, name: &str, src: &str) -> std::path::PathBuf {
    let c = dir.join(format!("{name}.c"));
    let bin = dir.join(name);
    std::fs::write(&c, src).expect("write source");
    common::run(Command::new("cc").args(["-O2", "-o"]).arg(&bin).arg(&c));
    bin
}

#[test]
fn planted_material_is_found_and_clean_pairs_pass() {
    assert!(
        common::have("cc"),
        "the C compiler (build-essential) is required"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let original = build(d, "original", ORIGINAL);
    let clean = build(d, "clean", CLEAN);
    let (baseline, note) = Baseline::build();
    assert!(note.is_none(), "{note:?}");

    let r = check_clone_with(&clean, &original, &baseline).expect("check");
    assert!(r.passed(), "clean pair flagged:\n{r}");
    assert!(
        r.checked_code_bytes > 0 && r.checked_strings > 0 && r.checked_symbols > 0,
        "{r}"
    );

    // Plant 16 bytes of secret_mix's code (appended: the check covers the whole file).
    let elf = Elf::read(&original).expect("elf");
    let text = elf
        .sections
        .iter()
        .find(|s| s.name == ".text")
        .expect(".text");
    let code = elf.bytes(text);
    // A window from the middle of the original's own code (not start-up code, not padding).
    let sym_off = find_symbol_offset(&elf, "secret_mix").expect("secret_mix symbol");
    let start = (sym_off - text.addr) as usize;
    // 16 bytes of it with no compiler idiom in them (its multiplication constants).
    let from = (start..start + 40)
        .find(|&i| informative_len(&code[i..i + 16]) == 16)
        .expect("an idiom-free window in secret_mix");
    let planted_code = code[from..from + 16].to_vec();
    let mut bytes = std::fs::read(&clean).expect("clean bytes");
    bytes.extend_from_slice(&planted_code);
    let with_code = d.join("with_code");
    std::fs::write(&with_code, &bytes).expect("write");
    let r = check_clone_with(&with_code, &original, &baseline).expect("check");
    assert_eq!(r.code_runs.len(), 1, "{r}");
    assert_eq!(r.code_runs[0].len, 16);
    assert!(r.strings.is_empty() && r.symbols.is_empty(), "{r}");
    assert!(!r.passed());

    // A 15-byte run is not a finding.
    let mut bytes = std::fs::read(&clean).expect("clean bytes");
    bytes.extend_from_slice(&planted_code[..15]);
    let short = d.join("short");
    std::fs::write(&short, &bytes).expect("write");
    assert!(check_clone_with(&short, &original, &baseline)
        .expect("check")
        .passed());

    // Plant the string.
    let mut bytes = std::fs::read(&clean).expect("clean bytes");
    bytes.extend_from_slice(b"\0Totally secret ledger v7: settlement engine\0");
    let with_string = d.join("with_string");
    std::fs::write(&with_string, &bytes).expect("write");
    let r = check_clone_with(&with_string, &original, &baseline).expect("check");
    assert_eq!(
        r.strings,
        vec!["Totally secret ledger v7: settlement engine".to_string()],
        "{r}"
    );

    // A symbol of the same name.
    let with_symbol = build(d, "with_symbol", PLANTED_SYMBOL);
    let r = check_clone_with(&with_symbol, &original, &baseline).expect("check");
    assert_eq!(r.symbols, vec!["secret_mix".to_string()], "{r}");
    // printf is imported by both: never a finding.
    assert!(!r.symbols.iter().any(|s| s == "printf"));
    // Compiler idioms are not code of anybody's.
    assert_eq!(
        informative_len(&[
            0x5b, 0x5d, 0x41, 0x5c, 0x41, 0x5d, 0x41, 0x5e, 0x41, 0x5f, 0xc3, 0x66, 0x0f, 0x1f,
            0x44, 0x00, 0x00
        ]),
        0
    );
    assert!(r.to_markdown().contains("**Failed**"));
}

fn find_symbol_offset(elf: &Elf, name: &str) -> Option<u64> {
    // Parse .symtab for the value of `name`.
    let symtab = elf.sections.iter().find(|s| s.name == ".symtab")?;
    let strtab = elf.sections.get(symtab.link as usize)?;
    let names = elf.bytes(strtab);
    for e in elf.bytes(symtab).chunks_exact(24) {
        let off = u32::from_le_bytes(e[0..4].try_into().ok()?) as usize;
        let end = names[off..].iter().position(|b| *b == 0)? + off;
        if &names[off..end] == name.as_bytes() {
            return Some(u64::from_le_bytes(e[8..16].try_into().ok()?));
        }
    }
    None
}
