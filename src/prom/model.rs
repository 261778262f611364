//! The JSON of `/api/v1/query` and `/api/v1/query_range`, parsed without allocating per sample.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, SeqAccess, Visitor};

use super::PromError;
use crate::metering::Sample;

/// One series of a matrix (or vector) result: its labels (with `__name__`) and finite samples in time order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawSeries {
    pub labels: BTreeMap<String, String>,
    pub samples: Vec<Sample>,
    /// Timestamps of the NaN / ±Inf samples dropped from `samples`.
    pub non_finite: Vec<i64>,
}

impl RawSeries {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.get(name).map(String::as_str).filter(|v| !v.is_empty())
    }

    /// The first non-empty of several label spellings (`pod` / `exported_pod`, `Hostname` / `hostname`…).
    pub fn label_any(&self, names: &[&str]) -> Option<&str> {
        names.iter().find_map(|n| self.label(n))
    }

    pub fn name(&self) -> &str {
        self.label("__name__").unwrap_or("")
    }
}

#[derive(Deserialize)]
struct Envelope {
    status: String,
    data: Option<Data>,
    #[serde(rename = "errorType")]
    error_type: Option<String>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<SeriesJson>,
}

#[derive(Deserialize)]
struct SeriesJson {
    metric: BTreeMap<String, String>,
    #[serde(default)]
    values: Vec<Point>,
    value: Option<Point>,
}

/// `[1700000000.123, "0.5"]`
struct Point(i64, f64);

impl<'de> Deserialize<'de> for Point {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Point;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a [timestamp, \"value\"] pair")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Point, A::Error> {
                let t: f64 = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let v: Value = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(1, &self))?;
                if seq.next_element::<de::IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &self));
                }
                if !t.is_finite() {
                    return Err(de::Error::custom("non-finite timestamp"));
                }
                Ok(Point((t * 1000.0).round() as i64, v.0))
            }
        }
        d.deserialize_seq(V)
    }
}

/// A sample value: Prometheus sends floats as strings, `NaN`, `+Inf` and `-Inf` included.
struct Value(f64);

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Value;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sample value as a string")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
                let v = match s {
                    "NaN" => f64::NAN,
                    "+Inf" | "Inf" => f64::INFINITY,
                    "-Inf" => f64::NEG_INFINITY,
                    _ => s.parse().map_err(|_| E::custom(format!("`{s}` is not a number")))?,
                };
                Ok(Value(v))
            }
        }
        d.deserialize_str(V)
    }
}

/// Parses an API answer into series; an `error` status becomes [`PromError::Query`].
pub fn parse_response(body: &[u8]) -> Result<Vec<RawSeries>, PromError> {
    let env: Envelope = serde_json::from_slice(body).map_err(|e| PromError::Malformed(e.to_string()))?;
    if env.status != "success" {
        return Err(PromError::Query {
            error_type: env.error_type.unwrap_or_else(|| "unknown".into()),
            error: env.error.unwrap_or_else(|| format!("status `{}`", env.status)),
        });
    }
    let data = env.data.ok_or_else(|| PromError::Malformed("success without `data`".into()))?;
    if data.result_type != "matrix" && data.result_type != "vector" {
        return Err(PromError::Malformed(format!("unexpected resultType `{}`", data.result_type)));
    }
    Ok(data
        .result
        .into_iter()
        .map(|s| {
            let points = s.values.into_iter().chain(s.value);
            let mut out = RawSeries { labels: s.metric, samples: Vec::new(), non_finite: Vec::new() };
            for Point(t, v) in points {
                if v.is_finite() {
                    out.samples.push(Sample::new(t, v));
                } else {
                    out.non_finite.push(t);
                }
            }
            // a vector grown by doubling can hold twice what it needs; a window's samples are kept until metered
            out.samples.shrink_to_fit();
            out
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_matrix_and_drops_non_finite_values() {
        let body = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","pod":"a","exported_pod":""},
             "values":[[1700000000,"12"],[1700000060.5,"NaN"],[1700000120.007,"+Inf"],[1700000180,"1e2"]]}]}}"#;
        let s = parse_response(body).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].samples, vec![Sample::new(1_700_000_000_000, 12.0), Sample::new(1_700_000_180_000, 100.0)]);
        assert_eq!(s[0].non_finite, vec![1_700_000_060_500, 1_700_000_120_007]);
        assert_eq!(s[0].name(), "DCGM_FI_DEV_GPU_UTIL");
        assert_eq!(s[0].label_any(&["exported_pod", "pod"]), Some("a"));
    }

    #[test]
    fn parses_a_vector() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"x"},"value":[1700000000.5,"3"]}]}}"#;
        let s = parse_response(body).unwrap();
        assert_eq!(s[0].samples, vec![Sample::new(1_700_000_000_500, 3.0)]);
    }

    #[test]
    fn errors_are_typed() {
        let e = parse_response(br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#).unwrap_err();
        assert!(matches!(e, PromError::Query { ref error_type, .. } if error_type == "bad_data"), "{e}");
        assert!(!e.is_transient());
        for bad in [
            &b"<html>502</html>"[..],
            br#"{"status":"success"}"#,
            br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"x"]]}]}}"#,
        ] {
            let e = parse_response(bad).unwrap_err();
            assert!(matches!(e, PromError::Malformed(_)), "{e}");
        }
    }
}
