//! Which ends of a range selector a server includes, decided from what it says about itself: its build info
//! (`/api/v1/status/buildinfo`) and whether it serves VictoriaMetrics' export.

use serde::Deserialize;

pub const BUILD_INFO_PATH: &str = "/api/v1/status/buildinfo";

/// How a range selector `s[d]` evaluated at `t` bounds its samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeEnds {
    /// `[t − d, t]`: Prometheus 2.x (and what runs its engine).
    Closed,
    /// `(t − d, t]`: Prometheus 3 and VictoriaMetrics.
    LeftOpen,
}

impl RangeEnds {
    /// The range `d` that, evaluated at `end − 1 ms`, covers exactly `[end − span, end)`: timestamps are integer
    /// milliseconds, so a closed range is one millisecond shorter than the span.
    pub fn range_ms(self, span_ms: i64) -> i64 {
        match self {
            Self::Closed => span_ms - 1,
            Self::LeftOpen => span_ms,
        }
    }
}

/// The `data` of a build-info answer; every field optional, as servers fill in what they like.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct BuildInfo {
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub revision: Option<String>,
}

#[derive(Deserialize)]
struct BuildInfoEnvelope {
    status: String,
    data: Option<BuildInfo>,
}

impl BuildInfo {
    /// The major version, if `version` starts with a number (`2.42.0+ds`, `v3.1.0`).
    fn major(&self) -> Option<u64> {
        let v = self.version.as_deref()?.trim().trim_start_matches('v');
        v.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
    }

    /// A build-info answer, if `body` is one that succeeded.
    pub fn parse(body: &[u8]) -> Option<Self> {
        let env: BuildInfoEnvelope = serde_json::from_slice(body).ok()?;
        (env.status == "success").then(|| env.data.unwrap_or_default())
    }
}

/// The ends a backend's range selectors include, and why. `serves_export`: VictoriaMetrics' export is the source
/// (so the server is a VictoriaMetrics); `build`: its build info, `None` where it has none.
///
/// Prometheus reports its version with a revision; VictoriaMetrics answers `{}` (1.79) or a fixed Prometheus
/// version for Grafana's sake (`{"version":"2.24.0"}`, later releases) — never a revision — so a version without a
/// revision is not taken at its word. A server without build info (Prometheus before 2.14) is taken for 2.x.
pub fn range_ends(serves_export: bool, build: Option<&BuildInfo>) -> (RangeEnds, String) {
    if serves_export {
        return (RangeEnds::LeftOpen, "VictoriaMetrics (its export is the source)".into());
    }
    let Some(build) = build else {
        return (RangeEnds::Closed, "no build info: taken for Prometheus 2.x".into());
    };
    let version = build.version.as_deref().unwrap_or("");
    if build.revision.as_deref().is_none_or(|r| r.trim().is_empty()) {
        return (RangeEnds::LeftOpen, format!("build info without a revision (version `{version}`): VictoriaMetrics"));
    }
    match build.major() {
        Some(m) if m >= 3 => (RangeEnds::LeftOpen, format!("version {version}: Prometheus 3 or later")),
        _ => (RangeEnds::Closed, format!("version {version}: Prometheus 2.x")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(body: &str) -> Option<BuildInfo> {
        BuildInfo::parse(body.as_bytes())
    }

    #[test]
    fn each_backend_gets_its_ends() {
        // Prometheus 2.42 as Debian builds it: both ends
        let prom2 = info(
            r#"{"status":"success","data":{"version":"2.42.0+ds","revision":"2.42.0+ds-5+deb12u1","branch":"debian/sid","goVersion":"go1.19.8"}}"#,
        );
        assert_eq!(range_ends(false, prom2.as_ref()).0, RangeEnds::Closed);
        // Prometheus 3 excludes the left end
        let prom3 = info(
            r#"{"status":"success","data":{"version":"3.1.0","revision":"7086161a93b262aa0949dbf2aba15a5a7b13e0a3"}}"#,
        );
        assert_eq!(range_ends(false, prom3.as_ref()).0, RangeEnds::LeftOpen);
        // VictoriaMetrics 1.79 answers an empty build info, later releases a fixed Prometheus version
        for vm in [r#"{"status":"success","data":{}}"#, r#"{"status":"success","data":{"version":"2.24.0"}}"#] {
            let (ends, why) = range_ends(false, info(vm).as_ref());
            assert_eq!(ends, RangeEnds::LeftOpen, "{vm}");
            assert!(why.contains("VictoriaMetrics"), "{why}");
        }
        // whatever the build info says, a server whose export is read is a VictoriaMetrics
        assert_eq!(range_ends(true, prom2.as_ref()).0, RangeEnds::LeftOpen);
        assert_eq!(range_ends(true, None).0, RangeEnds::LeftOpen);
        // no build info at all (Prometheus before 2.14, a proxy that hides it): Prometheus 2.x
        assert_eq!(range_ends(false, None).0, RangeEnds::Closed);
    }

    #[test]
    fn build_info_answers_are_read_leniently() {
        assert_eq!(info(r#"{"status":"error","errorType":"x","error":"y"}"#), None);
        assert_eq!(info("404 page not found"), None);
        assert_eq!(info(r#"{"status":"success"}"#), Some(BuildInfo::default()));
        let v = |s: &str| BuildInfo { version: Some(s.into()), revision: Some("r".into()) }.major();
        assert_eq!((v("2.42.0+ds"), v("v3.0.1"), v("10"), v("dev")), (Some(2), Some(3), Some(10), None));
    }

    #[test]
    fn a_range_covers_the_span_on_either_end_rule() {
        // evaluated at end − 1 ms: closed [end − 1 h, end − 1 ms], left-open (end − 1 h − 1 ms, end − 1 ms]
        assert_eq!(RangeEnds::Closed.range_ms(3_600_000), 3_599_999);
        assert_eq!(RangeEnds::LeftOpen.range_ms(3_600_000), 3_600_000);
    }
}
