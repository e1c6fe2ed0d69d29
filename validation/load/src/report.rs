//! Per-connection recording, the merged report, and its outputs (text, JSON, HdrHistogram log).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::arrivals::Arrival;
use crate::error::LoadError;
use crate::outcome::{ErrorKind, Outcome};

/// `kept_up` requires at least this fraction of the scheduled requests to be answered.
pub const KEPT_UP_MIN_ANSWERED: f64 = 0.95;
/// `kept_up` requires the 99th percentile of send lag to be at most this many microseconds, or
/// one mean gap between two sends of a connection if that is longer.
pub const KEPT_UP_MAX_LAG_P99_US: f64 = 1000.0;

/// Histograms hold nanoseconds with 3 significant digits; they start small (10 ms) and grow on
/// demand so thousands of connections don't each pay for an hour-wide range.
fn new_histogram(sigfig: u8) -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 10_000_000, sigfig)
        .expect("constant histogram bounds are valid");
    h.auto(true);
    h
}

fn empty_histogram() -> Histogram<u64> {
    new_histogram(3)
}

fn record(h: &mut Histogram<u64>, value_ns: u64) {
    if h.record(value_ns).is_err() {
        h.saturating_record(value_ns);
    }
}

/// What one connection thread measured; merged at the end, so the hot path takes no lock.
#[derive(Debug)]
pub(crate) struct ConnStats {
    pub latency: Histogram<u64>,
    pub lag: Histogram<u64>,
    pub scheduled: u64,
    pub sent: u64,
    pub completed: u64,
    pub ok: u64,
    pub miss: u64,
    pub rejected: u64,
    pub errors: BTreeMap<ErrorKind, u64>,
    /// Set when the connection stopped early at its share of `max_requests`: the end of its
    /// measured window (last intended time plus one mean gap), in monotonic ns.
    pub window_end_ns: Option<u64>,
    /// Per request class (the protocol's index): answered requests and their response bytes.
    pub classes: Vec<(u64, u64)>,
}

impl ConnStats {
    pub fn new() -> ConnStats {
        ConnStats {
            latency: new_histogram(3),
            // Lag is only summarised (p50/p99/max): 2 digits are plenty.
            lag: new_histogram(2),
            scheduled: 0,
            sent: 0,
            completed: 0,
            ok: 0,
            miss: 0,
            rejected: 0,
            errors: BTreeMap::new(),
            window_end_ns: None,
            classes: Vec::new(),
        }
    }

    /// Counts one measured response of request class `class` and `bytes` bytes.
    pub fn record_class(&mut self, class: usize, bytes: u64) {
        self.add_class(class, 1, bytes);
    }

    fn add_class(&mut self, class: usize, responses: u64, bytes: u64) {
        if self.classes.len() <= class {
            self.classes.resize(class + 1, (0, 0));
        }
        self.classes[class].0 += responses;
        self.classes[class].1 += bytes;
    }

    /// Records one measured request: intended send time, when its connection became free
    /// (end of the previous request), actual send time, and when the response was complete.
    ///
    /// Latency starts at the intended send time when the request had to wait for its
    /// connection's previous response: time spent queued behind a slow response is charged to
    /// the request that waited (wrk2's correction for coordinated omission). When the connection
    /// was already free at the intended time, latency starts at the actual send time, so the
    /// generator's own timer wake-up delay (tens of µs on a VM) is not charged to the server;
    /// that delay is still reported as send lag. Only answered requests have a latency: a timeout
    /// or reset has none worth mixing in.
    pub fn record(
        &mut self,
        outcome: Outcome,
        intended_ns: u64,
        free_ns: u64,
        sent_ns: u64,
        done_ns: u64,
    ) {
        self.sent += 1;
        record(&mut self.lag, sent_ns.saturating_sub(intended_ns));
        let start_ns = if free_ns > intended_ns {
            intended_ns
        } else {
            sent_ns
        };
        let answered = match outcome {
            Outcome::Ok => {
                self.ok += 1;
                true
            }
            Outcome::Miss => {
                self.miss += 1;
                true
            }
            Outcome::Rejected => {
                self.rejected += 1;
                true
            }
            Outcome::Error(kind) => {
                *self.errors.entry(kind).or_default() += 1;
                kind.is_answer()
            }
        };
        if answered {
            self.completed += 1;
            record(&mut self.latency, done_ns.saturating_sub(start_ns));
        }
    }

    pub fn merge(&mut self, other: ConnStats) {
        // Both histograms auto-resize, so adding cannot run out of range.
        let _ = self.latency.add(&other.latency);
        let _ = self.lag.add(&other.lag);
        self.scheduled += other.scheduled;
        self.sent += other.sent;
        self.completed += other.completed;
        self.ok += other.ok;
        self.miss += other.miss;
        self.rejected += other.rejected;
        for (kind, n) in other.errors {
            *self.errors.entry(kind).or_default() += n;
        }
        for (class, (n, bytes)) in other.classes.into_iter().enumerate() {
            self.add_class(class, n, bytes);
        }
    }
}

/// Counts by outcome.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcomes {
    pub ok: u64,
    /// memcached `get`s that found nothing.
    pub miss: u64,
    /// Pix transfers refused for insufficient funds (`FAILED_PRECONDITION`).
    pub rejected: u64,
    /// Sum of `errors`.
    pub errors_total: u64,
    /// Errors by kind: `timeout`, `disconnected`, `connect`, `io`, `protocol`, `http_<status>`,
    /// `server_error`, `client_error`, `not_stored`, `grpc_<code>`.
    pub errors: BTreeMap<String, u64>,
}

/// Latency to the complete response, in microseconds: from the intended send time for requests
/// that waited for their connection, otherwise from the actual send time (see [`LoadReport`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// Actual send time minus intended send time, in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LagSummary {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// The answered requests of one request class in the measured period and the bytes of their
/// responses (head included). A class is a request key the server's response depends on and a
/// clone's runtime can read: for HTTP, the request target. The profiler records these so that a
/// clone sizes each class's responses as the original did (docs/profile.md, `network.request_classes`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestClassStats {
    /// The key, e.g. `/index.html`.
    pub key: String,
    pub responses: u64,
    pub response_bytes: u64,
}

/// One point of the latency distribution (for CDF plots).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PercentilePoint {
    /// 0..=100.
    pub percentile: f64,
    pub latency_us: f64,
}

/// The result of one load run.
///
/// Counting rules: `requests_scheduled` is the number of intended send times inside the measured
/// period; `requests_sent` those actually attempted (a connection that falls behind stops at the
/// end of the period, so some may never be sent); `requests_completed` those the server answered
/// with a well-formed response — success, miss, rejection or an error status — which are also the
/// requests in the latency histogram. `achieved_rate = requests_completed / duration_s`.
///
/// Latency: a request that had to wait because its connection was still busy with the previous
/// response counts from its intended send time (coordinated-omission correction, as wrk2); a
/// request whose connection was free counts from its actual send time, so the generator's own
/// timer wake-up delay is excluded. `send_lag_us` reports actual minus intended send time for
/// every sent request, whatever its cause.
///
/// `kept_up` is true when `requests_completed >= 0.95 * requests_scheduled` and
/// `send_lag_us.p99 <= max(1000 µs, connections / offered_rate)` (the mean gap between two sends of
/// one connection); otherwise `kept_up_problem` says which failed. A high send lag means requests
/// regularly waited a whole gap for their connection (more connections are needed for this rate,
/// or the server is saturated); a low completion ratio means the server or the generator fell
/// behind or failed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadReport {
    pub protocol: String,
    pub target: String,
    pub arrival: Arrival,
    pub connections: usize,
    pub seed: u64,
    pub offered_rate: f64,
    pub achieved_rate: f64,
    pub warmup_s: f64,
    pub duration_s: f64,
    pub requests_scheduled: u64,
    pub requests_sent: u64,
    pub requests_completed: u64,
    pub outcomes: Outcomes,
    pub latency_us: LatencySummary,
    pub send_lag_us: LagSummary,
    pub kept_up: bool,
    pub kept_up_problem: Option<String>,
    /// The latency distribution at HdrHistogram's usual percentile ticks.
    pub latency_percentiles: Vec<PercentilePoint>,
    /// Wall-clock start of the measured period, seconds since the Unix epoch.
    pub measured_start_unix_s: f64,
    /// Per request class, the measured responses and their bytes; empty for protocols without
    /// classes and in reports written before they were recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request_classes: Vec<RequestClassStats>,
    /// All answered requests' latencies, nanoseconds.
    #[serde(skip, default = "empty_histogram")]
    pub latency_histogram: Histogram<u64>,
    /// All sent requests' send lag, nanoseconds.
    #[serde(skip, default = "empty_histogram")]
    pub send_lag_histogram: Histogram<u64>,
}

/// What the runner knows besides the counts.
pub(crate) struct RunFacts {
    pub protocol: &'static str,
    pub target: String,
    pub arrival: Arrival,
    pub connections: usize,
    pub seed: u64,
    pub offered_rate: f64,
    pub warmup: Duration,
    pub duration: Duration,
    pub measured_start: SystemTime,
    /// The protocol's request classes, by index.
    pub request_classes: Vec<String>,
}

impl RunFacts {
    /// The send-lag p99 limit for `kept_up`, in microseconds.
    fn lag_limit_us(&self) -> f64 {
        let gap_us = 1e6 * self.connections as f64 / self.offered_rate.max(f64::MIN_POSITIVE);
        KEPT_UP_MAX_LAG_P99_US.max(gap_us)
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

impl LoadReport {
    pub(crate) fn new(facts: RunFacts, stats: ConnStats) -> LoadReport {
        let duration_s = facts.duration.as_secs_f64();
        let h = &stats.latency;
        let latency_us = if h.is_empty() {
            LatencySummary::default()
        } else {
            LatencySummary {
                min: us(h.min()),
                mean: h.mean() / 1000.0,
                p50: us(h.value_at_quantile(0.50)),
                p90: us(h.value_at_quantile(0.90)),
                p99: us(h.value_at_quantile(0.99)),
                p999: us(h.value_at_quantile(0.999)),
                max: us(h.max()),
            }
        };
        let lag = &stats.lag;
        let send_lag_us = if lag.is_empty() {
            LagSummary::default()
        } else {
            LagSummary {
                p50: us(lag.value_at_quantile(0.50)),
                p99: us(lag.value_at_quantile(0.99)),
                max: us(lag.max()),
            }
        };
        let latency_percentiles = h
            .iter_quantiles(2)
            .map(|v| PercentilePoint {
                percentile: v.quantile_iterated_to() * 100.0,
                latency_us: us(v.value_iterated_to()),
            })
            .collect();
        let errors_total = stats.errors.values().sum();
        let outcomes = Outcomes {
            ok: stats.ok,
            miss: stats.miss,
            rejected: stats.rejected,
            errors_total,
            errors: stats
                .errors
                .iter()
                .map(|(kind, n)| (kind.label(), *n))
                .collect(),
        };
        let achieved_rate = if duration_s > 0.0 {
            stats.completed as f64 / duration_s
        } else {
            0.0
        };

        let mut problems = Vec::new();
        let answered = stats.completed as f64;
        let needed = KEPT_UP_MIN_ANSWERED * stats.scheduled as f64;
        if answered < needed {
            problems.push(format!(
                "only {} of {} scheduled requests were answered ({:.1}%, need {:.0}%)",
                stats.completed,
                stats.scheduled,
                100.0 * answered / (stats.scheduled.max(1) as f64),
                KEPT_UP_MIN_ANSWERED * 100.0
            ));
        }
        let lag_limit_us = facts.lag_limit_us();
        if send_lag_us.p99 > lag_limit_us {
            problems.push(format!(
                "send lag p99 {:.0} µs exceeds {lag_limit_us:.0} µs (requests waited for their \
                 connection; use more connections or a lower rate)",
                send_lag_us.p99
            ));
        }
        let kept_up = problems.is_empty();

        LoadReport {
            protocol: facts.protocol.to_string(),
            target: facts.target,
            arrival: facts.arrival,
            connections: facts.connections,
            seed: facts.seed,
            offered_rate: facts.offered_rate,
            achieved_rate,
            warmup_s: facts.warmup.as_secs_f64(),
            duration_s,
            requests_scheduled: stats.scheduled,
            requests_sent: stats.sent,
            requests_completed: stats.completed,
            outcomes,
            latency_us,
            send_lag_us,
            kept_up,
            kept_up_problem: (!kept_up).then(|| problems.join("; ")),
            latency_percentiles,
            measured_start_unix_s: facts
                .measured_start
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            request_classes: facts
                .request_classes
                .iter()
                .enumerate()
                .map(|(i, key)| {
                    let (responses, response_bytes) =
                        stats.classes.get(i).copied().unwrap_or((0, 0));
                    RequestClassStats {
                        key: key.clone(),
                        responses,
                        response_bytes,
                    }
                })
                .collect(),
            latency_histogram: stats.latency,
            send_lag_histogram: stats.lag,
        }
    }

    /// A human-readable summary; says plainly when the offered rate was not kept up.
    pub fn to_summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} load on {}: {} connection{}, {} arrivals, {:.1} s measured after {:.1} s warm-up",
            self.protocol,
            self.target,
            self.connections,
            if self.connections == 1 { "" } else { "s" },
            self.arrival,
            self.duration_s,
            self.warmup_s
        );
        let ratio = if self.offered_rate > 0.0 {
            100.0 * self.achieved_rate / self.offered_rate
        } else {
            0.0
        };
        let _ = writeln!(
            s,
            "  rate      offered {:.1} req/s, achieved {:.1} req/s ({ratio:.1}%)",
            self.offered_rate, self.achieved_rate
        );
        let _ = writeln!(
            s,
            "  requests  scheduled {}, sent {}, answered {}",
            self.requests_scheduled, self.requests_sent, self.requests_completed
        );
        let o = &self.outcomes;
        let _ = writeln!(
            s,
            "  outcomes  ok {}, miss {}, rejected {}, errors {}",
            o.ok, o.miss, o.rejected, o.errors_total
        );
        if !o.errors.is_empty() {
            let list: Vec<String> = o.errors.iter().map(|(k, n)| format!("{k} {n}")).collect();
            let _ = writeln!(s, "  errors    {}", list.join(", "));
        }
        let l = &self.latency_us;
        let _ = writeln!(
            s,
            "  latency   p50 {:.1} µs, p90 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs, max {:.1} µs (mean {:.1} µs)",
            l.p50, l.p90, l.p99, l.p999, l.max, l.mean
        );
        let g = &self.send_lag_us;
        let _ = writeln!(
            s,
            "  send lag  p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
            g.p50, g.p99, g.max
        );
        match &self.kept_up_problem {
            None => {
                let _ = writeln!(s, "  kept up with the offered rate");
            }
            Some(problem) => {
                let _ = writeln!(s, "  could not keep up with the offered rate: {problem}");
            }
        }
        s
    }

    /// The report as pretty-printed JSON (histograms excluded; see `write_histogram_log`).
    pub fn to_json(&self) -> String {
        // Plain data with string keys: serialisation cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Writes [`LoadReport::to_json`] to `path`.
    pub fn write_json(&self, path: &Path) -> Result<(), LoadError> {
        std::fs::write(path, self.to_json() + "\n").map_err(|e| LoadError::Output {
            what: "the JSON report",
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
    }

    /// The histograms as an HdrHistogram interval log (V2, deflate-compressed): one interval
    /// covering the measured period, untagged for latency and tagged `send_lag` for send lag.
    /// Values are nanoseconds; the log's max column is in microseconds.
    pub fn histogram_log(&self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let mut serializer = V2DeflateSerializer::new();
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs_f64(self.measured_start_unix_s);
        let mut log = IntervalLogWriterBuilder::new()
            .add_comment(&format!(
                "ditto-load {} {} at {:.1} req/s offered, {} connections",
                self.protocol, self.target, self.offered_rate, self.connections
            ))
            .add_comment("values in nanoseconds; Interval_Max column in microseconds")
            .with_start_time(start)
            .with_base_time(start)
            .with_max_value_divisor(1000.0)
            .begin_log_with(&mut out, &mut serializer)
            .map_err(|e| e.to_string())?;
        let length = Duration::from_secs_f64(self.duration_s);
        log.write_histogram(&self.latency_histogram, Duration::ZERO, length, None)
            .map_err(|e| e.to_string())?;
        log.write_histogram(
            &self.send_lag_histogram,
            Duration::ZERO,
            length,
            Tag::new("send_lag"),
        )
        .map_err(|e| e.to_string())?;
        Ok(out)
    }

    /// Writes [`LoadReport::histogram_log`] to `path`.
    pub fn write_histogram_log(&self, path: &Path) -> Result<(), LoadError> {
        let err = |reason: String| LoadError::Output {
            what: "the histogram log",
            path: path.to_path_buf(),
            reason,
        };
        let bytes = self.histogram_log().map_err(err)?;
        std::fs::write(path, bytes).map_err(|e| err(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;

    fn facts() -> RunFacts {
        RunFacts {
            protocol: "http",
            target: "127.0.0.1:8080".into(),
            arrival: Arrival::Fixed,
            connections: 2,
            seed: 1,
            offered_rate: 100.0,
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(1),
            measured_start: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            request_classes: vec!["/a".into(), "/b".into()],
        }
    }

    #[test]
    fn request_classes_sum_over_connections_and_name_every_class() {
        let mut one = healthy();
        one.record_class(1, 300);
        one.record_class(1, 100);
        let mut two = healthy();
        two.record_class(0, 50);
        two.record_class(1, 200);
        one.merge(two);
        let report = LoadReport::new(facts(), one);
        let got: Vec<(&str, u64, u64)> = report
            .request_classes
            .iter()
            .map(|c| (c.key.as_str(), c.responses, c.response_bytes))
            .collect();
        assert_eq!(got, vec![("/a", 1, 50), ("/b", 3, 600)]);
        // A class no connection answered is still listed, with nothing counted.
        let report = LoadReport::new(facts(), healthy());
        assert_eq!(report.request_classes[1].responses, 0);
    }

    /// 100 scheduled, 100 sent; latencies 100..=199 µs, lag 5 µs.
    fn healthy() -> ConnStats {
        let mut stats = ConnStats::new();
        stats.scheduled = 100;
        for i in 0..100u64 {
            let t = i * 10_000_000;
            stats.record(Outcome::Ok, t, 0, t + 5_000, t + 5_000 + 100_000 + i * 1000);
        }
        stats
    }

    #[test]
    fn report_summarises_rates_outcomes_and_percentiles() {
        let r = LoadReport::new(facts(), healthy());
        assert_eq!(r.requests_completed, 100);
        assert!((r.achieved_rate - 100.0).abs() < 1e-9);
        assert!(
            (r.latency_us.p50 - 149.0).abs() < 0.5,
            "{}",
            r.latency_us.p50
        );
        assert!((r.latency_us.max - 199.0).abs() < 0.5);
        assert!((r.send_lag_us.p99 - 5.0).abs() < 0.1);
        assert!(r.kept_up);
        let text = r.to_summary();
        assert!(text.contains("kept up with the offered rate"), "{text}");
        assert!(!text.contains("could not"), "{text}");
    }

    #[test]
    fn errors_are_counted_by_kind_and_only_answers_have_latency() {
        let mut stats = ConnStats::new();
        stats.scheduled = 3;
        stats.record(Outcome::Error(ErrorKind::Timeout), 0, 0, 0, 9_000_000);
        stats.record(Outcome::Error(ErrorKind::HttpStatus(404)), 0, 0, 0, 50_000);
        stats.record(Outcome::Miss, 0, 0, 0, 60_000);
        let r = LoadReport::new(facts(), stats);
        assert_eq!(r.requests_sent, 3);
        assert_eq!(r.requests_completed, 2);
        assert_eq!(r.outcomes.errors_total, 2);
        assert_eq!(r.outcomes.errors["timeout"], 1);
        assert_eq!(r.outcomes.errors["http_404"], 1);
        assert_eq!(r.outcomes.miss, 1);
        assert_eq!(r.latency_histogram.len(), 2);
        assert!(r.latency_us.max < 100.0);
    }

    #[test]
    fn falling_behind_is_reported_plainly() {
        let mut stats = healthy();
        stats.scheduled = 200;
        let r = LoadReport::new(facts(), stats);
        assert!(!r.kept_up);
        let text = r.to_summary();
        assert!(
            text.contains("could not keep up with the offered rate: only 100 of 200"),
            "{text}"
        );

        let mut lagging = ConnStats::new();
        lagging.scheduled = 100;
        for i in 0..100u64 {
            lagging.record(Outcome::Ok, 0, 0, 50_000_000, 50_100_000 + i);
        }
        let r = LoadReport::new(facts(), lagging);
        assert!(!r.kept_up);
        assert!(r.kept_up_problem.unwrap().contains("send lag p99"));
    }

    #[test]
    fn latency_counts_from_intended_time_only_when_the_request_queued() {
        let mut stats = ConnStats::new();
        // Connection free at 0, intended 1 ms, woke 40 µs late, answered 100 µs after sending:
        // the oversleep is the generator's, not the server's.
        stats.record(Outcome::Ok, 1_000_000, 0, 1_040_000, 1_140_000);
        assert_eq!(stats.latency.max() / 1000, 100);
        // Previous response came 300 µs after this request's intended time: the wait counts.
        let mut queued = ConnStats::new();
        queued.record(Outcome::Ok, 1_000_000, 1_300_000, 1_301_000, 1_400_000);
        assert_eq!(queued.latency.max() / 1000, 400);
        assert_eq!(queued.lag.max() / 1000, 301);
    }

    #[test]
    fn lag_limit_is_one_millisecond_or_one_connection_gap() {
        let mut f = facts();
        f.connections = 4;
        f.offered_rate = 20_000.0;
        assert_eq!(f.lag_limit_us(), 1000.0);
        f.offered_rate = 100.0;
        assert_eq!(f.lag_limit_us(), 40_000.0);
    }

    #[test]
    fn merge_adds_counts_and_histograms() {
        let mut a = healthy();
        a.merge(healthy());
        assert_eq!(a.scheduled, 200);
        assert_eq!(a.ok, 200);
        assert_eq!(a.latency.len(), 200);
    }

    #[test]
    fn histogram_grows_beyond_its_initial_range() {
        let mut stats = ConnStats::new();
        stats.record(Outcome::Ok, 0, 0, 0, 30_000_000_000);
        let max = stats.latency.max();
        assert!(max >= 29_900_000_000, "{max}");
    }

    #[test]
    fn json_round_trips_without_histograms() {
        let r = LoadReport::new(facts(), healthy());
        let json = r.to_json();
        assert!(json.contains("\"achieved_rate\""), "{json}");
        assert!(json.contains("\"p999\""), "{json}");
        let back: LoadReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back.requests_completed, 100);
        assert_eq!(back.latency_us, r.latency_us);
    }

    #[test]
    fn interval_log_decodes_to_the_same_histograms() {
        let r = LoadReport::new(facts(), healthy());
        let log = r.histogram_log().unwrap();
        let text = String::from_utf8(log.clone()).unwrap();
        assert!(text.contains("#[StartTime: 1700000000"), "{text}");
        let mut decoded = Vec::new();
        for entry in IntervalLogIterator::new(&log) {
            if let LogEntry::Interval(h) = entry.unwrap() {
                let bytes = base64_decode(h.encoded_histogram());
                let hist: Histogram<u64> = Deserializer::new()
                    .deserialize(&mut bytes.as_slice())
                    .unwrap();
                decoded.push((h.tag().map(|t| t.as_str().to_string()), hist));
            }
        }
        assert_eq!(decoded.len(), 2);
        assert_eq!(decoded[0].0, None);
        assert_eq!(decoded[0].1, r.latency_histogram);
        assert_eq!(decoded[1].0.as_deref(), Some("send_lag"));
        assert_eq!(decoded[1].1.len(), 100);
    }

    /// Minimal standard base64 decoder, to avoid a dependency only for this test.
    fn base64_decode(s: &str) -> Vec<u8> {
        let value = |c: u8| -> u32 {
            match c {
                b'A'..=b'Z' => (c - b'A') as u32,
                b'a'..=b'z' => (c - b'a' + 26) as u32,
                b'0'..=b'9' => (c - b'0' + 52) as u32,
                b'+' => 62,
                b'/' => 63,
                _ => panic!("bad base64 {c}"),
            }
        };
        let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
        let mut out = Vec::new();
        for chunk in bytes.chunks(4) {
            let mut acc = 0u32;
            for (i, &c) in chunk.iter().enumerate() {
                acc |= value(c) << (18 - 6 * i);
            }
            for i in 0..chunk.len().saturating_sub(1) {
                out.push((acc >> (16 - 8 * i)) as u8);
            }
        }
        out
    }
}
