//! What `packs serve` counts: calls by tool and outcome, their latency, the calls in
//! flight, denials and HTTP responses by status; served in the OpenMetrics text format
//! (which Prometheus scrapes) at `/metrics` by the HTTP transport.

use std::sync::atomic::AtomicI64;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

/// The server's metrics.
pub(crate) struct Metrics {
    registry: Registry,
    calls: Family<Labels, Counter>,
    latency: Histogram,
    in_flight: Gauge<i64, AtomicI64>,
    denials: Family<Labels, Counter>,
    responses: Family<Labels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let calls = Family::<Labels, Counter>::default();
        // 0.5 ms to about 65 s: a trivial tool's spawn up to the longest timeouts.
        let latency = Histogram::new(exponential_buckets(0.0005, 2.0, 18));
        let in_flight = Gauge::<i64, AtomicI64>::default();
        let denials = Family::<Labels, Counter>::default();
        let responses = Family::<Labels, Counter>::default();
        let mut registry = Registry::with_prefix("packs");
        registry.register("calls", "tools/call requests by tool and outcome", calls.clone());
        registry.register("call_duration_seconds", "Time from a tools/call request to its answer", latency.clone());
        registry.register("calls_in_flight", "tools/call requests running now", in_flight.clone());
        registry.register("denials", "Requests or calls refused, by reason", denials.clone());
        registry.register("http_responses", "HTTP responses by status code", responses.clone());
        Metrics { registry, calls, latency, in_flight, denials, responses }
    }
}

/// Counts a call in flight until dropped.
pub(crate) struct InFlight<'m>(&'m Metrics);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.dec();
    }
}

impl Metrics {
    /// A call started; it counts as in flight until the guard is dropped.
    pub(crate) fn call_started(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight(self)
    }

    /// A call ended: `tool` is "" for a name the catalog does not have (a client cannot
    /// grow the label set), `outcome` one of a fixed few.
    pub(crate) fn call_ended(&self, tool: &str, outcome: &'static str, took: Duration) {
        let tool = if tool.is_empty() { "(unknown)".to_owned() } else { tool.to_owned() };
        self.calls.get_or_create(&vec![("tool", tool), ("outcome", outcome.to_owned())]).inc();
        self.latency.observe(took.as_secs_f64());
        if outcome == "denied" {
            self.denied("permission");
        }
    }

    /// A request or call refused, for `reason` (one of a fixed few).
    pub(crate) fn denied(&self, reason: &'static str) {
        self.denials.get_or_create(&vec![("reason", reason.to_owned())]).inc();
    }

    /// An HTTP response was sent with `status`.
    pub(crate) fn responded(&self, status: u16) {
        self.responses.get_or_create(&vec![("code", status.to_string())]).inc();
    }

    /// Everything, in the OpenMetrics text format.
    pub(crate) fn render(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_by_tool_and_outcome() {
        let m = Metrics::default();
        {
            let _guard = m.call_started();
            assert!(m.render().contains("packs_calls_in_flight 1"));
        }
        m.call_ended("echo", "ok", Duration::from_millis(2));
        m.call_ended("", "unknown_tool", Duration::from_millis(1));
        m.call_ended("rm", "denied", Duration::from_millis(1));
        let text = m.render();
        assert!(text.contains("packs_calls_in_flight 0"), "{text}");
        assert!(text.contains(r#"packs_calls_total{tool="echo",outcome="ok"} 1"#), "{text}");
        assert!(text.contains(r#"packs_calls_total{tool="(unknown)",outcome="unknown_tool"} 1"#), "{text}");
        assert!(text.contains(r#"packs_denials_total{reason="permission"} 1"#), "{text}");
        assert!(text.contains("packs_call_duration_seconds_count 3"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
    #[test]
    fn http_responses_are_counted_by_status_code() {
        let m = Metrics::default();
        m.responded(200);
        m.responded(200);
        m.responded(401);
        let text = m.render();
        assert!(text.contains(r#"packs_http_responses_total{code="200"} 2"#), "{text}");
        assert!(text.contains(r#"packs_http_responses_total{code="401"} 1"#), "{text}");
    }
}
