//! The window backend runs callgrind where the differential runs cachegrind: the two must simulate
//! the same caches and the same branch predictor. A differential test of one small program under
//! both, with one geometry: every total the figures use agrees. (Callgrind books a read-modify-write
//! as a write and cachegrind as a read, so only the reads and writes together are compared, as
//! `sim_figures` uses them.)
//!
//! A missing tool (valgrind, cc) fails the test with the package to install.

use std::path::Path;
use std::process::Command;

use ditto_measure::cachegrind::CachegrindTotals;
use ditto_measure::callgrind::read_dump;

/// Data-dependent and patterned branches, strided and random reads, read-modify-writes, and
/// indirect calls over a 4 MiB array (larger than the LL below).
const PROGRAM: &str = r#"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
static int f0(int x) { return x + 1; }
static int f1(int x) { return x ^ 3; }
static int f2(int x) { return x * 5; }
int main(void) {
    size_t n = 1 << 20;
    uint32_t *a = calloc(n, sizeof *a);
    int (*fs[3])(int) = {f0, f1, f2};
    uint64_t x = 88172645463325252ull, sum = 0;
    for (int r = 0; r < 4; r++)
        for (size_t i = 0; i < n; i += 3) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            size_t j = x & (n - 1);
            if (x & 8) a[j] += (uint32_t)i; else sum += a[i];
            if ((i & 7) == 0) sum += fs[x % 3]((int)sum);
        }
    printf("%llu\n", (unsigned long long)sum);
    return 0;
}
"#;

fn require(tool: &str, package: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{tool} is missing: apt-get install {package} (scripts/setup.sh)"
    );
}

fn run_under(dir: &Path, tool: &str, out: &Path) {
    let geometry = ["--I1=32768,8,64", "--D1=32768,8,64", "--LL=1048576,8,64"];
    let status = Command::new("valgrind")
        .arg(format!("--tool={tool}"))
        .args(["--cache-sim=yes", "--branch-sim=yes"])
        .args(geometry)
        .arg(format!("--{tool}-out-file={}", out.display()))
        .arg(dir.join("program"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("valgrind runs");
    assert!(status.success(), "{tool} run failed: {status}");
}

/// |a − b| within `rel` of b, plus `slack` events.
fn near(a: f64, b: f64, rel: f64, slack: f64) -> bool {
    (a - b).abs() <= rel * b.abs() + slack
}

#[test]
fn callgrind_simulates_the_caches_and_branches_cachegrind_does() {
    require("valgrind", "valgrind");
    require("cc", "build-essential");
    let dir = std::env::temp_dir().join(format!("ditto-callgrind-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("program.c"), PROGRAM).expect("source written");
    let cc = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(dir.join("program"))
        .arg(dir.join("program.c"))
        .status()
        .expect("cc runs");
    assert!(cc.success(), "cc failed");
    run_under(&dir, "cachegrind", &dir.join("cachegrind.out"));
    run_under(&dir, "callgrind", &dir.join("callgrind.out"));
    let cg = CachegrindTotals::read(&dir.join("cachegrind.out")).expect("cachegrind output");
    let cl = read_dump(&dir.join("callgrind.out")).expect("callgrind output");
    let _ = std::fs::remove_dir_all(&dir);

    // The program's own work is identical; the tools' start-up code differs by about a thousand
    // instructions of ~30 million, and a few dozen events of each kind.
    let (rel, slack) = (1e-4, 100.0);
    let pairs = [
        ("instructions", cg.ir, cl.ir),
        ("data accesses", cg.dr + cg.dw, cl.dr + cl.dw),
        ("L1i misses", cg.i1mr, cl.i1mr),
        ("L1d misses", cg.d1mr + cg.d1mw, cl.d1mr + cl.d1mw),
        (
            "LL misses",
            cg.ilmr + cg.dlmr + cg.dlmw,
            cl.ilmr + cl.dlmr + cl.dlmw,
        ),
        ("conditional branches", cg.bc, cl.bc),
        ("conditional mispredictions", cg.bcm, cl.bcm),
        ("indirect branches", cg.bi, cl.bi),
        ("indirect mispredictions", cg.bim, cl.bim),
    ];
    for (what, a, b) in pairs {
        assert!(
            near(b, a, rel, slack),
            "{what}: callgrind {b} against cachegrind {a}"
        );
    }
    // The program misses the LL and mispredicts often enough for the comparison to mean something.
    assert!(cg.dlmr + cg.dlmw > 1e5, "LL misses: {cg:?}");
    assert!(cg.bcm > 1e5 && cg.bim > 1e4, "mispredictions: {cg:?}");
}
