//! cardhour: GPU FinOps cost accounting — exact GPU-hours and effective GPU-hours from Prometheus, stored in Postgres.

pub mod alerts;
pub mod api;
pub mod auth;
pub mod billing;
pub mod cache;
pub mod cli;
pub mod config;
pub mod db;
pub mod error;
pub mod export;
pub mod ingest;
pub mod ledger;
pub mod mappings;
pub mod metering;
pub mod money;
pub mod node_cli;
pub mod oversub_cli;
pub mod pricing;
pub mod prom;
pub mod readiness;
pub mod shutdown;
pub mod simulate;
pub mod usage;
pub mod validate;
pub mod waste;
