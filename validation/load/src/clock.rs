//! Monotonic nanosecond clock and precise sleeping.
//!
//! Schedules are kept as absolute `CLOCK_MONOTONIC` nanoseconds so that sleeping to an intended send
//! time never accumulates drift (a relative sleep would add the time spent between reading the clock
//! and entering the kernel). The default Linux timer slack of 50 µs would dominate a loopback RTT, so
//! each load thread lowers its own slack to 1 ns first.

use std::time::Duration;

/// Nanoseconds on `CLOCK_MONOTONIC`, the clock `clock_nanosleep` sleeps on.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// Lowers the calling thread's timer slack so sleeps end within microseconds of their deadline.
pub fn set_fine_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK only changes this thread's slack; a failure leaves the default.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Sleeps until the absolute monotonic time `deadline_ns`.
///
/// The kernel sleep ends `spin_ns` early and the rest is busy-waited; `spin_ns = 0` never spins.
/// Spinning trades the target's CPU for wake-up precision, so it stays optional.
pub fn sleep_until(deadline_ns: u64, spin_ns: u64) {
    let wake = deadline_ns.saturating_sub(spin_ns);
    if now_ns() < wake {
        let ts = libc::timespec {
            tv_sec: (wake / 1_000_000_000) as libc::time_t,
            tv_nsec: (wake % 1_000_000_000) as libc::c_long,
        };
        loop {
            // SAFETY: `ts` is a valid timespec; the remainder pointer may be null with TIMER_ABSTIME.
            let rc = unsafe {
                libc::clock_nanosleep(
                    libc::CLOCK_MONOTONIC,
                    libc::TIMER_ABSTIME,
                    &ts,
                    std::ptr::null_mut(),
                )
            };
            // clock_nanosleep returns the error number directly; only EINTR warrants a retry.
            if rc != libc::EINTR {
                break;
            }
        }
    }
    while spin_ns > 0 && now_ns() < deadline_ns {
        std::hint::spin_loop();
    }
}

/// Converts a duration to nanoseconds, saturating at `u64::MAX`.
pub fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_until_never_wakes_early() {
        set_fine_timer_slack();
        for _ in 0..20 {
            let deadline = now_ns() + 200_000;
            sleep_until(deadline, 0);
            assert!(now_ns() >= deadline);
        }
    }

    #[test]
    fn sleep_until_past_deadline_returns_at_once() {
        let start = now_ns();
        sleep_until(start.saturating_sub(1_000_000), 50_000);
        assert!(now_ns() - start < 50_000_000);
    }
}
