//! The protobuf messages of Prometheus remote read (`prompb/remote.proto`, `prompb/types.proto`), declared by
//! hand with prost's derive: only the fields the streamed read uses, same tags, so no protoc at build time.

/// `prometheus.ReadRequest`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReadRequest {
    #[prost(message, repeated, tag = "1")]
    pub queries: Vec<Query>,
    #[prost(enumeration = "ResponseType", repeated, tag = "2")]
    pub accepted_response_types: Vec<i32>,
}

/// `prometheus.ReadRequest.ResponseType`
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ResponseType {
    Samples = 0,
    StreamedXorChunks = 1,
}

/// `prometheus.Query`: samples of the series matching every matcher in `[start, end]` (both ends included).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Query {
    #[prost(int64, tag = "1")]
    pub start_timestamp_ms: i64,
    #[prost(int64, tag = "2")]
    pub end_timestamp_ms: i64,
    #[prost(message, repeated, tag = "3")]
    pub matchers: Vec<LabelMatcher>,
}

/// `prometheus.LabelMatcher`
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct LabelMatcher {
    #[prost(enumeration = "MatchType", tag = "1")]
    pub r#type: i32,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "3")]
    pub value: String,
}

/// `prometheus.LabelMatcher.Type`
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum MatchType {
    Eq = 0,
    Neq = 1,
    Re = 2,
    Nre = 3,
}

/// `prometheus.ChunkedReadResponse`: one frame of a streamed answer.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ChunkedReadResponse {
    #[prost(message, repeated, tag = "1")]
    pub chunked_series: Vec<ChunkedSeries>,
    #[prost(int64, tag = "2")]
    pub query_index: i64,
}

/// `prometheus.ChunkedSeries`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ChunkedSeries {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub chunks: Vec<Chunk>,
}

/// `prometheus.Label`
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Label {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `prometheus.Chunk`
#[derive(Clone, PartialEq, prost::Message)]
pub struct Chunk {
    #[prost(int64, tag = "1")]
    pub min_time_ms: i64,
    #[prost(int64, tag = "2")]
    pub max_time_ms: i64,
    #[prost(enumeration = "ChunkEncoding", tag = "3")]
    pub r#type: i32,
    #[prost(bytes = "vec", tag = "4")]
    pub data: Vec<u8>,
}

/// `prometheus.Chunk.Encoding`
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ChunkEncoding {
    Unknown = 0,
    Xor = 1,
    Histogram = 2,
    FloatHistogram = 3,
}
