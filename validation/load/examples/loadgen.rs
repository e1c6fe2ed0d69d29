//! Minimal driver for measuring the generator by hand (the real CLI is `ditto load`).
//!
//! `cargo run --release -p ditto-load --example loadgen -- PROTOCOL ADDR RATE CONNECTIONS SECONDS
//! [fixed|poisson] [SPIN_US] [PATH]` with PROTOCOL one of memcached, http, pix-grpc,
//! length-prefixed.

use std::time::Duration;

use ditto_load::{
    run, warm, Arrival, HttpWorkload, LengthPrefixedWorkload, LoadConfig, MemcachedWorkload,
    PixWorkload, WeightedPath, Workload,
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        eprintln!(
            "usage: loadgen PROTOCOL ADDR RATE CONNECTIONS SECONDS [fixed|poisson] [SPIN_US] [PATH]"
        );
        std::process::exit(2);
    }
    let parse_or_exit = |what: &str, text: &str| -> f64 {
        text.parse().unwrap_or_else(|_| {
            eprintln!("{what} must be a number, got {text:?}");
            std::process::exit(2)
        })
    };
    let workload = match args[0].as_str() {
        "memcached" => Workload::Memcached(MemcachedWorkload::default()),
        "http" => Workload::Http(HttpWorkload {
            paths: vec![WeightedPath {
                path: args.get(7).cloned().unwrap_or_else(|| "/".into()),
                weight: 1.0,
            }],
            host: None,
        }),
        "pix-grpc" => Workload::PixGrpc(PixWorkload::default()),
        "length-prefixed" => Workload::LengthPrefixed(LengthPrefixedWorkload::default()),
        other => {
            eprintln!("unknown protocol {other}");
            std::process::exit(2)
        }
    };
    let addr = args[1].parse().unwrap_or_else(|e| {
        eprintln!("bad address {}: {e}", args[1]);
        std::process::exit(2)
    });
    let mut cfg = LoadConfig::new(addr, workload, parse_or_exit("RATE", &args[2]));
    cfg.connections = parse_or_exit("CONNECTIONS", &args[3]) as usize;
    cfg.duration = Duration::from_secs_f64(parse_or_exit("SECONDS", &args[4]));
    if let Some(a) = args.get(5) {
        cfg.arrival = a.parse::<Arrival>().unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2)
        });
    }
    if let Some(s) = args.get(6) {
        cfg.spin = Duration::from_secs_f64(parse_or_exit("SPIN_US", s) / 1e6);
    }
    match warm(cfg.addr, &cfg.workload, false) {
        Ok(w) => eprintln!("warmed: {} requests, {} ok", w.requests, w.ok),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1)
        }
    }
    match run(&cfg, &mut |p| eprintln!("{p}")) {
        Ok(report) => print!("{}", report.to_summary()),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1)
        }
    }
}
