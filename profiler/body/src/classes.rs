//! The instruction class table (`data/classes.tsv`) and the operand kinds.
//!
//! Classes are data so that adding or moving a mnemonic is a one-line change reviewed as data; the only
//! rules in code are the two that depend on prefixes (lock, rep) and the SIMD width split.

use std::collections::HashMap;

use anyhow::{bail, Context, Result};

/// The class table as shipped.
pub const CLASS_TABLE: &str = include_str!("../data/classes.tsv");

/// Instruction classes by function, in the order the profile lists them.
pub const CLASSES: [&str; 14] = [
    "mov", "alu", "mul", "div", "fp", "simd128", "simd256", "simd512", "branch", "lock", "rep",
    "crc32", "nop", "other",
];

/// Operand kinds, in the profile's order (`MixShare::OPERANDS`).
pub const OPERANDS: [&str; 4] = ditto_profile::MixShare::OPERANDS;

/// Index into [`CLASSES`].
pub type ClassId = u8;

pub fn class_id(name: &str) -> Option<ClassId> {
    CLASSES
        .iter()
        .position(|c| *c == name)
        .map(|i| i as ClassId)
}

/// The class a table row names; `simd` is resolved by width later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableClass {
    Fixed(ClassId),
    Simd,
}

/// Parsed class table: glob rows in priority order, with a cache by mnemonic name.
#[derive(Debug, Clone)]
pub struct ClassTable {
    rows: Vec<(String, TableClass)>,
}

impl ClassTable {
    pub fn parse(text: &str) -> Result<ClassTable> {
        let mut rows = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut cols = line.split('\t').filter(|c| !c.is_empty());
            let (Some(pattern), Some(class), None) = (cols.next(), cols.next(), cols.next()) else {
                bail!("class table line {}: expected `pattern<TAB>class`", n + 1);
            };
            let class = if class == "simd" {
                TableClass::Simd
            } else {
                TableClass::Fixed(class_id(class).with_context(|| {
                    format!("class table line {}: unknown class `{class}`", n + 1)
                })?)
            };
            rows.push((pattern.to_string(), class));
        }
        Ok(ClassTable { rows })
    }

    /// The bundled table.
    pub fn bundled() -> ClassTable {
        // The bundled table is checked by a unit test, so a parse failure here is a build defect.
        ClassTable::parse(CLASS_TABLE).unwrap_or(ClassTable { rows: Vec::new() })
    }

    /// Class of a mnemonic (lower case), `other` when no row matches.
    pub fn lookup(&self, mnemonic: &str) -> TableClass {
        self.rows
            .iter()
            .find(|(p, _)| glob_match(p, mnemonic))
            .map(|(_, c)| *c)
            .unwrap_or(TableClass::Fixed(CLASSES.len() as ClassId - 1))
    }

    /// Lookup for every iced mnemonic at once (the decoder calls this per static instruction).
    pub fn by_mnemonic(&self) -> HashMap<iced_x86::Mnemonic, TableClass> {
        iced_x86::Mnemonic::values()
            .map(|m| (m, self.lookup(&format!("{m:?}").to_ascii_lowercase())))
            .collect()
    }
}

/// `*` matches any (possibly empty) run; everything else matches itself.
fn glob_match(pattern: &str, text: &str) -> bool {
    let p = pattern.as_bytes();
    let t = text.as_bytes();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_table_parses_and_names_only_known_classes() {
        let t = ClassTable::parse(CLASS_TABLE).expect("bundled table");
        assert!(t.rows.len() > 100);
    }

    #[test]
    fn first_matching_row_wins() {
        let t = ClassTable::bundled();
        let id = |n| TableClass::Fixed(class_id(n).unwrap());
        assert_eq!(t.lookup("div"), id("div"));
        assert_eq!(t.lookup("fdiv"), id("fp"));
        assert_eq!(t.lookup("jne"), id("branch"));
        assert_eq!(t.lookup("push"), id("mov"));
        assert_eq!(t.lookup("popcnt"), id("alu"));
        assert_eq!(t.lookup("paddd"), TableClass::Simd);
        assert_eq!(t.lookup("addsd"), id("fp"));
        assert_eq!(t.lookup("vaddsd"), id("fp"));
        assert_eq!(t.lookup("vaddpd"), TableClass::Simd);
        assert_eq!(t.lookup("crc32"), id("crc32"));
        assert_eq!(t.lookup("cpuid"), id("other"));
    }

    #[test]
    fn every_iced_mnemonic_gets_a_class() {
        let t = ClassTable::bundled();
        let all = t.by_mnemonic();
        assert!(all.len() > 1000);
    }

    #[test]
    fn glob_handles_prefix_suffix_and_middle() {
        assert!(glob_match("j*", "jne"));
        assert!(glob_match("*sd", "addsd"));
        assert!(glob_match("v*sd", "vaddsd"));
        assert!(!glob_match("v*sd", "vaddpd"));
        assert!(glob_match("mov", "mov"));
        assert!(!glob_match("mov", "movzx"));
    }

    #[test]
    fn malformed_rows_are_refused_with_the_line_number() {
        let e = ClassTable::parse("add\talu\nfoo\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2"), "{e}");
        let e = ClassTable::parse("add\tbogus\n").unwrap_err().to_string();
        assert!(e.contains("unknown class"), "{e}");
    }
}
