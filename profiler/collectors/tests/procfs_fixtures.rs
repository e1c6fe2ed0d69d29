//! Parsers against files recorded from a real memcached 1.6 (`memcached -u memcache -p 21211 -U 21211
//! -t 4`, one client connected, plus a second instance on a unix socket for the unix table). The
//! expected values were read off the files by hand (and the maps classes computed independently).

use ditto_collect::procfs::parse::*;

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/procfs/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

const KB: u64 = 1024;

#[test]
fn process_stat_fields_match_the_recorded_memcached() {
    let s = parse_stat(&fixture("memcached_stat")).expect("parse");
    assert_eq!(s.pid, 6609);
    assert_eq!(s.state, TaskState::Sleeping);
    assert_eq!(s.ppid, 1);
    assert_eq!(s.minflt, 553);
    assert_eq!(s.majflt, 0);
    assert_eq!((s.utime_ticks, s.stime_ticks), (0, 0));
    assert_eq!((s.priority, s.nice), (20, 0));
    assert_eq!(s.num_threads, 10);
    assert_eq!(s.start_ticks, 156936);
    assert_eq!(s.processor, 1);
    assert_eq!((s.rt_priority, s.policy), (0, 0));
}

#[test]
fn thread_stat_with_hyphenated_comm_parses() {
    let s = parse_stat(&fixture("memcached_thread_stat")).expect("parse");
    assert_eq!(s.pid, 6611);
    assert_eq!(s.ppid, 1);
    assert_eq!(s.minflt, 276);
    assert_eq!(s.num_threads, 10);
    assert_eq!(s.start_ticks, 156936);
    assert_eq!(s.processor, 1);
}

#[test]
fn stat_comm_with_spaces_and_parentheses_does_not_shift_fields() {
    // comm may hold anything up to 15 bytes, including ") S 9 ".
    let line = "4242 (x) S 9 (y) R 7 4242 4242 0 -1 4194368 11 0 12 0 13 14 0 0 20 -5 3 0 555 \
                1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 7 2 0 0 0";
    let s = parse_stat(line).expect("parse");
    assert_eq!(s.pid, 4242);
    assert_eq!(s.state, TaskState::Running);
    assert_eq!(s.ppid, 7);
    assert_eq!(s.minflt, 11);
    assert_eq!(s.majflt, 12);
    assert_eq!(s.utime_ticks, 13);
    assert_eq!(s.stime_ticks, 14);
    assert_eq!(s.nice, -5);
    assert_eq!(s.num_threads, 3);
    assert_eq!(s.start_ticks, 555);
    assert_eq!(s.processor, 1);
    assert_eq!(s.rt_priority, 7);
    assert_eq!(s.policy, 2);
}

#[test]
fn truncated_stat_is_an_error_not_a_panic() {
    assert!(parse_stat("12 (x) S 1 2 3").is_err());
    assert!(parse_stat("").is_err());
    assert!(parse_stat("12 x S").is_err());
}

#[test]
fn status_fields_match_the_recorded_memcached() {
    let s = parse_status(&fixture("memcached_status")).expect("parse");
    assert_eq!(s.ppid, 1);
    assert_eq!((s.real_uid, s.effective_uid), (102, 102));
    assert_eq!(s.threads, 10);
    assert_eq!(s.vm_size, Some(412428 * KB));
    assert_eq!(s.vm_rss, Some(4560 * KB));
    assert_eq!(s.vm_hwm, Some(4560 * KB));
    assert_eq!(s.vm_data, Some(77500 * KB));
    assert_eq!(s.vm_swap, Some(0));
    assert_eq!(s.rss_anon, Some(2376 * KB));
    assert_eq!(s.rss_file, Some(2184 * KB));
    assert_eq!(s.rss_shmem, Some(0));
    assert_eq!(s.voluntary_ctxt_switches, 14);
    assert_eq!(s.nonvoluntary_ctxt_switches, 5);
}

#[test]
fn thread_status_and_schedstat_match_the_recorded_worker() {
    let s = parse_status(&fixture("memcached_thread_status")).expect("parse");
    assert_eq!(s.voluntary_ctxt_switches, 5);
    assert_eq!(s.nonvoluntary_ctxt_switches, 0);
    let ss = parse_schedstat(&fixture("memcached_thread_schedstat")).expect("parse");
    assert_eq!(
        ss,
        Schedstat {
            run_ns: 910038,
            wait_ns: 182582,
            timeslices: 5
        }
    );
}

#[test]
fn smaps_rollup_matches_the_recorded_memcached() {
    let r = parse_smaps_rollup(&fixture("memcached_smaps_rollup")).expect("parse");
    assert_eq!(
        r,
        SmapsRollup {
            rss: 4560 * KB,
            pss: 2663 * KB,
            referenced: 4088 * KB,
            anonymous: 2376 * KB,
            swap: 0,
            anon_huge_pages: 0,
        }
    );
}

#[test]
fn maps_summary_classifies_the_recorded_memcached_address_space() {
    let m = parse_maps(&fixture("memcached_maps")).expect("parse");
    let r = |count, bytes| Region { count, bytes };
    assert_eq!(m.exec_file, r(7, 4_988_928));
    assert_eq!(m.other_file, r(28, 3_309_568));
    assert_eq!(m.heap, r(1, 135_168));
    assert_eq!(m.stack, r(1, 135_168));
    assert_eq!(m.anonymous, r(21, 79_167_488));
    assert_eq!(m.reserved, r(14, 334_557_184));
    assert_eq!(m.special, r(4, 36_864));
    assert_eq!(m.shared, r(0, 0));
    assert_eq!(m.total, r(76, 422_330_368));
    // VmSize leaves out the vsyscall page, which maps lists.
    assert_eq!(m.total.bytes - 4096, 412428 * KB);
}

#[test]
fn parsed_fixtures_serialize_without_any_path_or_name() {
    let maps = parse_maps(&fixture("memcached_maps")).expect("maps");
    let stat = parse_stat(&fixture("memcached_thread_stat")).expect("stat");
    let unix = parse_unix_table(&fixture("memcached_net_unix")).expect("unix");
    let json = serde_json::to_string(&(maps, stat, unix)).expect("json");
    for s in [
        "/usr",
        "memcached",
        "mc-worker",
        "libc",
        "/tmp",
        "ditto-fixture",
        ".so",
    ] {
        assert!(!json.contains(s), "output contains {s:?}: {json}");
    }
}

#[test]
fn io_counters_match_the_recorded_memcached() {
    let io = parse_io(&fixture("memcached_io")).expect("parse");
    assert_eq!(
        io,
        IoCounters {
            rchar: 2711,
            wchar: 177,
            syscr: 16,
            syscw: 20,
            read_bytes: 139264,
            write_bytes: 8192,
            cancelled_write_bytes: 0,
        }
    );
}

#[test]
fn fd_links_of_the_recorded_memcached_classify_by_kind() {
    let text = fixture("memcached_fd_links");
    let mut sockets = Vec::new();
    let (mut pipes, mut paths, mut epoll, mut eventfd, mut other) = (0, 0, 0, 0, 0);
    for line in text.lines() {
        let (_, target) = line.split_once(' ').expect("fd target");
        match classify_fd_link(target) {
            FdKind::Socket(inode) => sockets.push(inode),
            FdKind::Pipe => pipes += 1,
            FdKind::Path => paths += 1,
            FdKind::Eventpoll => epoll += 1,
            FdKind::Eventfd => eventfd += 1,
            _ => other += 1,
        }
    }
    assert_eq!(sockets.len(), 11);
    assert!(sockets.contains(&123873) && sockets.contains(&124221));
    assert_eq!((pipes, paths, epoll, eventfd, other), (11, 4, 5, 4, 0));
}

#[test]
fn fd_link_kinds_cover_the_kernel_anon_inode_names() {
    assert_eq!(classify_fd_link("anon_inode:[timerfd]"), FdKind::Timerfd);
    assert_eq!(classify_fd_link("anon_inode:[signalfd]"), FdKind::Signalfd);
    assert_eq!(classify_fd_link("anon_inode:inotify"), FdKind::Inotify);
    assert_eq!(classify_fd_link("anon_inode:[io_uring]"), FdKind::IoUring);
    assert_eq!(classify_fd_link("anon_inode:[pidfd]"), FdKind::Pidfd);
    assert_eq!(
        classify_fd_link("anon_inode:bpf-map"),
        FdKind::OtherAnonInode
    );
    assert_eq!(classify_fd_link("/memfd:jit (deleted)"), FdKind::Memfd);
    assert_eq!(classify_fd_link("net:[4026531840]"), FdKind::Other);
    assert_eq!(classify_fd_link("socket:[bogus]"), FdKind::Other);
}

#[test]
fn fdinfo_flags_are_octal_and_show_nonblocking() {
    let flags =
        parse_fdinfo_flags("pos:\t0\nflags:\t04002\nmnt_id:\t10\nino:\t123873\n").expect("flags");
    assert_eq!(flags, 0o4002);
    assert_ne!(flags & libc::O_NONBLOCK as u32, 0);
    assert!(parse_fdinfo_flags("pos: 0\n").is_err());
}

#[test]
fn tcp_table_gives_listener_connection_and_queues_without_addresses() {
    let rows = parse_inet_table(&fixture("memcached_net_tcp")).expect("parse");
    assert_eq!(rows.len(), 9);
    let listener = rows.iter().find(|r| r.inode == 123873).expect("listener");
    assert_eq!(listener.state, SocketState::Listen);
    assert_eq!(listener.local_port, 21211);
    assert_eq!(listener.local_address, AddressClass::Wildcard);
    assert_eq!(listener.uid, 102);
    let server_side = rows.iter().find(|r| r.inode == 124221).expect("accepted");
    assert_eq!(server_side.state, SocketState::Established);
    assert_eq!(server_side.local_port, 21211);
    assert_eq!(server_side.local_address, AddressClass::Loopback);
    assert_eq!(server_side.remote_port, 0xAAF0);
    let client_side = rows.iter().find(|r| r.inode == 124948).expect("client");
    assert_eq!((client_side.rx_queue, client_side.tx_queue), (8, 0));
    let time_wait = rows
        .iter()
        .filter(|r| r.state == SocketState::TimeWait)
        .count();
    assert_eq!(time_wait, 3);
    assert!(rows
        .iter()
        .filter(|r| r.state == SocketState::TimeWait)
        .all(|r| r.inode == 0));
}

#[test]
fn tcp6_and_udp_tables_of_the_recorded_memcached() {
    let t6 = parse_inet_table(&fixture("memcached_net_tcp6")).expect("tcp6");
    assert_eq!(t6.len(), 1);
    assert_eq!((t6[0].inode, t6[0].local_port), (123874, 21211));
    assert_eq!(t6[0].state, SocketState::Listen);
    assert_eq!(t6[0].local_address, AddressClass::Wildcard);
    let udp = parse_inet_table(&fixture("memcached_net_udp")).expect("udp");
    assert_eq!(udp.len(), 1);
    assert_eq!((udp[0].inode, udp[0].local_port), (123877, 21211));
    assert_eq!(udp[0].state, SocketState::Close);
    let udp6 = parse_inet_table(&fixture("memcached_net_udp6")).expect("udp6");
    assert_eq!((udp6[0].inode, udp6[0].local_port), (123878, 21211));
}

#[test]
fn ipv6_loopback_and_v4_mapped_addresses_are_classified() {
    let head = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
    let text = format!(
        "{head}   0: 00000000000000000000000001000000:1F90 0000000000000000FFFF00000100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 5 1 0 20 4 30 10 -1\n\
         \x20  1: 000080FE00000000FF1E7D0A8F1A3CFE:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 6 1 0 100 0 0 10 0\n"
    );
    let rows = parse_inet_table(&text).expect("parse");
    assert_eq!(rows[0].local_address, AddressClass::Loopback);
    assert_eq!(rows[0].local_port, 8080);
    assert_eq!(rows[0].remote_address, AddressClass::Loopback);
    assert_eq!(rows[1].local_address, AddressClass::Other);
    assert_eq!(rows[1].remote_address, AddressClass::Wildcard);
}

#[test]
fn unix_table_gives_listener_and_connections_without_paths() {
    let rows = parse_unix_table(&fixture("memcached_net_unix")).expect("parse");
    assert_eq!(rows.len(), 7);
    let l = rows.iter().find(|r| r.inode == 125052).expect("listener");
    assert_eq!(l.state, SocketState::Listen);
    assert_eq!(l.socket_type, SocketType::Stream);
    assert!(l.bound);
    let c = rows.iter().find(|r| r.inode == 1677).expect("connected");
    assert_eq!(c.state, SocketState::Connected);
    assert!(!c.bound);
}

#[test]
fn malformed_tables_are_errors_not_panics() {
    assert!(parse_inet_table("header\n 0: zz:zz 00000000:0000 0A 0:0 0 0 0 0 1\n").is_err());
    assert!(parse_inet_table("header\n 0: 0100007F:52DB\n").is_err());
    assert!(parse_unix_table("header\nabc: 1 2\n").is_err());
    assert!(parse_maps("not a maps line\n").is_err());
    assert!(parse_smaps_rollup("").is_err());
    assert!(parse_schedstat("1 2").is_err());
}
